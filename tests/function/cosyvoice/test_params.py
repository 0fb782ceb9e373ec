"""The model's numbers: the one tokens → mel frames rule, and the strict manifest reading of each group."""

from __future__ import annotations

import pytest

from function.core.errors import ArtifactError
from function.cosyvoice.params import FlowParams, ModelParams


@pytest.mark.parametrize(("tokens", "frames"), [(0, 0), (1, 1), (20, 34), (250, 430), (251, 432)])
def test_tokens_map_to_frames_rounded_down_like_upstream(tokens: int, frames: int) -> None:
    # upstream: int(tokens / 50 * 22050 / 256), the flow's hard-coded mel rate
    assert FlowParams().mel_frames(tokens) == frames
    assert FlowParams().mel_rate == 22050 / 256


def test_a_manifest_group_with_an_unknown_field_is_refused() -> None:
    assert ModelParams.from_dict({}) == ModelParams()
    with pytest.raises(ArtifactError, match=r"unknown FlowParams fields \['mel_hop'\]"):
        ModelParams.from_dict({"flow": {"mel_hop": 256}})
