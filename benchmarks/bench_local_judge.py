"""The HaluEval demo against a one-slot llama.cpp server, as the local-judge guide writes it
(issue 26): exit code, LLM scores, seconds, scores per minute and the HTTP 500s the server
answered, per checkout.

Each run starts llama.cpp's Python server (one slot: it serves one request at a time) on a free
loopback port with the model given, runs ``examples/halueval_rag.py --judge judge
--judge-api-base URL --limit N`` of a checkout with default settings, and reads the server's
access log. With several ``--tree``s the runs alternate between them, so their ratios are
same-run ratios. Needs ``scripts/llama_server.sh`` (``TRACESCORE_LLAMA_PYTHON``, and
``TRACESCORE_LLAMA_MODEL`` or ``--model``)::

    eval "$(bash scripts/llama_server.sh | grep '^export ')"
    git archive 4f079ff | tar -x -C /tmp/before
    python benchmarks/bench_local_judge.py --tree /tmp/before --tree . --rounds 2 --limit 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

LLM_SCORERS = ("answer-relevancy", "context-precision")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(python: str, model: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            [python, "-m", "llama_cpp.server", "--model", model, "--model_alias", "judge",
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", "2"],
            stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama.cpp server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5):
                return process
        except OSError:
            time.sleep(1)
    process.kill()
    raise RuntimeError("llama.cpp server did not start in 300 s")


def load() -> float:
    return os.getloadavg()[0]


def run_demo(tree: Path, port: int, limit: int, workdir: Path, timeout: float) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TRACESCORE_", "OTEL_", "OPENAI_"))}
    env.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(tree),
               TRACESCORE_EXPORT_FILE=str(workdir / "traces.jsonl"))
    started = time.monotonic()
    load_before = load()
    proc = subprocess.run(
        [sys.executable, str(tree / "examples" / "halueval_rag.py"), "--json", "--judge", "judge",
         "--judge-api-base", f"http://127.0.0.1:{port}/v1", "--limit", str(limit)],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - started
    try:
        summary = json.loads(proc.stdout)
    except ValueError:
        summary = {"scorers": {}}
    cells = {s: summary["scorers"].get(s, {}) for s in LLM_SCORERS}
    scored = sum(int(c.get("scored", 0)) for c in cells.values())
    return {"rc": proc.returncode, "seconds": seconds, "scored": scored,
            "not_scorable": sum(int(c.get("not_scorable", 0)) for c in cells.values()),
            "errors": {s: c.get("error_types", {}) for s, c in cells.items()},
            "scores_per_minute": scored / seconds * 60, "load": (load_before + load()) / 2,
            "stderr_tail": proc.stderr[-600:]}


def server_counts(log: Path) -> tuple[int, int]:
    text = log.read_text(errors="replace")
    posts = re.findall(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})', text)
    return len(posts), sum(1 for status in posts if status == "500")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", type=Path,
                        help="checkout to run the demo of (repeatable; default: this one)")
    parser.add_argument("--model", default=os.environ.get("TRACESCORE_LLAMA_MODEL"),
                        help="GGUF model (default TRACESCORE_LLAMA_MODEL: SmolLM2-135M)")
    parser.add_argument("--limit", type=int, default=3, help="demo rows (2 LLM scores each)")
    parser.add_argument("--rounds", type=int, default=1, help="runs per checkout, alternating")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per demo run")
    args = parser.parse_args()
    python = os.environ.get("TRACESCORE_LLAMA_PYTHON")
    if not (python and args.model):
        sys.exit("run scripts/llama_server.sh and export what it prints")
    trees = [t.resolve() for t in args.tree or [Path(__file__).resolve().parents[1]]]
    results: dict[Path, list[dict[str, Any]]] = {t: [] for t in trees}
    for round_number in range(args.rounds):
        for tree in trees:
            with tempfile.TemporaryDirectory() as tmp:
                port, log = free_port(), Path(tmp) / "server.log"
                server = start_server(python, args.model, port, log)
                try:
                    result = run_demo(tree, port, args.limit, Path(tmp), args.timeout)
                finally:
                    server.terminate()
                    try:
                        server.wait(timeout=10)
                    except subprocess.TimeoutExpired:  # busy with calls the demo gave up on
                        server.kill()
                        server.wait(timeout=30)
                result["requests"], result["http_500"] = server_counts(log)
            results[tree].append(result)
            print(f"round {round_number + 1} {tree}: " + json.dumps(
                {k: (round(v, 2) if isinstance(v, float) else v) for k, v in result.items()
                 if k != "stderr_tail"}), flush=True)
            if result["rc"] != 0:
                print("  stderr: " + result["stderr_tail"].replace("\n", "\n  "), flush=True)
    print(f"\nmodel {Path(args.model).name}, --limit {args.limit} "
          f"({2 * args.limit} LLM scores a run), one slot")
    print(f"{'checkout':<40} {'exit':>6} {'scored':>8} {'s/run':>8} {'scores/min':>11} "
          f"{'500s/run':>9} {'load':>5}")
    for tree, runs in results.items():
        print(f"{str(tree)[-40:]:<40} {','.join(str(r['rc']) for r in runs):>6} "
              f"{statistics.median(r['scored'] for r in runs):>8g} "
              f"{statistics.median(r['seconds'] for r in runs):>8.0f} "
              f"{statistics.median(r['scores_per_minute'] for r in runs):>11.2f} "
              f"{statistics.median(r['http_500'] for r in runs):>9g} "
              f"{statistics.median(r['load'] for r in runs):>5.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
