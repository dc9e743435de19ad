"""The lean per-call path (issue 15, point 4) under odd input, reconfiguration and concurrency.

Each test here failed before the fix it names: the cheaper hot path must give the same results
as the plain one it replaced.
"""

from __future__ import annotations

from typing import Any

import pytest

import tracescore
from tracescore._core import redact as _redact
from tracescore._core.serialize import to_json
from tracescore.scorers import create_scorer


@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    _redact.configure(None, None)
    tracescore.shutdown(2000)


# -- scorer steps on the loop or in the worker pool -------------------------------------------


def test_a_step_without_a_module_name_is_scored() -> None:
    # A function made by eval/exec in fresh globals has __module__ None (generated steps,
    # steps from a config file): it is a user's step, so it goes to the worker pool, and the
    # check must not fail on it.
    step = eval("lambda run: 0.5", {})  # noqa: S307 - the point of the test
    assert step.__module__ is None
    result = create_scorer(id="generated", generate_score=step).run(output="an answer")
    assert result.score == 0.5


# -- redact_name's memory ---------------------------------------------------------------------


def test_a_name_redacted_under_old_rules_is_not_remembered_under_new_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # configure() on one thread while another redacts a name: the name's redaction under the
    # old rules must not be kept in the memory of the new rules.
    _redact.configure(None, None)
    name = "customer_12345678"
    assert to_json({name: "x"}) == '{"customer_12345678": "x"}'  # not yet a secret
    _redact.configure(None, None)  # fresh rules: the name is not remembered yet
    redactor = _redact.PROCESS  # configure()'s runtime's
    real = redactor.redact_text
    swapped = False

    def redact_text(text: str) -> str:
        nonlocal swapped
        result = real(text)  # computed under the rules in force (no customer pattern)
        if text == name and not swapped:
            swapped = True
            # Meanwhile, on other threads: configure() adds a pattern, and a call redacts a
            # name under the new rules (which starts their memory).
            _redact.configure([r"customer_\d+"], None)
            assert _redact.redact_name("question") == "question"
        return result

    monkeypatch.setattr(redactor, "redact_text", redact_text)
    _redact.redact_name(name)
    monkeypatch.undo()
    assert swapped
    assert _redact.redact_name(name) == _redact.REDACTED
    # A key that redacts is a credential: what is filed under it is not shown either.
    assert to_json({name: "x"}) == '{"[REDACTED]": "[REDACTED]"}'


# -- the held copy --------------------------------------------------------------------------------


def test_the_held_copy_encodes_as_the_sdk_span_does_under_every_limit() -> None:
    # The copy is read from the SDK's private containers: whatever the limits dropped (span,
    # event and link attributes, events, links), OTLP must receive the same bytes.
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Link, SpanContext, SpanKind, StatusCode, TraceState

    from tracescore._pipeline.held import with_events

    limits = SpanLimits(max_span_attributes=2, max_events=2, max_links=1,
                        max_event_attributes=1, max_link_attributes=1, max_attribute_length=4)
    provider = TracerProvider(span_limits=limits, resource=Resource({"service.name": "s"}))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("scope", "1.2", schema_url="https://schema", attributes={"a": 1})
    state = TraceState([("vendor", "value")])
    links = [Link(SpanContext(7, 8, True, trace_state=state), {"x": 1, "y": "long value"}),
             Link(SpanContext(9, 10, True, trace_state=state), {"ключ": (1, 2)})]
    with tracer.start_as_current_span("naïve", kind=SpanKind.CLIENT, links=links,
                                      attributes={"k1": "a long text", "k2": 2.5}) as span:
        span.add_event("first", {"a": 1, "b": "dropped"}, timestamp=123)
        span.add_event("second", {"c": [1, 2]})
        span.add_event("third")
        span.set_attribute("k3", ("x", "yyyyyy"))
        span.add_link(SpanContext(11, 12, False), {"l": "m"})
        span.set_status(StatusCode.ERROR, "déjà vu")
    (original,) = memory.get_finished_spans()
    assert (original.dropped_attributes, original.dropped_events, original.dropped_links) \
        == (1, 1, 2)
    copy = with_events(original, ())
    assert encode_spans([copy]) == encode_spans([original])
    assert encode_spans([with_events(copy, ())]) == encode_spans([original])


