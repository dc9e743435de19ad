"""Issue 22, point 1: redaction of every span that leaves through tracescore's export path.

The secrets of the issue's attack are planted where tracescore's decorators never see them
(span names, decorator options, attributes and events user code sets, resource attributes,
another instrumentation's spans on the same provider, an exception in prose), then every byte a
real OTLP receiver on loopback got is searched for them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import tracescore
import tracescore.testing
from tests.otlp_receiver import HttpOtlpReceiver
from tracescore._core import redact as _redact

ENV_KEY = "Qz8Wx3Rv6Tn1Ym4Kp7Ls"  # OPENAI_API_KEY's value, used as a tool name
AUTH_OPTION = "Ao5Fe2Gi8Hk3Jm6Np9Qr"  # @tracescore.agent(attributes={"auth_token": ...})
DB_PASSWORD = "Db4Pw7Xc1Vb9Nm2Lk5Jh"  # span.set_attribute("db.password", ...)
EVENT_KEY = "Ev3Nt6Ky9Ab2Cd5Ef8Gh"  # an api_key event attribute
URL_PASSWORD = "Ur1Lp4Ss7Ww0Dd3Ff6Gg"  # https://user:<this>@host
URL_TOKEN = "Qs2At5Tk8Zx1Cv4Bn7Mm"  # ...?access_token=<this>
RESOURCE_TOKEN = "ghp_Rs0Rc3Tk6Gi9Tt2Hb5Aa8Zz1Yy4Xx7Ww0Vv"  # OTEL_RESOURCE_ATTRIBUTES git.token
FOREIGN_KEY = "Fr9Gn2Ky5Sp8Ng1Mn4Ot"  # on another instrumentation's span
PROSE_TOKEN = "Pr6Se3Tk0Ab7Cd4Ef1Gh"  # "auth failed with token <this>"

SECRETS = [ENV_KEY, AUTH_OPTION, DB_PASSWORD, EVENT_KEY, URL_PASSWORD, URL_TOKEN, RESOURCE_TOKEN,
           FOREIGN_KEY, PROSE_TOKEN]


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Any:
    with HttpOtlpReceiver() as rec:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rec.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
        monkeypatch.setenv("TRACESCORE_LOG_RECORDS", "false")
        yield rec.received
        tracescore.shutdown(3000)


def _leaks(received: Any) -> list[str]:
    decoded = json.dumps([[s.name, s.attributes, s.events, s.resource] for s in received.spans],
                         default=str)
    raw = received.raw_bytes()
    return [s for s in SECRETS if s in decoded or s.encode() in raw]


def _plant(provider: TracerProvider) -> None:
    @tracescore.tool(name=ENV_KEY)
    def lookup(order_id: str) -> str:
        return "shipped"

    @tracescore.agent(name="support", attributes={"auth_token": AUTH_OPTION})
    def answer(question: str) -> str:
        span = trace.get_current_span()
        span.set_attribute("db.password", DB_PASSWORD)
        span.set_attribute("http.url",
                           f"https://bob:{URL_PASSWORD}@api.example.com/v1?access_token={URL_TOKEN}")
        span.add_event("auth", {"api_key": EVENT_KEY, "attempt": 1})
        lookup("A-1")
        foreign = provider.get_tracer("acme.http.client")
        with foreign.start_as_current_span("GET /orders") as other:
            other.set_attribute("http.request.header.x-api-key", FOREIGN_KEY)
            other.set_attribute("note", f"retried with password: {FOREIGN_KEY}")
        raise PermissionError(f"auth failed with token {PROSE_TOKEN}")

    with pytest.raises(PermissionError):
        answer("where is my order?")


def test_no_secret_set_by_anyone_leaves_through_the_export_path(
    receiver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"git.token={RESOURCE_TOKEN},team=checkout")
    provider = TracerProvider()
    tracescore.configure(service_name="leaks", tracer_provider=provider)
    _plant(provider)
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: len(spans) >= 3)

    # The spans all arrived, with what is not secret intact.
    (agent,) = receiver.by_name("invoke_agent support")
    assert agent.attributes["auth_token"] == "[REDACTED]"
    assert agent.attributes["db.password"] == "[REDACTED]"
    assert agent.attributes["http.url"] == (
        "https://bob:[REDACTED]@api.example.com/v1?access_token=[REDACTED]")
    events = dict(agent.events)
    assert events["auth"] == {"api_key": "[REDACTED]", "attempt": 1}
    assert events["exception"]["exception.message"] == "auth failed with token [REDACTED]"
    assert agent.resource["git.token"] == "[REDACTED]"
    assert agent.resource["team"] == "checkout"
    assert receiver.by_name("execute_tool [REDACTED]")
    (foreign,) = receiver.by_name("GET /orders")
    assert foreign.attributes["http.request.header.x-api-key"] == "[REDACTED]"
    assert foreign.attributes["note"] == "retried with password: [REDACTED]"
    assert _leaks(receiver) == []


def test_foreign_spans_can_be_left_alone(receiver: Any) -> None:
    provider = TracerProvider()
    tracescore.configure(service_name="leaks", tracer_provider=provider,
                         redaction=tracescore.RedactionOptions(foreign_spans=False))
    own = provider.get_tracer("tracescore")
    foreign = provider.get_tracer("acme.http.client")
    with own.start_as_current_span("own") as span:
        span.set_attribute("db.password", DB_PASSWORD)
    with foreign.start_as_current_span("theirs") as span:
        span.set_attribute("db.password", DB_PASSWORD)
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: len(spans) >= 2)
    assert receiver.by_name("own")[0].attributes["db.password"] == "[REDACTED]"
    assert receiver.by_name("theirs")[0].attributes["db.password"] == DB_PASSWORD


@pytest.mark.parametrize(("text", "expected"), [
    ("auth failed with token Pr6Se3Tk0Ab7Cd4Ef1Gh", "auth failed with token [REDACTED]"),
    ("the password is Correct-Horse-9 now", "the password is [REDACTED] now"),
    ("password: hunter2", "password: [REDACTED]"),
    ("use API key Ab12Cd34Ef56Gh78 here", "use API key [REDACTED] here"),
    ("secret s3cr3t-VALUE-99", "secret [REDACTED]"),
    # Prose about tokens and passwords stays as it was.
    ("the token limit was exceeded after 4096 tokens", "the token limit was exceeded after "
                                                        "4096 tokens"),
    ("reset your password tomorrow", "reset your password tomorrow"),
    ("a secret recipe", "a secret recipe"),
])
def test_values_next_to_a_credential_word_in_prose(text: str, expected: str) -> None:
    assert _redact.redact_text(text) == expected


def test_a_pem_header_with_no_end_redacts_the_rest() -> None:
    key = "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu"
    text = "config:\n-----BEGIN RSA PRIVATE KEY-----\n" + key + "\n(truncated)"
    assert _redact.redact_text(text) == "config:\n[REDACTED]"
    whole = f"a -----BEGIN PRIVATE KEY-----\n{key}\n-----END PRIVATE KEY----- b"
    assert _redact.redact_text(whole) == "a [REDACTED] b"


def test_a_text_with_more_candidates_than_examined_is_cut_not_leaked() -> None:
    # 20,000 "token <value>" pairs in 300 KB: more than the bound of matches examined in
    # Python for a text that size; what is past the bound goes out as [REDACTED].
    redactor = tracescore.testing.runtime().redactor  # configure()'s runtime counts it
    before = redactor.overflows
    text = "".join(f"token Tk{i:06d}xy " for i in range(20_000))
    redacted = _redact.redact_text(text)
    assert redactor.overflows == before + 1
    assert redacted.startswith("token [REDACTED] token [REDACTED]")
    assert redacted.endswith("[REDACTED]")
    assert "Tk0" not in redacted and "Tk1" not in redacted


def test_json_full_of_separators_is_not_cut() -> None:
    # ":" and "=" alone are no candidates: a large JSON document keeps its content.
    text = "[" + ",".join(f'{{"id": {i}, "score": 0.5, "label": "ok"}}' for i in range(20_000)) \
        + "]"
    assert _redact.redact_text(text) == text


def test_an_agent_name_that_is_a_key_stays_off_metrics_and_log_records(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import (
        InMemoryLogRecordExporter,
        SimpleLogRecordProcessor,
    )
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.helpers import ProbeScorer

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    logs = InMemoryLogRecordExporter()
    log_provider = LoggerProvider()
    log_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    reader = InMemoryMetricReader()
    tracescore.configure(exporter=InMemorySpanExporter(),
                         output=tracescore.OutputOptions(
                             logger_provider=log_provider,
                             meter_provider=MeterProvider(metric_readers=[reader])),
                         scoring=[tracescore.ScoringRule(scorer=ProbeScorer(), on="agent")])
    try:
        @tracescore.agent(name=ENV_KEY)
        def answer(question: str) -> str:
            return "an answer"

        answer("q")
        assert tracescore.force_flush(10_000)
        records = [r.log_record if hasattr(r, "log_record") else r
                   for r in logs.get_finished_logs()]
        assert records, "the score went out as a log record"
        text = json.dumps([dict(r.attributes or {}) for r in records], default=str)
        text += reader.get_metrics_data().to_json()
        assert ENV_KEY not in text
        assert "[REDACTED]" in text
    finally:
        tracescore.shutdown(3000)


def test_a_redacted_span_keeps_what_the_sdk_dropped() -> None:
    from opentelemetry.sdk.trace import SpanLimits
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=2, max_events=1))
    tracescore.configure(exporter=memory, tracer_provider=provider)
    try:
        with provider.get_tracer("acme").start_as_current_span("limited") as span:
            span.set_attribute("a", 1)
            span.set_attribute("b", 2)
            span.set_attribute("db.password", DB_PASSWORD)
            span.add_event("one")
            span.add_event("two")
        assert tracescore.force_flush(10_000)
        (exported,) = memory.get_finished_spans()
        assert dict(exported.attributes) == {"b": 2, "db.password": "[REDACTED]"}
        assert exported.dropped_attributes == 1
        assert exported.dropped_events == 1
    finally:
        tracescore.shutdown(3000)


def test_a_span_with_nothing_to_redact_is_exported_as_it_ended() -> None:
    # Redaction on the export thread costs no copy of a span it changes nothing in: the
    # exporter gets the very span the SDK ended (a user's processor sees the same object).
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class Ended(SpanProcessor):
        def __init__(self) -> None:
            self.spans: list[ReadableSpan] = []

        def on_end(self, span: ReadableSpan) -> None:
            self.spans.append(span)

    memory = InMemorySpanExporter()
    ended = Ended()
    provider = TracerProvider()
    provider.add_span_processor(ended)
    tracescore.configure(exporter=memory, tracer_provider=provider)
    try:
        with provider.get_tracer("acme").start_as_current_span("clean") as span:
            span.set_attribute("question", "What is the capital of France?")
        with provider.get_tracer("acme").start_as_current_span("dirty") as span:
            span.set_attribute("db.password", DB_PASSWORD)
        assert tracescore.force_flush(10_000)
        clean, dirty = memory.get_finished_spans()
        assert [s.name for s in ended.spans] == ["clean", "dirty"]
        assert clean is ended.spans[0]
        assert dirty is not ended.spans[1]
        assert dict(dirty.attributes) == {"db.password": "[REDACTED]"}
    finally:
        tracescore.shutdown(3000)


def test_a_value_exported_as_it_was_is_redacted_once_it_becomes_a_known_credential() -> None:
    # The export path remembers the names and short values it found nothing in; a credential
    # the process learns later (a judge built with it as its key) must not be let through by
    # that memory, on a span's attribute, in a sequence, or in an event.
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    key = "Lt7Kn4Wq1Zp8Xr5Cv2Bm"  # nothing marks it as a credential until the judge is built
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    tracescore.configure(exporter=memory, tracer_provider=provider)
    tracer = provider.get_tracer("acme")

    def emit(name: str) -> None:
        with tracer.start_as_current_span(name) as span:
            span.set_attribute("note", key)
            span.set_attribute("notes", [key, "plain"])
            span.add_event("seen", {"value": key})

    try:
        emit("before")
        assert tracescore.force_flush(10_000)  # exported (and remembered) before the judge
        emit("before again")  # answered from the memory this time
        assert tracescore.force_flush(10_000)
        tracescore.Judge("openai/gpt-4o-mini", api_key=key)
        emit("after")
        assert tracescore.force_flush(10_000)
        spans = {s.name: s for s in memory.get_finished_spans()}
        for name in ("before", "before again"):
            assert spans[name].attributes["note"] == key
        after = spans["after"]
        assert after.attributes["note"] == "[REDACTED]"
        assert tuple(after.attributes["notes"]) == ("[REDACTED]", "plain")
        assert dict(after.events[0].attributes) == {"value": "[REDACTED]"}
    finally:
        tracescore.shutdown(3000)


def test_a_captured_value_once_found_clean_is_redacted_once_it_becomes_a_known_credential() -> \
        None:
    # Capture remembers the short texts it found nothing in (the same question, the same
    # answer, call after call); a credential the process learns later must not be let through
    # by that memory, nor a text a pattern configured later matches.
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    key = "Qm3Vx8Tn5Rb2Hk9Pw4Ld"  # nothing marks it as a credential until the judge is built
    other = "Zy6Wc1Fs7Gj0Uq"
    first, second = InMemorySpanExporter(), InMemorySpanExporter()

    @tracescore.tool(name="lookup")
    def lookup(code: str) -> str:
        return f"{code} plain"

    try:
        tracescore.configure(exporter=first, tracer_provider=TracerProvider())
        for code in (key, key, other):  # the second call is answered from the memory
            lookup(code)
        assert tracescore.force_flush(10_000)  # exported before the key is known
        tracescore.Judge("openai/gpt-4o-mini", api_key=key)
        lookup(key)
        assert tracescore.force_flush(10_000)
        spans = first.get_finished_spans()
        assert [s.attributes["input.value"] for s in spans[:2]] == [f'{{"code": "{key}"}}'] * 2
        assert [s.attributes["output.value"] for s in spans[:2]] == [f'"{key} plain"'] * 2
        assert spans[2].attributes["output.value"] == f'"{other} plain"'
        after = spans[3].attributes
        assert key not in after["input.value"] and key not in after["output.value"], after
        tracescore.configure(exporter=second, tracer_provider=TracerProvider(),
                             redaction=tracescore.RedactionOptions(patterns=[r"plain"]))
        lookup(other)
        assert tracescore.force_flush(10_000)
        assert second.get_finished_spans()[0].attributes["output.value"] == \
            f'"{other} [REDACTED]"'
    finally:
        tracescore.shutdown(3000)
