"""The benchmark's measuring tools on tiny inputs: /proc parsing, clocks, page cache, stage timers, tables.

No wall-clock assertions: only that each tool reports what it was shown, in the right shape.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from bench.procs import (
    KIB,
    PhaseClock,
    drop_page_cache,
    parse_memory,
    phase_durations,
    read_memory,
    resident_fraction,
    total_pss,
)
from bench.stages import StageTimes, TimedProxy
from bench.tables import Table, ratio, seconds

ROLLUP = """\
55c3b7084000-7fff678d5000 ---p 00000000 00:00 0                          [rollup]
Rss:                1000 kB
Pss:                 600 kB
Pss_Anon:            250 kB
Pss_File:            340 kB
Pss_Shmem:            10 kB
Anonymous:           250 kB
"""
STATUS = "Name:\tpython\nVmHWM:\t    4000 kB\nVmRSS:\t    1000 kB\nThreads:\t1\n"


def test_memory_is_split_into_anonymous_and_file_backed() -> None:
    memory = parse_memory(ROLLUP, STATUS)
    assert memory.rss == 1000 * KIB
    assert memory.pss == 600 * KIB
    assert memory.anonymous == 250 * KIB
    assert memory.file_backed == (1000 - 250 - 10) * KIB  # shmem is neither
    assert memory.peak_rss == 4000 * KIB
    assert type(memory).from_dict(memory.to_dict()) == memory


def test_own_memory_is_read_from_proc() -> None:
    memory = read_memory()
    assert 0 < memory.pss <= memory.rss <= memory.peak_rss
    assert memory.anonymous + memory.file_backed <= memory.rss
    assert total_pss([os.getpid()]) > 0


def test_phase_durations_chain_from_the_spawn_instant() -> None:
    marks = [("interpreter", 10.5), ("imports", 11.0), ("load", 13.0)]
    assert phase_durations(marks, spawned=10.0) == {"interpreter": 0.5, "imports": 0.5, "load": 2.0}


def test_phase_clock_marks_in_order_and_samples_memory() -> None:
    clock = PhaseClock(time.monotonic())
    clock.mark("a")
    clock.mark("b", sample_memory=False)
    data = clock.to_dict()
    names = [name for name, _ in data["marks"]]
    assert names == ["interpreter", "a", "b"]
    times = [at for _, at in data["marks"]]
    assert times == sorted(times)
    assert set(data["memory"]) == {"a"}
    assert data["final"]["rss"] > 0


def test_page_cache_residency_of_one_file(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(os.urandom(256 * KIB))
    path.read_bytes()
    assert resident_fraction(path) == 1.0
    drop_page_cache(path)  # a no-op on tmpfs; evicts on a disk file system
    assert 0.0 <= resident_fraction(path) <= 1.0
    (tmp_path / "empty").write_bytes(b"")
    assert resident_fraction(tmp_path / "empty") == 0.0


def test_token_timer_counts_every_token_by_context() -> None:
    times = StageTimes()

    def generate(prefix: int, count: int):  # a stand-in LLM: yields `count` tokens
        yield from range(count)

    timed = times.timed_tokens(generate, lambda prefix, count: prefix)
    assert list(timed(10, 5)) == [0, 1, 2, 3, 4]
    assert len(times.first_token) == 1
    assert [cached for cached, _ in times.steps] == [10, 11, 12, 13]
    assert times.step_ms_at(11, window=1) is not None
    assert times.step_ms_at(500) is None
    assert times.seconds["llm"] >= sum(s for _, s in times.steps)


def test_proxy_times_named_methods_and_passes_the_rest() -> None:
    class Vocoder:
        params = "p"

        def generate(self, x: int) -> int:
            return x + 1

        def __call__(self, x: int) -> int:
            return x * 2

    times = StageTimes()
    proxy = TimedProxy(Vocoder(), "vocoder", times, ("__call__", "generate"))
    assert proxy(3) == 6 and proxy.generate(3) == 4 and proxy.params == "p"
    assert "vocoder" in times.seconds
    with pytest.raises(TypeError):
        TimedProxy(Vocoder(), "x", times, ("generate",))(1)


def test_tables_render_and_refuse_ragged_rows() -> None:
    table = Table("t", ("a", "b"))
    table.add("1", "2")
    with pytest.raises(ValueError):
        table.add("only one")
    assert "| 1 | 2 |" in table.render()
    assert ratio(10.0, 2.0) == "5.0×" and ratio(None, 1.0) == "–" and ratio(1.0, 0.0) == "–"
    assert seconds(0.25) == "250 ms" and seconds(2.5) == "2.50 s"


def test_report_renders_the_phase_table_and_chart(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from bench import report

    def run(scale: float) -> dict[str, float]:
        return {
            "imports": 0.1 * scale,
            "load": 0.2 * scale,
            "sessions": 0.1 * scale,
            "warm_up": 0.3 * scale,
            "first_response": 0.5 * scale,
        }

    runs = {"ours": [run(1.0)], "upstream": [run(20.0)]}
    result = {
        "command": "python -m bench coldstart",
        "finished": "now",
        "machine": {
            "cpu": "cpu",
            "cpus": 2,
            "memory_bytes": 2**32,
            "python": "3",
            "torch": "t",
            "onnxruntime": "o",
        },
        "tables": [],
        "data": {"runs": {"warm": runs, "cold": runs}},
    }
    (tmp_path / "coldstart.json").write_text(json.dumps(result))
    summary = report.run(tmp_path).read_text()
    assert "service ready" in summary and "| 20× " in summary
    assert (tmp_path / "phases.png").read_bytes()[:4] == b"\x89PNG"


def test_a_fresh_process_reports_every_phase_on_the_tiny_artifact(
    tiny_artifact: Path, tmp_path: Path
) -> None:
    from bench.coldstart import summarize_run
    from bench.config import BenchConfig

    config = BenchConfig(artifacts={"fp32": tiny_artifact}, results=tmp_path, threads=1)
    config.workload()
    result = config.child("ours", "coldstart")
    names = [name for name, _ in result.data["clock"]["marks"]]
    assert names == ["interpreter", "imports", "load", "sessions", "warm_up", "first_chunk", "response"]
    summary = summarize_run(result)
    assert all(summary[key] > 0 for key in ("imports", "sessions", "ready", "first_response", "total"))
    assert summary["ready"] < summary["total"]
    assert summary["peak_rss"] >= summary["final_anonymous"] + summary["final_file_backed"] > 0
    assert summary["audio_seconds"] > 0


def test_the_in_memory_variant_holds_the_artifact_once_and_says_the_same(
    tiny_artifact: Path, tmp_path: Path
) -> None:
    from bench.coldstart import summarize_run
    from bench.config import BenchConfig

    config = BenchConfig(artifacts={"fp32": tiny_artifact}, results=tmp_path, threads=1)
    config.workload()
    on_disk = summarize_run(config.child("ours", "coldstart"))
    in_memory = summarize_run(config.child("ours", "coldstart", None, "--in-memory"))
    artifact_bytes = sum(path.stat().st_size for path in tiny_artifact.iterdir())
    extra = in_memory["ready_anonymous"] - on_disk["ready_anonymous"]
    assert 0.8 * artifact_bytes < extra < 1.5 * artifact_bytes  # the buffer, and no copy of its weights
    assert in_memory["audio_seconds"] == on_disk["audio_seconds"]


def test_speed_table_says_which_variant_stopped_early() -> None:
    from bench.speed import table

    def variant(audio_seconds: float) -> dict:
        run = {"wall": 5.0, "audio_seconds": audio_seconds, "stages": {"flow": 1.0}, "step_ms": {"64": 9.0}}
        return {"texts": {"ten_seconds": [run]}, "first_chunk": {"ten_seconds": 1.0}}

    full = {"upstream fp32": variant(10.0), "ours fp32": variant(10.0), "ours int8": variant(10.0)}
    assert not any("EOS early" in note for note in table(full, ("ten_seconds",), {}, [], 1).notes)
    short = {**full, "ours int4": variant(5.0)}
    notes = [note for note in table(short, ("ten_seconds",), {}, [], 1).notes if "EOS early" in note]
    assert notes == [
        "ours int4 drew EOS early on ten_seconds: 5.0 s of audio, not 10.0;"
        " its RTF, per-audio-second figures and longest LLM context cover that shorter run"
    ]


def test_speed_table_puts_decode_beside_its_floor_and_shows_the_overlap() -> None:
    from bench.speed import table

    run = {"wall": 5.0, "audio_seconds": 10.0, "stages": {"llm": 3.0, "flow": 2.0}, "step_ms": {"64": 9.0}}
    streamed = {
        "wall": 4.0,
        "audio_seconds": 10.0,
        "stages": {"llm": 3.0, "flow": 2.0, "vocoder": 1.0},
        # The second chunk is due at 0.7 s and comes at 1.5 s; the third is then due at 9.5 s.
        "arrivals": [0.5, 1.5, 4.0],
        "durations": [0.2, 8.0, 1.8],
    }
    # 64 positions of cache at 1e6 bytes each: 1.64x the weights' bytes, so 1.64x their 6 ms.
    floor = {"bytes": 1e8, "ms": 6.0, "gb_per_s": 16.7, "cache_bytes_per_position": 1e6}
    ours = {
        "texts": {"ten_seconds": [run]},
        "first_chunk": {"ten_seconds": 0.5},
        "streamed": {"ten_seconds": streamed},
        "floor": floor,
    }
    upstream = {"texts": {"ten_seconds": [run]}, "first_chunk": {"ten_seconds": 2.0}, "floor": None}
    results = {"upstream fp32": upstream, "ours int8": ours}
    rows = {row[0]: row[1:] for row in table(results, ("ten_seconds",), {}, [], 1).rows}
    assert rows["decode weight-read floor, ms/token"][:2] == ("–", "6.0")
    assert rows["… LLM ms/token at 64 ÷ floor"][1] == "1.50×"
    assert rows["… LLM ms/token at 64 ÷ floor with the cache it reads"][1] == f"{9.0 / (6.0 * 1.64):.2f}×"
    assert rows["… playback stalls after the first chunk, s"][:2] == ("–", "0.80")
    assert rows["RTF streamed, ten_seconds"][1] == "0.40"
    assert rows["… stage busy seconds ÷ wall seconds (overlap)"][1] == "1.50×"


def test_the_floor_counts_the_weights_a_decode_step_reads(tiny_artifact: Path) -> None:
    """The tiny LLM's matrices (2 layers of q, k, v, out and the FFN; the input layer; the output head),
    with or without the biases onnxruntime folded into them; not the 4096-row speech embedding a step
    gathers one row of, nor linear_pos (llm_positions computes those rows ahead of the steps)."""
    import onnx

    from bench.floor import decode_weight_bytes, gemv_chain
    from export.fake import SIZES

    size = SIZES["tiny"]
    d, units, layers, vocab = size.llm_size, size.llm_units, size.llm_blocks, 4097
    weights = 4 * (layers * (4 * d * d + 2 * d * units) + d * d + d * vocab)
    biases = 4 * (layers * (4 * d + units + d) + d + vocab)
    assert weights <= decode_weight_bytes(tiny_artifact) <= weights + biases
    model = onnx.load_from_string(gemv_chain(3 * 4 * 2**20))
    assert [node.op_type for node in model.graph.node] == ["MatMul"] * 3


def test_a_floor_is_the_least_of_spaced_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst on the host during one attempt must not make the floor: the fastest attempt is kept."""
    from bench import floor

    slept: list[float] = []
    monkeypatch.setattr(floor.time, "sleep", slept.append)
    readings = iter([3.0, 1.0, 2.0])
    assert floor.least_of_attempts(lambda: next(readings)) == 1.0
    assert slept == [floor.ATTEMPT_SPACING_SECONDS] * (floor.ATTEMPTS - 1)


