"""Framework spans: what a foreign LLM span costs the thread that ends it when no rule selects
it, against the SDK's ``BatchSpanProcessor``; and what reading a selected span costs per
framework.

Run: ``PYTHONPATH=. python benchmarks/bench_frameworks.py [--spans 20000] [--rounds 7]
[--only readers|caller] [--processes 5]``

1. **Caller thread, unselected.** An OpenInference LLM span of a LangChain app's shape (15
   attributes, the flattened messages) is started and ended ``--spans`` times on one thread
   through (a) a ``TracerProvider`` with a ``BatchSpanProcessor`` and a no-op exporter (the
   SDK's own path) and (b) ``tracescore.configure()`` with a no-op exporter and a rule that
   selects no LLM span (``on="agent"``), at sample rate 1.0 (the trace is picked: the span is
   routed in ``on_end``, on the calling thread, and let go) and 0.1 (most traces are not: the
   span goes straight to export). The figure is the calling thread's CPU time per span
   (``time.thread_time``), median of ``--rounds`` alternating rounds, and the same-run ratio;
   also the readers' share of routing such a span (``reader_for`` + ``_turns.route``).
2. **Reader, selected.** For one span of each framework's recorded shape (``tests/
   test_readers_frameworks.py``), µs per span for all that routing and reading do when a rule
   selects it: ``reader_for``, ``_turns.route`` (kind, trace buffer, refine), ``read`` and
   ``_turns.finish`` (for the OpenAI Agents SDK's agent span: the turn read from its two model
   calls). The router runs this in ``on_end``, on the thread that ended the span.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.util.instrumentation import InstrumentationScope  # noqa: E402
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags  # noqa: E402

import tracescore  # noqa: E402
from tracescore._pipeline.trace_buffer import TraceBuffer  # noqa: E402
from tracescore._readers import reader_for  # noqa: E402

LLM_ATTRIBUTES: dict[str, Any] = {
    "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.provider": "openai",
    "llm.system": "openai", "input.value": json.dumps({"messages": [{"role": "user",
                                                                      "content": "Hi?"}]}),
    "input.mime_type": "application/json", "output.value": "Hello.",
    "llm.input_messages.0.message.role": "system",
    "llm.input_messages.0.message.content": "Be brief.",
    "llm.input_messages.1.message.role": "user", "llm.input_messages.1.message.content": "Hi?",
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.content": "Hello.", "llm.token_count.prompt": 10,
    "llm.token_count.completion": 5,
}


class _NoOp(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class _NullScorer:
    id = "null"
    uses_judge = False
    uses_context = False
    uses_tool_calls = False
    requires_ground_truth = False
    higher_is_better = True
    scale = 1.0

    async def arun(self, **kwargs: Any) -> Any:
        return None


def _caller_cpu_us(tracer: Any, n: int) -> float:
    start = time.thread_time()
    for _ in range(n):
        tracer.start_span("ChatOpenAI", attributes=LLM_ATTRIBUTES).end()
    return (time.thread_time() - start) / n * 1e6


def caller_thread(spans: int, rounds: int, processes: int = 1) -> None:
    """Part 1; with ``processes`` > 1, each of that many fresh interpreters measures it (their
    rounds alternate as in one) and the ratios given are the medians over the interpreters:
    between interpreters of one tree the ratio moves by 0.1-0.2 on this machine (threads and
    memory land differently), more than between rounds of one."""
    if processes > 1:
        runs = []
        for _ in range(processes):
            out = subprocess.run([sys.executable, __file__, "--only", "caller", "--spans",
                                  str(spans), "--rounds", str(rounds), "--json"],
                                 capture_output=True, text=True, check=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
        print(f"caller thread, foreign LLM span no rule selects: ratio to BatchSpanProcessor "
              f"(calling thread's CPU), median of {processes} interpreters, each the median of "
              f"{rounds} alternating rounds of {spans}:")
        for rate in ("1.0", "0.1"):
            ratios = sorted(run[rate] for run in runs)
            verdict = (f" (issue 32's target <= 1.10: "
                       f"{'met' if statistics.median(ratios) <= 1.10 else 'not met'})"
                       if rate == "1.0" else "")
            print(f"  sample_rate={rate:<4} ratio {statistics.median(ratios):.2f}  (each: "
                  f"{', '.join(f'{r:.2f}' for r in ratios)}){verdict}")
        return
    _caller_thread(spans, rounds)


def _caller_thread(spans: int, rounds: int, as_json: bool = False) -> None:
    sdk = TracerProvider(shutdown_on_exit=False)
    sdk.add_span_processor(BatchSpanProcessor(_NoOp(), max_queue_size=spans * 2))
    sdk_tracer = sdk.get_tracer("openinference.instrumentation.langchain")
    results: dict[float, list[tuple[float, float]]] = {1.0: [], 0.1: []}
    for rate in results:
        provider = TracerProvider(shutdown_on_exit=False)
        tracescore.configure(tracer_provider=provider, exporter=_NoOp(), scoring=[
            tracescore.ScoringRule(scorer=_NullScorer(), on="agent", sample_rate=rate)])
        tracer = provider.get_tracer("openinference.instrumentation.langchain")
        _caller_cpu_us(tracer, 2_000)  # warm up both paths
        _caller_cpu_us(sdk_tracer, 2_000)
        for _ in range(rounds):
            base = _caller_cpu_us(sdk_tracer, spans)
            ours = _caller_cpu_us(tracer, spans)
            results[rate].append((base, ours))
            tracescore.force_flush(30_000)
            sdk.force_flush(30_000)
        tracescore.shutdown(30_000)
    sdk.shutdown()
    if as_json:
        print(json.dumps({str(rate): statistics.median(p[1] / p[0] for p in pairs)
                          for rate, pairs in results.items()}))
        return
    from tracescore._readers._turns import route

    span = sdk_tracer.start_span("ChatOpenAI", attributes=LLM_ATTRIBUTES)
    span.end()
    buffer = TraceBuffer()
    reader_cpu = []
    for _ in range(rounds):
        start = time.thread_time()
        for _ in range(spans):
            route(reader_for(span), span, buffer)
        reader_cpu.append((time.thread_time() - start) / spans * 1e6)
    print(f"caller thread, foreign LLM span no rule selects (CPU µs/span, median of {rounds} "
          f"rounds of {spans}):")
    print(f"  of which reader_for + _turns.route in a picked trace: "
          f"{statistics.median(reader_cpu):.2f}")
    for rate, pairs in results.items():
        base = statistics.median(p[0] for p in pairs)
        ours = statistics.median(p[1] for p in pairs)
        ratio = statistics.median(p[1] / p[0] for p in pairs)
        print(f"  sample_rate={rate:<4} BatchSpanProcessor {base:6.2f}  tracescore {ours:6.2f}"
              f"  ratio {ratio:.2f}" + (f" (issue 32's target <= 1.10: "
                                        f"{'met' if ratio <= 1.10 else 'not met'})"
                                        if rate == 1.0 else ""))


def _span(name: str, scope: str, attributes: dict[str, Any], span_id: int,
          parent: int | None, start: int) -> ReadableSpan:
    ctx = SpanContext(trace_id=0xABC, span_id=span_id, is_remote=False,
                      trace_flags=TraceFlags(TraceFlags.SAMPLED))
    up = None if parent is None else SpanContext(trace_id=0xABC, span_id=parent,
                                                  is_remote=False)
    return ReadableSpan(name=name, context=ctx, parent=up, attributes=attributes,
                        instrumentation_scope=InstrumentationScope(scope),
                        status=Status(StatusCode.UNSET), start_time=start, end_time=start + 1)


def _messages(prefix: str, *pairs: tuple[str, str]) -> dict[str, str]:
    attrs = {}
    for i, (role, content) in enumerate(pairs):
        attrs[f"{prefix}.{i}.message.role"] = role
        attrs[f"{prefix}.{i}.message.content"] = content
    return attrs


def _parts(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


QUESTION, ANSWER = "What landmarks are in Paris?", "The Eiffel Tower and the Louvre."
GENERATION = {"openinference.span.kind": "LLM",
              **_messages("llm.input_messages", ("system", "Guide."), ("user", QUESTION)),
              **_messages("llm.output_messages", ("assistant", ANSWER))}

# (label, the selected span's kind, [spans in end order]; the last one is the one read)
CASES: list[tuple[str, str, list[ReadableSpan]]] = [
    ("pydantic-ai agent", "agent", [_span("invoke_agent agent", "pydantic-ai", {
        "gen_ai.operation.name": "invoke_agent",
        "pydantic_ai.all_messages": json.dumps([_parts("user", QUESTION),
                                                _parts("assistant", ANSWER)]),
        "final_result": ANSWER}, 1, None, 1)]),
    ("pydantic-ai chat", "llm", [_span("chat gpt-4o-mini", "pydantic-ai", {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([_parts("user", QUESTION)]),
        "gen_ai.output.messages": json.dumps([_parts("assistant", ANSWER)])}, 2, 1, 1)]),
    ("openai-agents agent", "agent", [
        _span("generation", "openinference.instrumentation.openai_agents", GENERATION, 3, 2, 2),
        _span("generation", "openinference.instrumentation.openai_agents", GENERATION, 4, 2, 3),
        _span("Guide", "openinference.instrumentation.openai_agents",
              {"openinference.span.kind": "AGENT"}, 2, 1, 1)]),
    ("llama-index query", "agent", [
        _span("OpenAI.chat", "openinference.instrumentation.llama_index", GENERATION, 3, 2, 2),
        _span("RetrieverQueryEngine.query", "openinference.instrumentation.llama_index", {
            "openinference.span.kind": "CHAIN", "input.value": QUESTION,
            "output.value": ANSWER}, 2, None, 1)]),
    ("langgraph graph", "agent", [
        _span("ChatOpenAI", "openinference.instrumentation.langchain", GENERATION, 3, 2, 2),
        _span("LangGraph", "openinference.instrumentation.langchain", {
            "openinference.span.kind": "CHAIN", "metadata": '{"ls_integration": "langgraph"}',
            "input.value": json.dumps({"messages": [{"role": "user", "content": QUESTION}]}),
            "input.mime_type": "application/json",
            "output.value": json.dumps({"messages": [
                {"type": "human", "data": {"content": QUESTION}},
                {"type": "ai", "data": {"content": ANSWER, "tool_calls": []}}]}),
            "output.mime_type": "application/json"}, 2, None, 1)]),
    ("crewai agent", "agent", [_span("Travel guide._execute_core",
                                     "openinference.instrumentation.crewai", {
        "openinference.span.kind": "AGENT", "input.value": json.dumps({"agent": {}}),
        "input.mime_type": "application/json",
        "output.value": json.dumps({"description": QUESTION, "raw": ANSWER, "pydantic": None}),
        "output.mime_type": "application/json"}, 2, 1, 1)]),
    ("dspy module", "agent", [
        _span("LM.__call__", "openinference.instrumentation.dspy", GENERATION, 3, 2, 2),
        _span("RAG.forward", "openinference.instrumentation.dspy", {
            "openinference.span.kind": "CHAIN", "input.value": json.dumps({"question": QUESTION}),
            "input.mime_type": "application/json",
            "output.value": json.dumps({"reasoning": "...", "response": ANSWER}),
            "output.mime_type": "application/json"}, 2, None, 1)]),
]


def _per_span_us(fn: Callable[[], None], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def readers(spans: int, rounds: int) -> None:
    from tracescore._readers._turns import finish, route

    buffer = TraceBuffer()
    print(f"reader, selected span (µs per selected span, median of {rounds} rounds of {spans}; "
          "spans beneath it are routed too and counted):")
    for label, kind, case in CASES:
        def once(case: list[ReadableSpan] = case, kind: str = kind, label: str = label) -> None:
            for span in case:
                reader = reader_for(span)
                routed = route(reader, span, buffer)
            content = finish(span, routed.kind, reader.read(span, routed.kind), routed.beneath,
                             reader_for)
            assert routed.kind == kind and content.output == ANSWER, (label, content)
            buffer.end_trace(0xABC)

        once()
        runs = [_per_span_us(once, spans) for _ in range(rounds)]
        print(f"  {label:<22} {statistics.median(runs):7.2f}  ({len(case)} span(s))")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", choices=("readers", "caller"),
                        help="one part (caller runs on older tracescore releases too)")
    parser.add_argument("--processes", type=int, default=1,
                        help="caller part: fresh interpreters to measure in (median over them)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        _caller_thread(args.spans, args.rounds, as_json=True)
        return
    if args.only != "caller":
        readers(max(1, args.spans // 4), args.rounds)
    if args.only != "readers":
        caller_thread(args.spans, args.rounds, args.processes)


if __name__ == "__main__":
    main()
