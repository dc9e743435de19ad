"""``tracescore.testing.local_runtime()``: tracescore configured but not installed. Two such
runtimes in one process see only their own spans and scores, and the process's configuration
(``configure()``, the global tracer provider) sees none of theirs."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace

import tracescore
import tracescore.testing
from tracescore.scorers import create_content_similarity_scorer, create_textual_difference_scorer
from tracescore.testing import CaptureScores, LocalRuntime, local_runtime


@tracescore.agent
def answer(question: str) -> str:
    return "Paris"


@tracescore.tool
def lookup(city: str) -> str:
    return "capital"


@tracescore.agent
async def answer_later(question: str) -> str:
    await asyncio.sleep(0)
    lookup(question)
    return "Paris"


@tracescore.agent
def stream(question: str) -> Iterator[str]:
    yield "Pa"
    yield "ris"


def _expected(span: Any, call_input: Any) -> str:
    return "Paris"


def similarity() -> tracescore.ScoringRule:
    return tracescore.ScoringRule(scorer=create_content_similarity_scorer(), on="agent",
                                  ground_truth=_expected)


def difference() -> tracescore.ScoringRule:
    return tracescore.ScoringRule(scorer=create_textual_difference_scorer(), on="agent",
                                  ground_truth=_expected)


def questions(spans: list[Any], kind: str = "invoke_agent") -> list[str]:
    """The question each agent span was called with, in export order."""
    return [json.loads(s.attributes["input.value"])["question"] for s in spans
            if s.name.startswith(kind)]


@pytest.fixture
def pair() -> Iterator[tuple[LocalRuntime, LocalRuntime]]:
    first = local_runtime(scoring=[similarity()], service_name="first")
    second = local_runtime(scoring=[difference()], service_name="second")
    try:
        yield first, second
    finally:
        first.shutdown()
        second.shutdown()


def test_two_local_runtimes_see_only_their_own_spans_and_the_global_one_none(
        capscore: CaptureScores, pair: tuple[LocalRuntime, LocalRuntime]) -> None:
    capscore.configure(scoring=[similarity()])
    first, second = pair
    provider = trace.get_tracer_provider()
    global_runtime = tracescore.testing.runtime()
    processor = global_runtime.processor

    answer("global before")
    with first.activate():
        answer("first")
        with second.activate():  # blocks nest
            answer("second")
        answer("first again")
    answer("global after")

    assert questions(first.spans()) == ["first", "first again"]
    assert first.scores() == {"content-similarity": [1.0, 1.0]}
    assert questions(second.spans()) == ["second"]
    assert second.scores() == {"textual-difference": [1.0]}
    assert questions(capscore.spans()) == ["global before", "global after"]
    assert capscore.scores() == {"content-similarity": [1.0, 1.0]}
    # Each span carries its own runtime's resource.
    assert {s.resource.attributes["service.name"] for s in first.spans()} == {"first"}
    assert {s.resource.attributes["service.name"] for s in second.spans()} == {"second"}
    # Nothing process-wide moved: the global provider, configure()'s runtime and its processor.
    assert trace.get_tracer_provider() is provider
    assert tracescore.testing.runtime() is global_runtime
    assert global_runtime.processor is processor
    assert first.stats().spans_exported == 2 and second.stats().spans_exported == 1
    assert tracescore.stats().spans_exported == 2


def test_runtimes_active_in_two_threads_at_once_stay_apart(
        capscore: CaptureScores, pair: tuple[LocalRuntime, LocalRuntime]) -> None:
    calls = 20
    barrier = threading.Barrier(2)

    def work(runtime: LocalRuntime, name: str) -> None:
        with runtime.activate():
            for i in range(calls):
                if i % 5 == 0:
                    barrier.wait(timeout=60)  # both threads are inside their blocks
                answer(f"{name} {i}")

    threads = [threading.Thread(target=work, args=(runtime, name))
               for runtime, name in zip(pair, ("first", "second"), strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    first, second = pair
    assert questions(first.spans()) == [f"first {i}" for i in range(calls)]
    assert questions(second.spans()) == [f"second {i}" for i in range(calls)]
    assert first.scores() == {"content-similarity": [1.0] * calls}
    assert second.scores() == {"textual-difference": [1.0] * calls}
    assert capscore.spans() == []


def test_tasks_and_streams_keep_the_runtime_they_started_in(
        capscore: CaptureScores, pair: tuple[LocalRuntime, LocalRuntime]) -> None:
    first, second = pair

    async def in_runtime(runtime: LocalRuntime, question: str) -> str:
        with runtime.activate():
            return await answer_later(question)

    async def both() -> list[str]:
        return list(await asyncio.gather(in_runtime(first, "first task"),
                                         in_runtime(second, "second task")))

    assert asyncio.run(both()) == ["Paris", "Paris"]
    with first.activate():
        chunks = stream("first stream")  # called here, consumed after the block
    assert "".join(chunks) == "Paris"

    first_spans, second_spans = first.spans(), second.spans()
    assert questions(first_spans) == ["first task", "first stream"]
    assert questions(second_spans) == ["second task"]
    # The tool call inside each task is the child of that task's agent span, in its runtime.
    for spans in (first_spans, second_spans):
        (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
        (agent,) = [s for s in spans if s.name == "invoke_agent answer_later"]
        assert tool.parent is not None and tool.parent.span_id == agent.context.span_id
    assert first.scores() == {"content-similarity": [1.0, 1.0]}
    assert capscore.spans() == []


def test_a_with_block_shuts_the_runtime_down_and_its_spans_stay_readable() -> None:
    with local_runtime(scoring=[similarity()]) as local:
        answer("once")
        with tracescore.span("step", kind="agent") as block:
            block.set_input("a block")
            block.set_output("Paris")
    assert [s.name for s in local.spans()] == ["invoke_agent answer", "invoke_agent step"]
    assert local.scores() == {"content-similarity": [1.0, 1.0]}
    answer("after")  # no longer this runtime's
    assert len(local.spans()) == 2
    local.shutdown()  # again: nothing


def test_its_log_records_and_metrics_go_to_its_own_providers_only(
        capscore: CaptureScores) -> None:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs import export as logs_export
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    memory = getattr(logs_export, "InMemoryLogRecordExporter", None) or \
        logs_export.InMemoryLogExporter
    logs = memory()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(logs_export.SimpleLogRecordProcessor(logs))
    reader = InMemoryMetricReader()
    received: list[Any] = []
    output = tracescore.OutputOptions(logger_provider=logger_provider,
                                      meter_provider=MeterProvider(metric_readers=[reader]))
    with local_runtime(scoring=[similarity()], output=output, on_score=received.append):
        answer("local")
    answer("global")

    (record,) = [r.log_record for r in logs.get_finished_logs()]
    assert record.attributes["gen_ai.evaluation.name"] == "content-similarity"
    assert [event.scorer_id for event in received] == ["content-similarity"]
    names = {m.name for rm in reader.get_metrics_data().resource_metrics
             for sm in rm.scope_metrics for m in sm.metrics}
    assert "tracescore.evaluation.score" in names, names
    assert questions(capscore.spans()) == ["global"]


def test_bad_arguments_fail_early() -> None:
    with pytest.raises(tracescore.ConfigurationError, match="ScoringRule objects"):
        local_runtime(scoring=[create_content_similarity_scorer()])  # type: ignore[list-item]
    with pytest.raises(tracescore.ConfigurationError, match="SpanExporter"):
        local_runtime(exporter=object())  # type: ignore[arg-type]
    with pytest.raises(tracescore.ConfigurationError, match="phoenix_url"):
        local_runtime(output=tracescore.OutputOptions(phoenix_url="http://127.0.0.1:1"))


def test_a_local_runtime_judges_with_its_own_judge(capscore: CaptureScores) -> None:
    from tracescore.scorers import create_answer_relevancy_scorer
    from tracescore.testing import ScriptedJudge

    def relevancy() -> tracescore.ScoringRule:
        return tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent")

    with ScriptedJudge() as own:
        for judge, reason in ((capscore.judge, "the global judge"), (own, "the local judge")):
            judge.route("answer_relevancy_statements", {"statements": ["Paris"]})
            judge.route("answer_relevancy_verdicts",
                        {"results": [{"result": "yes", "reason": "on topic"}]})
            judge.route("answer_relevancy_reason", {"reason": reason})
        capscore.configure(scoring=[relevancy()])  # capscore's judge is the global default
        with local_runtime(scoring=[relevancy()], judge=own.as_judge()) as local:
            answer("local")
        answer("global")

        (local_event,) = local.exporter.evaluation_events()
        (global_event,) = capscore.evaluation_events()
        assert local_event["gen_ai.evaluation.explanation"] == "the local judge"
        assert global_event["gen_ai.evaluation.explanation"] == "the global judge"
        assert len(own.requests) == len(capscore.judge.requests) == 3
