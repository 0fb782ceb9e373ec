"""A request whose consumer goes away never makes another request wait for it.

The wedge these tests hold off: one request's LLM thread holds the decoder memory's lock, an allocation
there runs the garbage collector, which finalises another request's abandoned `Engine.speak` generator; if
that finaliser waited for its own LLM thread, which is waiting for the same lock to give its cache back,
both would wait for good. Each test builds that moment on purpose instead of waiting for the collector to
pick it: the lock is held by the test, and the collector runs on a thread of the test's.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import function.cosyvoice.engine as engine_module
from function.core.options import SynthesisOptions
from function.cosyvoice.artifact import Artifact
from function.cosyvoice.engine import Engine
from function.cosyvoice.llm import CacheMemory

pytestmark = pytest.mark.engine

WAIT_SECONDS = 10  # only a wedge makes a test wait this long
# Two segments or more: a whole request's LLM thread is still decoding after the first audio.
SENTENCE = "Sentence {} of a longer request, which goes on for a while before it stops."
TEXT = " ".join(SENTENCE.format(index) for index in range(8))


@pytest.fixture(scope="module")
def engine(tiny_artifact: Path) -> Engine:
    return Engine.load(Artifact.open(tiny_artifact), threads=1)


def started_and_abandoned(engine: Engine, **options: Any) -> Iterator[np.ndarray | Any]:
    """A request that has yielded its first audio and is held only by a reference cycle, so that the
    collector, not a reference count, ends it: as a client that hung up leaves an edge's generator."""
    options = SynthesisOptions(text=TEXT, speaker=engine.speakers[0], seed=3, **options)
    speaking = engine.speak(engine.prepare(options))
    next(item for item in speaking if isinstance(item, np.ndarray))
    cycle: list[Any] = [speaking]
    cycle.append(cycle)
    return speaking


def collect_holding(lock: threading.Lock) -> bool:
    """Run the collector on another thread while `lock` is held (as a decode thread holds its memory's
    lock); whether the collection finished."""
    collected = threading.Event()

    def collect() -> None:
        gc.collect()
        collected.set()

    with lock:
        threading.Thread(target=collect, name="collector", daemon=True).start()
        finished = collected.wait(WAIT_SECONDS)
    return finished


@pytest.mark.parametrize("stream", [False, True])
def test_finalising_an_abandoned_request_waits_for_nothing(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    # One token ahead: the abandoned request's LLM thread is mid-request, holding its decoder cache.
    monkeypatch.setattr(engine_module, "RUN_AHEAD_TOKENS", 1)
    gc.collect()
    before = {thread.ident for thread in threading.enumerate()}
    started_and_abandoned(engine, stream=stream)
    assert collect_holding(engine.llm.cache_memory._lock), (
        "finalising an abandoned request waited for its LLM thread, which waits for the memory's lock"
    )
    # Signalled, not joined: the LLM thread ends by itself once the lock is free, its cache given back.
    for thread in threading.enumerate():
        if thread.ident not in before and thread.name == "cosyvoice-llm":
            thread.join(WAIT_SECONDS)
            assert not thread.is_alive()


def test_the_decoder_memory_lets_no_collection_run_under_its_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """No code that allocates Python objects (which may run the collector, and with it another request's
    cleanup) runs while CacheMemory holds its lock."""
    memory = CacheMemory()
    held: list[bool] = []

    def during_collection(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            held.append(memory._lock.locked())

    gc.callbacks.append(during_collection)
    threshold = gc.get_threshold()
    gc.set_threshold(1)  # every allocation of a tracked object collects
    try:
        for size in (10, 1000, 50, 5000, 20, 7, 300, 9000, 64, 2):
            memory.give(memory.take((size, 2)))
        _ = memory.kept_bytes
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(during_collection)
    assert held and not any(held)
