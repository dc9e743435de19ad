"""The judge-quality table from the results file: per split, model, engine, scorer and prompt
set, the items scored, accuracy at threshold 0.5 with its 95% Wilson interval, balanced
accuracy (the mean of the pass and fail rates recovered) and Cohen's kappa with 95%
percentile-bootstrap intervals, the confusion matrix, judge calls, tokens and seconds per item,
and the load the machine was under.

Prompt sets are named as the scorers name them now: records labelled ``default`` were scored
when both scorers' default was the Mastra prompts, so they read as ``mastra``; faithfulness
under ``tracescore-v2`` sends the very requests of ``mastra`` and reads as ``mastra`` too.

A judge pass is a score >= 0.5 for higher-is-better scorers and <= 0.5 for the lower-is-better
ones (hallucination); a HaluEval right answer is a human pass, a hallucinated one a human fail.
Items whose scoring failed (an invalid judge answer, a timeout, a peer's NaN) are counted apart
and left out of the agreement, as ``tracescore calibrate`` does; "not scorable" likewise.

Tokens per item are what one scorer costs on its own. The benchmark runs faithfulness and then
hallucination on each item; with ``tracescore-v1`` both send the same two requests and one
judge with a request cache answers the second scorer from the first: its standalone cost is
then the first's (taken from the faithfulness record of the same item). With ``tracescore-v2``
the cache answers hallucination's claims and verdicts and it pays only its reason: such records
are counted apart (``after faithfulness``), and the standalone column averages only the records
that paid for every call.

``--paired`` restricts every row to the items that every listed row scored, so engines are
compared on the same answers; ``--not-paired NAME`` (repeatable) leaves a prompt set, or a
scorer as the table names it, out of that comparison (one that was stopped early would
otherwise cap it at its own items). ``--derive-cascade`` adds the faithfulness cascade as the
support check's and faithfulness's records make it (``derived_cascade``).
``--skip-rows N`` leaves out the first N rows of each split (in ``split.json``'s order): the
held-out rows after them are those no prompt choice was made on. ``--docs`` rewrites the
tables between the markers of docs/judge-quality.md (with ``--skip-rows``, a third table: paired,
after the first N rows).

Run::

    python benchmarks/judge_quality/report.py [--results FILE ...] [--paired] [--docs] \
        [--not-paired tracescore-v1] [--skip-rows 16]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tracescore._offline.calibrate import stats  # noqa: E402

THRESHOLD = 0.5
# DeepEval 4.3.1's HallucinationMetric scores the share of contexts the output agrees with and
# succeeds at score >= threshold (deepeval/metrics/hallucination: score_qag_verdicts with
# passing=YES, is_successful: score >= threshold): higher is better, unlike tracescore's.
LOWER_IS_BETTER = {"hallucination"}
DOCS = REPO / "docs" / "judge-quality.md"
START, END = "<!-- judge-quality-table:start -->", "<!-- judge-quality-table:end -->"
ORDER = {"support-check": 0, "faithfulness-cascade": 1, "faithfulness": 2,
         "ragas-faithfulness": 3, "deepeval-faithfulness": 4, "hallucination": 5,
         "deepeval-hallucination": 6}


def prompts_of(record: dict[str, Any]) -> str:
    """The prompt set a record was scored with, by today's names (see the module docstring)."""
    prompt_set = str(record["prompt_set"])
    if record["engine"] != "tracescore":
        return prompt_set
    if record["scorer"] in ("faithfulness", "hallucination") and prompt_set == "default":
        return "mastra"
    if record["scorer"] == "faithfulness" and prompt_set == "tracescore-v2":
        return "mastra"
    return prompt_set


