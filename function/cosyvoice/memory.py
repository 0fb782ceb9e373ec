"""Memory given back after every graph run, so a long-lived process stays the size of its model.

Two allocators otherwise keep the largest request's working memory for good, and a server that meets
requests of growing shapes grows in steps (`python -m bench soak` records RSS between requests):
- onnxruntime's CPU arena keeps every region it has grown to. `RUN_OPTIONS` asks it to free its idle
  regions at the end of each run (arena shrinkage); the arena itself stays on, because without it every
  intermediate tensor is a malloc and the flow runs slower. A run that another of the same shapes
  follows takes `STEP_RUN_OPTIONS` instead, which keep the regions for it: the flow's Euler steps but the
  last, and the LLM's decode steps (a token per row, whatever the request: kept for good). Giving regions
  back only to take them again a moment later costs time.
- glibc's malloc raises its mmap threshold to the largest block freed (up to 32 MiB), so once a large
  activation has been freed, the next ones come from the heap, which keeps what it is given. A fixed
  threshold (`fix_mmap_threshold`) keeps blocks of 1 MiB and more as mappings, returned when freed.
Together RSS between requests stays flat (`python -m bench soak`) at no measurable cost in speed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

import onnxruntime as ort

# mallopt(3): M_MMAP_THRESHOLD; setting it also turns off glibc's dynamic threshold.
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1024 * 1024  # activations of a graph run are larger; small objects stay on the heap


def _run_options(shrink_arena: bool) -> ort.RunOptions:
    options = ort.RunOptions()
    # onnxruntime's Python wrapper reads this entry on every run to decide on graph capture, and where it is
    # unset finds out by raising and catching an error; -1 (no capture, the CPU provider's only way) is read
    # at once.
    options.add_run_config_entry("gpu_graph_id", "-1")
    if shrink_arena:
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


RUN_OPTIONS = _run_options(shrink_arena=True)
STEP_RUN_OPTIONS = _run_options(shrink_arena=False)


@functools.cache
def fix_mmap_threshold() -> bool:
    """Fix glibc's mmap threshold at MMAP_THRESHOLD, once per process; True when it is in force.

    Left alone where the C library is not glibc (musl, macOS: no such threshold) and where the operator
    chose one through glibc's own MALLOC_MMAP_THRESHOLD_."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.gnu_get_libc_version  # noqa: B018 - glibc only; raises AttributeError elsewhere
    except (OSError, AttributeError):
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


__all__ = ["MMAP_THRESHOLD", "RUN_OPTIONS", "STEP_RUN_OPTIONS", "fix_mmap_threshold"]