def test_the_cache_floor_counts_each_layers_key_value_and_position_row(tiny_artifact: Path) -> None:
    """Per cached position a step reads, in every layer, a key and a value row and a position row of
    heads × head_dim = the model width each, in fp32."""
    from bench.floor import cache_bytes_per_position, with_cache_ms
    from export.fake import SIZES

    size = SIZES["tiny"]
    assert cache_bytes_per_position(tiny_artifact) == size.llm_blocks * 3 * size.llm_size * 4
    floor = {"bytes": 1000.0, "ms": 2.0, "cache_bytes_per_position": 10.0}
    assert with_cache_ms(floor, 0) == 2.0
    assert with_cache_ms(floor, 50) == 3.0


def test_cost_per_million_characters_follows_rtf_memory_and_speaking_rate() -> None:
    """The issue's own figure: RTF 1.47 at 3,538 MB on x86 is ≈ $5.7 for English and ≈ $19 for Chinese."""
    from bench.cost import per_million_chars

    assert per_million_chars(1.47, 3538, "x86_64", 15.0) == pytest.approx(5.64, abs=0.01)
    assert per_million_chars(1.47, 3538, "x86_64", 4.5) == pytest.approx(18.81, abs=0.01)
    assert per_million_chars(1.47, 3538, "arm64", 15.0) == pytest.approx(5.64 * 0.8, abs=0.01)
    assert per_million_chars(0.735, 3538, "x86_64", 15.0) == pytest.approx(5.64 / 2, abs=0.01)


