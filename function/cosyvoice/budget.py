"""Whether a text can be spoken before a deadline: expected speech from the text, against measured speed.

Expected speech: the normalised segments' characters at a speaking pace (Chinese ~4.5 characters a
second, other scripts ~12 letters or digits a second; spaces and punctuation free), so numbers count as
the words they are read as. The model decides the real length (up to 30 speech tokens per text token):
this is the estimate used to refuse work up front; the deadline itself is enforced while synthesising.

Speed: compute seconds per speech token on this instance, measured, never assumed. The warm-up gives a
first figure, which the first real synthesis replaces: a 10-token run spreads its fixed costs over few
tokens, so it overstates the cost per token. After that every finished synthesis updates the running
figure. Before any measurement, nothing is refused up front.
"""

from __future__ import annotations

import threading

from function.core.deadline import JOBS_HINT, Deadline
from function.core.errors import TTSError
from function.cosyvoice.frontend import contains_chinese

CJK_SECONDS = 1 / 4.5  # a Chinese character, read aloud
LETTER_SECONDS = 1 / 12  # a letter or digit of other scripts
SMOOTHING = 0.3  # weight of the newest measurement in the running figure


class OverBudget(TTSError):
    """The text needs more time than the request has: refused before any synthesis."""

    code = "exceeds_time_limit"
    status = 413


def expected_speech_seconds(segments: list[str]) -> float:
    seconds = 0.0
    for segment in segments:
        for char in segment:
            if contains_chinese(char):
                seconds += CJK_SECONDS
            elif char.isalnum():
                seconds += LETTER_SECONDS
    return seconds


class SpeedMeter:
    """Compute seconds per speech token, smoothed over the syntheses this process has run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds_per_token: float | None = None
        self._from_warm_up = False

    @property
    def seconds_per_token(self) -> float | None:
        return self._seconds_per_token

    def observe(self, seconds: float, tokens: int, warm_up: bool = False) -> None:
        if tokens <= 0 or seconds <= 0:
            return
        measured = seconds / tokens
        with self._lock:
            known = None if self._from_warm_up else self._seconds_per_token
            self._seconds_per_token = measured if known is None else known + SMOOTHING * (measured - known)
            self._from_warm_up = warm_up

    def seconds_for(self, segments: list[str], token_rate: float) -> float | None:
        """The compute seconds `check` expects `segments` to take here; None before any measurement."""
        per_token = self._seconds_per_token
        return None if per_token is None else expected_speech_seconds(segments) * token_rate * per_token

    def check(self, segments: list[str], text_chars: int, token_rate: float, deadline: Deadline) -> None:
        """Raise OverBudget when the expected synthesis of `segments` would outlast `deadline`."""
        needed = self.seconds_for(segments, token_rate)
        available = deadline.remaining()
        if needed is None or needed <= available:
            return
        speech = expected_speech_seconds(segments)
        fitting = int(text_chars * max(available, 0.0) / needed) if needed > 0 else text_chars
        raise OverBudget(
            f"this text needs ~{needed:.0f} s of synthesis here (~{speech:.0f} s of speech at"
            f" {needed / speech if speech else 0:.2f} s per second of speech), more than the"
            f" {max(available, 0):.0f} s"
            f" this request has left ({deadline.reason}); about {fitting} of its {text_chars} characters"
            f" fit: shorten it, or {JOBS_HINT}"
        )


__all__ = ["OverBudget", "SpeedMeter", "expected_speech_seconds"]
