"""What a statically quantised part is calibrated and judged on: mels from the model's own fp32 flow.

Static quantisation (the vocoder's) fixes every activation's range at export, so it needs inputs like the
ones the graph sees at run time: the flow's mels for random speech tokens, in the model's own voices
(spk2info.pt's speakers; random embeddings for a model without them). They are made on first use, once per
export run, from the fp32 graphs every artifact of the run is cut from; an export that quantises nothing
statically never makes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import onnx

from export.config import ModelConfig
from export.graphs.sessions import runtime_flow

CALIBRATION_TOKENS = (50, 100, 150, 200)  # four utterances of ~1-4 s
HELD_OUT_TOKENS = 150


@dataclass
class Samples:
    graphs: Mapping[str, onnx.ModelProto]  # the export's fp32 graphs
    config: ModelConfig
    speakers: Sequence[Sequence[float]]  # speaker embeddings to draw voices from; empty: random ones

    @cached_property
    def calibration_mels(self) -> tuple[np.ndarray, ...]:
        """Mels [1, n_mels, frames] to fix activation ranges on."""
        return self._mels(CALIBRATION_TOKENS, seed=1)

    @cached_property
    def held_out_mel(self) -> np.ndarray:
        """A mel the calibration never saw (other tokens, noise and voice), to judge the result on."""
        return self._mels((HELD_OUT_TOKENS,), seed=2)[0]

    def _mels(self, lengths: Sequence[int], seed: int) -> tuple[np.ndarray, ...]:
        config = self.config.flow
        flow = runtime_flow(self.graphs, config.params())
        rng = np.random.default_rng(seed)
        no_prompt = (np.zeros((1, 0), np.int64), np.zeros((1, 0, config.output_size), np.float32))
        mels = []
        for tokens in lengths:
            speech = rng.integers(0, config.vocab_size, size=(1, tokens), dtype=np.int64)
            if self.speakers:
                speaker = np.asarray(self.speakers[int(rng.integers(len(self.speakers)))], np.float32)[None]
            else:
                speaker = rng.standard_normal((1, config.spk_embed_dim), dtype=np.float32)
            noise = flow.sample_noise(rng, flow.mel_frames(tokens))
            mels.append(flow(speech, *no_prompt, speaker, noise))
        return tuple(mels)


__all__ = ["CALIBRATION_TOKENS", "HELD_OUT_TOKENS", "Samples"]
