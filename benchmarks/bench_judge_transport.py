"""The judge's transports side by side (issue 15): CPU per score of every LLM scorer, CPU per
HTTP request of the candidate clients, and what a judge leaves in the application (RSS,
modules, tracked objects, full-GC pauses).

Run: ``python benchmarks/bench_judge_transport.py [--parts cpu http gc] [--rounds 3]``

- ``cpu``: every LLM scorer of ``tracescore.scorers`` (``bench_judge_calls``'s sample and
  scripted replies) run ``--runs`` times per round with a fresh judge of each transport
  (``direct``, ``litellm``; no request cache), rounds alternating; CPU per score is this
  process's CPU time (``time.process_time``) over the runs. The judge server runs in a child
  process, so its CPU is not counted.
- ``http``: one request body (a judge's, with its ``response_format``) sent ``--requests``
  times from 4 tasks at a time on one loop, through one shared aiohttp session, one httpx
  ``AsyncClient`` and ``litellm.acompletion``, rounds alternating: CPU ms per request.
- ``gc``: a fresh interpreter per mode (no judge; direct in process; litellm in process; each
  out of process; litellm in process then ``gc.freeze()``) configures tracescore, scores 5
  spans with answer relevancy, then reports RSS, ``len(sys.modules)``, tracked objects
  (``len(gc.get_objects())``) and the duration of 15 full collections timed with
  ``gc.callbacks`` (median and max).

On the shared 2-core machine, compare numbers within one run; the script prints the load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

_SERVER = """
import sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/benchmarks")
from bench_judge_calls import route_all
from tracescore.testing import ScriptedJudge
server = ScriptedJudge()
route_all(server)
print(server.api_base, flush=True)
sys.stdin.read()
"""


class ServerProcess:
    """The scripted judge with every scorer's replies, in a child process."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(REPO)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.api_base = self.proc.stdout.readline().strip()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


# -- cpu ------------------------------------------------------------------------------------
def part_cpu(server: ServerProcess, rounds: int, runs: int) -> None:
    import inspect

    import bench_judge_calls as calls

    import tracescore

    factories = calls.llm_factories()
    per: dict[tuple[str, str], list[float]] = {}
    counts: dict[str, int] = {}

    def judge(transport: str) -> Any:
        return tracescore.Judge("openai/bench", api_base=server.api_base, api_key="x",
                                timeout=30, cache_size=0, transport=transport)

    built: dict[tuple[str, str], Any] = {}
    for name, factory in factories.items():
        options = {k: v for k, v in calls.FACTORY_OPTIONS.items()
                   if k in inspect.signature(factory).parameters}
        for transport in ("direct", "litellm"):
            scorer = factory(model=judge(transport), **options)
            if not scorer.uses_judge:
                break
            scorer.run(**calls.RUN_ARGUMENTS)  # warm-up: imports, prices, connections
            built[(name, transport)] = scorer
    for _ in range(rounds):
        for (name, transport), scorer in built.items():
            started = time.process_time()
            for _ in range(runs):
                result = scorer.run(**calls.RUN_ARGUMENTS)
            per.setdefault((name, transport), []).append(
                (time.process_time() - started) / runs * 1000)
            counts[name] = getattr(result, "judge_calls", None) or counts.get(name, 0)
    print(f"\nCPU per score (ms, median of {rounds} rounds x {runs} runs; load {load()})")
    print(f"{'scorer':44} {'calls':>5} {'direct':>14} {'litellm':>14} {'ratio':>6}")
    for name in sorted({n for n, _ in built}):
        d, l_ = per[(name, "direct")], per[(name, "litellm")]
        md, ml = statistics.median(d), statistics.median(l_)
        print(f"{name:44} {counts.get(name, 0):>5} {md:7.1f} ({min(d):.1f}-{max(d):.1f})"
              f" {ml:7.1f} ({min(l_):.1f}-{max(l_):.1f}) {md / ml:6.2f}")


# -- http -----------------------------------------------------------------------------------
def part_http(server: ServerProcess, rounds: int, requests: int) -> None:
    import aiohttp
    import httpx
    import litellm
    from pydantic import BaseModel

    from tracescore._judge import strict_schema

    class Statements(BaseModel):
        statements: list[str]

    fmt = strict_schema.response_format(Statements, "answer_relevancy_statements")
    body = {"model": "bench", "temperature": 0, "response_format": fmt,
            "messages": [{"role": "system", "content": "Split the answer. " * 20},
                         {"role": "user", "content": "<answer>Paris is in France.</answer>"}]}
    url = f"{server.api_base}/chat/completions"
    headers = {"Authorization": "Bearer x", "Content-Type": "application/json"}

    async def run(kind: str, clients: dict[str, Any]) -> float:
        sem = asyncio.Semaphore(4)  # the stdlib server's listen backlog is 5

        async def one(i: int) -> None:
            async with sem:
                msg = dict(body)
                msg["messages"] = [body["messages"][0],
                                   {"role": "user", "content": f"<answer>{i}</answer>"}]
                if kind == "aiohttp":
                    async with clients["aiohttp"].post(url, data=json.dumps(msg).encode(),
                                                       headers=headers) as r:
                        json.loads(await r.read())
                elif kind == "httpx":
                    r = await clients["httpx"].post(url, content=json.dumps(msg).encode(),
                                                    headers=headers)
                    r.json()
                else:
                    await litellm.acompletion(model="openai/bench", api_base=server.api_base,
                                              api_key="x", messages=msg["messages"],
                                              response_format=fmt, temperature=0)

        started = time.process_time()
        await asyncio.gather(*(one(i) for i in range(requests)))
        return (time.process_time() - started) / requests * 1000

    async def main() -> dict[str, list[float]]:
        clients = {"aiohttp": aiohttp.ClientSession(), "httpx": httpx.AsyncClient()}
        out: dict[str, list[float]] = {}
        for kind in ("aiohttp", "httpx", "litellm"):
            await run(kind, clients)  # warm-up
        for _ in range(rounds):
            for kind in ("aiohttp", "httpx", "litellm"):
                out.setdefault(kind, []).append(await run(kind, clients))
        await clients["aiohttp"].close()
        await clients["httpx"].aclose()
        return out

    out = asyncio.run(main())
    print(f"\nCPU per HTTP request (ms; {requests} requests x {rounds} rounds, 4 in flight; "
          f"load {load()})")
    for kind, values in out.items():
        print(f"{kind:10} {statistics.median(values):6.2f} "
              f"({min(values):.2f}-{max(values):.2f})")


