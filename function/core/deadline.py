"""How long a request may run, and what set the limit.

Every edge knows its own limits (function.service.deadlines: the Lambda invocation, API Gateway's 30 s, a
container's longest request, the caller's `X-Request-Timeout`) and keeps the earliest of them as one
`Deadline`; the engine refuses work that cannot finish before it (function.cosyvoice.budget) and stops at
it, so no compute is billed for a response nobody receives.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from function.core.errors import TTSError

# Room left after the deadline the engine sees: the last chunk's encoding, the reply, the runtime's post.
REPLY_MARGIN_SECONDS = 1.0
# Where work too long for a request's limit can go (every refusal and stop says it the same way).
JOBS_HINT = "send it to POST /v1/jobs (or the SQS queue), which splits the work across invocations"


class DeadlineExceeded(TTSError):
    """The synthesis reached its time limit and was stopped; nothing after it was computed."""

    code = "deadline_exceeded"
    status = 504


class Stopped(DeadlineExceeded):
    """The process was asked to stop (SIGTERM) and had no time left to finish the work: it goes back
    unfinished, through no fault of its own."""

    code = "stopped"
    status = 503


@dataclass(frozen=True)
class Deadline:
    at: float  # time.monotonic() when the engine must have stopped
    reason: str  # what set it, for people: "API Gateway's 30 s limit"
    seconds: float  # the limit as granted, for messages

    @classmethod
    def after(
        cls, seconds: float, reason: str, margin: float = REPLY_MARGIN_SECONDS, since: float | None = None
    ) -> Deadline:
        """`seconds` from `since` (a time.monotonic(); default now), less the reply's margin."""
        start = time.monotonic() if since is None else since
        return cls(start + seconds - margin, reason, seconds)

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def expired(self) -> bool:
        return time.monotonic() >= self.at

    @property
    def stopping(self) -> bool:
        """Whether the process is stopping: work refused now is handed back, not failed."""
        return False

    def check(self) -> None:
        """Raise DeadlineExceeded once the deadline has passed."""
        if self.expired():
            raise DeadlineExceeded(
                f"synthesis stopped at this request's time limit ({self.seconds:.0f} s, {self.reason});"
                f" for long texts, {JOBS_HINT}"
            )


def earliest(*deadlines: Deadline | None) -> Deadline | None:
    given = [deadline for deadline in deadlines if deadline is not None]
    return min(given, key=lambda deadline: deadline.at) if given else None


__all__ = ["Deadline", "DeadlineExceeded", "JOBS_HINT", "REPLY_MARGIN_SECONDS", "Stopped", "earliest"]
