"""Scoring throughput (scores/s) end to end, against the ceiling of litellm itself.

Run: ``python benchmarks/bench_throughput.py [--scores 400] [--rounds 3] [--concurrency 8 16 32]``
Profile: add ``--profile`` (needs ``py-spy``; see benchmarks/README.md).

Against the loopback judge (``tests/judge_server.py`` in a child process, answering at once),
in one process and in alternating rounds:

- ``litellm ceiling``: raw ``litellm.acompletion`` calls from 16 asyncio tasks on one event
  loop, each call exactly the request tracescore's judge sends (captured from a warm-up score:
  same model, messages, ``response_format``, timeout), the user message made unique per call;
- ``tracescore, max_concurrency=N``: ``configure()`` with one ``ScoringRule(sample_rate=1.0)``,
  ``--scores`` decorated calls (each with a different question, so the judge's request cache
  answers none of them), then ``force_flush()``; scores/s = scores attached / (first call to
  the end of the flush).

The scorer makes ONE judge call per score: ``create_scorer`` with a single ``generate_score``
``JudgePrompt`` (default ``{"score": number}`` schema) and no reason step. So scores/s and judge
calls/s are the same number and comparable with the ceiling's calls/s.

The judge server runs in its own process so that its CPU is not charged to the process measured.
On this 2-core machine shared with other work, numbers are noisy: compare the percentages of
the same run, not runs.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from bench_latency import JudgeProcess  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult  # noqa: E402

import tracescore  # noqa: E402
from tracescore.scorers import JudgePrompt, create_scorer  # noqa: E402

SCORER_ID = "bench-one-call"
ROUTES = {"bench_one_call_score": {"score": 0.8}}
CEILING_TASKS = 16


class NoopExporter(SpanExporter):
    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


def one_call_scorer(judge: tracescore.Judge) -> Any:
    return create_scorer(
        id=SCORER_ID,
        description="How well the answer addresses the question, 0..1 (one judge call).",
        requires=("input", "output"),
        model=judge,
        generate_score=JudgePrompt(
            instructions="Rate from 0 to 1 how well the answer addresses the question.",
            prompt="{input}\n{output}",
        ),
    )


@tracescore.agent(name="support-bot")
def answer(question: str) -> str:
    return f"Paris is the capital of France. ({question[-8:]})"


def capture_request(scorer: Any, transport: str = "litellm") -> dict[str, Any]:
    """Score once through tracescore and keep the kwargs it gave ``litellm.acompletion`` (the
    direct transport's client takes the very same kwargs)."""
    seen: list[dict[str, Any]] = []
    if transport == "litellm":
        import litellm as owner
        attr = "acompletion"
    else:
        from tracescore._judge.direct import DirectClient as owner  # type: ignore[assignment]
        attr = "acompletion"
    real = getattr(owner, attr)

    if transport == "litellm":
        async def spy(*args: Any, **kwargs: Any) -> Any:
            seen.append(dict(kwargs))
            return await real(*args, **kwargs)
    else:
        async def spy(self: Any, call: dict[str, Any]) -> Any:  # type: ignore[misc]
            seen.append(dict(call))
            return await real(self, call)

    setattr(owner, attr, spy)
    try:
        result = scorer.run(input="What is the capital of France?", output="Paris.")
    finally:
        setattr(owner, attr, real)
    if result.score is None or len(seen) != 1:
        raise RuntimeError(f"the warm-up score failed: {result!r}, {len(seen)} judge call(s)")
    return seen[0]


_CEILING_CHILD = """
import asyncio, json, os, sys, time
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
import litellm
request = json.loads(sys.stdin.readline())
tasks = int(sys.argv[1])
messages = request["messages"]
loop = asyncio.new_event_loop()

async def run(calls):
    counter = iter(range(calls))

    async def worker():
        for i in counter:
            kwargs = dict(request)
            last = dict(messages[-1])
            last["content"] = f"{last['content']}\\n(call {i})"
            kwargs["messages"] = [*messages[:-1], last]
            response = await litellm.acompletion(**kwargs)
            if not response.choices[0].message.content:
                raise RuntimeError("empty judge answer")

    await asyncio.gather(*(worker() for _ in range(tasks)))

print("ready", flush=True)
for line in sys.stdin:
    calls = int(line)
    cpu, start = time.process_time(), time.perf_counter()
    loop.run_until_complete(run(calls))
    print(calls / (time.perf_counter() - start), (time.process_time() - cpu) / calls, flush=True)
"""


class CeilingProcess:
    """Raw ``litellm.acompletion`` calls in a child process with ``CEILING_TASKS`` asyncio tasks
    on one event loop. A child of its own: litellm keeps process-wide state bound to one event
    loop (its logging worker, its HTTP clients), and a second loop in this process would make it
    migrate between tracescore's judge loop and ours on every switch."""

    def __init__(self, request: dict[str, Any]) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CEILING_CHILD, str(CEILING_TASKS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        if self._proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the litellm ceiling process did not start")

    def round(self, calls: int) -> tuple[float, float]:
        """Run ``calls`` calls; return (calls/s, CPU seconds per call)."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(f"{calls}\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline().split()
        if len(line) != 2:
            raise RuntimeError("the litellm ceiling process failed")
        return float(line[0]), float(line[1])

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def tracescore_round(provider: TracerProvider, rule: Any, concurrency: int, scores: int,
                     round_index: int) -> tuple[float, float, Any]:
    """Returns (scores/s, CPU seconds of this process per score, stats)."""
    tracescore.configure(
        tracer_provider=provider, exporter=NoopExporter(), scoring=[rule],
        limits=tracescore.LimitsOptions(max_concurrency=concurrency, max_queue_size=scores + 100,
                                        score_timeout=300),
    )
    cpu, start = time.process_time(), time.perf_counter()
    for i in range(scores):
        answer(f"What is the capital of France? (round {round_index}, call {i}, c{concurrency})")
    done = tracescore.force_flush(300_000)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    stats = tracescore.stats()
    tracescore.shutdown(10_000)
    if not done:
        print(f"  warning: force_flush timed out at max_concurrency={concurrency}")
    scored = max(1, stats.scores_attached)
    return stats.scores_attached / elapsed, cpu / scored, stats


def start_profiler(out: str) -> subprocess.Popen[bytes] | None:
    py_spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(py_spy):
        print("--profile needs py-spy (pip install py-spy); profiling skipped")
        return None
    proc = subprocess.Popen(
        [py_spy, "record", "--pid", str(os.getpid()), "--rate", "250", "--format", "raw",
         "--gil", "--threads", "--nonblocking", "--full-filenames", "--output", out],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    time.sleep(1.0)  # py-spy attaches
    if proc.poll() is not None:
        err = proc.stderr.read().decode() if proc.stderr else ""
        print(f"py-spy could not attach: {err.strip()[:300]}; profiling skipped")
        return None
    return proc


def stop_profiler(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(2)  # SIGINT: py-spy writes its output and exits
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def _frame_key(frame: str) -> str:
    """``function (/full/path/file.py:123)`` -> ``package/file.py:function``."""
    name, _, where = frame.rpartition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "/work/main/", "/lib/python3."):
        if marker in path:
            path = path.split(marker, 1)[1]
            if marker == "/lib/python3.":
                path = path.split("/", 1)[-1]
            break
    if "/tracescore/" in path:
        path = "tracescore/" + path.split("/tracescore/", 1)[1]
    return f"{path}:{name or frame}"


# Where a GIL sample's time goes, by the first rule that matches its stack (frame keys).
_CATEGORIES: list[tuple[str, Callable[[list[str]], bool]]] = [
    ("tracescore -> litellm.completion_cost  (tracescore/_judge/metrics.py:cost)",
     lambda ks: any(k in ("tracescore/_judge/metrics.py:cost", "tracescore/_judge.py:_cost")
                    for k in ks)),
    ("tracescore -> JSON schema for response_format  (tracescore/_judge/output.py)",
     lambda ks: any(k in ("tracescore/_judge/output.py:response_format",
                          "tracescore/_judge.py:_response_format") for k in ks)),
    ("litellm.acompletion and its threads  (the raw call: the ceiling does this too)",
     lambda ks: any(k.startswith("litellm/") for k in ks)),
    ("tracescore, no litellm below  (scorer, judge, worker, processor, decorator)",
     lambda ks: any(k.startswith("tracescore/") for k in ks)),
    ("event loops, HTTP transport, thread pool  (asyncio, aiohttp, concurrent.futures)",
     lambda ks: True),
]


def summarize_profile(path: str, top: int = 15) -> None:
    """Where the GIL-holding samples went: by category, by thread, and the functions of
    tracescore's own share (file:function, self and inclusive)."""
    categories: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    own_self: collections.Counter[str] = collections.Counter()
    own_incl: collections.Counter[str] = collections.Counter()
    own_calls: collections.Counter[str] = collections.Counter()
    leaf_self: collections.Counter[str] = collections.Counter()
    total = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            stack, _, count_s = line.rstrip("\n").rpartition(" ")
            if not stack or not count_s.isdigit():
                continue
            count = int(count_s)
            frames = stack.split(";")
            thread = frames[0].split(": ", 1)[-1] if frames[0].startswith("thread") else "?"
            keys = [_frame_key(f) for f in frames if " (" in f]
            if not keys:
                continue
            total += count
            threads[thread.rstrip("_0123456789") + ("*" if thread[-1:].isdigit() else "")] += count
            leaf_self[keys[-1]] += count
            category = next(name for name, test in _CATEGORIES if test(keys))
            categories[category] += count
            if category.startswith(("tracescore -> ", "tracescore, ")):
                own_self[keys[-1]] += count
                for key in {k for k in keys if k.startswith("tracescore/")}:
                    own_incl[key] += count
                last = max(i for i, k in enumerate(keys) if k.startswith("tracescore/"))
                callee = keys[last + 1] if last + 1 < len(keys) else "(itself)"
                own_calls[f"{keys[last]} -> {callee}"] += count
    if not total:
        print("profile: no samples")
        return

    def pct(n: int) -> str:
        return f"{100 * n / total:5.1f}%"

    print(f"\nprofile: py-spy --gil (samples of whichever thread holds the GIL), {total} samples")
    print("by thread (* = a pool of numbered threads):")
    for name, n in threads.most_common(5):
        print(f"  {pct(n)}  {name}")
    print("by where the time goes:")
    for name, n in categories.most_common():
        print(f"  {pct(n)}  {name}")
    print(f"tracescore's own share, top {top} by self time (running function, any package):")
    for name, n in own_self.most_common(top):
        print(f"  {pct(n)}  {name}")
    print(f"tracescore's own share, top {top} calls out of tracescore (deepest tracescore "
          "frame -> what it called), inclusive:")
    for name, n in own_calls.most_common(top):
        print(f"  {pct(n)}  {name}")
    print(f"tracescore's own share, top {top} tracescore functions by inclusive time:")
    for name, n in own_incl.most_common(top):
        print(f"  {pct(n)}  {name}")
    print(f"whole process, top {top} by self time:")
    for name, n in leaf_self.most_common(top):
        print(f"  {pct(n)}  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scores", type=int, default=400, help="scores (and calls) per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--judge-model", default="openai/bench",
                        help="litellm model string sent to the loopback judge; a priced name "
                        "such as openai/gpt-4o-mini makes litellm compute a cost for each call")
    parser.add_argument("--transport", choices=["direct", "litellm"], default="direct",
                        help="the judge's transport (issue 15); default direct")
    parser.add_argument("--profile", action="store_true",
                        help="after the table, profile one more tracescore round with py-spy")
    parser.add_argument("--profile-concurrency", type=int, default=16)
    args = parser.parse_args()

    if args.transport == "litellm":
        import litellm  # noqa: F401  - its ~2.5 s import is not what we time

    with JudgeProcess(0.0, ROUTES) as server:
        judge = tracescore.Judge(args.judge_model, api_base=server.api_base, api_key="x",
                                 timeout=30, transport=args.transport)
        scorer = one_call_scorer(judge)
        rule = tracescore.ScoringRule(scorer=scorer, sample_rate=1.0)
        request = capture_request(scorer, args.transport)
        ceiling = CeilingProcess(request)
        provider = TracerProvider()
        try:
            # Warm-up: the ceiling's HTTP client, tracescore's worker and judge loops.
            ceiling.round(64)
            tracescore_round(provider, rule, args.concurrency[0], 64, -1)

            names = [f"litellm ceiling ({CEILING_TASKS} tasks)"]
            names += [f"tracescore, max_concurrency={c}" for c in args.concurrency]
            rates: dict[str, list[float]] = {n: [] for n in names}
            cpus: dict[str, list[float]] = {n: [] for n in names}
            totals: dict[str, collections.Counter[str]] = collections.defaultdict(
                collections.Counter)
            for r in range(args.rounds):
                for name in names[r % len(names):] + names[: r % len(names)]:
                    if name.startswith("litellm"):
                        rate, cpu = ceiling.round(args.scores)
                    else:
                        c = int(name.rsplit("=", 1)[1])
                        rate, cpu, stats = tracescore_round(provider, rule, c, args.scores, r)
                        for key in ("scores_attached", "scoring_errors", "skipped_queue_full"):
                            totals[name][key] += getattr(stats, key)
                    rates[name].append(rate)
                    cpus[name].append(cpu)
        finally:
            ceiling.close()

        top = statistics.median(rates[names[0]])
        print(f"scoring throughput against the loopback judge (answers at once, child process), "
              f"{args.rounds} alternating rounds x {args.scores} scores; one judge call per score; "
              f"model {args.judge_model}")
        print("(shared 2-core machine: numbers are noisy; compare within this run. CPU ms is "
              "the measured process's CPU time per score or per call)\n")
        header = (f"{'':<32}{'median/s':>9}{'best/s':>8}{'of ceiling':>11}{'CPU ms':>8}"
                  "  scored, errors, skipped")
        print(header)
        print("-" * len(header))
        for name in names:
            med = statistics.median(rates[name])
            tail = "" if name.startswith("litellm") else (
                f"  {totals[name]['scores_attached']}/{args.scores * args.rounds}, "
                f"{totals[name]['scoring_errors']}, {totals[name]['skipped_queue_full']}")
            print(f"{name:<32}{med:>9.1f}{max(rates[name]):>8.1f}{med / top:>11.0%}"
                  f"{statistics.median(cpus[name]) * 1000:>8.2f}{tail}")
        best = max(names[1:], key=lambda n: statistics.median(rates[n]))
        share = statistics.median(rates[best]) / top
        print(f"\nbest setting: {best.split(', ')[1]} at {share:.0%} of the litellm ceiling "
              f"(transport {args.transport}; issue 15's target with the direct transport: "
              f">= 200%: {'met' if share >= 2 else 'NOT met'}); CPU per score "
              f"{statistics.median(cpus[best]) / statistics.median(cpus[names[0]]):.2f}x "
              "the raw call's")

        if args.profile:
            out = os.path.join(tempfile.mkdtemp(prefix="tracescore-profile-"), "profile.txt")
            proc = start_profiler(out)
            if proc is not None:
                rate, _, _ = tracescore_round(provider, rule, args.profile_concurrency,
                                              args.scores, 99)
                stop_profiler(proc)
                print(f"\nprofiled round: max_concurrency={args.profile_concurrency}, "
                      f"{rate:.1f} scores/s (under the profiler); raw stacks in {out}")
                summarize_profile(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
