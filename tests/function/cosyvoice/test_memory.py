"""A graph run gives its working memory back: RSS after runs of growing size stays where it was.

Measured in a fresh process (this one's heap holds whatever earlier tests left), on a graph whose two
intermediate tensors are as large as its input: runs over 64, 128 and 256 MiB inputs."""

from __future__ import annotations

import sys
import textwrap

import pytest

from function.cosyvoice import memory
from tests.conftest import run_cli

_PROBE = textwrap.dedent(
    """
    import sys

    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from bench.procs import read_memory
    from function.cosyvoice import graphs, memory
    from function.cosyvoice.contract import GraphSpec, TensorSpec

    nodes = [
        helper.make_node("Mul", ["x", "two"], ["doubled"]),
        helper.make_node("Add", ["doubled", "two"], ["shifted"]),
        helper.make_node("ReduceSum", ["shifted"], ["total"], keepdims=0),
    ]
    model = helper.make_model(
        helper.make_graph(
            nodes,
            "probe",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
            [helper.make_tensor_value_info("total", TensorProto.FLOAT, [])],
            [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    if sys.argv[1] == "keep":  # onnxruntime's and glibc's defaults: the arena keeps its regions
        graphs.RUN_OPTIONS = ort.RunOptions()
    else:
        memory.fix_mmap_threshold()  # what session creation through the artifact does
    session = ort.InferenceSession(
        model.SerializeToString(), graphs.session_options(2, False), providers=["CPUExecutionProvider"]
    )
    x_spec, total_spec = TensorSpec("x", "float32", ("n",)), TensorSpec("total", "float32", ())
    spec = GraphSpec("probe", "test", (x_spec,), (total_spec,))
    graph = graphs.Graph(session, spec)
    graph.run(x=np.ones(1024, np.float32))
    x = np.ones(64 * 2**20, np.float32)
    before = read_memory().rss
    for mebi_floats in (16, 32, 64):
        graph.run(x=x[: mebi_floats * 2**20])
    print((read_memory().rss - before) / 2**20)
    """
)


def _growth_mib(mode: str) -> float:
    done = run_cli("-c", _PROBE, mode)  # from the repository root, where bench/ is importable
    assert done.returncode == 0, done.stderr
    return float(done.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RSS from /proc; glibc's malloc")
def test_runs_of_growing_size_leave_rss_where_it_was() -> None:
    assert _growth_mib("release") < 32


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RSS from /proc; glibc's malloc")
def test_the_probe_sees_what_the_default_arena_keeps() -> None:
    # The same runs with onnxruntime's default run options and glibc's own threshold: the largest run's
    # two 256 MiB intermediates stay resident. Without this the first test could pass by measuring nothing.
    assert _growth_mib("keep") > 256


def test_the_run_options_ask_for_arena_shrinkage_except_between_steps() -> None:
    shrinkage = "memory.enable_memory_arena_shrinkage"
    assert memory.RUN_OPTIONS.get_run_config_entry(shrinkage) == "cpu:0"
    with pytest.raises(RuntimeError):  # onnxruntime's answer for an entry that is not set
        memory.STEP_RUN_OPTIONS.get_run_config_entry(shrinkage)


def test_an_operators_own_threshold_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert memory.fix_mmap_threshold.__wrapped__() is False
