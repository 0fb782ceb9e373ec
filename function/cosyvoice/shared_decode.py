"""One decode batch that every request a process runs at once draws its speech tokens from.

A decode step reads all of the LLM's weights whatever its rows (function.cosyvoice.llm), so requests
decoding side by side, each on its own, read them once per token per request. Here their segments are rows
of one `DecodeBatch`, stepped by one thread: a request's segments join between two steps and leave when
they end, or when the request goes away. The batch holds at most `rows` segments; a request keeps at most
the `rows` it asks for in it, and a free row goes to the waiting segment whose request has the fewest rows
in the batch (the earliest among those), so a request that arrives while another fills the batch gets the
next row that frees.

Each segment still samples from its own generator, but which rows it shares a step with depends on what
else runs: with an int8 LLM that moves its draws (function.cosyvoice.llm). The engine therefore sends only
unseeded whole-utterance requests here; a seeded one decodes in a batch of its own segments, and a seed
gives the same audio whatever else the process is doing. A streamed request decodes on its own too: its
first chunk holds its decode to give the flow the cores, which a batch stepping for others would not do.
"""

from __future__ import annotations

import queue
import threading
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from itertools import islice

from function.cosyvoice.llm import LLM, DecodeBatch, LLMInput


class _Ticket:
    """One segment on its way through the shared batch, and the tokens it has drawn so far."""

    def __init__(self, segment: LLMInput, owner: object) -> None:
        self.segment = segment
        self.owner = owner  # the request's generate_segments call
        self.cancelled = False  # set by the request's thread, read by the decoding one
        self._drawn: queue.SimpleQueue[int | None | BaseException] = queue.SimpleQueue()

    def put(self, item: int | None | BaseException) -> None:
        """A token, None once the segment has ended, or the error that ended it."""
        self._drawn.put(item)

    def tokens(self) -> Iterator[int]:
        """The segment's tokens as they are drawn, until it ends."""
        while (item := self._drawn.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item


class SharedDecoder:
    """The process's shared decode batch of up to `rows` segments; `generate_segments` is `LLM`'s, drawn
    here. The decoding thread starts with the first segment and waits while there is none."""

    def __init__(self, llm: LLM, rows: int) -> None:
        if rows < 2:
            raise ValueError(f"a shared decode batch needs at least two rows, got {rows}")
        self.llm = llm
        self.rows = rows
        self.steps = 0  # decode steps taken: each is one read of the decoder's weights
        self._changed = threading.Condition()  # its lock is reentrant: _submit takes it again
        self._waiting: list[_Ticket] = []
        self._batch: DecodeBatch[_Ticket] | None = None  # None while idle; only the decoding thread sets it
        self._thread: threading.Thread | None = None

    def generate_segments(self, segments: Sequence[LLMInput], rows: int) -> Iterator[int | None]:
        """Each segment's speech tokens in segment order, each closed by None, with up to `rows` of them in
        the shared batch at once. The first `rows` wait for their rows from this call on; closing the
        iterator takes its segments out of the batch."""
        if rows < 1:
            raise ValueError(f"rows must be at least 1, got {rows}")
        owner = object()
        pending = iter(segments)
        with self._changed:  # they arrive together: the decoding thread sees all of them or none
            ahead = deque(self._submit(segment, owner) for segment in islice(pending, rows))
        return self._drawn(ahead, pending, owner)

    def _drawn(
        self, ahead: deque[_Ticket], pending: Iterator[LLMInput], owner: object
    ) -> Iterator[int | None]:
        """The tokens of the segments `ahead`, then of those `pending`, each submitted as one ahead ends."""
        try:
            while ahead:
                yield from ahead[0].tokens()
                yield None
                ahead.popleft()
                following = next(pending, None)
                if following is not None:
                    ahead.append(self._submit(following, owner))
        finally:  # may run in a finaliser: it only sets flags, which the decoding thread reads each turn
            for ticket in ahead:
                ticket.cancelled = True

    def _submit(self, segment: LLMInput, owner: object) -> _Ticket:
        ticket = _Ticket(segment, owner)
        with self._changed:
            self._waiting.append(ticket)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="cosyvoice-shared-decode", daemon=True)
                self._thread.start()
            self._changed.notify()
        return ticket

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and self._batch is None:
                    self._changed.wait()
            try:
                self._turn()
            except BaseException as exc:  # every request in the batch hears of it; the thread goes on
                self._fail(exc)

    def _turn(self) -> None:
        """One round: waiting segments join the free rows, dropped ones leave, every row draws its next
        token and, while rows remain, the decoder takes one step; an empty batch gives its memory back."""
        batch = self._batch = self._batch or DecodeBatch[_Ticket](self.llm, self.rows)
        with self._changed:
            joining = self._choose(batch.members())
        for ticket in joining:
            try:
                joined = batch.join(ticket, ticket.segment)
            except Exception as exc:  # this segment's error (its text is too long): the others go on
                ticket.put(exc)
                continue
            if not joined:
                ticket.put(None)
        for ticket in batch.members():
            if ticket.cancelled:
                batch.leave(ticket)
        for ticket, token in batch.draw():
            ticket.put(token)
        if len(batch):
            batch.step()
            self.steps += 1
        else:  # idle: the cache's memory goes back for the next batch, or a request decoding alone
            batch.release()
            self._batch = None

    def _choose(self, in_batch: list[_Ticket]) -> list[_Ticket]:
        """The waiting segments that take the batch's free rows (called holding the lock)."""
        self._waiting = [ticket for ticket in self._waiting if not ticket.cancelled]
        rows_of = Counter(ticket.owner for ticket in in_batch)
        chosen: list[_Ticket] = []
        while self._waiting and len(in_batch) + len(chosen) < self.rows:
            # min keeps the first of equals: the earliest of the requests with the fewest rows
            ticket = min(self._waiting, key=lambda waiting: rows_of[waiting.owner])
            self._waiting.remove(ticket)
            rows_of[ticket.owner] += 1
            chosen.append(ticket)
        return chosen

    def _fail(self, exc: BaseException) -> None:
        """A step failed: every segment in the batch ends with `exc`, and the batch starts afresh."""
        if self._batch is not None:
            for ticket in self._batch.members():
                ticket.put(exc)
            self._batch.release()
            self._batch = None


__all__ = ["SharedDecoder"]
