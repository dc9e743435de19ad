"""Per-call overhead of ``@tracescore.agent`` next to its peers' decorators, in one process.

Run (in the peer venv, see benchmarks/README.md):
``python benchmarks/bench_peers.py [--calls 10000] [--rounds 7]``

Every variant decorates (or, for the baseline, wraps by hand) the same trivial function
``answer(question) -> str`` and records its span through an SDK ``TracerProvider`` with a
``BatchSpanProcessor`` whose queue holds a whole round (nothing is dropped: the script counts
what each no-op exporter received and says so) and a no-op exporter:

- ``baseline``: ``tracer.start_as_current_span`` setting the attributes tracescore sets
  (operation, span kinds, agent name, JSON input and output, MIME types);
- ``tracescore``: ``@tracescore.agent(name="answer")``, no scoring rule;
- ``openllmetry``: traceloop-sdk ``@workflow(name="answer")``, ``Traceloop.init`` with a
  processor of our own, no auto-instrumentation, endpoint on loopback;
- ``langfuse``: ``@observe(name="answer", as_type="agent")``, ``Langfuse`` with dummy keys, a
  loopback ``base_url``, its own provider and our exporter;
- ``openinference``: ``@OITracer(tracer, TraceConfig()).agent(name="answer")``.

A peer that is not installed or fails to set up is reported and left out; the others still run.
Rounds alternate between the variants (the order rotates each round) and each variant's provider
is flushed after its round, untimed, so one variant's export backlog does not run inside another's
timing. The table gives the median and the fastest round; with other work sharing the CPU the
median moves by several percent from run to run, the ratios much less.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

# Offline and quiet, before any peer is imported. The loopback port is closed: a peer that tries
# to reach its backend anyway fails at once instead of waiting on the network.
_DEAD_ENDPOINT = "http://127.0.0.1:9"
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("TRACELOOP_TELEMETRY", "false")
os.environ.setdefault("TRACELOOP_METRICS_ENABLED", "false")
os.environ.setdefault("TRACELOOP_LOGGING_ENABLED", "false")
os.environ.setdefault("TRACELOOP_TRACE_CONTENT", "true")
os.environ.setdefault("LANGFUSE_TRACING_ENVIRONMENT", "bench")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."


class NoopExporter(SpanExporter):
    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


@dataclass
class Variant:
    name: str
    fn: Callable[[str], Any]
    exporter: NoopExporter
    flush: Callable[[], Any]
    samples: list[float] = field(default_factory=list)
    calls: int = 0


def _provider(queue_size: int) -> tuple[TracerProvider, NoopExporter]:
    exporter = NoopExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=queue_size))
    return provider, exporter


def setup_baseline(queue_size: int) -> Variant:
    provider, exporter = _provider(queue_size)
    tracer = provider.get_tracer("baseline")

    def answer(question: str) -> str:
        with tracer.start_as_current_span(
            "invoke_agent answer",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "openinference.span.kind": "AGENT",
                "tracescore.span.kind": "agent",
                "gen_ai.agent.name": "answer",
            },
        ) as span:
            span.set_attribute("input.value", json.dumps({"question": question}))
            span.set_attribute("input.mime_type", "application/json")
            result = ANSWER
            span.set_attribute("output.value", json.dumps(result))
            span.set_attribute("output.mime_type", "application/json")
            return result

    return Variant("baseline (bare OTel span)", answer, exporter, provider.force_flush)


def setup_tracescore(queue_size: int) -> Variant:
    import tracescore

    exporter = NoopExporter()
    # configure() sizes its export queue from OTEL_BSP_MAX_QUEUE_SIZE when that is set.
    os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = str(queue_size)
    try:
        tracescore.configure(tracer_provider=TracerProvider(), exporter=exporter, scoring=[])
    finally:
        del os.environ["OTEL_BSP_MAX_QUEUE_SIZE"]

    @tracescore.agent(name="answer")
    def answer(question: str) -> str:
        return ANSWER

    return Variant(f"tracescore {tracescore.__version__} @agent", answer, exporter,
                   lambda: tracescore.force_flush(60_000))


def setup_openllmetry(queue_size: int) -> Variant:
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import workflow

    exporter = NoopExporter()
    processor = BatchSpanProcessor(exporter, max_queue_size=queue_size)
    # Traceloop prints banners; keep the table readable. It takes the global tracer provider
    # (this script sets no other one) and instruments threading globally.
    with contextlib.redirect_stdout(io.StringIO()):
        Traceloop.init(app_name="bench", api_endpoint=_DEAD_ENDPOINT, processor=processor,
                       instruments=set(), telemetry_enabled=False)

    @workflow(name="answer")
    def answer(question: str) -> str:
        return ANSWER

    return Variant(f"openllmetry {version('traceloop-sdk')} @workflow", answer, exporter,
                   processor.force_flush)


def setup_langfuse(queue_size: int) -> Variant:
    exporter = NoopExporter()
    provider = TracerProvider()
    # LangfuseSpanProcessor (a BatchSpanProcessor) takes no queue size: only the env var sets it.
    os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = str(queue_size)
    try:
        from langfuse import Langfuse, observe

        client = Langfuse(public_key="pk-lf-bench", secret_key="sk-lf-bench",
                          base_url=_DEAD_ENDPOINT, tracer_provider=provider,
                          span_exporter=exporter)
    finally:
        del os.environ["OTEL_BSP_MAX_QUEUE_SIZE"]

    @observe(name="answer", as_type="agent")
    def answer(question: str) -> str:
        return ANSWER

    def flush() -> None:
        client.flush()
        provider.force_flush()

    return Variant(f"langfuse {version('langfuse')} @observe", answer, exporter, flush)


def setup_openinference(queue_size: int) -> Variant:
    from openinference.instrumentation import OITracer, TraceConfig

    provider, exporter = _provider(queue_size)
    tracer = OITracer(provider.get_tracer("bench"), config=TraceConfig())

    @tracer.agent(name="answer")
    def answer(question: str) -> str:
        return ANSWER

    return Variant(f"openinference {version('openinference-instrumentation')} agent", answer,
                   exporter, provider.force_flush)


SETUPS: dict[str, Callable[[int], Variant]] = {
    "baseline": setup_baseline,
    "tracescore": setup_tracescore,
    # Before anything else could set a global provider: traceloop adopts the global one.
    "openllmetry": setup_openllmetry,
    "langfuse": setup_langfuse,
    "openinference": setup_openinference,
}


def timed(fn: Callable[[str], Any], calls: int) -> float:
    gc.collect()
    start = time.perf_counter()
    for _ in range(calls):
        fn(QUESTION)
    return (time.perf_counter() - start) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", nargs="*", choices=list(SETUPS), help="variants to run")
    args = parser.parse_args()
    queue_size = args.calls * 2 + 1024

    variants: list[Variant] = []
    missing: list[str] = []
    for key in args.only or list(SETUPS):
        try:
            variant = SETUPS[key](queue_size)
            if variant.fn(QUESTION) != ANSWER:
                raise RuntimeError("the decorated function returned something else")
            variant.calls += 1
            variants.append(variant)
        except Exception as exc:  # a peer that cannot run here is reported, not fatal
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            missing.append(f"{key}: {last}")
    if not variants or variants[0].name.split()[0] != "baseline":
        print("the baseline could not run:", *missing, sep="\n  ")
        return 1

    for v in variants:  # warm-up
        for _ in range(min(2_000, args.calls)):
            v.fn(QUESTION)
        v.calls += min(2_000, args.calls)
        v.flush()

    for r in range(args.rounds):
        order = variants[r % len(variants):] + variants[: r % len(variants)]
        for v in order:
            v.samples.append(timed(v.fn, args.calls))
            v.calls += args.calls
            v.flush()

    base = statistics.median(variants[0].samples)
    print(f"per-call cost of a trivial decorated function, {args.rounds} alternating rounds x "
          f"{args.calls:,} calls, no-op exporter, one process")
    print(f"python {sys.version.split()[0]}, opentelemetry-sdk {version('opentelemetry-sdk')}, "
          f"{os.cpu_count()} CPUs (shared: numbers are noisy, compare ratios)\n")
    header = f"{'variant':<38}{'median us':>10}{'best us':>9}{'ratio':>7}  spans exported"
    print(header)
    print("-" * len(header))
    for v in variants:
        med = statistics.median(v.samples)
        status = "all" if v.exporter.count == v.calls else f"{v.exporter.count:,} of {v.calls:,}!"
        print(f"{v.name:<38}{med * 1e6:>10.2f}{min(v.samples) * 1e6:>9.2f}{med / base:>7.2f}"
              f"  {status}")
    peers = variants[1:]
    if peers:
        lowest = min(peers, key=lambda v: statistics.median(v.samples))
        print(f"\nlowest overhead among the decorators: {lowest.name} "
              f"({statistics.median(lowest.samples) / base:.2f}x the bare span)")
    for line in missing:
        print(f"NOT RUN {line}")
    dropped = [v.name for v in variants if v.exporter.count != v.calls]
    if dropped:
        print("WARNING: spans were lost for:", ", ".join(dropped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
