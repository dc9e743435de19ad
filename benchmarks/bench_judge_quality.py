"""Judge quality on HaluEval QA with a real local model: tracescore's faithfulness and
hallucination scorers calibrated against HaluEval's labels, and Ragas's faithfulness with the
same model on the same rows for comparison.

Each HaluEval row has a question, its knowledge, a right answer and a hallucinated one, so every
row gives two labelled items: the right answer passes (faithful, no hallucination), the
hallucinated one fails. ``tracescore.calibrate`` scores them and reports accuracy, Cohen's kappa,
the confusion matrix and the best threshold; Ragas's ``Faithfulness`` runs in its own
virtualenv (``benchmarks/bench_judge_quality_ragas.py``; Ragas 0.4.3 imports only with
``langchain-community<0.4 langchain<1 langchain-core<1 langchain-openai<1``) and its scores go
through the same arithmetic (``tracescore._offline.calibrate.stats``) at the same threshold, 0.5.

The judge: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) behind llama.cpp's OpenAI-compatible server,
started here on loopback unless ``--server URL`` names a running one. Get the model and the
server with ``scripts/llama_server.sh --qwen`` (it prints ``TRACESCORE_QWEN_GGUF`` and
``TRACESCORE_LLAMA_PYTHON``). On 2 cores a judge call takes 30-150 s, so a full run of 200 rows
(400 items x 3 judge calls x 3 scorers) takes days: it resumes. Every outcome is appended to a
state file per scorer under ``--state-dir`` as it lands; run the same command again to go on.

Run::

    eval "$(scripts/llama_server.sh --qwen | grep '^export ')"
    python benchmarks/bench_judge_quality.py --rows 100:110 \\
        --ragas-python ~/.cache/tracescore-ci/venv-ragas/bin/python

Rows are 0-based indices into ``examples/data/halueval_qa_200.jsonl`` (a copy of the first 200
rows of HaluEval's QA set; MIT licence, see ``examples/data/README.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import tracescore
from tracescore._offline.calibrate import stats

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "examples" / "data" / "halueval_qa_200.jsonl"
RAGAS_HELPER = Path(__file__).resolve().parent / "bench_judge_quality_ragas.py"
DEFAULT_STATE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / \
    "tracescore-ci" / "judge-quality"
THRESHOLD = 0.5


def labelled_items(rows: range) -> list[dict[str, Any]]:
    """Two labelled items per HaluEval row: the right answer (pass) and the hallucinated one
    (fail), with the row's question and knowledge."""
    lines = DATA.read_text(encoding="utf-8").splitlines()
    items = []
    for index in rows:
        row = json.loads(lines[index])
        for kind, key, label in (("right", "right_answer", "pass"),
                                 ("halluc", "hallucinated_answer", "fail")):
            items.append({"id": f"r{index}-{kind}", "input": row["question"],
                          "context": [row["knowledge"]], "output": row[key], "label": label})
    return items


