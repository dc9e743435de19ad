"""The one router: every ended span becomes scoring work (or not) in one place, the scoring
processor's ``on_end``, on the thread that ends it, in end order.

These tests pin what that place must keep, through the public API: the full values, the end
order within a trace, the predicate and the sampling decision taken once per span, a full queue
that drops and counts instead of blocking, and every span exported exactly once whatever else
runs (flush, shutdown, other threads).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import tracescore
from tests.helpers import ProbeScorer, eval_events, finished, memory_configure


@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    tracescore.shutdown(3000)


def _ids(spans: list[Any]) -> list[int]:
    return [s.context.span_id for s in spans if not s.name.startswith("evaluation ")]


def test_a_trace_is_routed_in_end_order() -> None:
    # A retrieval's documents reach the trace buffer before the agent span that ends after it
    # is routed: the context scorer of the agent sees them.
    probe = ProbeScorer(id="ctx", uses_context=True)
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe)])

    @tracescore.retrieval
    def search(q: str) -> list[str]:
        return [f"doc {q} {i}" for i in range(3)]

    @tracescore.agent
    def answer(q: str) -> str:
        return " ".join(search(q))

    for i in range(50):
        answer(str(i))
    finished(exp)
    assert len(probe.calls) == 50
    for call in probe.calls:
        q = call["input"]
        assert list(call["context"]) == [f"doc {q} {i}" for i in range(3)]


def test_a_rule_predicate_runs_once_per_ended_span() -> None:
    seen: list[str] = []

    def predicate(span: Any) -> bool:
        seen.append(span.name)
        return span.name.startswith("invoke_agent")

    probe = ProbeScorer(id="p")
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on=predicate)])

    @tracescore.tool(name="look")
    def look(q: str) -> str:
        return q

    @tracescore.agent(name="answer")
    def answer(q: str) -> str:
        return look(q) * 20

    for i in range(10):
        answer(str(i))
    spans = finished(exp)
    assert sorted(seen) == sorted(["execute_tool look"] * 10 + ["invoke_agent answer"] * 10)
    assert len(probe.calls) == 10
    assert len([s for s in spans if eval_events(s)]) == 10


def test_a_predicate_of_an_unsampled_rule_is_not_run() -> None:
    # The trace-sampling decision comes first: a rule that cannot pick the trace matches
    # nothing, so its predicate (user code, on the caller's thread) is not run.
    seen: list[str] = []
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(
        scorer=ProbeScorer(id="p"), on=lambda s: bool(seen.append(s.name)), sample_rate=0.0)])

    @tracescore.agent
    def answer(q: str) -> str:
        return q

    answer("q")
    finished(exp)
    assert seen == []


def test_a_full_queue_drops_and_counts_and_never_blocks_the_caller() -> None:
    gate = threading.Event()

    class Gated(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            import asyncio

            while not gate.is_set():
                await asyncio.sleep(0.005)
            return await super().arun(**kwargs)

    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=Gated(id="g"))],
                              limits=tracescore.LimitsOptions(max_queue_size=3,
                                                              max_concurrency=1))

    @tracescore.agent
    def answer(q: str) -> str:
        return "an answer of some length"

    for i in range(10):
        answer(str(i))  # returns at once: the seven past the queue's bound are not waited for
    assert tracescore.stats().skipped_queue_full == 7
    gate.set()
    spans = finished(exp)
    assert len(_ids(spans)) == 10  # every span exported once, scored or not
    assert len([s for s in spans if eval_events(s)]) == 3


def test_spans_ending_while_shutdown_runs_are_each_exported_once() -> None:
    # Threads keep ending sampled spans while another shuts tracescore down: every span goes
    # out exactly once (held and released, or exported directly once shutdown closed the
    # processor).
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=ProbeScorer(id="p"))])

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    stop = threading.Event()
    enough = threading.Event()
    counts = [0] * 4

    def work(n: int) -> None:
        while not stop.is_set():
            answer(str(n))
            counts[n] += 1
            if sum(counts) >= 2000:
                enough.set()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    assert enough.wait(120)
    tracescore.shutdown(5000)
    stop.set()
    for t in threads:
        t.join(10)
    # Spans that ended after the shutdown went nowhere; none went out twice.
    ids = _ids(list(exp.get_finished_spans()))
    assert len(ids) == len(set(ids))
    assert len(ids) >= 2000


def test_a_span_ending_during_shutdowns_flush_is_scored_and_exported_once() -> None:
    # A span ends while shutdown flushes: the processor is not closed yet, so it is held and
    # its job queued; shutdown waits for the engine within its deadline, so the span goes out
    # once, with its score (a job still running at the deadline would be counted as dropped).
    inst, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=ProbeScorer(id="p"))])

    @tracescore.agent
    def answer(q: str) -> str:
        return "an answer of some length"

    flush = inst.processor.force_flush

    def flush_then_a_span_ends(timeout_millis: float = 30_000) -> bool:
        done = flush(timeout_millis)
        answer("during shutdown")
        return done

    inst.processor.force_flush = flush_then_a_span_ends  # type: ignore[method-assign]
    tracescore.shutdown(30_000)
    (span,) = exp.get_finished_spans()
    assert len(eval_events(span)) == 1
    assert inst.stats().jobs_dropped == 0
