"""Hostile input: scorer CPU, loop responsiveness, judge-reply repair, big retrievals (issue 10).

Run it on this tree, and on an older one for the "before" column:

    python benchmarks/bench_hostile.py
    git archive <old commit> tracescore | tar -x -C /tmp/before
    python benchmarks/bench_hostile.py --tree /tmp/before

Sections (each prints one table; CPU is process time, so it counts every thread):

1. ``scorers``: each heuristic scorer run directly on texts of N distinct words (no caps: the
   scorer's own complexity), then through the scorers' call site (``run_scorer``, with the
   default caps) on a 100,000-item output.
2. ``loop``: how late a no-op coroutine scheduled on the tracescore loop every 10 ms runs while
   a scorer burns ~2 s of CPU in a step, the step written ``async def`` (it runs on the loop)
   and plain ``def`` (it runs in the worker pool).
3. ``judge``: 20 ordinary judge calls, one every 100 ms, from the moment another call is answered
   with 300 KB of unterminated JSON; the slowest ordinary call and the hostile call's outcome.
   The judge is a ``ScriptedJudge`` in a child process (a judge inside the measured process
   would take its GIL).
4. ``retrieval``: the caller's cost of a ``@tracescore.retrieval`` returning 1,000,000 strings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import threading
import time
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")


def _words(count: int, salt: str) -> list[str]:
    return [f"{salt}{i}q{i * 7919 % 100_003}" for i in range(count)]


def _cpu(fn: Any) -> tuple[float, Any]:
    start = time.process_time()
    value = fn()
    return time.process_time() - start, value


def bench_scorers(sizes: list[int], budget: float) -> None:
    from tracescore.scorers import (
        create_completeness_scorer,
        create_content_similarity_scorer,
        create_keyword_coverage_scorer,
        create_textual_difference_scorer,
        create_tone_consistency_scorer,
    )

    scorers = {
        "completeness": create_completeness_scorer(),
        "content-similarity": create_content_similarity_scorer(),
        "keyword-coverage": create_keyword_coverage_scorer(),
        "textual-difference": create_textual_difference_scorer(),
        "tone-consistency": create_tone_consistency_scorer(),
    }
    print("\n## scorers: CPU seconds of one run() on N distinct words in and out (no caps)")
    print("| scorer | " + " | ".join(f"N={n:,}" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name, scorer in scorers.items():
        cells = []
        skipped = False
        for n in sizes:
            if skipped:
                cells.append("skipped")
                continue
            text_in = " ".join(_words(n, "a"))
            text_out = ". ".join(_words(n, "a")[::-1])
            seconds, _ = _cpu(lambda: scorer.run(input=text_in, output=text_out,  # noqa: B023
                                                 reference_tone=None))
            cells.append(f"{seconds:.3f}")
            skipped = seconds > budget  # the next size would take far longer
        print(f"| {name} | " + " | ".join(cells) + " |")

    try:
        from tracescore._pipeline.scoring import run_scorer
    except ImportError:
        return
    from tracescore._core.loop import run_blocking

    print("\n## scorers through the call site (run_scorer, default caps): 100,000-item output, "
          "100,000-word input")
    print("| scorer | CPU s | explanation (end) |")
    print("|---|---|---|")
    output = _words(100_000, "a")
    question = " ".join(_words(100_000, "a")[::-1])
    for name, scorer in scorers.items():
        seconds, outcome = _cpu(lambda scorer=scorer: run_blocking(run_scorer(
            scorer, {"input": question, "output": output})))
        print(f"| {name} | {seconds:.3f} | {outcome.explanation[-110:]} |")


def bench_loop(burn_seconds: float) -> None:
    from tracescore._core.loop import get_loop, run_blocking
    from tracescore.scorers import create_scorer

    def burn() -> float:
        end = time.process_time() + burn_seconds
        x = 0
        while time.process_time() < end:
            x += sum(range(1_000))
        return 1.0

    async def burn_on_loop(run: Any) -> float:
        return burn()

    variants = {
        "async def step (runs on the loop)": create_scorer(id="on-loop",
                                                           generate_score=burn_on_loop),
        "def step (runs in the worker pool)": create_scorer(id="in-pool",
                                                            generate_score=lambda run: burn()),
    }
    loop = get_loop()
    print(f"\n## loop: lateness of a no-op scheduled every 10 ms while a step burns "
          f"{burn_seconds:g} s of CPU")
    print("| variant | pings | median ms | p99 ms | max ms |")
    print("|---|---|---|---|---|")

    async def noop() -> None:
        return None

    for label, scorer in variants.items():
        done = threading.Event()
        lateness: list[float] = []

        def ping(done: threading.Event = done, lateness: list[float] = lateness) -> None:
            while not done.is_set():
                sent = time.perf_counter()
                asyncio.run_coroutine_threadsafe(noop(), loop).result()
                lateness.append((time.perf_counter() - sent) * 1000)
                time.sleep(0.01)

        pinger = threading.Thread(target=ping)
        pinger.start()
        try:
            run_blocking(scorer.arun(output="x"))
        finally:
            done.set()
            pinger.join()
        ordered = sorted(lateness)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        print(f"| {label} | {len(ordered)} | {statistics.median(ordered):.2f} | {p99:.1f} | "
              f"{ordered[-1]:.1f} |")


def _judge_server(port_queue: Any, stop: Any, reply_size: int) -> None:
    from tracescore.testing import ScriptedJudge

    with ScriptedJudge() as server:
        runaway = '{"verdict": "yes", "notes": "' + "blah, " * (reply_size // 6)
        server.route_prompt("hostile", [runaway, runaway])
        server.route("bench_verdict", {"verdict": "yes"})
        port_queue.put(server.api_base)
        stop.wait()


def bench_judge(reply_size: int, calls: int) -> None:
    from pydantic import BaseModel

    import tracescore
    from tracescore._core.loop import run_blocking
    from tracescore.scorers import JudgePrompt, create_scorer
    from tracescore.testing import SCRIPTED_JUDGE_API_KEY

    class Verdict(BaseModel):
        verdict: str

    context = multiprocessing.get_context("spawn")
    port_queue, stop = context.Queue(), context.Event()
    child = context.Process(target=_judge_server, args=(port_queue, stop, reply_size))
    child.start()
    api_base = port_queue.get(timeout=60)
    try:
        judge = tracescore.Judge("openai/bench-judge", api_base=api_base,
                                 api_key=SCRIPTED_JUDGE_API_KEY, timeout=120, max_retries=0,
                                 cache_size=0)
        scorer = create_scorer(
            id="bench-judged", model=judge, requires=(),
            analyze=JudgePrompt(instructions="Judge.", prompt="{input}",
                                output_schema=Verdict, name="bench_verdict"),
            generate_score=lambda run: 1.0,
        )
        run_blocking(scorer.arun(input="warm-up"))

        async def timed(text: str, start: float | None = None) -> tuple[float, str]:
            start = time.perf_counter() if start is None else start
            try:
                result = await scorer.arun(input=text)
                outcome = f"score {result.score}, {result.judge_calls} calls"
            except Exception as exc:  # noqa: BLE001 - the outcome is what we report
                outcome = type(exc).__name__
            return time.perf_counter() - start, outcome

        async def staggered(i: int, origin: float) -> tuple[float, str]:
            # One every 100 ms, timed from when it was due: a loop busy repairing the hostile
            # reply delays its start as much as its answer.
            due = origin + 0.1 * i
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            return await timed(f"ordinary {i}", due)

        async def scenario() -> list[tuple[float, str]]:
            origin = time.perf_counter()
            hostile = asyncio.ensure_future(timed("hostile"))
            others = [staggered(i, origin) for i in range(calls)]
            return [await hostile, *await asyncio.gather(*others)]

        cpu, results = _cpu(lambda: run_blocking(scenario()))
        (hostile_s, hostile_outcome), ordinary = results[0], results[1:]
        slowest = max(s for s, _ in ordinary)
        print(f"\n## judge: {calls} ordinary calls, one every 100 ms, beside a reply of "
              f"{reply_size:,} characters of unterminated JSON")
        print("| hostile call | its outcome | slowest ordinary call | median ordinary | CPU s |")
        print("|---|---|---|---|---|")
        print(f"| {hostile_s:.2f} s | {hostile_outcome} | {slowest:.2f} s | "
              f"{statistics.median(s for s, _ in ordinary):.3f} s | {cpu:.2f} |")
    finally:
        stop.set()
        child.join(timeout=10)


def bench_retrieval(count: int) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    import tracescore

    tracescore.configure(tracer_provider=TracerProvider(), exporter=False)
    documents = ["a short document"] * count

    @tracescore.retrieval
    def search(query: str) -> list[str]:
        return documents

    search("warm-up")
    wall = []
    for _ in range(3):
        start = time.perf_counter()
        search("q")
        wall.append(time.perf_counter() - start)
    print(f"\n## retrieval: the caller's cost of a retrieval returning {count:,} strings")
    print(f"| median of 3 | {statistics.median(wall) * 1000:.1f} ms |")
    tracescore.shutdown()

    from tracescore._core.serialize import to_json

    try:
        text = to_json({"n": 10**100_000, "x": float("nan")})
        json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        verdict = f"strict JSON: {text}"
    except Exception as exc:  # noqa: BLE001 - the outcome is what we report
        verdict = f"{type(exc).__name__}: {str(exc)[:80]}"
    print(f"| to_json({{'n': 10**100000, 'x': nan}}) | {verdict} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", help="import tracescore from this folder (an older checkout)")
    parser.add_argument("--only", nargs="*",
                        choices=["scorers", "loop", "judge", "retrieval"],
                        default=["scorers", "loop", "judge", "retrieval"])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 5_000, 20_000])
    parser.add_argument("--budget", type=float, default=20.0,
                        help="skip larger sizes of a scorer once one run took this many s")
    parser.add_argument("--burn", type=float, default=2.0)
    parser.add_argument("--reply", type=int, default=300_000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--documents", type=int, default=1_000_000)
    args = parser.parse_args()
    if args.tree:
        sys.path.insert(0, os.path.abspath(args.tree))
    import tracescore

    print(f"tracescore from {os.path.dirname(tracescore.__file__)}; load {os.getloadavg()}")
    if "scorers" in args.only:
        bench_scorers(args.sizes, args.budget)
    if "loop" in args.only:
        bench_loop(args.burn)
    if "judge" in args.only:
        bench_judge(args.reply, args.calls)
    if "retrieval" in args.only:
        bench_retrieval(args.documents)


if __name__ == "__main__":
    main()