def start_server(python: str, model: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    """llama.cpp's server on loopback with the judge model, once it answers."""
    with log.open("ab") as out:
        process = subprocess.Popen(
            [python, "-m", "llama_cpp.server", "--model", model, "--model_alias", "judge",
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", "2"],
            stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the llama.cpp server exited ({process.returncode}); see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5):
                return process
        except OSError:
            time.sleep(1)  # a benchmark, not a test: polling the server's readiness
    process.terminate()
    raise SystemExit(f"the llama.cpp server did not answer within 300 s; see {log}")


def agreement_dict(a: stats.Agreement | None) -> dict[str, Any] | None:
    if a is None:
        return None
    return {"threshold": a.threshold, "n": a.n, "accuracy": a.accuracy, "kappa": a.kappa,
            "confusion": a.confusion()}


def ragas_scores(python: str, base: str, items: list[dict[str, Any]], state: Path,
                 timeout: float) -> dict[str, dict[str, Any]]:
    """Run Ragas's faithfulness in its virtualenv (resumable through ``state``); its records
    by item id."""
    payload = tmp = state.with_suffix(".items.json")
    payload.write_text(json.dumps(items), encoding="utf-8")
    subprocess.run([python, str(RAGAS_HELPER), "--base", base, "--items", str(tmp),
                    "--state", str(state), "--timeout", str(timeout)], check=True)
    out = {}
    for line in state.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        out[record["id"]] = record
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="100:105", metavar="START:STOP",
                        help="HaluEval rows, 0-based, stop excluded (default 100:105)")
    parser.add_argument("--scorers", default="faithfulness,hallucination",
                        help="tracescore scorer ids, comma-separated")
    parser.add_argument("--server", metavar="URL",
                        help="a running OpenAI-compatible server serving the model as 'judge' "
                        "(default: start llama.cpp with TRACESCORE_QWEN_GGUF)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE)
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds per judge call (default 600)")
    parser.add_argument("--ragas-python", metavar="PYTHON",
                        help="the Python of a virtualenv with ragas 0.4.3 (default: no Ragas)")
    parser.add_argument("--tag", default="", help="suffix of the state files (a prompt variant)")
    args = parser.parse_args(argv)
    start, _, stop = args.rows.partition(":")
    rows = range(int(start), int(stop))
    items = labelled_items(rows)
    args.state_dir.mkdir(parents=True, exist_ok=True)

    process = None
    base = args.server
    if base is None:
        model = os.environ.get("TRACESCORE_QWEN_GGUF")
        python = os.environ.get("TRACESCORE_LLAMA_PYTHON")
        if not (model and python):
            raise SystemExit("set TRACESCORE_QWEN_GGUF and TRACESCORE_LLAMA_PYTHON (run "
                             "scripts/llama_server.sh --qwen) or pass --server URL")
        process = start_server(python, model, args.port, args.state_dir / "llama-server.log")
        base = f"http://127.0.0.1:{args.port}/v1"
    report: dict[str, Any] = {"rows": f"{rows.start}:{rows.stop}", "items": len(items),
                              "threshold": THRESHOLD, "scorers": {}}
    try:
        judge = tracescore.Judge("openai/judge", api_base=base, api_key="none",
                                 timeout=args.timeout, max_retries=1, cache_size=0)
        outcomes: dict[str, dict[str, Any]] = {}
        for scorer_id in filter(None, args.scorers.split(",")):
            state = args.state_dir / f"{scorer_id}{args.tag}.state.jsonl"
            print(f"== {scorer_id}: {len(items)} items, state {state}", flush=True)
            result = tracescore.calibrate(items, scorer_id, judge=judge, threshold=THRESHOLD,
                                          state_file=state, progress=True)
            print(result.table(), flush=True)
            report["scorers"][scorer_id] = {
                k: v for k, v in result.to_dict().items() if k != "items"}
            outcomes[scorer_id] = {i.id: i.as_dict() for i in result.items}
        if args.ragas_python:
            state = args.state_dir / f"ragas-faithfulness{args.tag}.state.jsonl"
            print(f"== ragas faithfulness: state {state}", flush=True)
            records = ragas_scores(args.ragas_python, base, items, state, args.timeout)
            labels = {i["id"]: i["label"] == "pass" for i in items}
            pairs = [(r["score"], labels[i]) for i, r in records.items()
                     if i in labels and r.get("score") is not None]
            report["scorers"]["ragas-faithfulness"] = {
                "items": len([i for i in records if i in labels]), "scored": len(pairs),
                "at_threshold": agreement_dict(stats.agreement(pairs, THRESHOLD)),
                "best_threshold": agreement_dict(stats.best_threshold(pairs, THRESHOLD)),
            }
            ours = outcomes.get("faithfulness", {})
            both = [i for i, r in records.items() if r.get("score") is not None
                    and ours.get(i, {}).get("score") is not None]
            report["both_scored"] = {
                "items": len(both),
                "tracescore_faithfulness": agreement_dict(stats.agreement(
                    [(ours[i]["score"], labels[i]) for i in both], THRESHOLD)),
                "ragas_faithfulness": agreement_dict(stats.agreement(
                    [(records[i]["score"], labels[i]) for i in both], THRESHOLD)),
            }
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=60)
    scorers = args.scorers.replace(",", "+") + ("+ragas" if args.ragas_python else "")
    out = args.state_dir / f"summary-{rows.start}-{rows.stop}-{scorers}{args.tag}.json"
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))
    print(f"summary: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
