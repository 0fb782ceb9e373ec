"""function.cosyvoice.threads: the engine's CPUs split between its sessions, by one rule.

GIVEN an engine on 1, 2, 3, 4, 6 or 8 CPUs
WHEN it splits them
THEN the decode takes at most two, the estimator's rows run side by side on half each from two CPUs up,
everything else takes them all; at one and two CPUs the choices measured on 2-vCPU hosts; and the loaded
sessions run with what the split says.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from function.cosyvoice.artifact import Artifact
from function.cosyvoice.engine import Engine
from function.cosyvoice.graphs import Graph
from function.cosyvoice.threads import ThreadSplit

# cpus → (decode, each estimator call, rows side by side)
SPLITS = {
    1: (1, 1, False),  # one call on the batch of two, every session on the one CPU
    2: (2, 1, True),  # the decode on both cores; the rows on one each
    3: (2, 1, True),  # the odd CPU left to the decode beside the flow
    4: (2, 2, True),
    6: (2, 3, True),
    8: (2, 4, True),
}


@pytest.mark.parametrize(("cpus", "split"), SPLITS.items())
def test_the_split_at_each_cpu_count(cpus: int, split: tuple[int, int, bool]) -> None:
    chosen = ThreadSplit.for_cpus(cpus)
    assert (chosen.decode, chosen.estimator, chosen.estimator_rows_side_by_side) == split
    assert chosen.cpus == cpus


def test_the_description_names_every_share() -> None:
    assert ThreadSplit.for_cpus(1).describe() == "decode 1, estimator 1, others 1"
    assert ThreadSplit.for_cpus(6).describe() == "decode 2, estimator 2 rows × 3, others 6"


@pytest.mark.parametrize("cpus", [0, -2, True, 1.5])
def test_an_engine_without_a_cpu_is_refused(cpus: object) -> None:
    with pytest.raises(ValueError, match="at least one CPU"):
        ThreadSplit.for_cpus(cpus)  # type: ignore[arg-type]


def _threads(graph: Graph) -> int:
    return int(graph.session.get_session_options().intra_op_num_threads)


@pytest.mark.parametrize("cpus", [1, 2, 4])
def test_the_loaded_engine_runs_each_session_with_its_share(tiny_artifact: Path, cpus: int) -> None:
    engine = Engine.load(Artifact.open(tiny_artifact), threads=cpus)
    split = ThreadSplit.for_cpus(cpus)
    assert _threads(engine.llm.decode) == split.decode
    assert _threads(engine.flow.estimator) == split.estimator
    assert engine.flow.rows_side_by_side is split.estimator_rows_side_by_side
    others = [engine.llm.prefill, engine.llm.positions, engine.flow.encoder]
    others += [engine.vocoder.f0_graph, engine.vocoder.generator_graph]
    assert [_threads(graph) for graph in others] == [cpus] * len(others)