def read(path: Path) -> list[dict[str, Any]]:
    """The last record of each key (a rerun after an error appends a newer line)."""
    latest: dict[tuple[str, ...], dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        record["prompt_set"] = prompts_of(record)
        key = (record["id"], record["scorer"], record["prompt_set"], record["model_sha256"])
        if key in latest and latest[key]["status"] != "error" and record["status"] == "error":
            continue
        latest[key] = record
    return list(latest.values())


def derived_cascade(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The faithfulness cascade as its records would read, derived from records that ran: the
    support check's where the check is sure (outside the shipped band), else the faithfulness
    (``mastra``) record of the same answer and model, whose claims and verdict requests are the
    very ones the cascade sends (at temperature 0, the same verdicts). Tokens are then the
    faithfulness record's, an upper bound: they include the reason call the cascade does not
    make. Labelled engine ``derived`` in the table, apart from the cascade's own runs."""
    band = json.loads((REPO / "tracescore" / "scorers" / "support_check.json").read_text(
        encoding="utf-8"))["band"]
    faith = {(r["id"], r["model_sha256"]): r for r in records
             if r["engine"] == "tracescore" and r["scorer"] == "faithfulness"
             and r["prompt_set"] == "mastra" and r["status"] == "scored"}
    out = []
    for r in records:
        if r["scorer"] != "support-check" or r["status"] != "scored":
            continue
        sure = not band[0] < float(r["score"]) < band[1]
        twin = None if sure else faith.get((r["id"], r["model_sha256"]))
        if not sure and twin is None:
            continue
        source = r if sure else twin
        assert source is not None
        out.append({**source, "scorer": "faithfulness-cascade", "engine": "derived",
                    "prompt_set": r["prompt_set"], "cache_hits": 0,
                    "seconds": r["seconds"] + (0 if sure else twin["seconds"])})
    return out


def skip_rows(records: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The records not in the first ``n`` rows of their split (``split.json``'s order)."""
    order = json.loads((HERE / "split.json").read_text(encoding="utf-8"))
    first = {split: set(order[split][:n]) for split in ("dev", "heldout")}
    return [r for r in records if r["row"] not in first[r["split"]]]


def standalone_tokens(records: list[dict[str, Any]]) -> None:
    """Give each record ``tokens`` (prompt + completion) as if its scorer ran alone."""
    faith = {(r["id"], r["prompt_set"], r["model_sha256"]): r for r in records
             if r["scorer"] == "faithfulness" and r["engine"] == "tracescore"}
    for r in records:
        tokens = (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)
        r["calls"] = r.get("judge_calls") or 0
        # Paid only part of its calls (the rest came from another scorer's requests).
        r["shared"] = bool(r.get("cache_hits")) and bool(r.get("judge_calls"))
        if r["engine"] == "tracescore" and r["scorer"] == "hallucination" and \
                r.get("cache_hits") and r.get("judge_calls") == 0:
            twin = faith.get((r["id"], r["prompt_set"], r["model_sha256"]))
            if twin is not None:
                tokens = (twin.get("prompt_tokens") or 0) + (twin.get("completion_tokens") or 0)
                r["calls"] = twin.get("judge_calls") or 0
        r["tokens"] = tokens


def balanced(tp: int, fn: int, fp: int, tn: int) -> float | None:
    """The mean of the share of human passes judged pass and of human fails judged fail."""
    if not (tp + fn and fp + tn):
        return None
    return (tp / (tp + fn) + tn / (fp + tn)) / 2


def balanced_interval(tp: int, fn: int, fp: int, tn: int, *, level: float = 0.95,
                      resamples: int = 2000, seed: int = 25) -> tuple[float, float] | None:
    """A percentile-bootstrap interval for balanced accuracy, resampling the human passes and
    the human fails apart (their numbers are fixed by the data's design). Seeded."""
    passes, fails = tp + fn, fp + tn
    if not (passes and fails):
        return None
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        hits = sum(rng.randrange(passes) < tp for _ in range(passes))
        rejects = sum(rng.randrange(fails) < tn for _ in range(fails))
        values.append((hits / passes + rejects / fails) / 2)
    values.sort()
    tail = (1 - level) / 2
    return (values[int(math.floor(tail * (resamples - 1)))],
            values[int(math.ceil((1 - tail) * (resamples - 1)))])


def row_of(key: tuple[str, ...], group: list[dict[str, Any]]) -> dict[str, Any]:
    split, model, sha, engine, scorer, prompt_set = key
    scored = [r for r in group if r["status"] == "scored" and r.get("score") is not None]
    pairs = [(float(r["score"]), r["label"] == "pass") for r in scored]
    a = stats.agreement(pairs, THRESHOLD, scorer not in LOWER_IS_BETTER)
    agree = a.true_pass + a.true_fail
    wilson = stats.wilson_interval(agree, a.n)
    kappa_ci = stats.kappa_interval(a.true_pass, a.false_pass, a.false_fail, a.true_fail)
    loads = [r["load1"] for r in group if r.get("load1") is not None]
    alone = [r for r in scored if not r["shared"]]
    after = [r for r in scored if r["shared"]]
    return {
        "split": split, "model": model, "model_sha256": sha, "engine": engine,
        "scorer": scorer, "prompt_set": prompt_set,
        "server_version": sorted({str(r.get("server_version")) for r in group}),
        "items": len(group), "scored": a.n,
        "errors": sum(r["status"] == "error" for r in group),
        "not_scorable": sum(r["status"] == "not_scorable" for r in group),
        "agree": agree, "accuracy": a.accuracy, "accuracy_ci95": wilson,
        "balanced_accuracy": balanced(a.true_pass, a.false_fail, a.false_pass, a.true_fail),
        "balanced_accuracy_ci95": balanced_interval(a.true_pass, a.false_fail, a.false_pass,
                                                    a.true_fail),
        "kappa": a.kappa, "kappa_ci95": kappa_ci, "confusion": a.confusion(),
        "calls_per_item": statistics.fmean(r["calls"] for r in alone) if alone else None,
        "tokens_per_item": statistics.fmean(r["tokens"] for r in alone) if alone else None,
        "judged_share": (sum(1 for r in scored if r["calls"]) / len(scored)) if scored else None,
        "after_faithfulness": {"items": len(after),
                               "calls_per_item": statistics.fmean(r["calls"] for r in after),
                               "tokens_per_item": statistics.fmean(r["tokens"] for r in after)}
        if after else None,
        "seconds_per_item": statistics.fmean(r["seconds"] for r in group) if group else None,
        "load1": [min(loads), max(loads)] if loads else None,
    }


def table(records: list[dict[str, Any]], paired: bool,
          not_paired: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The rows of the table; with ``paired``, over the items every row of the split and model
    scored, leaving out the prompt sets in ``not_paired``."""
    standalone_tokens(records)
    if paired:
        records = [r for r in records
                   if r["prompt_set"] not in not_paired and name_of(r) not in not_paired]
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["split"], r["model"], r["model_sha256"], r["engine"], r["scorer"],
                r["prompt_set"])].append(r)
    if paired:  # per split and model: the items every row of that model scored
        for split_model in {k[:3] for k in groups}:
            keys = [k for k in groups if k[:3] == split_model]
            common = set.intersection(*({r["id"] for r in groups[k]
                                         if r["status"] != "error"} for k in keys))
            for k in keys:
                groups[k] = [r for r in groups[k] if r["id"] in common]
    rows = [row_of(k, g) for k, g in groups.items() if g]
    rows.sort(key=lambda r: (r["split"] != "heldout", r["model"], ORDER.get(r["scorer"], 9),
                             r["prompt_set"]))
    return rows


def name_of(row: dict[str, Any]) -> str:
    """The scorer as the table names it: ``faithfulness``, ``ragas-faithfulness (ragas)``."""
    engine = row["engine"]
    return str(row["scorer"]) if engine == "tracescore" else f"{row['scorer']} ({engine})"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| split | scorer | prompts | scored (errors) | accuracy [95% CI] "
        "| balanced accuracy [95% CI] | kappa [95% CI] | confusion (TP FN / FP TN) "
        "| calls/item | tokens/item | s/item | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ci = r["accuracy_ci95"]
        acc = "-" if r["accuracy"] is None else (
            f"{r['agree']}/{r['scored']} = {pct(r['accuracy'])} [{pct(ci[0])}, {pct(ci[1])}]")
        k, kci = r["kappa"], r["kappa_ci95"]
        kappa = "-" if k is None else f"{k:.2f}" + (
            f" [{kci[0]:.2f}, {kci[1]:.2f}]" if kci else "")
        b, bci = r["balanced_accuracy"], r["balanced_accuracy_ci95"]
        bal = "-" if b is None else f"{pct(b)}" + (f" [{pct(bci[0])}, {pct(bci[1])}]" if bci
                                                   else "")
        c = r["confusion"]
        conf = f"{c['pass']['pass']} {c['pass']['fail']} / {c['fail']['pass']} {c['fail']['fail']}"
        calls = "-" if r["calls_per_item"] is None else f"{r['calls_per_item']:.1f}"
        tokens = "-" if r["tokens_per_item"] is None else f"{r['tokens_per_item']:,.0f}"
        shared = r["after_faithfulness"]
        if shared:  # what it paid when faithfulness had already asked the shared requests
            calls += f"; {shared['calls_per_item']:.1f} after faithfulness"
            tokens += f"; {shared['tokens_per_item']:,.0f} after faithfulness"
        if r["scorer"] == "faithfulness-cascade" and r["judged_share"] is not None:
            calls += f" (judge on {pct(r['judged_share'])})"
        secs = "-" if r["seconds_per_item"] is None else (
            f"{r['seconds_per_item']:.0f}" if r["seconds_per_item"] >= 1
            else f"{r['seconds_per_item']:.2f}")
        load = "-" if r["load1"] is None else f"{r['load1'][0]:.0f}-{r['load1'][1]:.0f}"
        name = name_of(r)
        lines.append(
            f"| {r['split']} | {name} | {r['prompt_set']} | {r['scored']} ({r['errors']}) "
            f"| {acc} | {bal} | {kappa} | {conf} | {calls} | {tokens} | {secs} | {load} |")
    models = sorted({(r["model"], r["model_sha256"], ", ".join(r["server_version"]))
                     for r in rows})
    for model, sha, server in models:
        lines.append(f"\nModel `{model}`, sha256 `{sha}`, server {server}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, action="append",
                        help="a results file (repeatable; default: every results/*.jsonl, one "
                        "per model)")
    parser.add_argument("--paired", action="store_true")
    parser.add_argument("--not-paired", action="append", default=[], metavar="PROMPT_SET",
                        help="leave this prompt set, or this scorer as the table names it "
                        "(e.g. 'faithfulness-cascade'), out of the paired table (repeatable)")
    parser.add_argument("--split", help="only this split")
    parser.add_argument("--docs", action="store_true", help="rewrite docs/judge-quality.md's "
                        "table (held-out and dev, all items, then paired)")
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    parser.add_argument("--skip-rows", type=int, default=0, metavar="N",
                        help="leave out the first N rows of each split")
    parser.add_argument("--derive-cascade", action="store_true",
                        help="add the faithfulness cascade derived from the support check's and "
                        "faithfulness's records (engine 'derived'; see derived_cascade)")
    args = parser.parse_args(argv)
    if args.not_paired and not (args.paired or args.docs):
        parser.error("--not-paired applies to the paired table: add --paired or --docs")
    files = args.results or sorted((HERE / "results").glob("*.jsonl"))
    records = [r for f in files for r in read(f)]
    if args.derive_cascade:
        records += derived_cascade(records)
    if args.skip_rows and not args.docs:
        records = skip_rows(records, args.skip_rows)
    if args.split:
        records = [r for r in records if r["split"] == args.split]
    not_paired = frozenset(args.not_paired)
    rows = table(records, args.paired, not_paired)
    text = markdown(rows)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    if args.docs:
        everything = [r for f in files for r in read(f)]
        if args.derive_cascade:
            everything += derived_cascade(everything)
        paired = markdown(table(everything, True, not_paired))
        left_out = "".join(f", {p} left out" for p in sorted(not_paired))
        block = (f"{START}\nAll items each row finished:\n\n{text}\n\nOnly the items every row "
                 f"of the split finished (paired{left_out}):\n\n{paired}\n")
        if args.skip_rows:
            later = markdown(table(skip_rows(everything, args.skip_rows), True,
                                   not_paired))
            block += (f"\nPaired, after the first {args.skip_rows} rows of each split (the "
                      f"held-out rows no prompt choice looked at):\n\n{later}\n")
        block += END
        doc = DOCS.read_text(encoding="utf-8")
        head, _, rest = doc.partition(START)
        _, _, tail = rest.partition(END)
        DOCS.write_text(head + block + tail, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
