"""``tracescore serve`` honours its own file: its runtime's input caps, judge metrics and
redaction, not the process's (``configure()``'s)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from test_serve_support import FullReceiver

import tracescore
from tracescore import serve
from tracescore.testing import SCRIPTED_JUDGE_API_KEY, ScriptedJudge

QUESTION = "What is the capital of France?"
# Long enough that a 60-character cap cuts it; the tail must never reach the judge.
ANSWER = "Paris is the capital of France. " + "It has many museums. " * 20 + "TAIL-MARKER"


@pytest.fixture
def receiver() -> Iterator[FullReceiver]:
    with FullReceiver() as recv:
        yield recv


@pytest.fixture
def relevancy_judge(judge_server: ScriptedJudge) -> ScriptedJudge:
    judge_server.route("answer_relevancy_statements", {"statements": ["Paris is the capital."]})
    judge_server.route("answer_relevancy_verdicts",
                       {"results": [{"result": "yes", "reason": "on topic"}]})
    judge_server.route("answer_relevancy_reason", {"reason": "It answers the question."})
    return judge_server


def _start(receiver: FullReceiver, judge: ScriptedJudge, extra: str = "") -> Any:
    config = serve.parse(f"""
exporter: {{endpoint: "{receiver.endpoint}", protocol: grpc, compression: none}}
receivers: {{grpc: {{endpoint: "127.0.0.1:0"}}, http: null}}
metrics_interval: 0.2
trace: {{idle: 0.2, settle_after_root: 0.1, max_wait: 30}}
judge:
  model: openai/gpt-4o-mini
  api_base: "{judge.api_base}"
  api_key: "{SCRIPTED_JUDGE_API_KEY}"
  max_retries: 0
