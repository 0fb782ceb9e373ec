"""A job split into parts: runs of consecutive segments, each its own queue message, spoken whole by one
worker and joined once at the end (function.jobs.join).

The split is made once, by the first worker that plans the job, and stored with it (function.jobs.store):
every worker then speaks the same parts, whatever its own settings. A part holds segments until their
expected speech (function.cosyvoice.budget.expected_speech_seconds) reaches COSYVOICE_JOB_PART_SECONDS; a
part never splits a segment, and a script's pauses and marks go with the segment they come before
(function.cosyvoice.utterance.Utterance.performed).

The same result, however the job is split. A segment's audio is pinned by its seed, but with
COSYVOICE_DECODE_BATCH above 1 the LLM decodes a run of segments as one batch (the first of a run alone,
then up to that many at once), and with an int8 LLM a segment draws other tokens in a batch than alone.
So a job's segments are decoded in fixed runs (`decode_runs`): `decode_group` consecutive segments from
segment 0, whatever the parts, and a part's boundaries fall on those runs' boundaries. With a decode
batch of 1 every segment is decoded alone and a part is one run. Either way the audio depends on the seed
and the decode batch the job was planned with, not on the part size, the window or the workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from function.cosyvoice.budget import expected_speech_seconds


@dataclass(frozen=True)
class Plan:
    parts: tuple[range, ...]  # consecutive, covering every segment of the job from 0
    decode_group: int  # segments decoded together (from segment 0); 1: each alone, a part in one run

    @property
    def segments(self) -> int:
        return self.parts[-1].stop

    def decode_runs(self, part: int) -> list[range]:
        """The engine calls that speak `part`: the whole part when segments decode alone, else its
        segments in the job's fixed runs of `decode_group`."""
        span = self.parts[part]
        if self.decode_group == 1:
            return [span]
        group = self.decode_group
        return [range(start, min(start + group, span.stop)) for start in span[::group]]

    def to_dict(self) -> dict[str, Any]:
        return {"parts": [[span.start, span.stop] for span in self.parts], "decode_group": self.decode_group}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        return cls(tuple(range(start, stop) for start, stop in data["parts"]), int(data["decode_group"]))


def split(segments: list[str], part_seconds: float, decode_rows: int) -> Plan:
    """Parts of about `part_seconds` of expected speech each, cut only between decode runs.

    decode_rows: the engine's decode batch. Above 1, a run is the first segment alone and then one full
    batch, as the engine decodes a call; 1: any cut is a run boundary."""
    group = 1 if decode_rows == 1 else decode_rows + 1
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
    return Plan(tuple(parts), group)


__all__ = ["Plan", "split"]
