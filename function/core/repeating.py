"""An action repeated on a thread of its own while a block of work runs (a lease or a message kept alive
while a part is spoken), stopped and joined when the block ends, however it ends."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def repeating(seconds: float, action: Callable[[], None], name: str) -> Iterator[None]:
    """Call `action` every `seconds` until the block ends; the thread is joined before the block's end
    returns, so nothing the action writes races what follows. `action` handles its own failures."""
    done = threading.Event()

    def run() -> None:
        while not done.wait(seconds):
            action()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


__all__ = ["repeating"]
