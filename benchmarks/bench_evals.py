"""``run_evals`` throughput against a judge that takes 100 ms per call, next to the judge-bound
ceiling measured in the same process.

Run: ``python benchmarks/bench_evals.py [--concurrency 1 4 16] [--rounds 3] [--delay 0.1]``

The judge is the tests' loopback OpenAI-compatible server (``tests/judge_server.py``) with a
fixed latency, reached through litellm. One LLM scorer, answer relevancy, makes three sequential
judge calls per item (statements, verdicts, reason), so an item costs at least 3 x latency.

For each concurrency ``c`` the script measures, in alternating rounds (median reported):

- ``run_evals``: items per second of ``run_evals(concurrency=c)`` over ``8 * c`` distinct items
  (at least 16), untraced, and ``traced`` with tracescore configured (no-op exporter);
- ``ceiling``: the same number of "items" of three sequential raw ``Judge.acomplete`` calls,
  ``c`` at a time, through the same ``Judge``: what the judge path allows without run_evals;
- ``ideal``: ``c / (3 * latency)``, the bound with zero overhead.

The judge's request cache is off (``cache_size=0``) and every item's text differs, so every
call reaches the server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult  # noqa: E402
from pydantic import BaseModel  # noqa: E402

import tracescore  # noqa: E402
from tracescore.scorers import create_answer_relevancy_scorer  # noqa: E402
from tracescore.testing import ScriptedJudge as JudgeServer  # noqa: E402
from tracescore.testing import make_judge

CALLS_PER_ITEM = 3


class NoopExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class Pong(BaseModel):
    reason: str


def script(server: JudgeServer) -> None:
    server.route(
        "answer_relevancy_statements",
        {"statements": ["Paris is the capital of France.", "It is large."]},
    )
    server.route(
        "answer_relevancy_verdicts",
        {"results": [{"result": "yes", "reason": "on topic"}] * 2},
    )
    server.route("answer_relevancy_reason", {"reason": "Relevant."})
    server.route("bench_ping", {"reason": "pong"})


def items(n: int, tag: str) -> list[dict[str, Any]]:
    return [{"input": f"[{tag}-{i}] What is the capital of France?"} for i in range(n)]


def target(question: str) -> str:
    # Distinct per item, so no two judge prompts are the same.
    return f"Paris is the capital of France. It is large. ({question[:12]})"


def eval_rate(judge: Any, concurrency: int, n: int, tag: str) -> float:
    scorer = create_answer_relevancy_scorer(model=judge)
    start = time.perf_counter()
    result = tracescore.run_evals(
        data=items(n, tag),
        scorers=[scorer],
        target=target,
        concurrency=concurrency,
        progress=False,
    )
    elapsed = time.perf_counter() - start
    summary = result.scorers["answer-relevancy"]
    if summary.scored != n:
        raise SystemExit(f"benchmark run was not clean: {result.table()}")
    return n / elapsed


def ceiling_rate(judge: Any, concurrency: int, n: int, tag: str) -> float:
    async def one_item(i: int) -> None:
        for step in range(CALLS_PER_ITEM):
            await judge.acomplete(
                system="Answer with a reason.",
                user=f"[{tag}-{i}-{step}] ping",
                schema=Pong,
                name="bench_ping",
            )

    async def main() -> float:
        semaphore = asyncio.Semaphore(concurrency)

        async def bounded(i: int) -> None:
            async with semaphore:
                await one_item(i)

        start = time.perf_counter()
        await asyncio.gather(*(bounded(i) for i in range(n)))
        return n / (time.perf_counter() - start)

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.1, help="judge latency in seconds")
    args = parser.parse_args()

    with JudgeServer() as server:
        script(server)
        server.delay = args.delay
        judge = make_judge(server, cache_size=0, timeout=30)
        # Warm-up: litellm's import and first client, outside every measurement.
        eval_rate(judge, 2, 2, "warm")
        ceiling_rate(judge, 2, 2, "warm")

        rows = []
        for c in args.concurrency:
            n = max(16, 8 * c)
            evals: list[float] = []
            traced: list[float] = []
            ceilings: list[float] = []
            for r in range(args.rounds):
                tracescore.shutdown()
                evals.append(eval_rate(judge, c, n, f"e{c}-{r}"))
                ceilings.append(ceiling_rate(judge, c, n, f"c{c}-{r}"))
                tracescore.configure(service_name="bench-evals", exporter=NoopExporter())
                traced.append(eval_rate(judge, c, n, f"t{c}-{r}"))
                tracescore.shutdown()
            rows.append(
                (
                    c,
                    n,
                    statistics.median(evals),
                    statistics.median(traced),
                    statistics.median(ceilings),
                    c / (CALLS_PER_ITEM * args.delay),
                )
            )
        total_requests = len(server.requests)

    print(
        f"run_evals, one LLM scorer (answer-relevancy: {CALLS_PER_ITEM} judge calls per item), "
        f"judge latency {args.delay * 1000:.0f} ms, median of {args.rounds} rounds"
    )
    header = (
        "concurrency",
        "items",
        "run_evals it/s",
        "traced it/s",
        "ceiling it/s",
        "ideal it/s",
        "evals/ceiling",
    )
    print(" | ".join(header))
    print(" | ".join("-" * len(h) for h in header))
    for c, n, ev, tr, ceil, ideal in rows:
        cells = (
            str(c),
            str(n),
            f"{ev:.2f}",
            f"{tr:.2f}",
            f"{ceil:.2f}",
            f"{ideal:.2f}",
            f"{ev / ceil:.0%}",
        )
        print(" | ".join(cell.rjust(len(h)) for cell, h in zip(cells, header, strict=True)))
    print(f"judge requests served: {total_requests}")


if __name__ == "__main__":
    main()
