"""The released front-end graphs are taken as upstream takes them: inputs by position, output 0."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

from export.build import conform_io_names
from export.errors import ExportError
from export.graphs.frontend_models import speaker_encoder, speech_tokenizer
from function.cosyvoice.contract import CAMPPLUS, SPEECH_TOKENIZER


def renamed_with_extra_output(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with its own names (like a released file) and a second output upstream never reads."""
    graph = model.graph
    first = graph.output[0]
    graph.node.append(helper.make_node("Identity", [first.name], ["extra"]))
    graph.output.append(helper.make_tensor_value_info("extra", first.type.tensor_type.elem_type, None))
    for index, value in enumerate(graph.input):
        old, value.name = value.name, f"in_{index}"
        for node in graph.node:
            node.input[:] = [value.name if name == old else name for name in node.input]
    return model


@pytest.mark.parametrize(
    ("build", "spec"), [(speaker_encoder, CAMPPLUS), (speech_tokenizer, SPEECH_TOKENIZER)]
)
def test_a_graph_with_more_outputs_is_used_by_its_first(build, spec, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source, target = tmp_path / "source.onnx", tmp_path / "target.onnx"
    onnx.save_model(renamed_with_extra_output(build(np.random.default_rng(0))), str(source))
    conform_io_names(source, target, spec)
    session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == [s.name for s in spec.inputs]
    assert [o.name for o in session.get_outputs()] == [s.name for s in spec.outputs]


def test_a_graph_upstream_cannot_feed_is_refused_in_one_line(tmp_path: Path) -> None:
    one_input = helper.make_graph(
        [helper.make_node("Identity", ["feats"], ["indices"])],
        "one_input",
        [helper.make_tensor_value_info("feats", TensorProto.FLOAT, [1, 128, "frames"])],
        [helper.make_tensor_value_info("indices", TensorProto.FLOAT, [1, 128, "frames"])],
    )
    source = tmp_path / "speech_tokenizer_v1.onnx"
    onnx.save_model(helper.make_model(one_input), str(source))
    with pytest.raises(ExportError, match="upstream feeds 2 inputs by position") as error:
        conform_io_names(source, tmp_path / "out.onnx", SPEECH_TOKENIZER)
    assert "\n" not in str(error.value)
