"""Process-level measurement: phase clocks, memory from /proc, page-cache control, fresh child processes.

Standard library only: the timed child processes import this module before anything they measure, so it
must cost next to nothing and must not pull in numpy, torch or onnxruntime.

Clocks: parent and children read CLOCK_MONOTONIC, which is system-wide on Linux, so a child's marks can be
subtracted from the instant its parent called `Popen` (that interval is "interpreter start").
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

KIB = 1024
MIB = 1024 * 1024


@dataclass(frozen=True)
class Memory:
    """One process's memory, in bytes (from /proc/<pid>/smaps_rollup and /proc/<pid>/status)."""

    rss: int
    pss: int
    anonymous: int  # resident anonymous pages: heap, copies of weights
    file_backed: int  # resident pages backed by a file: mapped weights, shared libraries
    pss_anonymous: int
    pss_file: int
    peak_rss: int  # VmHWM: the high-water mark of RSS over the process's life

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, int]) -> Memory:
        return cls(**{key: int(data[key]) for key in cls.__dataclass_fields__})


def _kib_fields(text: str) -> dict[str, int]:
    """'Name:   123 kB' lines → {'Name': bytes}; other lines are ignored."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            values[name.strip()] = int(parts[0]) * KIB
    return values


def parse_memory(smaps_rollup: str, status: str) -> Memory:
    rollup = _kib_fields(smaps_rollup)
    anonymous = rollup.get("Anonymous", 0)
    # Shmem pages count in neither column: they are rare here and belong to neither story.
    return Memory(
        rss=rollup.get("Rss", 0),
        pss=rollup.get("Pss", 0),
        anonymous=anonymous,
        file_backed=max(0, rollup.get("Rss", 0) - anonymous - rollup.get("Pss_Shmem", 0)),
        pss_anonymous=rollup.get("Pss_Anon", 0),
        pss_file=rollup.get("Pss_File", 0),
        peak_rss=_kib_fields(status).get("VmHWM", 0),
    )


def read_memory(pid: int | str = "self") -> Memory:
    proc = Path("/proc") / str(pid)
    return parse_memory((proc / "smaps_rollup").read_text(), (proc / "status").read_text())


def total_pss(pids: Iterable[int]) -> int:
    """Proportional set size summed over processes: shared pages are counted once in total."""
    return sum(read_memory(pid).pss for pid in pids)


def drop_page_cache(path: Path) -> None:
    """Ask the kernel to evict one file's clean pages (pages another process has mapped stay)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_fraction(path: Path) -> float:
    """Share of a file's pages in the page cache (mincore on a read-only mapping); 0.0 for an empty file."""
    size = path.stat().st_size
    if size == 0:
        return 0.0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    with path.open("rb") as handle:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, handle.fileno(), 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap failed for {path}")
        try:
            vector = (ctypes.c_ubyte * pages)()
            if libc.mincore(address, size, vector) != 0:
                raise OSError(ctypes.get_errno(), f"mincore failed for {path}")
            return sum(byte & 1 for byte in vector) / pages
        finally:
            libc.munmap(address, size)


@dataclass
class PhaseClock:
    """Marks the end of each phase in a timed process; memory is sampled at each mark, off the clock.

    `started` is the first instant the process itself could record (top of its main module); the time
    spent here reading /proc is subtracted, so phases measure only the work between marks.
    """

    started: float
    marks: list[tuple[str, float]] = field(default_factory=list)
    memory: dict[str, dict[str, int]] = field(default_factory=dict)
    _excluded: float = 0.0

    def __post_init__(self) -> None:
        # Importing this module and building the clock is measurement overhead, not the measured stack.
        self._excluded = time.monotonic() - self.started
        self.marks.append(("interpreter", self.started))

    def mark(self, name: str, sample_memory: bool = True) -> None:
        now = time.monotonic()
        self.marks.append((name, now - self._excluded))
        if sample_memory:
            self.memory[name] = read_memory().to_dict()
            self._excluded += time.monotonic() - now

    def to_dict(self) -> dict[str, object]:
        return {"marks": self.marks, "memory": self.memory, "final": read_memory().to_dict()}


def phase_durations(marks: Sequence[tuple[str, float]], spawned: float) -> dict[str, float]:
    """Seconds per phase: each mark minus the previous one, the first minus the parent's spawn instant."""
    durations: dict[str, float] = {}
    previous = spawned
    for name, at in marks:
        durations[name] = at - previous
        previous = at
    return durations


@dataclass(frozen=True)
class ChildResult:
    spawned: float  # CLOCK_MONOTONIC just before the child was started
    ended: float
    data: dict  # what the child wrote to its result file

    @property
    def phases(self) -> dict[str, float]:
        return phase_durations(self.data["clock"]["marks"], self.spawned)

    def since_spawn(self, mark: str) -> float:
        return dict(self.data["clock"]["marks"])[mark] - self.spawned


class ChildFailed(RuntimeError):
    pass


def run_child(
    module: str,
    args: Sequence[str],
    result_file: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ChildResult:
    """Run `python -m module args... --result FILE` in a fresh interpreter and read back its JSON."""
    result_file.unlink(missing_ok=True)
    command = [sys.executable, "-m", module, *args, "--result", str(result_file)]
    full_env = {**os.environ, **(env or {})}
    spawned = time.monotonic()
    completed = subprocess.run(
        command, env=full_env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    ended = time.monotonic()
    if completed.returncode != 0 or not result_file.exists():
        tail = "\n".join(completed.stderr.strip().splitlines()[-15:])
        raise ChildFailed(f"{module} {' '.join(args)} exited {completed.returncode}:\n{tail}")
    return ChildResult(spawned, ended, json.loads(result_file.read_text()))


def printed_results(module: str, argument_lists: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """`python -m module *arguments` once per list, each in a fresh interpreter, in order: the JSON object
    each prints on its last line."""
    results = []
    for arguments in argument_lists:
        command = [sys.executable, "-m", module, *arguments]
        child = subprocess.run(command, capture_output=True, text=True, check=True)
        results.append(json.loads(child.stdout.splitlines()[-1]))
    return results


def with_latest_baseline(
    results: Sequence[dict[str, Any]], key: str
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each result beside its baseline: the latest result so far whose `key` is the first result's. Runs
    that alternate with the baseline's (1,4,1,4) then compare each with the run just before it, which on
    a busy host ran under the more nearly same load."""
    base = results[0]
    for result in results:
        if result[key] == results[0][key]:
            base = result
        yield result, base


def write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(data, indent=1, ensure_ascii=False, default=str))
    temporary.replace(path)


__all__ = [
    "ChildFailed",
    "ChildResult",
    "Memory",
    "PhaseClock",
    "drop_page_cache",
    "parse_memory",
    "phase_durations",
    "read_memory",
    "resident_fraction",
    "run_child",
    "total_pss",
    "printed_results",
    "with_latest_baseline",
    "write_json",
]
