"""The judge-quality benchmark runner: LLM scorers against labelled public data, resumable.

Each finished (item, scorer, prompt set, model) is one JSON line appended to the results file
as soon as it lands; a rerun skips what is there, so a run of hours is split into as many runs
as needed. What to run, in what order, is a plan (``plan.json``: a list of tasks, done first to
last; the runner re-reads it between items, so it can be edited while a run goes on):

    {"engine": "tracescore", "prompt_set": "default", "scorers": ["faithfulness",
     "hallucination"], "split": "heldout", "first": 0, "count": 40}

``engine`` is ``tracescore`` (the scorers of this checkout: ``faithfulness`` and
``hallucination`` with the task's ``prompt_set``, ``support-check`` and ``faithfulness-cascade``
under any label, e.g. ``"v1"``), or ``ragas`` / ``deepeval`` (run
by ``peers.py`` in a virtualenv of their own, ``--peers-python``). Items are HaluEval QA rows
taken in the order of ``split.json`` (``first`` and ``count`` count rows; each row gives two
items, its right answer, label pass, and its hallucinated answer, label fail). The prompt set
``default`` in a task means the Mastra prompts for both scorers (``mastra``): it is the label
of the rows scored before hallucination's default became ``tracescore-v2``, kept so that they
resume under the same key; new tasks name their set.

The judge is any OpenAI-compatible server (``--server URL``, the model served as ``--model``);
without ``--server`` llama.cpp's server is started on loopback with ``TRACESCORE_QWEN_GGUF``.
Every record carries the model file's sha256 (``--model-file``; computed once and cached beside
the results) and the server's version, so results of different models never mix.

Run (see docs/judge-quality.md)::

    eval "$(scripts/llama_server.sh --qwen | grep '^export ')"
    python benchmarks/judge_quality/run.py --plan benchmarks/judge_quality/plan.json \\
        --results benchmarks/judge_quality/results/qwen2.5-coder-1.5b-q4_k_m.jsonl
    python benchmarks/judge_quality/report.py
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere: this checkout's tracescore
    sys.path.insert(0, str(REPO))

DATA = REPO / "examples" / "data" / "halueval_qa_200.jsonl"
SPLIT = HERE / "split.json"
PEERS = HERE / "peers.py"
THRESHOLD = 0.5
LABEL_OF = {"right": "pass", "halluc": "fail"}


def load_rows() -> list[dict[str, str]]:
    """The HaluEval QA rows, in file order."""
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def items_of(split: str, first: int, count: int, rows: list[dict[str, str]],
             order: dict[str, list[int]]) -> list[dict[str, Any]]:
    """Two labelled items per row of ``split[first:first + count]``, right answer first."""
    out = []
    for row in order[split][first:first + count]:
        data = rows[row]
        for answer, key in (("right", "right_answer"), ("halluc", "hallucinated_answer")):
            out.append({"id": f"r{row}-{answer}", "row": row, "answer": answer, "split": split,
                        "label": LABEL_OF[answer], "input": data["question"],
                        "context": [data["knowledge"]], "output": data[key]})
    return out


def record_key(record: dict[str, Any]) -> tuple[str, str, str, str]:
    return (record["id"], record["scorer"], record["prompt_set"], record["model_sha256"])


def done_keys(results: Path) -> set[tuple[str, str, str, str]]:
    """Keys of the finished records (an error is not finished: it is tried again)."""
    keys: set[tuple[str, str, str, str]] = set()
    if not results.exists():
        return keys
    for line in results.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by an interruption
        if record.get("status") in ("scored", "not_scorable"):
            keys.add(record_key(record))
    return keys


def append(results: Path, record: dict[str, Any]) -> None:
    results.parent.mkdir(parents=True, exist_ok=True)
    with results.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        fh.flush()


def sha256_of(path: Path, cache_dir: Path) -> str:
    """The file's sha256, cached by path, size and mtime (hashing 1.1 GB takes a while)."""
    stat = path.stat()
    cache_dir.mkdir(parents=True, exist_ok=True)
    tag = hashlib.sha256(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    cached = cache_dir / f"sha256-{tag.hexdigest()[:16]}"
    if cached.exists():
        return cached.read_text().strip()
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    cached.write_text(digest.hexdigest() + "\n")
    return digest.hexdigest()


def start_server(python: str, model: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    """llama.cpp's server on loopback serving ``model`` as ``judge``, once it answers."""
    with log.open("ab") as out:
        process = subprocess.Popen(
            [python, "-m", "llama_cpp.server", "--model", model, "--model_alias", "judge",
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
             "--n_threads", "2"], stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the llama.cpp server exited ({process.returncode}); see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5):
                return process
        except OSError:
            time.sleep(2)  # a benchmark, not a test: polling the server's readiness
    process.terminate()
    raise SystemExit(f"the llama.cpp server did not answer within 600 s; see {log}")


def load1() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


_JUDGES: dict[bool, Any] = {}


def judge_for(args: argparse.Namespace, share: bool) -> Any:
    """One judge per run (it learns once that llama.cpp refuses ``json_schema``): with a
    request cache when the prompt set's scorers share requests (``tracescore-v1`` and
    ``-v2``), else without, so that each scorer's cost is its own."""
    if share not in _JUDGES:
        import tracescore

        _JUDGES[share] = tracescore.Judge(
            f"openai/{args.model}", api_base=args.server,
            api_key=os.environ.get(args.api_key_env, "none") if args.api_key_env else "none",
            timeout=args.timeout, max_retries=1, cache_size=64 if share else 0,
            response_format=args.response_format)
    return _JUDGES[share]


async def run_tracescore(item: dict[str, Any], scorers: list[str], prompt_set: str,
                         args: argparse.Namespace, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """Score one item with tracescore's scorers. The default prompt set runs each scorer on
    its own (no shared requests); ``tracescore-v1``'s scorers send identical requests, which
    one judge's cache answers once (the report gives each scorer its standalone cost). The plan
    runs ``tracescore-v2``'s hallucination on its own, so its cost is its own."""
    from tracescore import scorers as prebuilt

    shared = judge_for(args, share=prompt_set != "default")
    factories = {"faithfulness": prebuilt.create_faithfulness_scorer,
                 "hallucination": prebuilt.create_hallucination_scorer,
                 "support-check": prebuilt.create_support_check_scorer,
                 "faithfulness-cascade": prebuilt.create_faithfulness_cascade_scorer}
    out = []
    for scorer_id in scorers:
        # The cascade's judge has no cache: what it spends on the answers the check is unsure
        # of is its own cost, measured.
        judge = judge_for(args, share=False) if scorer_id == "faithfulness-cascade" else shared
        options: dict[str, Any] = {}
        if scorer_id in ("faithfulness", "hallucination"):
            options = {"model": judge,
                       "prompt_set": "mastra" if prompt_set == "default" else prompt_set}
        elif scorer_id == "faithfulness-cascade":
            options = {"model": judge}
        scorer = factories[scorer_id](**options)
        hits_before = judge.cache_info().hits if judge.cache_size else 0
        started = time.perf_counter()
        record: dict[str, Any] = {}
        try:
            result = await scorer.arun(input=item["input"], output=item["output"],
                                       context=item["context"])
            record = {
                "status": "not_scorable" if result.score is None else "scored",
                "score": result.score, "error": None, "reason": result.reason[:600],
                "claims": (result.preprocess_step_result or {}).get("claims"),
                "verdicts": (result.analyze_step_result or {}).get("verdicts"),
                "judge_calls": result.judge_calls, "prompt_tokens": result.input_tokens,
                "completion_tokens": result.output_tokens,
            }
        except Exception as exc:  # noqa: BLE001 - a benchmark records every failure
            record = {"status": "error", "score": None,
                      "error": f"{type(exc).__name__}: {exc}"[:600],
                      "judge_calls": None, "prompt_tokens": None, "completion_tokens": None}
        record["cache_hits"] = (judge.cache_info().hits - hits_before) if judge.cache_size else 0
        record["seconds"] = round(time.perf_counter() - started, 2)
        out.append({**base_record(item, scorer_id, prompt_set, "tracescore", meta), **record})
    return out


def run_peer(task: dict[str, Any], items: list[dict[str, Any]], args: argparse.Namespace,
             meta: dict[str, Any], results: Path, done: set[tuple[str, str, str, str]]) -> int:
    """Run a peer's metrics on ``items`` in its virtualenv; append each record as it lands.
    The task's ``prompt_set`` names the peer and its version (``ragas-0.4.3``): ``peers.py``
    refuses to run another version."""
    engine = task["engine"]
    if not args.peers_python:
        print(f"skip {engine}: no --peers-python", flush=True)
        return 0
    request = {"engine": engine, "scorers": task["scorers"], "prompt_set": task["prompt_set"],
               "server": args.server, "model": args.model, "timeout": args.timeout,
               "items": [i for i in items if any((i["id"], s, task["prompt_set"],
                                                  meta["model_sha256"]) not in done
                                                 for s in task["scorers"])]}
    process = subprocess.Popen([args.peers_python, str(PEERS)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(request))
    process.stdin.close()
    by_id = {i["id"]: i for i in items}
    count = 0
    for line in process.stdout:
        try:
            peer = json.loads(line)
        except json.JSONDecodeError:
            print(line.rstrip(), flush=True)
            continue
        item = by_id[peer.pop("id")]
        record = {**base_record(item, peer.pop("scorer"), task["prompt_set"], engine, meta),
                  **peer}
        if record_key(record) in done:
            continue
        append(results, record)
        count += 1
        show(record)
    process.wait()
    return count


def base_record(item: dict[str, Any], scorer: str, prompt_set: str, engine: str,
                meta: dict[str, Any]) -> dict[str, Any]:
    return {"id": item["id"], "row": item["row"], "answer": item["answer"],
            "split": item["split"], "label": item["label"], "scorer": scorer,
            "prompt_set": prompt_set, "engine": engine, **meta,
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "load1": load1()}


def show(record: dict[str, Any]) -> None:
    print(f"{record['finished_at']} {record['split']} {record['id']} {record['engine']}/"
          f"{record['scorer']}/{record['prompt_set']}: {record['status']} "
          f"score={record.get('score')} {record.get('seconds')} s "
          f"tokens={record.get('prompt_tokens')}+{record.get('completion_tokens')} "
          f"load={record['load1']} {record.get('error') or ''}", flush=True)


def next_work(plan: list[dict[str, Any]], rows: list[dict[str, str]],
              order: dict[str, list[int]], done: set[tuple[str, str, str, str]],
              sha: str, batch: int) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The first task with unfinished items, and its next items (one row for tracescore,
    up to ``batch`` rows for a peer, whose virtualenv takes a while to start)."""
    for task in plan:
        items = items_of(task["split"], task.get("first", 0), task["count"], rows, order)
        prompt_set = task.get("prompt_set") or "default"
        todo = [i for i in items
                if any((i["id"], s, prompt_set, sha) not in done for s in task["scorers"])]
        if todo:
            limit = 2 if task["engine"] == "tracescore" else 2 * batch
            return {**task, "prompt_set": prompt_set}, todo[:limit]
    return None


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(amain(argv))


async def amain(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", type=Path, default=HERE / "plan.json")
    parser.add_argument("--results", type=Path,
                        default=HERE / "results" / "qwen2.5-coder-1.5b-q4_k_m.jsonl")
    parser.add_argument("--server", metavar="URL",
                        help="a running OpenAI-compatible server (default: start llama.cpp)")
    parser.add_argument("--model", default="judge", help="the served model name")
    parser.add_argument("--api-key-env", metavar="NAME",
                        help="the environment variable holding the server's API key (a hosted "
                        "judge; the key itself is never written to the results)")
    parser.add_argument("--model-file", type=Path,
                        default=os.environ.get("TRACESCORE_QWEN_GGUF"),
                        help="the model file, for its sha256 (default TRACESCORE_QWEN_GGUF)")
    parser.add_argument("--model-sha256", help="the model's sha256 when there is no file here")
    parser.add_argument("--model-label", default="qwen2.5-coder-1.5b-instruct-q4_k_m")
    parser.add_argument("--server-version", help="default: llama-cpp-python's version in "
                        "TRACESCORE_LLAMA_PYTHON")
    parser.add_argument("--server-python", default=os.environ.get("TRACESCORE_LLAMA_PYTHON"))
    parser.add_argument("--port", type=int, default=8767)
    parser.add_argument("--peers-python", help="the Python of the Ragas/DeepEval virtualenv")
    parser.add_argument("--peer-batch", type=int, default=3, help="rows per peer process")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per judge call")
    parser.add_argument("--response-format", default="auto",
                        help="the judge's response_format mode (tracescore.Judge): json_object "
                        "for llama.cpp's server saves the json_schema probes (default auto)")
    parser.add_argument("--max-items", type=int, default=0, help="stop after N (0: no limit)")
    args = parser.parse_args(argv)

    if args.model_sha256:
        sha = args.model_sha256
    elif args.model_file:
        sha = sha256_of(Path(args.model_file), args.results.parent / ".cache")
    else:
        raise SystemExit("give --model-file (or TRACESCORE_QWEN_GGUF) or --model-sha256")
    version = args.server_version
    if version is None and args.server_python:
        version = "llama-cpp-python " + subprocess.run(
            [args.server_python, "-c", "import llama_cpp; print(llama_cpp.__version__)"],
            capture_output=True, text=True, check=True).stdout.strip()
    process = None
    if args.server is None:
        if not (args.model_file and args.server_python):
            raise SystemExit("set TRACESCORE_QWEN_GGUF and TRACESCORE_LLAMA_PYTHON (run "
                             "scripts/llama_server.sh --qwen) or pass --server URL")
        process = start_server(args.server_python, str(args.model_file), args.port,
                               args.results.parent / ".cache" / "llama-server.log")
        args.server = f"http://127.0.0.1:{args.port}/v1"
    meta = {"model": args.model_label, "model_sha256": sha, "server_version": version}
    rows = load_rows()
    order = json.loads(SPLIT.read_text(encoding="utf-8"))
    finished = 0
    # Keys that failed in this run are not tried again before the next run.
    attempted: set[tuple[str, str, str, str]] = set()
    try:
        while not args.max_items or finished < args.max_items:
            plan = json.loads(args.plan.read_text(encoding="utf-8"))
            done = done_keys(args.results) | attempted
            work = next_work(plan, rows, order, done, sha, args.peer_batch)
            if work is None:
                print("plan done", flush=True)
                break
            task, items = work
            if task["engine"] == "tracescore":
                for item in items:
                    scorers = [s for s in task["scorers"]
                               if (item["id"], s, task["prompt_set"], sha) not in done]
                    for record in await run_tracescore(item, scorers, task["prompt_set"],
                                                       args, meta):
                        if "JudgeUnavailableError" in str(record.get("error")):
                            # the server is gone (crashed or killed): an answer nobody judged
                            # is not a result; stop, so that a rerun picks the item up again
                            raise SystemExit(f"the judge's server stopped answering: "
                                             f"{record['error']}")
                        append(args.results, record)
                        attempted.add(record_key(record))
                        show(record)
                    finished += 1
            else:
                finished += run_peer(task, items, args, meta, args.results, done)
                attempted.update((i["id"], s, task["prompt_set"], sha)
                                 for i in items for s in task["scorers"])
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