def test_cost_table_prices_each_measured_variant_beside_the_hosted_voices() -> None:
    from bench.cost import table, template_memory_mb

    rows = {row[0]: row[1:] for row in table({"ours int8": 1.0, "ours fp32": None}, 1024).rows}
    assert "ours fp32" not in rows  # not measured: no price made up for it
    assert rows["ours int8"] == ("1.00", "$1.11", "$0.89", "$3.70", "$2.96")
    assert rows["Amazon Polly Neural"][1:] == ("$16.00",) * 4
    assert rows["OpenAI tts-1"][1] == "$15.00"
    assert 2048 <= template_memory_mb() <= 10240  # the template's MinValue..MaxValue


def test_negative_durations_read_like_positive_ones() -> None:
    """A chunk that came late has a negative margin: seconds past one read in seconds, not ms."""
    from bench.tables import seconds

    assert (seconds(-0.5), seconds(-6.67), seconds(0.25), seconds(2.0)) == (
        "-500 ms",
        "-6.67 s",
        "250 ms",
        "2.00 s",
    )


def test_speed_table_sets_the_fast_tier_beside_the_ten_step_figures() -> None:
    from bench.speed import table

    def run(wall: float, flow: float) -> dict:
        return {"wall": wall, "audio_seconds": 10.0, "stages": {"flow": flow}, "step_ms": {"64": 9.0}}

    ours = {
        "texts": {"ten_seconds": [run(20.0, 12.0)]},
        "first_chunk": {"ten_seconds": 1.0},
        "fast": {
            "steps": 5,
            "mel": {"reference_steps": 10, "frames": 430, "moved": {"5": 0.0913, "7": 0.0521}},
            "runs": [run(14.0, 6.0)],
        },
        "arithmetic": {
            "seconds": {"flow": 1.0, "vocoder": 0.1},
            "graph_seconds": {"flow_encoder": 0.25, "flow_estimator": 0.75},
        },
    }
    upstream = {"texts": {"ten_seconds": [run(160.0, 26.0)]}, "first_chunk": {"ten_seconds": 30.0}}
    rendered = table({"upstream fp32": upstream, "ours int8": ours}, ("ten_seconds",), {}, [], 1)
    rows = {row[0]: row[1:] for row in rendered.rows}
    assert rows["fast tier (5 flow steps): RTF, ten_seconds"][:2] == ("–", "1.40")
    assert rows["… ÷ the 10-step RTF"][:2] == ("–", "0.70×")
    assert rows["fast tier: flow s per audio s"][:2] == ("–", "0.60")
    assert rows["… ÷ the 10-step figure"][:2] == ("–", "0.50×")
    assert rows["… the flow's arithmetic floor at the same ratio"][:2] == ("–", "0.62×")  # 0.25 + 0.375
    assert rows["mel moved from 10 steps at 5 / 7 steps (relative L2)"] == ("–", "0.091 / 0.052", "–")
    assert any("listen before you ship it" in note for note in rendered.notes)
    without = table({"upstream fp32": upstream}, ("ten_seconds",), {}, [], 1)
    assert not any(row[0].startswith("fast tier") for row in without.rows)


