"""The export's report of the fast tier: how far the mel moves at 5 and 7 flow steps from the full 10, on
the flow graphs the artifact ships, recorded in the manifest and printed with its caveat."""

from __future__ import annotations

import json
from pathlib import Path

from export.build import ExportSummary

STEP_KEYS = {"tokens", "reference_steps", "mel_relative_l2_at_5_steps", "mel_relative_l2_at_7_steps"}


def test_the_manifest_records_how_far_fewer_steps_move_the_mel(tiny_artifact: Path) -> None:
    report = json.loads((tiny_artifact / "manifest.json").read_text())["export_options"]["flow_steps"]
    assert set(report) == STEP_KEYS
    assert report["reference_steps"] == 10
    five, seven = report["mel_relative_l2_at_5_steps"], report["mel_relative_l2_at_7_steps"]
    # Another solve of the same ODE: the mel moves (0 would mean the steps were ignored), by less than its
    # own size (~1 would mean another mel altogether), and not the same way at 5 and 7 steps. Which of the
    # two moves less is the weights' to say: 5 steps' grid is every other point of 10's, 7's is not.
    assert 0 < five < 0.5 and 0 < seven < 0.5
    assert five != seven


def test_the_summary_prints_the_distances_and_says_to_listen(tmp_path: Path) -> None:
    summary = ExportSummary(
        out_dir=tmp_path,
        flow_steps={"tokens": 100, "reference_steps": 10, "mel_relative_l2_at_5_steps": 0.1},
    )
    text = "\n".join(summary.lines())
    assert "mel_relative_l2_at_5_steps=0.1" in text
    assert "listen before you ship" in text and "random weights" in text
