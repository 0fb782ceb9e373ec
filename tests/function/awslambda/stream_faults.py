"""The streaming runtime with one fault injected, for test_lambda_streaming.py (the child process):

  python tests/function/awslambda/stream_faults.py FAULT --stream

mid_stream     every engine stream raises after its first chunk, when the reply has already started
after_restore  an after-restore hook that raises (SnapStart)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any


def mid_stream() -> None:
    from function.cosyvoice.engine import Engine

    original = Engine.speak

    def broken(self: Engine, utterance: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        chunks = original(self, utterance, *args, **kwargs)
        yield next(chunks)
        raise RuntimeError("injected: the engine failed mid-stream")

    Engine.speak = broken  # type: ignore[method-assign]


def after_restore() -> None:
    from snapshot_restore_py import register_after_restore

    def fail() -> None:
        raise RuntimeError("injected: an after-restore hook failed")

    register_after_restore(fail)


FAULTS = {"mid_stream": mid_stream, "after_restore": after_restore}

if __name__ == "__main__":
    from function.local.runtime import main

    FAULTS[sys.argv[1]]()
    main([sys.argv[0], *sys.argv[2:]])