def test_the_speed_child_runs_the_fast_tier_on_the_same_tokens(tiny_artifact: Path, tmp_path: Path) -> None:
    from bench.config import BenchConfig

    config = BenchConfig(artifacts={"fp32": tiny_artifact}, results=tmp_path, threads=1)
    config.workload()
    # One attempt at each floor: the floors' own tests are above; the attempts' spacing would only wait.
    args = (
        "--runs",
        "1",
        "--texts",
        "short",
        "--stream-text",
        "short",
        "--fast-steps",
        "5",
        "--floor-attempts",
        "1",
    )
    data = config.child("ours", "speed", tiny_artifact, *args).data
    (ten,) = data["texts"]["short"]
    fast = data["fast"]
    (five,) = fast["runs"]
    assert fast["steps"] == 5
    assert five["tokens"] == ten["tokens"] and five["audio_seconds"] == ten["audio_seconds"] > 0
    assert fast["mel"]["reference_steps"] == 10 and fast["mel"]["frames"] > 0
    assert all(0 < moved < 1 for moved in fast["mel"]["moved"].values())


@pytest.mark.parametrize("attempts", ["0", "-2"])
def test_the_speed_child_refuses_a_floor_of_no_measurement(
    attempts: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import child

    command = ["ours", "speed", "--source", tmp_path, "--workload", tmp_path / "w.json", "--result", tmp_path]
    monkeypatch.setattr("sys.argv", ["bench.child", *map(str, command), "--floor-attempts", attempts])
    with pytest.raises(SystemExit) as exited:
        child.main()
    assert exited.value.code == 2
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert f"--floor-attempts {attempts}: a floor is the least of one measurement or more" in line


def test_the_cost_table_has_a_row_per_tier() -> None:
    from bench.speed import tier_rtfs

    def run(wall: float) -> dict:
        return {"wall": wall, "audio_seconds": 10.0, "stages": {}, "step_ms": {}}

    ours = {"texts": {"ten_seconds": [run(20.0)]}, "fast": {"steps": 5, "runs": [run(14.0)]}}
    upstream = {"texts": {"ten_seconds": [run(160.0)]}}
    rtfs = tier_rtfs({"upstream fp32": upstream, "ours int8": ours, "ours fp32": {"texts": {}}})
    assert rtfs == {"ours int8": 2.0, "ours int8, 5 flow steps": 1.4, "ours fp32": None}
