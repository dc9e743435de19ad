"""Per-span cost of the readers, per source: what a span costs when no rule selects it, and
when one does.

Run: ``python benchmarks/bench_readers.py [--spans 20000] [--rounds 7]``

For one span of each source's real shape (an OpenInference LLM span, a GenAI chat span with
message JSON, a traceloop workflow span, a chroma query span with result events, and transport
spans: an httpx client span and a psycopg driver span), the script prints the median over rounds
of the µs per span of:

- ``unselected``: ``reader_for`` + ``kind``, all the readers do for a span no rule wants
  (the processor also asks ``observe`` of retrieval and tool spans when a rule needs context);
- ``on_end, no match``: the real ``ScoringSpanProcessor.on_end`` with one rule that matches
  nothing (``on="tool", scope="nothing"``) against the same processor without rules: the extra
  cost a non-matching rule puts on every span of, say, a LangChain app;
- ``selected``: ``reader_for`` + ``kind`` + ``observe`` + ``read`` (the read happens once per
  picked span; the scoring itself runs on the background loop and is not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from opentelemetry.sdk.trace import Event, ReadableSpan  # noqa: E402
from opentelemetry.sdk.util.instrumentation import InstrumentationScope  # noqa: E402
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags  # noqa: E402

from tracescore._pipeline.processor import ScoringSpanProcessor  # noqa: E402
from tracescore._pipeline.rules import ScoringRule  # noqa: E402
from tracescore._pipeline.trace_buffer import TraceBuffer  # noqa: E402
from tracescore._readers import reader_for  # noqa: E402


class _NullScorer:
    id = "null"
    uses_judge = False
    uses_context = True
    uses_tool_calls = True
    requires_ground_truth = False
    higher_is_better = True
    scale = 1.0

    async def arun(self, **kwargs: Any) -> Any:
        return None


def _span(name: str, scope: str, attributes: dict[str, Any],
          events: tuple[Event, ...] = ()) -> ReadableSpan:
    ctx = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=False,
                      trace_flags=TraceFlags(TraceFlags.SAMPLED))
    parent = SpanContext(trace_id=0xABC, span_id=0x123, is_remote=False)
    return ReadableSpan(name=name, context=ctx, parent=parent, attributes=attributes,
                        events=events, instrumentation_scope=InstrumentationScope(scope),
                        status=Status(StatusCode.UNSET), start_time=1, end_time=2)


SPANS = {
    "openinference llm": _span("ChatOpenAI", "openinference.instrumentation.langchain", {
        "openinference.span.kind": "LLM", "input.value": "Hi?", "output.value": "Hello.",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "Hi?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "Hello.", "llm.model_name": "gpt-4o-mini"}),
    "genai chat": _span("chat gpt-4o-mini", "opentelemetry.instrumentation.openai_v2", {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "Hi?"}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "Hello."}]}])}),
    "traceloop workflow": _span("answer.workflow", "traceloop.tracer", {
        "traceloop.span.kind": "workflow", "traceloop.entity.name": "answer",
        "traceloop.entity.input": json.dumps({"args": ["Hi?"], "kwargs": {}}),
        "traceloop.entity.output": json.dumps("Hello.")}),
    "chroma query": _span("chroma.query", "opentelemetry.instrumentation.chromadb", {
        "db.system": "chroma", "db.operation": "query"}, tuple(
        Event("db.query.result", {"db.query.result.document": f"document {i}"})
        for i in range(4))),
    "httpx client": _span("POST", "opentelemetry.instrumentation.httpx", {
        "http.request.method": "POST", "url.full": "http://127.0.0.1:8000/v1/chat/completions",
        "http.response.status_code": 200, "server.address": "127.0.0.1"}),
    "psycopg driver": _span("SELECT", "opentelemetry.instrumentation.psycopg", {
        "db.system": "postgresql", "db.operation": "SELECT", "db.statement": "SELECT 1"}),
}


def _per_span_us(fn: Callable[[], None], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def _processor(rules: list[Any]) -> ScoringSpanProcessor:
    return ScoringSpanProcessor(None, rules, score_timeout=30, max_concurrency=1,
                                max_queue_size=10, flush_timeout=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    nomatch = ScoringRule(scorer=_NullScorer(), on="tool", scope="nothing")
    with_rule = _processor([nomatch.compile()])
    without = _processor([])
    buffer = TraceBuffer()
    print(f"{'span':<20} {'unselected':>11} {'on_end extra':>13} {'selected':>10}   (µs/span, "
          f"median of {args.rounds} rounds of {args.spans})")
    for label, span in SPANS.items():
        rows: dict[str, list[float]] = {"unselected": [], "extra": [], "selected": []}

        def unselected(span: ReadableSpan = span) -> None:
            reader_for(span).kind(span)

        def selected(span: ReadableSpan = span) -> None:
            reader = reader_for(span)
            kind = reader.kind(span)
            reader.observe(span, kind, buffer)
            reader.read(span, kind)
            buffer.end_trace(0xABC)

        def on_end_rule(span: ReadableSpan = span) -> None:
            with_rule.on_end(span)

        def on_end_none(span: ReadableSpan = span) -> None:
            without.on_end(span)

        for _ in range(args.rounds):
            rows["unselected"].append(_per_span_us(unselected, args.spans))
            rows["extra"].append(_per_span_us(on_end_rule, args.spans)
                                 - _per_span_us(on_end_none, args.spans))
            rows["selected"].append(_per_span_us(selected, args.spans))
        med = {k: statistics.median(v) for k, v in rows.items()}
        print(f"{label:<20} {med['unselected']:>11.2f} {med['extra']:>13.2f} "
              f"{med['selected']:>10.2f}")


if __name__ == "__main__":
    main()
