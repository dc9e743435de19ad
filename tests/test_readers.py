"""Readers: each span source becomes a ScoringRequest; a new source is one reader class."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

import tracescore
from tests.helpers import ProbeScorer, eval_events, finished, memory_configure
from tracescore import _readers
from tracescore._pipeline.trace_buffer import TraceBuffer
from tracescore._readers import Content, Reader, reader_for
from tracescore._readers.generic import GenericReader
from tracescore._readers.tracescore import TracescoreReader
from tracescore.testing import runtime


@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    tracescore.shutdown(2000)


@dataclass
class ContextProbe(ProbeScorer):
    uses_context: bool = True


# -- tracescore's own spans ------------------------------------------------------------------------


def test_own_spans_are_read_in_full_whatever_the_span_carries() -> None:
    probe = ContextProbe(id="ctx")
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")],
                              content=tracescore.ContentOptions(max_length=8))

    @tracescore.retrieval
    def search(q: str) -> list[str]:
        return ["the first document, long", "the second document, long"]

    @tracescore.agent
    def answer(q: str) -> str:
        search(q)
        return "an answer longer than eight characters"

    answer("a question longer than eight characters")
    spans = finished(exp)
    agent = next(s for s in spans if s.name.startswith("invoke_agent"))
    assert len(agent.attributes["input.value"]) <= 8  # truncated on the span ...
    assert probe.calls == [{  # ... in full for the scorer, documents in retrieval order
        "input": "a question longer than eight characters",
        "output": "an answer longer than eight characters",
        "context": ["the first document, long", "the second document, long"],
    }]
    assert len(eval_events(agent)) == 1


def test_own_reader_without_the_handoff_reads_the_attributes() -> None:
    # A span made with tracescore's conventions by a plain tracer (or ended by an asynchronous
    # span processor, outside the decorator's end() call): the attributes are all there is.
    span = _span("invoke_agent x", scope="other", attributes={
        "tracescore.span.kind": "agent", "input.value": '{"q": 1}', "output.value": '"a"'})
    reader = reader_for(span)
    assert isinstance(reader, TracescoreReader)
    assert reader.kind(span) == "agent"
    assert reader.read(span, "agent") == Content('{"q": 1}', '"a"')


def test_own_tool_calls_reach_tool_scorers_under_the_scored_span() -> None:
    @dataclass
    class ToolProbe(ProbeScorer):
        uses_tool_calls: bool = True

    probe = ToolProbe(id="tools")
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])

    @tracescore.tool(name="lookup")
    def lookup(order_id: str) -> dict[str, str]:
        return {"status": "shipped"}

    @tracescore.tool(name="broken")
    def broken() -> None:
        raise ValueError("no")

    @tracescore.agent
    def answer(q: str) -> str:
        lookup("42")
        with pytest.raises(ValueError):
            broken()
        return "shipped"

    lookup("outside")  # another trace: not under the scored span
    answer("where is 42?")
    finished(exp)
    (call,) = probe.calls
    assert call["tool_calls"] == [
        {"name": "lookup", "arguments": {"order_id": "42"}, "result": {"status": "shipped"}},
        {"name": "broken", "arguments": {}, "result": None, "error": "ValueError: no"},
    ]


# -- any span: the generic reader ------------------------------------------------------------------


def test_generic_reader_reads_input_and_output_values_of_any_span() -> None:
    probe = ProbeScorer(id="generic")
    inst, exp = memory_configure(scoring=[tracescore.ScoringRule(
        scorer=probe, on=lambda span: span.name == "foreign")])
    tracer = inst.tracer_provider.get_tracer("some.instrumentation")
    with tracer.start_as_current_span("foreign") as span:
        span.set_attribute("input.value", "hello")
        span.set_attribute("output.value", "world!")
    with tracer.start_as_current_span("foreign"):
        pass  # nothing to score: not scorable, and the reason says why
    spans = finished(exp)
    events = [e for s in spans for e in eval_events(s)]
    assert probe.calls == [{"input": "hello", "output": "world!"}]
    (empty,) = [e for e in events if "gen_ai.evaluation.score.value" not in e]
    assert empty["gen_ai.evaluation.score.label"] == "not_scorable"
    assert "no input.value or output.value" in empty["gen_ai.evaluation.explanation"]


def test_generic_reader_is_last_and_names_no_kind() -> None:
    span = _span("anything", scope="x")
    assert isinstance(reader_for(span), GenericReader)
    assert GenericReader().kind(span) is None


# -- a new source is one reader class --------------------------------------------------------------

# A made-up instrumentation, "acme.agents", with its own attribute names.
ACME_KINDS = {"AGENT_RUN": "agent", "SEARCH": "retrieval"}


class AcmeReader:
    """Everything tracescore needs to score the made-up acme instrumentation's spans."""

    name = "acme"
    volatile = False

    def accepts(self, span: Any) -> bool:
        return _readers.scope_name(span) == "acme.agents"

    def kind(self, span: Any) -> str | None:
        return ACME_KINDS.get(str(_readers.attributes_of(span).get("acme.kind")))

    def observe(self, span: Any, kind: str | None, buffer: TraceBuffer) -> None:
        if kind == "retrieval":
            hits = json.loads(_readers.attributes_of(span).get("acme.hits", "[]"))
            buffer.add_documents(span.context.trace_id, span.start_time or 0, tuple(hits))

    def read(self, span: Any, kind: str | None) -> Content:
        attrs = _readers.attributes_of(span)
        return Content(attrs.get("acme.prompt"), attrs.get("acme.answer"))


