"""Redaction where it used to have gaps: sequences whose first item is not a string, credentials
used as attribute names, disguised credentials (invisible characters, compatibility forms,
percent and HTML-entity encodings), human feedback and conversation ids on log records, and
tracescore's own messages (which must keep their documentation words).

Each export case plants credentials and searches every byte a real OTLP receiver on loopback got.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Link

import tracescore
from tests.otlp_receiver import HttpOtlpReceiver

# Keys of well-known formats (the value rules catch them wherever they are).
KEYS = [f"sk-proj-{c * 4}Ab3Cd5Ef7Gh9Jk2Lm4" for c in "ABCDEFGHIJ"]


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Any:
    with HttpOtlpReceiver() as rec:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rec.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
        monkeypatch.setenv("TRACESCORE_LOG_RECORDS", "false")
        yield rec.received
        tracescore.shutdown(3000)


def _in_clear(received: Any, secrets: list[str]) -> list[str]:
    raw = received.raw_bytes()
    return [s for s in secrets if s.encode() in raw]


def test_every_item_of_a_sequence_attribute_is_scrubbed(receiver: Any) -> None:
    # The first item of each array is not a string (None, a number): all items are searched.
    provider = TracerProvider(resource=Resource({"deploy.notes": (None, KEYS[3])}))
    tracescore.configure(service_name="arrays", tracer_provider=provider)
    tracer = provider.get_tracer("acme.jobs")
    with tracer.start_as_current_span("first") as first:
        pass
    with tracer.start_as_current_span(
            "second", links=[Link(first.get_span_context(), {"notes": [None, KEYS[2]]})]) as span:
        span.set_attribute("notes", [None, KEYS[0]])
        span.set_attribute("mixed", [7, KEYS[4]])  # not homogeneous: the SDK keeps it
        span.set_attribute("blob", KEYS[5].encode())
        span.add_event("retry", {"notes": [None, KEYS[1]]})
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: len(spans) >= 2)
    (second,) = receiver.by_name("second")
    assert second.attributes["notes"] == [None, "[REDACTED]"]
    assert second.attributes["mixed"] == [7, "[REDACTED]"]
    assert second.attributes["blob"] == b"[REDACTED]"
    assert dict(second.events)["retry"] == {"notes": [None, "[REDACTED]"]}
    assert second.resource["deploy.notes"] == [None, "[REDACTED]"]
    assert _in_clear(receiver, KEYS[:6]) == []


def test_a_credential_used_as_an_attribute_name_is_scrubbed(receiver: Any) -> None:
    provider = TracerProvider(resource=Resource({KEYS[3]: "prod", "team": "checkout"}))
    tracescore.configure(service_name="names", tracer_provider=provider)
    tracer = provider.get_tracer("acme.jobs")
    with tracer.start_as_current_span("first") as first:
        pass
    with tracer.start_as_current_span(
            "second", links=[Link(first.get_span_context(), {KEYS[2]: 1})]) as span:
        span.set_attribute(KEYS[0], "user-7")
        span.set_attribute(f"cache.{KEYS[5]}", 3)
        span.set_attribute(KEYS[6], "other")  # two names that redact alike stay apart
        span.set_attribute("[REDACTED]", "kept")  # a name that already reads so
        span.set_attribute("plain", "kept")
        span.add_event("login", {KEYS[1]: True})
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: len(spans) >= 2)
    (second,) = receiver.by_name("second")
    attributes = dict(second.attributes)
    assert attributes.pop("plain") == "kept"
    assert attributes.pop("cache.[REDACTED]") == "[REDACTED]"
    # The value under a credential is redacted too, whatever its type.
    assert sorted(attributes.values()) == ["[REDACTED]", "[REDACTED]", "kept"]
    assert all(k.startswith("[REDACTED]") for k in attributes)
    assert len(attributes) == 3
    assert dict(second.events)["login"] == {"[REDACTED]": "[REDACTED]"}
    assert second.resource.get("[REDACTED]") == "[REDACTED]"
    assert second.resource["team"] == "checkout"
    assert _in_clear(receiver, KEYS[:7]) == []


# -- human feedback, conversation ids and scorer names on every signal ---------------------------

PASSWORD = "Hx7-Vw2-Qp9-Lz4"


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Any:
    from tests.test_writers import Backend

    b = Backend()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", b.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "10")
    yield b
    tracescore.shutdown(3000)
    b.close()


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def test_feedback_is_redacted_on_the_log_record_and_the_annotation(backend: Any) -> None:
    tracescore.configure(service_name="feedback",
                         output=tracescore.OutputOptions(phoenix_url=backend.url))
    assert tracescore.record_feedback(
        "user_thumbs", trace_id="ab" * 16, span_id="cd" * 8, score=0.0,
        label=f"password={PASSWORD}",
        explanation=f"It printed my key {KEYS[0]} and the password is {PASSWORD}!",
        annotator=KEYS[1])
    assert tracescore.force_flush(30_000)
    assert backend.wait(lambda: backend.logs and backend.annotation_posts)
    (record,) = backend.logs
    attributes = record["attributes"]
    assert attributes["gen_ai.evaluation.score.label"] == "password=[REDACTED]"
    assert attributes["gen_ai.evaluation.explanation"] == (
        "It printed my key [REDACTED] and the password is [REDACTED]!")
    assert attributes["tracescore.evaluation.annotator"] == "[REDACTED]"
    sent = json.dumps([backend.logs, backend.annotation_posts])
    assert [s for s in (KEYS[0], KEYS[1], PASSWORD) if s in sent] == []


def test_feedback_strings_are_bounded(backend: Any) -> None:
    tracescore.configure(service_name="feedback")
    huge = "n" * 5_000_000
    assert tracescore.record_feedback(huge, trace_id="ab" * 16, span_id="cd" * 8,
                                      label="l" * 5_000_000, explanation="e" * 5_000_000,
                                      annotator="a" * 5_000_000)
    assert tracescore.force_flush(30_000)
    assert backend.wait(lambda: backend.logs)
    (record,) = backend.logs
    lengths = {k: len(v) for k, v in record["attributes"].items() if isinstance(v, str)}
    assert lengths == {"gen_ai.evaluation.name": 256, "gen_ai.evaluation.score.label": 256,
                       "gen_ai.evaluation.explanation": 4096,
                       "tracescore.evaluation.annotator": 128,
                       "tracescore.evaluation.annotator_kind": 5}
    assert record["attributes"]["gen_ai.evaluation.name"].endswith(
        "...[truncated 4999744 chars]")


def test_ids_and_scorer_names_are_redacted_and_bounded_on_every_signal(
        backend: Any) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from tests.helpers import ProbeScorer

    reader = InMemoryMetricReader()
    tracescore.configure(
        service_name="ids",
        output=tracescore.OutputOptions(meter_provider=MeterProvider(metric_readers=[reader])),
        scoring=[tracescore.ScoringRule(scorer=ProbeScorer(id=f"probe-{KEYS[9]}"), on="agent"),
                 tracescore.ScoringRule(scorer=ProbeScorer(id="p" * 100_000), on="agent")])

    @tracescore.agent(name="support")
    def answer(question: str, response_id: str = "") -> str:
        if response_id:  # ids set on the span by the application, not by conversation()
            span = trace.get_current_span()
            span.set_attribute("gen_ai.response.id", response_id)
            span.set_attribute("session.id", KEYS[4])
        return "an answer"

    with tracescore.conversation(KEYS[0], session_id=KEYS[1], user_id=KEYS[2]):
        answer("q")
    with tracescore.conversation("c" * 1_000_000):
        answer("q", response_id=KEYS[3])
    assert tracescore.force_flush(30_000)
    assert backend.wait(lambda: len(backend.logs) >= 4 and len(backend.spans) >= 2)

    scored = [r["attributes"] for r in backend.logs
              if r["event_name"] == "gen_ai.evaluation.result"]
    assert len(scored) == 4
    names = {a["gen_ai.evaluation.name"] for a in scored}
    cut = "...[truncated 99744 chars]"
    assert names == {"probe-[REDACTED]", "p" * (256 - len(cut)) + cut}
    first = [a for a in scored if a.get("user.id")]
    assert {a["gen_ai.conversation.id"] for a in first} == {"[REDACTED]"}
    assert {a["session.id"] for a in first} == {"[REDACTED]"}
    assert {a["user.id"] for a in first} == {"[REDACTED]"}
    second = [a for a in scored if not a.get("user.id")]
    assert {a["gen_ai.response.id"] for a in second} == {"[REDACTED]"}
    assert {a["session.id"] for a in second} == {"[REDACTED]"}
    assert {len(a["gen_ai.conversation.id"]) for a in second} == {256}
    spans = [s["attributes"] for s in backend.spans if s["name"] == "invoke_agent support"]
    assert [len(s["gen_ai.conversation.id"]) for s in spans] == [10, 256]
    metrics = reader.get_metrics_data().to_json()
    every = _strings([backend.logs, backend.spans]) + [metrics]
    assert [k for k in KEYS[:5] + KEYS[9:] if any(k in s for s in every)] == []
    assert max(len(s) for s in _strings([backend.logs, backend.spans])
               if not s.startswith("{")) <= 4096
    assert "p" * 300 not in metrics


# -- tracescore's own messages keep their documentation words ------------------------------------


def test_a_missing_key_error_keeps_its_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore.scorers import create_answer_relevancy_scorer
    from tracescore.testing import InMemoryScoreExporter

    for name in ("OPENAI_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    exporter = InMemoryScoreExporter()
    tracescore.configure(exporter=exporter, judge="openai/gpt-4o-mini", scoring=[
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent")])
    try:
        @tracescore.agent
        def answer(question: str) -> str:
            return "Paris"

        answer("What is the capital of France?")
        assert tracescore.force_flush(30_000)
        (event,) = exporter.evaluation_events()
        assert event["error.type"] == "judge_error"
        assert event["gen_ai.evaluation.explanation"].endswith(
            "set OPENAI_API_KEY or pass api_key")
    finally:
        tracescore.shutdown(3000)


@pytest.mark.parametrize(("message", "expected"), [
    ("set OPENAI_API_KEY or pass api_key", None),
    ("no API key: pass api_key=... to Judge", None),
    ("asks an LLM judge: pass --judge MODEL or set TRACESCORE_JUDGE_MODEL", None),
    ("no tool calls were given (pass tool_calls=[...] or an output)", None),
    ("pass strict_mode=True to require the exact sequence", None),
    ("needs a ground truth: pass ScoringRule(ground_truth='answer')", None),
    # Credentials next to the same words are still redacted.
    ("pass api_key=Xy12Ab34Cd56Ef78 to Judge", "pass api_key=[REDACTED] to Judge"),
    ("auth failed with token dGVzdDEyMzQ=", "auth failed with token [REDACTED]"),
    ("the password is Secret_Token1", "the password is [REDACTED]"),
    ("token Ab12Cd34(expired)", "token [REDACTED](expired)"),
])
def test_tracescore_log_messages_keep_documentation_words(
        message: str, expected: str | None, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    with caplog.at_level(logging.WARNING, logger="tracescore"):
        logging.getLogger("tracescore").warning("tracescore: %s", message)
    assert caplog.records[-1].getMessage() == "tracescore: " + (expected or message)


def test_tracescore_log_records_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from tests.helpers import ProbeScorer
    from tracescore.testing import InMemoryScoreExporter

    failing = ProbeScorer(id="s" * 1_000_000,
                          fail_with=RuntimeError(f"{KEYS[0]} " + "x" * 1_000_000))
    tracescore.configure(exporter=InMemoryScoreExporter(), scoring=[
        tracescore.ScoringRule(scorer=failing, on="agent")])
    try:
        @tracescore.agent
        def answer(question: str) -> str:
            return "an answer"

        with caplog.at_level(logging.WARNING, logger="tracescore"):
            answer("q")
            assert tracescore.force_flush(30_000)
        (record,) = [r for r in caplog.records if "raised" in r.getMessage()]
        assert len(record.getMessage()) <= 1_000
        assert record.exc_text is not None and len(record.exc_text) <= 65_536
        assert KEYS[0] not in record.exc_text and "[REDACTED]" in record.exc_text
        with caplog.at_level(logging.WARNING, logger="tracescore"):
            logging.getLogger("tracescore").warning("tracescore: %s", "y" * 1_000_000)
        assert len(caplog.records[-1].getMessage()) == 16_384
    finally:
        tracescore.shutdown(3000)


# -- disguised credentials ------------------------------------------------------------------------

KEY = "sk-proj-Tq3RkX8vN2mW7yL4pZ6cB1dF"


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _percent(text: str) -> str:
    return "".join(f"%{b:02X}" for b in text.encode())


DISGUISED = {
    "zero-width space": KEY[:8] + "\u200b" + KEY[8:],
    "zero-width joiners": "\u200d".join(KEY),
    "word joiner and BOM": KEY[:3] + "\u2060" + KEY[3:12] + "\ufeff" + KEY[12:],
    "soft hyphens": KEY[:10] + "\u00ad" + KEY[10:20] + "\u00ad" + KEY[20:],
    "fullwidth": _fullwidth(KEY),
    "mathematical letters": "".join(chr(0x1D41A + ord(c) - 97) if "a" <= c <= "z" else c
                                    for c in KEY),
    "percent-encoded": _percent(KEY),
    "partly percent-encoded": KEY[:8] + _percent(KEY[8:12]) + KEY[12:],
    "decimal entities": "".join(f"&#{ord(c)};" for c in KEY),
    "hex entities": "".join(f"&#x{ord(c):x};" for c in KEY[:6]) + KEY[6:],
    "named entity": KEY[:2] + "&hyphen;" + KEY[3:],
    "password behind a soft hyphen": "pass\u00adword=Hx7Vw2Qp9Lz4",
    "password, fullwidth name": _fullwidth("password") + ": Hx7Vw2Qp9Lz4",
    "token in a percent-encoded query": "q=1%26access_token%3DHx7Vw2Qp9Lz4Mn5",
}
# Attacks beyond the first eleven: disguises inside disguises, other invisible characters and
# escapes, and letters drawn like Latin ones.
DISGUISED_MORE = {
    "percent-encoded twice": _percent(_percent(KEY)),
    "percent-encoded entities": _percent("".join(f"&#{ord(c)};" for c in KEY[:4])) + KEY[4:],
    "entity of a zero-width space": KEY[:8] + "&#8203;" + KEY[8:],
    "percent-encoded zero-width space": KEY[:8] + "%E2%80%8B" + KEY[8:],
    "percent-encoded fullwidth": KEY[:8] + _percent(_fullwidth(KEY[8:16])) + KEY[16:],
    "JSON escapes": "".join(f"\\u{ord(c):04x}" for c in KEY),
    "JSON-escaped zero-width space": KEY[:8] + "\\u200b" + KEY[8:],
    "bidirectional override": KEY[:8] + "\u202e" + KEY[8:],
    "tag characters": KEY[:8] + "\U000e0041\U000e0042" + KEY[8:],
    "variation selector": KEY[:8] + "\ufe0f" + KEY[8:],
    "Hangul filler": KEY[:8] + "\u3164" + KEY[8:],
    "Cyrillic look-alikes": "\u0455k\u2010proj\u2010" + KEY[8:],
    "ligature": "password=Hx7Vw2Qp9Lz4\ufb01",
}


@pytest.mark.parametrize("disguise", [*DISGUISED, *DISGUISED_MORE])
def test_a_disguised_credential_is_redacted_in_place(
        disguise: str, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    text = {**DISGUISED, **DISGUISED_MORE}[disguise]
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        logging.getLogger("tracescore").warning("tracescore: before %s after", text)
    shown = caplog.records[-1].getMessage()
    # The span of the original text is replaced, what is around it kept.
    assert shown.startswith("tracescore: before ") and shown.endswith(" after")
    assert "[REDACTED]" in shown
    left = shown.removeprefix("tracescore: before ").removesuffix(" after")
    assert "Hx7Vw2Qp9Lz4" not in left and text not in left
    assert not any(part in left for part in ("Tq3RkX8v", "N2mW7yL4", "pZ6cB1dF"))


def test_disguised_credentials_do_not_leave_over_otlp(receiver: Any) -> None:
    tracescore.configure(service_name="disguised")
    planted = {**DISGUISED, **DISGUISED_MORE}
    with tracescore.span("disguised") as block:
        span = trace.get_current_span()
        for i, text in enumerate(planted.values()):
            span.set_attribute(f"note.{i}", f"before {text} after")
        span.set_attribute("pass\u200bword", "Hx7Vw2Qp9Lz4")  # a disguised secret name
        span.set_attribute(_fullwidth("api_key"), "Hx7Vw2Qp9Lz4")
        span.add_event("retry", {"detail": f"with {DISGUISED['percent-encoded']} again"})
        block.set_output("done")
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: len(spans) >= 1)
    (exported,) = receiver.by_name("disguised")
    for i, name in enumerate(planted):
        value = exported.attributes[f"note.{i}"]
        assert value.startswith("before ") and value.endswith(" after"), name
        assert "[REDACTED]" in value, name
    assert exported.attributes["pass\u200bword"] == "[REDACTED]"
    assert exported.attributes[_fullwidth("api_key")] == "[REDACTED]"
    assert dict(exported.events)["retry"] == {"detail": "with [REDACTED] again"}
    raw = receiver.raw_bytes()
    leaked = [name for name, text in planted.items() if text.encode() in raw]
    assert leaked == []
    for secret in ("Hx7Vw2Qp9Lz4", KEY[8:16], KEY[16:24]):
        assert secret.encode() not in raw


@pytest.mark.parametrize("text", [
    # Text with the characters disguises use, and nothing to hide: unchanged.
    "Größe: 10 % mehr &amp; schneller \u2014 naïve café, ﬁle, ｆｕｌｌ ｗｉｄｔｈ, 漢字",
    "https://example.com/search?q=caf%C3%A9&lang=fr&page=2",
    "<p>Tom &amp; Jerry &lt;3 &#169; 2024</p>",
    "C:\\Users\\name\\x86\\documents and \\u00e9 in JSON",
    "Привет, мир! Это обычный текст без секретов.",
    "a\u200bb\u200cc\u200dd \u00ad soft",
])
def test_text_with_disguise_characters_and_no_credential_is_unchanged(
        text: str, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    with caplog.at_level(logging.WARNING, logger="tracescore"):
        logging.getLogger("tracescore").warning("tracescore: %s", text)
    assert caplog.records[-1].getMessage() == "tracescore: " + text


@pytest.mark.parametrize(("text", "expected"), [
    # Characters that vanish or expand before the credential move nothing after it.
    ("\ufb01\u200b\ufb01 " + KEY[:8] + "\u200b" + KEY[8:] + " \ufb01\u00adx",
     "\ufb01\u200b\ufb01 [REDACTED] \ufb01\u00adx"),
    ("%41%42 " + _percent(KEY) + " &amp; " + KEY[:3] + "&#112;" + KEY[4:] + " %7E",
     "%41%42 [REDACTED] &amp; [REDACTED] %7E"),
    ("\u00e9t\u00e9 " + _fullwidth(KEY) + " \u00e9t\u00e9",
     "\u00e9t\u00e9 [REDACTED] \u00e9t\u00e9"),
    ("https://x.example/?q=caf%C3%A9&token=" + _percent("Hx7Vw2Qp9Lz4Mn5") + "&page=2",
     "https://x.example/?q=caf%C3%A9&token=[REDACTED]&page=2"),
    # A lone surrogate (shown as "?") inside a key.
    ("x " + KEY[:8] + "\udc00" + KEY[8:] + " y", "x [REDACTED] y"),
    # A form that expands to 18 characters is left alone (no key holds it).
    ("\ufdfa " + KEY[:8] + "\u200b" + KEY[8:] + " \ufdfa", "\ufdfa [REDACTED] \ufdfa"),
])
def test_a_disguised_credential_is_replaced_exactly_where_it_was(
        text: str, expected: str, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    with caplog.at_level(logging.WARNING, logger="tracescore"):
        logging.getLogger("tracescore").warning("tracescore: %s", text)
    assert caplog.records[-1].getMessage() == "tracescore: " + expected


def test_a_credential_as_a_tracer_name_span_name_or_status_is_scrubbed(receiver: Any) -> None:
    from opentelemetry.trace import Status, StatusCode

    provider = TracerProvider()
    tracescore.configure(service_name="scopes", tracer_provider=provider)
    hidden = DISGUISED["zero-width space"]
    tracer = provider.get_tracer(f"acme.{hidden}", hidden)
    with tracer.start_as_current_span(f"call {hidden}") as span:
        span.set_status(Status(StatusCode.ERROR, f"failed with {DISGUISED['fullwidth']}"))
        span.add_event(f"retry {DISGUISED['percent-encoded']}")
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: len(spans) >= 1)
    (exported,) = receiver.spans
    assert exported.name == "call [REDACTED]"
    assert exported.scope == "acme.[REDACTED]"
    assert [name for name, _ in exported.events] == ["retry [REDACTED]"]
    raw = receiver.raw_bytes()
    assert [t for t in (hidden, DISGUISED["fullwidth"], DISGUISED["percent-encoded"])
            if t.encode() in raw] == []
    assert KEY[8:16].encode() not in raw


def test_disguised_credentials_never_reach_a_judge(capscore: Any) -> None:
    from tracescore.scorers import create_answer_relevancy_scorer

    capscore.judge.route("answer_relevancy_statements", {"statements": ["Paris."]})
    capscore.judge.route("answer_relevancy_verdicts",
                         {"results": [{"result": "yes", "reason": "on topic"}]})
    capscore.judge.route("answer_relevancy_reason", {"reason": "Direct."})
    capscore.configure(scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(),
                                                       on="agent")])

    @tracescore.agent
    def answer(question: str) -> str:
        return (f"Paris. (debug: {DISGUISED['fullwidth']} {DISGUISED['percent-encoded']} "
                f"{DISGUISED_MORE['JSON escapes']})")

    answer(f"What is the capital of France? My key: {DISGUISED['zero-width space']}, "
           f"{DISGUISED['password behind a soft hyphen']}")
    assert capscore.flush()
    assert capscore.scores() == {"answer-relevancy": [1.0]}
    prompts = "\n".join(capscore.judge.prompts)
    assert "capital of France" in prompts and "[REDACTED]" in prompts
    planted = [DISGUISED["fullwidth"], DISGUISED["percent-encoded"],
               DISGUISED_MORE["JSON escapes"], DISGUISED["zero-width space"], "Hx7Vw2Qp9Lz4",
               KEY[8:16], KEY[16:24]]
    assert [p for p in planted if p in prompts] == []


def test_your_patterns_match_disguised_text_too(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    tracescore.configure(exporter=False, redaction=tracescore.RedactionOptions(
        patterns=[r"ACME-[0-9]{8}"]))
    try:
        with caplog.at_level(logging.WARNING, logger="tracescore"):
            logging.getLogger("tracescore").warning(
                "tracescore: ACME-12345678, ACME%2D12345678, ACME&#45;12345678, "
                "ACME-\u200b12345678, ACME\uff0d12345678 and ACME-1234")
        assert caplog.records[-1].getMessage() == (
            "tracescore: [REDACTED], [REDACTED], [REDACTED], [REDACTED], [REDACTED] and "
            "ACME-1234")
    finally:
        tracescore.configure(exporter=False)
        tracescore.shutdown(3000)