# -- gc -------------------------------------------------------------------------------------
_GC_CHILD = """
import gc, json, os, statistics, sys, time
os.environ["LITELLM_OFFLINE_MODE"] = "true"
mode = sys.argv[1]
sys.path.insert(0, sys.argv[2])
import tracescore
from tracescore.scorers import create_answer_relevancy_scorer
from tracescore.testing import InMemoryScoreExporter, ScriptedJudge, make_judge

server = ScriptedJudge()
server.route("answer_relevancy_statements", {"statements": ["Paris."]})
server.route("answer_relevancy_verdicts", {"results": [{"result": "yes", "reason": "r"}]})
server.route("answer_relevancy_reason", {"reason": "On topic."})
rules = []
if mode != "none":
    transport = "litellm" if "litellm" in mode else "direct"
    judge = make_judge(server, transport=transport, out_of_process=mode.startswith("process"),
                       cache_size=0, timeout=60)
    rules = [tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(model=judge))]
tracescore.configure(exporter=InMemoryScoreExporter(), scoring=rules)

@tracescore.agent
def answer(q):
    return "Paris."

for i in range(5):
    answer(f"Capital of France? {i}")
assert tracescore.force_flush(120_000)
if mode.endswith("freeze"):
    gc.freeze()
pauses, started = [], []
def timer(phase, info):
    if info["generation"] == 2:
        if phase == "start":
            started.append(time.perf_counter())
        else:
            pauses.append((time.perf_counter() - started.pop()) * 1000)
gc.callbacks.append(timer)
for _ in range(15):
    gc.collect()
gc.callbacks.remove(timer)
rss = int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) // 1024
print(json.dumps({"rss_mb": rss, "modules": len(sys.modules),
                  "objects": len(gc.get_objects()), "litellm": "litellm" in sys.modules,
                  "gc_median_ms": statistics.median(pauses), "gc_max_ms": max(pauses)}))
server.close()
tracescore.shutdown()
"""

GC_MODES = ("none", "direct", "litellm", "process-direct", "process-litellm", "litellm-freeze")


def part_gc(rounds: int) -> None:
    rows: dict[str, list[dict[str, Any]]] = {}
    for _ in range(rounds):
        for mode in GC_MODES:
            run = subprocess.run([sys.executable, "-c", _GC_CHILD, mode, str(REPO)],
                                 capture_output=True, text=True, timeout=300)
            if run.returncode:
                print(f"{mode}: failed\n{run.stderr[-2000:]}")
                continue
            rows.setdefault(mode, []).append(json.loads(run.stdout.strip().splitlines()[-1]))
    print(f"\nThe application process after 5 scores ({rounds} fresh interpreters per mode, "
          f"medians; load {load()})")
    print(f"{'judge':16} {'RSS MB':>7} {'modules':>8} {'objects':>9} {'litellm':>8} "
          f"{'full GC ms (range)':>22}")
    for mode, results in rows.items():
        def med(key: str, results: list[dict[str, Any]] = results) -> float:
            return float(statistics.median(r[key] for r in results))
        gc_values = [r["gc_median_ms"] for r in results]
        print(f"{mode:16} {med('rss_mb'):7.0f} {med('modules'):8.0f} {med('objects'):9.0f} "
              f"{str(results[0]['litellm']):>8} {statistics.median(gc_values):9.1f} "
              f"({min(gc_values):.1f}-{max(r['gc_max_ms'] for r in results):.1f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", nargs="+", default=["cpu", "http", "gc"],
                        choices=["cpu", "http", "gc"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5, help="scores per scorer per round")
    parser.add_argument("--requests", type=int, default=300, help="HTTP requests per round")
    args = parser.parse_args()
    print(f"load at start: {load()}")
    if "gc" in args.parts:
        part_gc(args.rounds)
    if "cpu" in args.parts or "http" in args.parts:
        server = ServerProcess()
        try:
            if "http" in args.parts:
                part_http(server, args.rounds, args.requests)
            if "cpu" in args.parts:
                part_cpu(server, args.rounds, args.runs)
        finally:
            server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
