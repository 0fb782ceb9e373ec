"""Plain-text tables (GitHub markdown, readable in a terminal) and the number formats they use."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.procs import MIB


@dataclass
class Table:
    title: str
    headers: Sequence[str]
    rows: list[Sequence[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: str) -> None:
        if len(cells) != len(self.headers):
            raise ValueError(
                f"{self.title}: row has {len(cells)} cells, table has {len(self.headers)} columns"
            )
        self.rows.append(cells)

    def render(self) -> str:
        widths = [
            max(len(str(cell)) for cell in column) for column in zip(self.headers, *self.rows, strict=True)
        ]

        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

        out = [
            f"### {self.title}",
            "",
            line(self.headers),
            "|" + "|".join("-" * (w + 2) for w in widths) + "|",
        ]
        out += [line(row) for row in self.rows]
        out += [""] + [f"- {note}" for note in self.notes] if self.notes else []
        return "\n".join(out) + "\n"

    def to_dict(self) -> dict[str, object]:
        return {
            "title": self.title,
            "headers": list(self.headers),
            "rows": [list(r) for r in self.rows],
            "notes": self.notes,
        }


def seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1000:.0f} ms" if abs(value) < 1 else f"{value:.2f} s"


def mib(value: float | None) -> str:
    return "–" if value is None else f"{value / MIB:,.0f} MiB"


def plain(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def ratio(upstream: float | None, ours: float | None) -> str:
    """How many times more upstream takes (time, memory, RTF) than ours: > 1 means ours is better."""
    if upstream is None or ours is None or ours <= 0:
        return "–"
    value = upstream / ours
    return f"{value:.0f}×" if value >= 10 else f"{value:.1f}×" if value >= 1 else f"{value:.2f}×"


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def minimum(values: Sequence[float]) -> float | None:
    return min(values) if values else None


__all__ = ["Table", "median", "mib", "minimum", "plain", "ratio", "seconds"]
