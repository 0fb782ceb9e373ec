"""The Lambda runtime process: `python -m function.local.runtime HANDLER`, i.e. awslambdaric's loop, or
`python -m function.local.runtime --stream`, the response-streaming runtime (function.awslambda.streaming).

With AWS_LAMBDA_INITIALIZATION_TYPE=snap-start and COSYVOICE_LOCAL_CLONES=N, the process stands in for
a snapshot: after every before-snapshot hook has run it forks N clones and waits for them; each clone
goes on as a restored environment (restore/next, after-restore hooks, invocations). Lambda snapshots
the whole VM, threads included; fork keeps only the calling thread, so clones need sessions created
with one intra-op thread (COSYVOICE_THREADS=1): onnxruntime's pool threads would not exist in them.
"""

from __future__ import annotations

import os
import sys

CLONES_VARIABLE = "COSYVOICE_LOCAL_CLONES"
CLONE_ID_VARIABLE = "COSYVOICE_LOCAL_CLONE"
STREAM = "--stream"


def _snapshot_by_fork(clones: int) -> None:
    children = []
    for index in range(clones):
        pid = os.fork()
        if pid == 0:
            os.environ[CLONE_ID_VARIABLE] = str(index)
            return  # the clone continues into restore/next
        children.append(pid)
    status = 0
    for pid in children:
        _, code = os.waitpid(pid, 0)
        status = status or os.waitstatus_to_exitcode(code)
    os._exit(status)  # the snapshotted environment itself never serves


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit(f"usage: python -m function.local.runtime MODULE.FUNCTION | {STREAM}")
    clones = int(os.environ.get(CLONES_VARIABLE, "0"))
    if clones and os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE") == "snap-start":
        from snapshot_restore_py import register_before_snapshot

        # Registered before the handler module is imported, so it runs last: before-snapshot hooks run
        # in reverse order of registration.
        register_before_snapshot(_snapshot_by_fork, clones)
    if argv[1] == STREAM:
        from function.awslambda.streaming.runtime import main as stream_main

        stream_main()
    else:
        from awslambdaric.__main__ import main as runtime_main

        runtime_main(["awslambdaric", argv[1]])


if __name__ == "__main__":
    main(sys.argv)
