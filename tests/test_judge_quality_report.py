"""benchmarks/judge_quality/report.py on a small results file: agreement per row, the paired
table over the items every row scored, and ``--not-paired`` leaving a prompt set out of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "benchmarks" / "judge_quality" / "report.py"


def record(item: str, label: str, scorer: str, prompt_set: str, score: float) -> dict:
    return {"id": item, "row": 0, "answer": "x", "split": "heldout", "label": label,
            "scorer": scorer, "prompt_set": prompt_set, "engine": "tracescore",
            "model": "m", "model_sha256": "0" * 64, "server_version": "s", "load1": 1.0,
            "status": "scored", "score": score, "error": None, "judge_calls": 3,
            "prompt_tokens": 100, "completion_tokens": 10, "cache_hits": 0, "seconds": 1.0}


def report(tmp_path: Path, records: list[dict], *args: str) -> dict[tuple[str, str], dict]:
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "rows.json"
    subprocess.run([sys.executable, str(REPORT), "--results", str(results), "--json", str(out),
                    *args], check=True, capture_output=True)
    return {(r["scorer"], r["prompt_set"]): r for r in json.loads(out.read_text())}


RECORDS = [
    # four items for the default set: two agree with the labels
    record("a-right", "pass", "hallucination", "default", 0.0),
    record("a-halluc", "fail", "hallucination", "default", 1.0),
    record("b-right", "pass", "hallucination", "default", 1.0),
    record("b-halluc", "fail", "hallucination", "default", 0.5),  # <= 0.5 passes: disagrees
    record("a-right", "pass", "hallucination", "tracescore-v2", 0.0),
    record("a-halluc", "fail", "hallucination", "tracescore-v2", 1.0),
    record("b-right", "pass", "hallucination", "tracescore-v2", 0.0),
    record("b-halluc", "fail", "hallucination", "tracescore-v2", 0.67),
    # a prompt set stopped after the first row
    record("a-right", "pass", "hallucination", "tracescore-v1", 0.0),
    record("a-halluc", "fail", "hallucination", "tracescore-v1", 0.0),
]


def test_rows_count_agreement_at_the_threshold(tmp_path: Path) -> None:
    rows = report(tmp_path, RECORDS)

    assert (rows["hallucination", "default"]["agree"], rows["hallucination", "default"]["scored"]) \
        == (2, 4)
    assert rows["hallucination", "tracescore-v2"]["agree"] == 4
    assert rows["hallucination", "tracescore-v1"]["scored"] == 2


def test_paired_rows_share_their_items_unless_a_prompt_set_is_left_out(tmp_path: Path) -> None:
    capped = report(tmp_path, RECORDS, "--paired")
    assert {r["scored"] for r in capped.values()} == {2}

    rows = report(tmp_path, RECORDS, "--paired", "--not-paired", "tracescore-v1")
    assert set(rows) == {("hallucination", "default"), ("hallucination", "tracescore-v2")}
    assert {r["scored"] for r in rows.values()} == {4}


def test_skip_rows_leaves_out_the_first_rows_of_the_split(tmp_path: Path) -> None:
    order = json.loads((REPORT.parent / "split.json").read_text())["heldout"]
    records = []
    for row in order[:2]:
        for answer, label, score in (("right", "pass", 0.0), ("halluc", "fail", 0.0)):
            records.append({**record(f"r{row}-{answer}", label, "hallucination", "default", score),
                            "row": row})
    assert report(tmp_path, records)["hallucination", "default"]["scored"] == 4

    rows = report(tmp_path, records, "--skip-rows", "1")
    assert rows["hallucination", "default"]["scored"] == 2


def test_paired_items_are_chosen_per_model(tmp_path: Path) -> None:
    # a second model that ran one row only does not cap the first model's paired rows
    small = [{**r, "model": "small", "model_sha256": "1" * 64} for r in RECORDS[:2]]

    rows = report(tmp_path, RECORDS + small, "--paired", "--not-paired", "tracescore-v1")

    assert rows["hallucination", "tracescore-v2"]["scored"] == 4
