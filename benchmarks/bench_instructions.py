"""Instructions per call, per thread, under valgrind's callgrind: a measure of the hot path that
does not move with the machine's load (timed ratios on a shared 2-core machine move by 0.1-0.3
between runs of one tree).

Run: ``python benchmarks/bench_instructions.py [--variants base,unsampled,foreign1,foreign01]``
(needs ``valgrind``; about a minute per variant).

Each variant runs in a fresh interpreter under ``valgrind --tool=callgrind
--separate-threads=yes`` twice, with ``LOW`` and ``HIGH`` calls after the same warm-up; the
difference divided by ``HIGH - LOW`` is what one call costs each thread, start-up and warm-up
cancelled out. The garbage collector is frozen and disabled for the measured calls: which thread
runs a collection depends on timing, and it would move hundreds of thousands of instructions
between threads from one run to the next. After the measured calls the child waits for the
routing thread to route what still waits for it: valgrind runs one thread at a time, and without
that wait the exit's flush routed the rest on the calling thread, a share that varied from run
to run (for another instrumentation's spans the calling thread's figure moved from 0.55x to
1.87x between two runs of one tree). The sum over threads is exact where the spans routed do not
depend on random trace ids (rate 0 or 1).

Variants: ``base`` (a bare OTel span with the attribute work tracescore does, through the SDK's
``BatchSpanProcessor``), ``unsampled`` (``@tracescore.agent`` with a rule whose sample picks no
trace), ``foreign1``/``foreign01`` (another instrumentation's LLM span no rule selects, rate 1.0
and 0.1) and ``sdk`` (that LLM span through the ``BatchSpanProcessor``). The export batch is
4,096 spans so that no batch fills during the run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOW, HIGH = 1000, 3000

_CHILD = r"""
import gc, json, os, sys
sys.path.insert(0, {here!r})
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
import tracescore
from bench_frameworks import LLM_ATTRIBUTES, _NoOp, _NullScorer
variant, calls = sys.argv[1], int(sys.argv[2])

def bsp_provider():
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_NoOp(), max_queue_size=100_000))
    return provider

if variant == "base":
    tracer = bsp_provider().get_tracer("baseline")
    def call():
        with tracer.start_as_current_span("invoke_agent answer", attributes={{
                "gen_ai.operation.name": "invoke_agent", "openinference.span.kind": "AGENT",
                "tracescore.span.kind": "agent", "gen_ai.agent.name": "answer"}}) as span:
            span.set_attribute("input.value", json.dumps({{"question": "What is it?"}}))
            span.set_attribute("input.mime_type", "application/json")
            span.set_attribute("output.value", json.dumps("Paris."))
            span.set_attribute("output.mime_type", "application/json")
elif variant == "unsampled":
    from tracescore.scorers import create_content_similarity_scorer
    tracescore.configure(tracer_provider=TracerProvider(), exporter=_NoOp(), scoring=[
        tracescore.ScoringRule(scorer=create_content_similarity_scorer(), sample_rate=0.0,
                               ground_truth=lambda s, q: "Paris")])
    @tracescore.agent(name="answer")
    def answer(question):
        return "Paris."
    def call():
        answer("What is it?")
else:
    if variant == "sdk":
        provider = bsp_provider()
    else:
        provider = TracerProvider()
        rate = 1.0 if variant == "foreign1" else 0.1
        tracescore.configure(tracer_provider=provider, exporter=_NoOp(), scoring=[
            tracescore.ScoringRule(scorer=_NullScorer(), on="agent", sample_rate=rate)])
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    def call():
        tracer.start_span("ChatOpenAI", attributes=LLM_ATTRIBUTES).end()
for _ in range(200):
    call()
gc.collect(); gc.freeze(); gc.disable()
for _ in range(calls):
    call()
# The spans still waiting for the routing thread are routed there, not by the exit's flush on
# this thread (valgrind runs one thread at a time: how many wait here varies from run to run).
from tracescore._pipeline.runtime import RUNTIME
if RUNTIME.processor is not None:
    RUNTIME.processor._handoff.wait_idle(3600.0)
"""


def _threads(out_prefix: str) -> dict[int, int]:
    """Instructions per thread of one callgrind run (files ``prefix-NN``)."""
    totals = {}
    folder = Path(out_prefix).parent
    for path in folder.glob(Path(out_prefix).name + "-*"):
        match = re.search(r"^(?:summary|totals): (\d+)", path.read_text(), re.M)
        totals[int(path.name.rsplit("-", 1)[1])] = int(match.group(1)) if match else 0
    return totals


def measure(variant: str, folder: str) -> dict[int, float]:
    """Instructions per call per thread (1 is the calling thread) of ``variant``."""
    script = Path(folder) / "child.py"
    script.write_text(_CHILD.format(here=str(HERE)))
    env = {**os.environ, "LITELLM_OFFLINE_MODE": "true", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4096"}
    runs = {}
    for calls in (LOW, HIGH):
        prefix = f"{folder}/cg.{variant}.{calls}"
        subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                        f"--callgrind-out-file={prefix}", sys.executable, str(script), variant,
                        str(calls)], env=env, check=True, capture_output=True)
        runs[calls] = _threads(prefix)
    return {t: (runs[HIGH].get(t, 0) - runs[LOW].get(t, 0)) / (HIGH - LOW)
            for t in sorted(set(runs[LOW]) | set(runs[HIGH]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="base,unsampled,sdk,foreign1,foreign01")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for variant in args.variants.split(","):
            results[variant] = measure(variant, folder)
    print(f"instructions per call (callgrind, {HIGH} - {LOW} calls, GC frozen)")
    print(f"{'variant':<12}{'calling thread':>16}{'other threads':>16}{'all':>12}")
    for variant, threads in results.items():
        caller = threads.get(1, 0.0)
        others = sum(v for t, v in threads.items() if t != 1 and v > 0)
        print(f"{variant:<12}{caller:>16,.0f}{others:>16,.0f}{caller + others:>12,.0f}")
    for variant, base in (("unsampled", "base"), ("foreign1", "sdk"), ("foreign01", "sdk")):
        if variant in results and base in results:
            mine, theirs = results[variant], results[base]
            all_mine = sum(v for v in mine.values() if v > 0)
            all_theirs = sum(v for v in theirs.values() if v > 0)
            print(f"{variant} / {base}: calling thread {mine.get(1, 0) / theirs[1]:.2f}, "
                  f"all threads {all_mine / all_theirs:.2f}")


if __name__ == "__main__":
    main()