def test_a_foreign_readable_span_is_scored_and_exported_whole() -> None:
    # A span built by hand (another SDK, a collector): plain dict attributes, a list of
    # events, links with a trace state, non-ASCII keys, sequence and bytes values.
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import (
        Link,
        SpanContext,
        SpanKind,
        Status,
        StatusCode,
        TraceFlags,
        TraceState,
    )

    from tests.helpers import ProbeScorer, eval_events, finished, memory_configure

    inst, exp = memory_configure(scoring=[tracescore.ScoringRule(
        scorer=ProbeScorer(), on=lambda span: True, sample_rate=0.0, score_errors=True)])
    context = SpanContext(0xABC, 0xDEF, False, TraceFlags(TraceFlags.SAMPLED),
                          TraceState([("k", "v")]))
    parent = SpanContext(0xABC, 0x123, True)
    link = Link(SpanContext(0x999, 0x888, True, trace_state=TraceState([("a", "b")])), {"la": 1})
    attributes = {"ключ": "значение", "output.value": "an answer", "seq": ("a", "b"),
                  "raw": b"\x00\xff", "numbers": [1, 2]}
    span = ReadableSpan(
        name="fö", context=context, parent=parent, resource=Resource({"service.name": "x"}),
        attributes=attributes, events=[Event("e1", {"x": 1}, timestamp=5)], links=[link],
        kind=SpanKind.CLIENT, status=Status(StatusCode.ERROR, "boom"), start_time=1,
        end_time=2, instrumentation_scope=InstrumentationScope("scope", "1.0"))
    inst.processor.on_end(span)
    (out,) = finished(exp)
    assert len(eval_events(out)) == 1
    assert {k: v for k, v in out.attributes.items()
            if not k.startswith("tracescore.")} == attributes
    assert [(e.name, e.timestamp, dict(e.attributes)) for e in out.events[:1]] \
        == [("e1", 5, {"x": 1})]
    assert out.links == (link,) and out.links[0].context.trace_state == TraceState([("a", "b")])
    assert (out.name, out.context, out.parent, out.kind) == ("fö", context, parent,
                                                             SpanKind.CLIENT)
    assert (out.status.status_code, out.status.description) == (StatusCode.ERROR, "boom")
    assert (out.start_time, out.end_time) == (1, 2)
    assert out.resource.attributes["service.name"] == "x"
    assert out.instrumentation_scope == InstrumentationScope("scope", "1.0")


# -- no call record for a trace no rule can pick ------------------------------------------------


def test_a_fractional_rule_scores_exactly_its_traces_on_full_values() -> None:
    # The decorators skip the call record (the full values scoring reads) for a trace no rule
    # can pick; the processor picks by the same trace-id sample. Every trace the sample picks
    # must be scored, on the full untruncated input, and no other.
    from tests.helpers import ProbeScorer, eval_events, finished, memory_configure
    from tracescore._pipeline.sampling import trace_sampled

    probe = ProbeScorer()
    _, exp = memory_configure(
        scoring=[tracescore.ScoringRule(scorer=probe, sample_rate=0.5, name="lean")],
        content=tracescore.ContentOptions(max_length=40))
    long_question = "q" * 500

    @tracescore.agent
    def answer(question: str) -> str:
        return "an answer"

    for _ in range(60):
        answer(long_question)
    spans = finished(exp)
    picked = {s.context.trace_id for s in spans if trace_sampled(s.context.trace_id, 0.5, "lean")}
    scored = {s.context.trace_id for s in spans if eval_events(s)}
    assert 0 < len(picked) < 60  # the sample split the traces
    assert scored == picked
    assert len(probe.calls) == len(picked)
    assert all(call["input"] == long_question for call in probe.calls)  # full, not the 40 cut


def test_a_span_subclass_reporting_drops_keeps_them_in_the_held_copy() -> None:
    # A ReadableSpan subclass (a bridge from another tracer) may report what its source dropped
    # through the dropped_* properties, with plain containers underneath.
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import SpanContext, TraceFlags

    from tracescore._pipeline.held import with_events

    class Bridged(ReadableSpan):
        @property
        def dropped_attributes(self) -> int:
            return 2

        @property
        def dropped_events(self) -> int:
            return 3

        @property
        def dropped_links(self) -> int:
            return 4

    span = Bridged(name="bridged", context=SpanContext(1, 2, False, TraceFlags(1)),
                   attributes={"a": 1}, events=[Event("e", {"k": "v"}, 5)], start_time=1,
                   end_time=2)
    copy = with_events(span, [Event("score", {"s": 1.0}, 6)], {"tracescore.score.x": 1.0})
    assert (copy.dropped_attributes, copy.dropped_events, copy.dropped_links) == (2, 3, 4)
    assert dict(copy.attributes) == {"a": 1, "tracescore.score.x": 1.0}
    assert [e.name for e in copy.events] == ["e", "score"]


def test_rules_at_several_rates_and_salts_each_score_exactly_their_traces() -> None:
    # The picker hashes a trace once per distinct salt (a rule's name; unnamed rules share
    # the empty one) and compares the hash with each rule's bound: every rule must still pick
    # exactly the traces ``trace_sampled`` gives it.
    from tests.helpers import ProbeScorer, eval_events, finished, memory_configure
    from tracescore._pipeline.sampling import trace_sampled

    rules = [("named", 0.3, "x"), ("plain-half", 0.5, None), ("plain-fifth", 0.2, None),
             ("all", 1.0, "y"), ("none", 0.0, None)]
    _, exp = memory_configure(scoring=[
        tracescore.ScoringRule(scorer=ProbeScorer(id=scorer_id), sample_rate=rate, name=name)
        for scorer_id, rate, name in rules])

    @tracescore.agent
    def answer(question: str) -> str:
        return "an answer"

    for _ in range(80):
        answer("q")
    spans = finished(exp)
    assert len(spans) == 80
    for scorer_id, rate, name in rules:
        picked = {s.context.trace_id for s in spans
                  if trace_sampled(s.context.trace_id, rate, name or "")}
        scored = {s.context.trace_id for s in spans
                  if any(e["gen_ai.evaluation.name"] == scorer_id for e in eval_events(s))}
        assert scored == picked, scorer_id
    assert 0 < sum(1 for s in spans if trace_sampled(s.context.trace_id, 0.2, "")) < 80
