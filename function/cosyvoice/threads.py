"""How the engine shares the CPUs it gets between its stages: one rule, `ThreadSplit.for_cpus`.

The LLM's decode runs on a thread of its own beside the flow and the vocoder (function.cosyvoice.engine),
and the two kinds of work want different things:
- A decode step reads all of the LLM's weights for one token: it is bound by memory bandwidth, and beyond
  two threads it gains nothing, so it takes at most two, whatever the precision. Its worker waits for work
  only briefly within a step and onnxruntime's calling thread takes the shards the worker has not started
  (function.cosyvoice.llm), so alone (a request's first window) the step has both cores, and beside the flow
  its second thread runs only when a core is free instead of holding it idle. One decode session, so the
  prepacked int8/int4 weights exist once.
- The flow's estimator and the vocoder are bound by arithmetic: they take every CPU. The estimator's
  guidance batch of two rows runs as two calls side by side once there are two CPUs, each on half of them
  (function.cosyvoice.flow): its thousand-odd small nodes then never wait for the other row's threads. With
  an odd count the CPU left over is the decode's.
- The prefill, the LLM's position rows, the flow's encoder and the prompt models run one at a time
  (before a segment, or before the request) and take every CPU.

At one and two CPUs these choices rest on measurements (function.cosyvoice.llm and function.cosyvoice.flow
name the commands); above two the same rules are applied, and `python -m bench scaling` measures each
count the host has with the split this gives it.
"""

from __future__ import annotations

from dataclasses import dataclass

DECODE_MAX_THREADS = 2  # a decode step is bound by memory bandwidth, which two threads already draw


@dataclass(frozen=True)
class ThreadSplit:
    """Intra-op threads per session for an engine on `cpus` CPUs."""

    cpus: int  # the CPUs the engine gets: prefill, positions, flow encoder, vocoder, prompt models
    decode: int  # the LLM's decode step, running beside the flow and the vocoder
    estimator: int  # each estimator call
    estimator_rows_side_by_side: bool  # the guidance batch's two rows as two calls at once

    @classmethod
    def for_cpus(cls, cpus: int) -> ThreadSplit:
        if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1:
            raise ValueError(f"an engine needs at least one CPU, got {cpus!r}")
        side_by_side = cpus >= 2
        return cls(
            cpus=cpus,
            decode=min(cpus, DECODE_MAX_THREADS),
            estimator=cpus // 2 if side_by_side else cpus,
            estimator_rows_side_by_side=side_by_side,
        )

    def describe(self) -> str:
        """One line for tables: 'decode 2, estimator 2 rows × 1, others 2'."""
        rows = f"2 rows × {self.estimator}" if self.estimator_rows_side_by_side else f"{self.estimator}"
        return f"decode {self.decode}, estimator {rows}, others {self.cpus}"


__all__ = ["DECODE_MAX_THREADS", "ThreadSplit"]