def test_a_new_source_is_one_reader_class() -> None:
    reader = AcmeReader()
    assert isinstance(reader, Reader)
    runtime().add_reader(reader)
    try:
        probe = ContextProbe(id="acme-probe")
        inst, exp = memory_configure(scoring=[tracescore.ScoringRule(
            scorer=probe, on="agent", scope="acme.*")])
        tracer = inst.tracer_provider.get_tracer("acme.agents")
        run_attributes = {"acme.kind": "AGENT_RUN", "acme.prompt": "Who wrote Dune?",
                          "acme.answer": "Frank Herbert."}
        search_attributes = {"acme.kind": "SEARCH",
                             "acme.hits": json.dumps(["Dune is by Herbert."])}
        with tracer.start_as_current_span("run", attributes=run_attributes), \
                tracer.start_as_current_span("search", attributes=search_attributes):
            pass
        spans = finished(exp)
        assert probe.calls == [{"input": "Who wrote Dune?", "output": "Frank Herbert.",
                                "context": ["Dune is by Herbert."]}]
        run = next(s for s in spans if s.name == "run")
        assert [e["gen_ai.evaluation.name"] for e in eval_events(run)] == ["acme-probe"]
    finally:
        runtime().remove_reader(reader)


def test_a_rule_selects_by_instrumentation_scope() -> None:
    reader = AcmeReader()
    runtime().add_reader(reader)
    try:
        probe = ProbeScorer(id="p")
        inst, exp = memory_configure(scoring=[tracescore.ScoringRule(
            scorer=probe, on="agent", scope="not-acme")])
        tracer = inst.tracer_provider.get_tracer("acme.agents")
        with tracer.start_as_current_span("run", attributes={"acme.kind": "AGENT_RUN"}):
            pass
        finished(exp)
        assert probe.calls == []
    finally:
        runtime().remove_reader(reader)


def test_a_reader_that_raises_is_passed_over_and_the_span_still_exported() -> None:
    class Broken:
        name = "broken"
        volatile = False

        def accepts(self, span: Any) -> bool:
            raise RuntimeError("bug in a reader")

        def kind(self, span: Any) -> str | None:
            return None

        def observe(self, span: Any, kind: str | None, buffer: TraceBuffer) -> None:
            return None

        def read(self, span: Any, kind: str | None) -> Content:
            return Content()

    broken = Broken()
    runtime().add_reader(broken)
    try:
        probe = ProbeScorer()
        _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])

        @tracescore.agent
        def answer(q: str) -> str:
            return "fine"

        assert answer("q") == "fine"
        (span,) = finished(exp)
        assert len(eval_events(span)) == 1
    finally:
        runtime().remove_reader(broken)


def test_register_refuses_what_is_not_a_reader() -> None:
    with pytest.raises(TypeError, match="not a tracescore Reader"):
        runtime().add_reader(object())  # type: ignore[arg-type]


def _span(name: str, *, scope: str, attributes: dict[str, Any] | None = None) -> ReadableSpan:
    ctx = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=False,
                      trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return ReadableSpan(name=name, context=ctx, attributes=attributes or {},
                        instrumentation_scope=InstrumentationScope(scope),
                        status=Status(StatusCode.UNSET), start_time=1, end_time=2)