rules:
  - scorer: answer-relevancy
    on: agent
{extra}
""", toml=False)
    return serve.start(config)


def _agent_span(trace_id: int, answer: str = ANSWER) -> ReadableSpan:
    return ReadableSpan(
        name="invoke_agent answer",
        context=SpanContext(trace_id, 0x1, False, TraceFlags(TraceFlags.SAMPLED)),
        parent=None,
        resource=Resource({"service.name": "svc"}),
        attributes={"tracescore.span.kind": "agent", "gen_ai.operation.name": "invoke_agent",
                    "input.value": json.dumps({"question": QUESTION}),
                    "input.mime_type": "application/json",
                    "output.value": json.dumps(answer), "output.mime_type": "application/json"},
        kind=SpanKind.INTERNAL,
        status=Status(StatusCode.OK),
        start_time=1_000_000_000,
        end_time=2_000_000_000,
        instrumentation_scope=InstrumentationScope("some.instrumentation", "1.2.3"),
    )


def _send(port: int, spans: list[ReadableSpan]) -> None:
    import grpc
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        trace_service_pb2_grpc.TraceServiceStub(channel).Export(encode_spans(spans), timeout=10)


def _scored(receiver: FullReceiver) -> dict[str, Any]:
    assert receiver.received.wait_for(
        lambda spans: any(name == "gen_ai.evaluation.result"
                          for s in spans for name, _ in s.events), 30)
    (span,) = receiver.received.spans
    ((_, event),) = [(n, a) for n, a in span.events if n == "gen_ai.evaluation.result"]
    return event


def test_serve_file_limits_cap_what_the_judge_receives(
        receiver: FullReceiver, relevancy_judge: ScriptedJudge) -> None:
    running = _start(receiver, relevancy_judge,
                     "limits: {max_scoring_length: 60}")
    try:
        _send(running.grpc_port, [_agent_span(0x71)])
        event = _scored(receiver)
    finally:
        running.stop(10)
    assert event["gen_ai.evaluation.score.value"] == 1.0
    assert "output to its first 60 of" in event["gen_ai.evaluation.explanation"]
    prompts = relevancy_judge.prompts
    assert prompts and all("TAIL-MARKER" not in p for p in prompts)
    assert any("Paris is the capital of France." in p for p in prompts)


def test_serve_without_limits_gives_the_judge_the_whole_answer(
        receiver: FullReceiver, relevancy_judge: ScriptedJudge) -> None:
    running = _start(receiver, relevancy_judge)
    try:
        _send(running.grpc_port, [_agent_span(0x72)])
        event = _scored(receiver)
    finally:
        running.stop(10)
    assert "Scored on cut inputs" not in event["gen_ai.evaluation.explanation"]
    assert any("TAIL-MARKER" in p for p in relevancy_judge.prompts)


def _points(receiver: FullReceiver, name: str) -> list[Any]:
    with receiver.lock:
        return [p for req in receiver.metrics for rm in req.resource_metrics
                for sm in rm.scope_metrics for m in sm.metrics if m.name == name
                for p in (m.histogram.data_points or m.sum.data_points)]


def _attrs(point: Any) -> dict[str, Any]:
    return {kv.key: kv.value.string_value for kv in point.attributes}


def test_serve_exports_the_judges_token_and_cost_metrics(
        receiver: FullReceiver, relevancy_judge: ScriptedJudge) -> None:
    running = _start(receiver, relevancy_judge)
    try:
        _send(running.grpc_port, [_agent_span(0x73, "Paris is the capital of France.")])
        _scored(receiver)
        names = ("gen_ai.client.token.usage", "gen_ai.client.operation.duration",
                 "tracescore.judge.token.usage", "tracescore.judge.cost")
        assert receiver.wait(lambda: all(_points(receiver, n) for n in names)), \
            sorted(receiver.metric_names())
    finally:
        running.stop(10)
    calls = [p for p in _points(receiver, "gen_ai.client.operation.duration")]
    # statements, verdicts, reason: three calls, each with the judge's model and provider
    assert max(p.count for p in calls) == 3
    assert {(_attrs(p)["gen_ai.request.model"], _attrs(p)["gen_ai.provider.name"])
            for p in calls} == {("openai/gpt-4o-mini", "openai")}
    tokens = _points(receiver, "gen_ai.client.token.usage")
    assert {_attrs(p)["gen_ai.token.type"] for p in tokens} == {"input", "output"}
    assert all(p.sum > 0 for p in tokens)
    assert max(p.as_double for p in _points(receiver, "tracescore.judge.cost")) > 0


def test_a_serve_in_process_leaves_configure_alone(
        receiver: FullReceiver, relevancy_judge: ScriptedJudge) -> None:
    # configure()'s runtime keeps its own caps while a service with other caps runs.
    tracescore.configure(exporter=False, limits=tracescore.LimitsOptions(max_scoring_length=7))
    running = _start(receiver, relevancy_judge, "limits: {max_scoring_length: 60}")
    try:
        assert tracescore.testing.runtime().caps.max_length == 7
        _send(running.grpc_port, [_agent_span(0x74)])
        event = _scored(receiver)
    finally:
        running.stop(10)
    assert "output to its first 60 of" in event["gen_ai.evaluation.explanation"]
    assert tracescore.testing.runtime().caps.max_length == 7


def _plain_span(trace_id: int, note: str) -> ReadableSpan:
    return ReadableSpan(
        name="work", context=SpanContext(trace_id, 0x2, False, TraceFlags(TraceFlags.SAMPLED)),
        parent=None, resource=Resource({"service.name": "svc"}), attributes={"note": note},
        kind=SpanKind.INTERNAL, status=Status(StatusCode.OK), start_time=1_000_000_000,
        end_time=2_000_000_000,
        instrumentation_scope=InstrumentationScope("some.instrumentation", "1.2.3"))


def test_serve_redaction_patterns_apply_to_the_service_only(
        receiver: FullReceiver, relevancy_judge: ScriptedJudge) -> None:
    from tracescore.testing import InMemoryScoreExporter

    text = "codes APPCODE-123456 and SVCCODE-654321"
    exporter = InMemoryScoreExporter()
    tracescore.configure(exporter=exporter, redaction=tracescore.RedactionOptions(
        patterns=[r"APPCODE-\d{6}"], callback=lambda t: t.replace("Alice", "[NAME]")))

    @tracescore.tool
    def note(value: str) -> str:
        return value

    running = _start(receiver, relevancy_judge,
                     'redaction: {patterns: ["SVCCODE-[0-9]{6}"]}')
    try:
        note(f"Alice: {text}")
        _send(running.grpc_port, [_plain_span(0x75, f"Alice: {text}")])
        assert receiver.received.wait_for(lambda spans: len(spans) == 1, 30)
    finally:
        running.stop(10)
    tracescore.force_flush(5000)
    # The service redacts with its file's patterns only...
    (received,) = receiver.received.spans
    assert received.attributes["note"] == "Alice: codes APPCODE-123456 and [REDACTED]"
    # ...and configure()'s runtime with its own patterns and callback, before, during and after.
    (span,) = exporter.get_finished_spans()
    assert json.loads(span.attributes["output.value"]) == "[NAME]: codes [REDACTED] and " \
        "SVCCODE-654321"
    note(text)
    tracescore.force_flush(5000)
    assert json.loads(exporter.get_finished_spans()[-1].attributes["output.value"]) == \
        "codes [REDACTED] and SVCCODE-654321"
