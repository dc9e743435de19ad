"""Decorated-call latency with every call scored by a 200 ms LLM judge, against scoring off.

Run: ``python benchmarks/bench_latency.py [--calls 800] [--interval-ms 100] [--blocks 4]``

One process, one call pattern: a ``@tracescore.agent`` that sleeps 1 ms (its "work") is called
in an open loop at a mean pace of one call per ``--interval-ms``, with Poisson arrivals (random
gaps, seeded: both configurations get the very same schedule; ``--fixed-pace`` for equal gaps,
which can fall in step with the judge's 200 ms and so with its answers), and each call's
latency is timed around the decorated call alone. Two configurations alternate in blocks
(off, on, off, on, ...), each ``--calls`` calls in all:

- ``scoring off``: ``configure()`` with no rule;
- ``scoring on``: one ``ScoringRule(sample_rate=1.0)`` with the answer-relevancy scorer, whose
  judge (``tracescore.Judge("openai/bench", api_base=<loopback>)``) answers every request after
  200 ms. Answer relevancy makes 3 judge calls per score (statements, verdicts, reason), so a
  score takes ~0.6 s and ``--interval-ms 100`` (10 calls/s, 30 judge calls/s) keeps ~6 scores
  in flight; ``max_concurrency`` is 32 so the scoring queue never grows while there is CPU for
  it (the default 8 would cap scoring at ~13 scores/s). Every call's question is different,
  so the judge's request cache answers nothing.

After each "on" block the script waits (untimed) until its scores are in, so no background
scoring runs during an "off" block; how long that wait took shows whether scoring kept pace
(a backlog means the process ran out of CPU for scoring). The process's CPU time per second of
each configuration shows the load that scoring adds: the latency cost comes from that load
competing for the GIL with the timed calls. The judge is ``tests/judge_server.py`` run in a child
process: a real judge is remote, and a judge server inside this process would take the GIL
from the very calls being timed (``--judge-in-process`` shows that effect).

It prints p50/p90/p99/max per configuration, the ratio on/off, and what scoring did (scores
attached, jobs skipped because the queue was full, errors). Latencies on a shared 2-core
machine are noisy: the tail (p99 of 800 calls is the 8th slowest) moves between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult  # noqa: E402

import tracescore  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

ANSWER_RELEVANCY_ROUTES: dict[str, Any] = {
    "answer_relevancy_statements": {
        "statements": ["Paris is the capital of France.", "Paris lies on the Seine."]
    },
    "answer_relevancy_verdicts": {
        "results": [
            {"result": "yes", "reason": "It answers the question."},
            {"result": "unsure", "reason": "True, but beside the question."},
        ]
    },
    "answer_relevancy_reason": {"reason": "Mostly on topic; one statement drifts."},
}

_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tracescore.testing import ScriptedJudge as JudgeServer
server = JudgeServer()
server.delay = float(sys.argv[2])
for name, reply in json.loads(sys.argv[3]).items():
    server.route(name, reply)
print(server.api_base, flush=True)
sys.stdin.read()  # serve until the parent closes our stdin (or dies)
"""


