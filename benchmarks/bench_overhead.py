"""Per-call overhead of ``@tracescore.agent`` against a bare OpenTelemetry span, and import time.

Run: ``python benchmarks/bench_overhead.py [--calls 20000] [--rounds 7] [--skip-import]``

Every variant runs in this one process, in alternating rounds, and exports each span once to a
no-op exporter: the baseline through the SDK's ``BatchSpanProcessor`` (a queue large enough that
nothing is dropped), tracescore through its own export processor (``configure(exporter=...)``
on a provider with no other processor). The script prints, per variant, the median per-call
wall time and the calling thread's CPU time (``time.thread_time``: what the call itself costs
that thread; background work such as scoring shows in the wall time only, since in a loop that
keeps a core busy it takes turns with the caller for the GIL), each with its ratio to the
baseline, and the wall time with the scoring left queued at the end of the loop drained
(``wall+drain``: the process CPU the drain took, per call, added; what each call cost the
process in all, whenever its scoring ran). ``--user-bsp`` also gives tracescore's provider
a ``BatchSpanProcessor`` (every span then goes through two export pipelines, as in the runs
before 2026-12-01):

- ``baseline``: ``tracer.start_as_current_span`` that sets the same attributes tracescore sets
  (operation, kinds, agent name, JSON input and output);
- ``tracescore, no rule``; ``rule not sampled`` (``sample_rate=0``); ``rule sampled``
  (``sample_rate=1``, content-similarity scored on the background thread) and ``sampled, slow
  judge`` (a scorer that takes 200 ms per score: the decorated call must not pay for it).

``import tracescore`` is timed in fresh interpreters (median of 7).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

import tracescore  # noqa: E402
from tracescore.scorers import create_content_similarity_scorer  # noqa: E402


class NoopExporter(SpanExporter):
    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


class SlowScorer:
    """Stands for an LLM judge that answers in 200 ms."""

    id = "slow-judge"
    uses_context = False
    requires_ground_truth = False
    higher_is_better = True

    async def arun(self, **kwargs: Any) -> Any:
        await asyncio.sleep(0.2)
        return _SlowResult()


class _SlowResult:
    score = 1.0
    reason = "ok"
    judge_model = "bench"


def per_call(fn: Callable[[str], Any], calls: int) -> tuple[float, float]:
    """Seconds per call: (wall, CPU time of this thread), after a full collection (every
    variant starts from a collected heap, whatever ran before it)."""
    gc.collect()
    start, cpu = time.perf_counter(), time.thread_time()
    for _ in range(calls):
        fn("What is the capital of France?")
    return (time.perf_counter() - start) / calls, (time.thread_time() - cpu) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--skip-import", action="store_true",
                        help="do not time `import tracescore` (14 fresh interpreters)")
    parser.add_argument("--user-bsp", action="store_true",
                        help="give tracescore's provider a BatchSpanProcessor of its own too")
    args = parser.parse_args()

    def make_provider(bsp: bool = True) -> TracerProvider:
        provider = TracerProvider()
        if bsp:
            provider.add_span_processor(
                BatchSpanProcessor(NoopExporter(), max_queue_size=200_000))
        return provider

    base_tracer = make_provider().get_tracer("baseline")

    def baseline(question: str) -> str:
        with base_tracer.start_as_current_span(
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
            result = "Paris is the capital of France."
            span.set_attribute("output.value", json.dumps(result))
            span.set_attribute("output.mime_type", "application/json")
            return result

    @tracescore.agent(name="answer")
    def decorated(question: str) -> str:
        return "Paris is the capital of France."

    sim = create_content_similarity_scorer()
    variants: dict[str, list[tracescore.ScoringRule] | None] = {
        "tracescore, no rule": [],
        "rule not sampled": [tracescore.ScoringRule(scorer=sim, sample_rate=0.0,
                                                    ground_truth=lambda s, q: "Paris")],
        "rule sampled": [tracescore.ScoringRule(scorer=sim, sample_rate=1.0,
                                                ground_truth=lambda s, q: "Paris")],
        "sampled, slow judge": [tracescore.ScoringRule(scorer=SlowScorer(), sample_rate=1.0)],
    }
    results: dict[str, list[tuple[float, float]]] = {"baseline": [], **{k: [] for k in variants}}
    drained: dict[str, list[float]] = {"baseline": [], **{k: [] for k in variants}}
    order = list(variants.items())
    for round_ in range(args.rounds):
        results["baseline"].append(per_call(baseline, args.calls))
        drained["baseline"].append(0.0)
        # The variants take turns at going first: the one right after another's shutdown
        # (or right after the baseline) ran measurably slower in a fixed order.
        shift = round_ % len(order)
        for name, rules in order[shift:] + order[:shift]:
            tracescore.configure(
                tracer_provider=make_provider(args.user_bsp), exporter=NoopExporter(),
                scoring=rules,
                limits=tracescore.LimitsOptions(max_queue_size=args.calls + 1, max_concurrency=256,
                                                score_timeout=600),
            )
            wall, cpu = per_call(decorated, args.calls)
            # The scoring still queued when the loop ends, drained before the next variant:
            # its process CPU per call makes the last column (what every span cost the
            # process in all, whenever its scoring ran).
            process = time.process_time()
            if name != "sampled, slow judge":  # 200 ms of sleep per score: nothing to drain
                tracescore.force_flush(600_000)
            drained[name].append(time.process_time() - process)
            results[name].append((wall, cpu))
            tracescore.shutdown(60_000 if name != "sampled, slow judge" else 1)

    base_wall = statistics.median(w for w, _ in results["baseline"])
    base_cpu = statistics.median(c for _, c in results["baseline"])
    print(f"per-call cost, median of {args.rounds} rounds x {args.calls} calls"
          + (" (tracescore's provider has a BatchSpanProcessor too)" if args.user_bsp else ""))
    print(f"{'variant':<24}{'wall us':>10}{'ratio':>8}{'caller CPU us':>15}{'ratio':>8}"
          f"{'wall+drain us':>15}{'ratio':>8}")
    for name, samples in results.items():
        wall = statistics.median(w for w, _ in samples)
        cpu = statistics.median(c for _, c in samples)
        total = statistics.median(w + d / args.calls for (w, _), d in zip(samples, drained[name],
                                                                          strict=True))
        print(f"{name:<24}{wall * 1e6:>10.2f}{wall / base_wall:>8.2f}"
              f"{cpu * 1e6:>15.2f}{cpu / base_cpu:>8.2f}{total * 1e6:>15.2f}"
              f"{total / base_wall:>8.2f}")
    # Issue 32's targets, on the wall time and on the calling thread's CPU time: the median of
    # the rounds' ratios (each round's variant against that round's baseline, so a drift of
    # the machine's speed between rounds cancels out).
    for name, target in (("rule not sampled", 1.15), ("rule sampled", 3.0)):
        pairs = list(zip(results[name], results["baseline"], strict=True))
        wall = statistics.median(w / bw for (w, _), (bw, _) in pairs)
        cpu = statistics.median(c / bc for (_, c), (_, bc) in pairs)
        verdict = {True: "met", False: "not met"}
        print(f"target {name} <= {target}x: wall {wall:.2f} ({verdict[wall <= target]}), "
              f"caller CPU {cpu:.2f} ({verdict[cpu <= target]})")
    if args.skip_import:
        return

    code = "import time; t=time.perf_counter(); import tracescore; print(time.perf_counter()-t)"
    times = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout)
        for _ in range(7)
    ]
    code_otel = ("import time; t=time.perf_counter(); import opentelemetry.sdk.trace; "
                 "print(time.perf_counter()-t)")
    otel = [
        float(subprocess.run([sys.executable, "-c", code_otel], capture_output=True, text=True,
                             check=True).stdout)
        for _ in range(7)
    ]
    print(f"import tracescore: {statistics.median(times):.3f} s (median of 7; "
          f"opentelemetry.sdk.trace alone: {statistics.median(otel):.3f} s)")


if __name__ == "__main__":
    main()
