"""benchmarks/judge_quality/report.py on a small results file: agreement per row, the paired
table over the items every row scored, and ``--not-paired`` leaving a prompt set out of it;
balanced accuracy, prompt sets by today's names, and tokens paid alone or after faithfulness."""

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

    assert (rows["hallucination", "mastra"]["agree"], rows["hallucination", "mastra"]["scored"]) \
        == (2, 4)
    assert rows["hallucination", "tracescore-v2"]["agree"] == 4
    assert rows["hallucination", "tracescore-v1"]["scored"] == 2


def test_paired_rows_share_their_items_unless_a_prompt_set_is_left_out(tmp_path: Path) -> None:
    capped = report(tmp_path, RECORDS, "--paired")
    assert {r["scored"] for r in capped.values()} == {2}

    rows = report(tmp_path, RECORDS, "--paired", "--not-paired", "tracescore-v1")
    assert set(rows) == {("hallucination", "mastra"), ("hallucination", "tracescore-v2")}
    assert {r["scored"] for r in rows.values()} == {4}


def test_skip_rows_leaves_out_the_first_rows_of_the_split(tmp_path: Path) -> None:
    order = json.loads((REPORT.parent / "split.json").read_text())["heldout"]
    records = []
    for row in order[:2]:
        for answer, label, score in (("right", "pass", 0.0), ("halluc", "fail", 0.0)):
            records.append({**record(f"r{row}-{answer}", label, "hallucination", "default", score),
                            "row": row})
    assert report(tmp_path, records)["hallucination", "mastra"]["scored"] == 4

    rows = report(tmp_path, records, "--skip-rows", "1")
    assert rows["hallucination", "mastra"]["scored"] == 2


def test_paired_items_are_chosen_per_model(tmp_path: Path) -> None:
    # a second model that ran one row only does not cap the first model's paired rows
    small = [{**r, "model": "small", "model_sha256": "1" * 64} for r in RECORDS[:2]]

    rows = report(tmp_path, RECORDS + small, "--paired", "--not-paired", "tracescore-v1")

    assert rows["hallucination", "tracescore-v2"]["scored"] == 4


def test_balanced_accuracy_weighs_passes_and_fails_alike(tmp_path: Path) -> None:
    # three human passes all judged pass, one human fail judged pass: accuracy 3/4, balanced
    # accuracy (1 + 0) / 2
    records = [record(f"p{i}", "pass", "faithfulness", "mastra", 1.0) for i in range(3)]
    records.append(record("f0", "fail", "faithfulness", "mastra", 1.0))

    row = report(tmp_path, records)["faithfulness", "mastra"]

    assert (row["agree"], row["balanced_accuracy"]) == (3, 0.5)
    low, high = row["balanced_accuracy_ci95"]
    assert low <= 0.5 <= high


def test_records_read_with_todays_prompt_set_names_and_shared_calls_apart(
    tmp_path: Path
) -> None:
    # "default" was the Mastra prompts for both scorers; faithfulness under tracescore-v2 sends
    # the Mastra requests: one row, "mastra", of two items
    records = [record("a", "pass", "faithfulness", "default", 1.0),
               {**record("b", "fail", "faithfulness", "tracescore-v2", 0.0),
                "prompt_tokens": 300}]
    # v2 hallucination alone (3 calls) on one item, after faithfulness (1 call, 2 hits) on one
    records += [record("a", "pass", "hallucination", "tracescore-v2", 0.0),
                {**record("b", "fail", "hallucination", "tracescore-v2", 1.0),
                 "judge_calls": 1, "prompt_tokens": 40, "cache_hits": 2}]

    rows = report(tmp_path, records)

    assert set(rows) == {("faithfulness", "mastra"), ("hallucination", "tracescore-v2")}
    assert rows["faithfulness", "mastra"]["tokens_per_item"] == (110 + 310) / 2
    v2 = rows["hallucination", "tracescore-v2"]
    assert (v2["scored"], v2["calls_per_item"], v2["tokens_per_item"]) == (2, 3, 110)
    assert v2["after_faithfulness"] == {"items": 1, "calls_per_item": 1, "tokens_per_item": 50}


def test_the_cascade_derived_from_the_check_and_faithfulness(tmp_path: Path) -> None:
    # the shipped band holds 0.5 and not 0.99: the first answer is the check's, the second the
    # judge's (its faithfulness record), with that record's tokens as an upper bound
    records = [{**record("a", "pass", "support-check", "v1", 0.99), "judge_calls": 0,
                "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.01},
               {**record("b", "fail", "support-check", "v1", 0.5), "judge_calls": 0,
                "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.01},
               record("b", "fail", "faithfulness", "mastra", 0.0),
               record("a", "pass", "faithfulness-cascade", "v1", 0.99)]

    report(tmp_path, records, "--derive-cascade")
    rows = json.loads((tmp_path / "rows.json").read_text())
    paired = report(tmp_path, records, "--derive-cascade", "--paired", "--not-paired",
                    "faithfulness-cascade")

    (derived,) = [r for r in rows if r["engine"] == "derived"]
    assert (derived["scored"], derived["agree"], derived["judged_share"]) == (2, 2, 0.5)
    assert derived["tokens_per_item"] == 110 / 2
    # the cascade's own run (one answer) stays in the plain table, out of the paired one
    (own,) = [r for r in rows if r["scorer"] == "faithfulness-cascade" and r["engine"] ==
              "tracescore"]
    assert own["scored"] == 1
    assert paired["support-check", "v1"]["scored"] == 1  # paired with faithfulness: answer b
    assert paired["faithfulness-cascade", "v1"]["engine"] == "derived"
