"""`Graph.bind`: a run over the caller's own arrays, as the decode step uses it, on a real session."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from function.cosyvoice.contract import GraphSpec, TensorSpec
from function.cosyvoice.graphs import Graph, session_options

SPEC = GraphSpec(
    "accumulate",
    "test",
    inputs=(TensorSpec("total", "float32", (4,)), TensorSpec("step", "float32", (4,))),
    outputs=(TensorSpec("new_total", "float32", (4,)), TensorSpec("doubled", "float32", (4,))),
)


@pytest.fixture
def graph() -> Graph:
    vector = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [4]) for name in ("total", "step")]
    model = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("Add", ["total", "step"], ["new_total"]),
                helper.make_node("Add", ["step", "step"], ["doubled"]),
            ],
            "accumulate",
            vector,
            [
                helper.make_tensor_value_info(name, TensorProto.FLOAT, [4])
                for name in ("new_total", "doubled")
            ],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    session = ort.InferenceSession(model.SerializeToString(), session_options(1, prepack=False))
    return Graph(session, SPEC)


def test_a_bound_run_reads_inputs_as_they_are_and_writes_outputs_in_place(graph: Graph) -> None:
    total, step, doubled = np.zeros(4, np.float32), np.ones(4, np.float32), np.zeros(4, np.float32)
    run = graph.bind({"new_total": total, "doubled": doubled}, total=total, step=step)
    run.run()
    step[:] = [1, 2, 3, 4]  # changed where it lies: the next run sees it without binding again
    run.run()
    np.testing.assert_array_equal(total, [2, 3, 4, 5])  # the output was its own input, updated in place
    np.testing.assert_array_equal(doubled, [2, 4, 6, 8])


def test_binding_names_what_is_missing_or_unusable(graph: Graph) -> None:
    total, step = np.zeros(4, np.float32), np.ones(4, np.float32)
    with pytest.raises(TypeError, match=r"no arrays for outputs \['doubled'\]"):
        graph.bind({"new_total": total}, total=total, step=step)
    with pytest.raises(TypeError, match=r"missing inputs \['step'\]"):
        graph.bind({"new_total": total, "doubled": step}, total=total)
    strided = np.zeros(8, np.float32)[::2]
    with pytest.raises(ValueError, match="step can only be bound to a C-contiguous array"):
        graph.bind({"new_total": total, "doubled": np.zeros(4, np.float32)}, total=total, step=strided)
