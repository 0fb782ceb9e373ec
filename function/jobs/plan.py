"""A job's plan: its parts (runs of consecutive segments, each its own queue message, spoken whole by one
worker and joined once at the end, function.jobs.join) and its contract (what decides every part's
messages and sound).

The plan is made once, by the first worker that plans the job, and stored with it (function.jobs.store).
It is the job's contract with every worker that touches it afterwards, whatever their own settings: a
fleet may mix configurations (the stack's Lambda beside a Kubernetes pool) and a deploy may change them
mid-job, and still every part is sent, spoken and joined as the job was planned.

- The window (COSYVOICE_JOB_PARALLEL when planned): the worker that finishes part k sends part
  k + window. Were it each worker's own, two windows on one queue would leave the parts between them
  unsent.
- The flow's steps and the decode batch (COSYVOICE_FLOW_STEPS or the request's, COSYVOICE_DECODE_BATCH):
  they decide the sound, so half a book cannot come out at other settings than the other half.
- The artifact (its manifest's sha256): a worker serving another model hands the part back unspoken.

A part holds segments until their expected speech (function.cosyvoice.budget.expected_speech_seconds)
reaches COSYVOICE_JOB_PART_SECONDS; a part never splits a segment, and a script's pauses and marks go
with the segment they come before (function.cosyvoice.utterance.Utterance.performed).

The same result, however the job is split. A segment's audio is pinned by its seed, but with a decode
batch above 1 the LLM decodes a run of segments as one batch (the first of a run alone, then up to that
many at once), and with an int8 LLM a segment draws other tokens in a batch than alone. So a job's
segments are decoded in fixed runs (`decode_runs`): `decode_group` consecutive segments from segment 0,
whatever the parts, and a part's boundaries fall on those runs' boundaries. With a decode batch of 1
every segment is decoded alone and a part is one run. Either way the audio depends on the seed and the
contract, not on the part size or the workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from function.cosyvoice.budget import expected_speech_seconds


@dataclass(frozen=True)
class Contract:
    """What every worker of a job goes by, fixed when the job is planned."""

    window: int  # parts of the job in flight at once: part k's worker sends part k + window
    flow_steps: int  # the flow's Euler steps of every part
    decode_rows: int  # segments the LLM decodes as one batch, at most (1: each alone)
    artifact: str  # the sha256 of the manifest of the artifact every part is spoken with

    def to_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "flow_steps": self.flow_steps,
            "decode_rows": self.decode_rows,
            "artifact": self.artifact,
        }


@dataclass(frozen=True)
class Plan:
    parts: tuple[range, ...]  # consecutive, covering every segment of the job from 0
    contract: Contract

    @property
    def segments(self) -> int:
        return self.parts[-1].stop

    @property
    def decode_group(self) -> int:
        """Segments decoded together (from segment 0): 1, each alone and a part in one run; else the
        first of a run alone and then one full batch, as the engine decodes a call."""
        rows = self.contract.decode_rows
        return 1 if rows == 1 else rows + 1

    def decode_runs(self, part: int) -> list[range]:
        """The engine calls that speak `part`: the whole part when segments decode alone, else its
        segments in the job's fixed runs of `decode_group`."""
        span = self.parts[part]
        group = self.decode_group
        if group == 1:
            return [span]
        return [range(start, min(start + group, span.stop)) for start in span[::group]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "parts": [[span.start, span.stop] for span in self.parts],
            "decode_group": self.decode_group,
            **self.contract.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], reader: Contract) -> Plan:
        """The stored plan. One stored before plans held their contract has only its parts and decode
        group: the `reader`'s own settings stand in for the rest, as they did then."""
        group = int(data["decode_group"])
        contract = Contract(
            window=int(data.get("window", reader.window)),
            flow_steps=int(data.get("flow_steps", reader.flow_steps)),
            decode_rows=int(data.get("decode_rows", 1 if group == 1 else group - 1)),
            artifact=str(data.get("artifact", reader.artifact)),
        )
        return cls(tuple(range(start, stop) for start, stop in data["parts"]), contract)


def split(segments: list[str], part_seconds: float, contract: Contract) -> Plan:
    """Parts of about `part_seconds` of expected speech each, cut only between the contract's decode
    runs."""
    rows = contract.decode_rows
    group = 1 if rows == 1 else rows + 1
    runs = [range(start, min(start + group, len(segments))) for start in range(0, len(segments), group)]
    parts: list[range] = []
    start, seconds = 0, 0.0
    for run in runs:
        seconds += expected_speech_seconds(segments[run.start : run.stop])
        if seconds >= part_seconds:
            parts.append(range(start, run.stop))
            start, seconds = run.stop, 0.0
    if start < len(segments):
        parts.append(range(start, len(segments)))
    return Plan(tuple(parts), contract)


__all__ = ["Contract", "Plan", "split"]