class JudgeProcess:
    """``tests/judge_server.JudgeServer`` in a child process, so its CPU is not ours.

    Args:
        delay: seconds before each answer.
        routes: schema name -> reply, as ``JudgeServer.route`` takes them (JSON values only).
    """

    def __init__(self, delay: float, routes: dict[str, Any]) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(REPO), str(delay), json.dumps(routes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self._proc.stdout is not None
        self.api_base = self._proc.stdout.readline().strip()
        if not self.api_base.startswith("http://127.0.0.1:"):
            self.close()
            raise RuntimeError("the judge server process did not start")

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> JudgeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InProcessJudge:
    """The same server in this process (``--judge-in-process``)."""

    def __init__(self, delay: float, routes: dict[str, Any]) -> None:
        sys.path.insert(0, str(REPO))
        from tracescore.testing import ScriptedJudge as JudgeServer

        self._server = JudgeServer()
        self._server.delay = delay
        for name, reply in routes.items():
            self._server.route(name, reply)
        self.api_base = self._server.api_base

    def close(self) -> None:
        self._server.close()

    def __enter__(self) -> InProcessJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NoopExporter(SpanExporter):
    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


@tracescore.agent(name="support-bot")
def answer(question: str) -> str:
    time.sleep(0.001)  # the agent's own work
    return f"Paris is the capital of France. Paris lies on the Seine. ({question[-6:]})"


def schedule(calls: int, interval: float, seed: int | None) -> list[float]:
    """Start offsets in seconds: Poisson arrivals with mean gap ``interval`` from ``seed``, or
    equal gaps when ``seed`` is None."""
    if seed is None:
        return [i * interval for i in range(calls)]
    rng = random.Random(seed)
    offsets, t = [], 0.0
    for _ in range(calls):
        offsets.append(t)
        t += rng.expovariate(1 / interval)
    return offsets


def run_block(start_index: int, offsets: Sequence[float]) -> list[float]:
    """Make one call at each offset; return their latencies in seconds."""
    latencies: list[float] = []
    t0 = time.perf_counter()
    for i, offset in enumerate(offsets):
        wait = t0 + offset - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        question = f"What is the capital of France? (call {start_index + i})"
        start = time.perf_counter()
        answer(question)
        latencies.append(time.perf_counter() - start)
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=800, help="calls per configuration")
    parser.add_argument("--blocks", type=int, default=4, help="alternating blocks per config")
    parser.add_argument("--interval-ms", type=float, default=100.0,
                        help="mean gap between calls: the load, one score per call")
    parser.add_argument("--judge-delay", type=float, default=0.2, help="judge latency, seconds")
    parser.add_argument("--max-concurrency", type=int, default=32)
    parser.add_argument("--fixed-pace", action="store_true",
                        help="equal gaps between calls instead of Poisson arrivals")
    parser.add_argument("--seed", type=int, default=0, help="seed of the arrival schedule")
    parser.add_argument("--switch-interval-ms", type=float, default=None,
                        help="sys.setswitchinterval for this run (an experiment: default 5 ms)")
    parser.add_argument("--gc-freeze", action="store_true",
                        help="gc.freeze() after the imports (experiment: docs/development.md)")
    parser.add_argument("--transport", choices=["direct", "litellm"], default="direct",
                        help="the judge's transport (issue 15); default direct")
    parser.add_argument("--out-of-process", action="store_true",
                        help="Judge(out_of_process=True): the judge's calls in its child process")
    parser.add_argument("--judge-in-process", action="store_true",
                        help="run the judge server in this process (it then competes for the GIL)")
    args = parser.parse_args()
    interval = args.interval_ms / 1000
    if args.switch_interval_ms is not None:
        sys.setswitchinterval(args.switch_interval_ms / 1000)
    per_block = max(1, args.calls // args.blocks)

    if args.transport == "litellm" and not args.out_of_process:
        import litellm  # noqa: F401  - imported up front: its ~2.5 s import is not what we time

    from tracescore.scorers import create_answer_relevancy_scorer

    if args.gc_freeze:
        import gc

        gc.collect()
        gc.freeze()  # import-time objects (litellm's ~400k) leave the collector's generations
    server_cls = InProcessJudge if args.judge_in_process else JudgeProcess
    provider = TracerProvider()
    exporter = NoopExporter()
    results: dict[str, list[float]] = {"scoring off": [], "scoring on": []}
    cpu_seconds = {"scoring off": 0.0, "scoring on": 0.0}
    wall_seconds = {"scoring off": 0.0, "scoring on": 0.0}
    flush_waits: list[float] = []
    totals = {"scores_attached": 0, "skipped_queue_full": 0, "scoring_errors": 0,
              "scores_late": 0, "scores_not_scorable": 0}
    flush_ok = True
    with server_cls(args.judge_delay, ANSWER_RELEVANCY_ROUTES) as server:
        judge = tracescore.Judge("openai/bench", api_base=server.api_base, api_key="x",
                                 timeout=10, transport=args.transport,
                                 out_of_process=args.out_of_process)
        print(f"judge transport: {judge.transport}, out of process: {judge.out_of_process}")
        rule = tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(model=judge),
                                      sample_rate=1.0)

        def configure(scoring: bool) -> None:
            tracescore.configure(
                tracer_provider=provider, exporter=exporter,
                scoring=[rule] if scoring else [],
                limits=tracescore.LimitsOptions(max_concurrency=args.max_concurrency,
                                                max_queue_size=1_000, score_timeout=30),
            )

        # Warm-up of both paths: litellm's HTTP client, the judge loop, the scoring worker.
        configure(True)
        run_block(-100, schedule(40, interval, None if args.fixed_pace else args.seed - 1))
        if not tracescore.force_flush(60_000) or tracescore.stats().scores_attached < 40:
            print("warm-up failed: the judge did not score (stats:", tracescore.stats(), ")")
            return 1
        configure(False)
        run_block(-50, schedule(40, interval, None if args.fixed_pace else args.seed - 2))

        index = 0
        for block in range(args.blocks):
            offsets = schedule(per_block, interval,
                               None if args.fixed_pace else args.seed * 1000 + block)
            for name in ("scoring off", "scoring on") if block % 2 == 0 else (
                    "scoring on", "scoring off"):
                configure(name == "scoring on")
                cpu, wall = time.process_time(), time.perf_counter()
                results[name] += run_block(index, offsets)
                cpu_seconds[name] += time.process_time() - cpu
                wall_seconds[name] += time.perf_counter() - wall
                index += per_block
                if name == "scoring on":
                    wait = time.perf_counter()
                    flush_ok &= tracescore.force_flush(120_000)
                    flush_waits.append(time.perf_counter() - wait)
                    stats = tracescore.stats()
                    for key in totals:
                        totals[key] += getattr(stats, key)
        tracescore.shutdown(10_000)

    off, on = results["scoring off"], results["scoring on"]
    pace = "every" if args.fixed_pace else "(Poisson arrivals) every"
    print(f"decorated-call latency: agent sleeping 1 ms, one call {pace} {args.interval_ms:g} ms, "
          f"{len(on)} calls per configuration in {args.blocks} alternating blocks")
    print(f"scoring on: answer-relevancy (3 judge calls per score) on every call, judge answers "
          f"after {args.judge_delay * 1000:g} ms, max_concurrency={args.max_concurrency}, "
          f"judge server {'in this process' if args.judge_in_process else 'in a child process'}")
    print("(shared 2-core machine: numbers are noisy, the tail most of all)\n")
    header = f"{'':<14}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'max ms':>9}{'mean ms':>9}"
    print(header)
    print("-" * len(header))
    for name, samples in (("scoring off", off), ("scoring on", on)):
        row = [percentile(samples, 50), percentile(samples, 90), percentile(samples, 99),
               max(samples), statistics.fmean(samples)]
        print(f"{name:<14}" + "".join(f"{v * 1000:>9.3f}" for v in row))
    ratios = [percentile(on, q) / percentile(off, q) for q in (50, 90, 99)]
    ratios += [max(on) / max(off), statistics.fmean(on) / statistics.fmean(off)]
    print(f"{'ratio on/off':<14}" + "".join(f"{r:>9.2f}" for r in ratios))
    p50 = ratios[0]
    print(f"\np50 ratio {p50:.2f} (target <= 1.10: {'met' if p50 <= 1.10 else 'NOT met'}); "
          f"p99 ratio {ratios[2]:.2f}")
    load = {k: cpu_seconds[k] / wall_seconds[k] for k in cpu_seconds}
    print(f"CPU of this process: {load['scoring off']:.2f} cores with scoring off, "
          f"{load['scoring on']:.2f} with scoring on ({1000 / args.interval_ms:g} "
          f"scores/s wanted)")
    print("waits for the scores after each 'on' block: "
          + ", ".join(f"{w:.1f} s" for w in flush_waits)
          + f" (a score takes ~{3 * args.judge_delay:g} s; much more means a backlog)")
    print("scoring: " + ", ".join(f"{k}={v}" for k, v in totals.items())
          + f"; every score in before the next block: {flush_ok}")
    if totals["skipped_queue_full"]:
        print("WARNING: the scoring queue overflowed; slow the pace (--interval-ms) or raise "
              "--max-concurrency")
    return 0


if __name__ == "__main__":
    sys.exit(main())
