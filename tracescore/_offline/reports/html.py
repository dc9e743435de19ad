"""Self-contained HTML reports of ``tracescore eval``, ``tracescore calibrate`` and
``tracescore rescore``.

Each page is rendered from the same JSON-ready dict the ``--report`` file holds
(``result_to_dict(result)`` for an evaluation, ``CalibrationResult.to_dict()`` for a
calibration), so what the page shows and what the JSON says cannot drift apart. A page is one
file: inline CSS, charts as inline SVG, no script and nothing fetched, so it opens offline, from
a CI artifact or an e-mail attachment.

Every value from the data (inputs, outputs, reasons, ids, file names) is untrusted text: the
templates are rendered by Jinja2 with autoescaping on for every value, and nothing is marked
safe. Long texts are cut for display (``MAX_TEXT_CHARS``), saying by how much; the JSON report
keeps them whole.

Charts: a score histogram per scorer (ten equal bins over ``0..scale``; a score equal to the
top of the scale falls in the last bin), bars split by the pass/fail label when a threshold is
set, the threshold drawn as a line; for a calibration, the histogram of the judge's scores per
human label, with the threshold used and the advised one; whether the judge agrees better than
chance, marked on the verdict badge when it does not.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["bin_index", "calibration_html", "eval_html", "histogram", "rescore_html",
           "write_html"]

MAX_TEXT_CHARS = 2_000  # characters of an input, output or reason shown per cell
MAX_FAILING_ROWS = 500  # failing (item, scorer) rows listed; the rest are counted
BINS = 10


def histogram(scores: list[float], scale: float, labels: list[str | None] | None = None,
              bins: int = BINS) -> list[dict[str, Any]]:
    """Counts of ``scores`` in ``bins`` equal bins over ``0..scale``.

    Args:
        scores: the scores (finite floats; others are left out).
        scale: the top of the score range (1 for most scorers).
        labels: per score, ``"pass"``, ``"fail"`` or None; counted per label in each bin.
        bins: how many bins.

    Returns:
        One dict per bin: ``low``, ``high`` (its bounds), ``count``, ``pass``, ``fail``.

    Examples:
        >>> [b["count"] for b in histogram([0.0, 0.55, 1.0], 1.0, bins=2)]
        [1, 2]
    """
    top = scale if scale and scale > 0 else 1.0
    out = [{"low": top * i / bins, "high": top * (i + 1) / bins, "count": 0, "pass": 0,
            "fail": 0} for i in range(bins)]
    for n, score in enumerate(scores):
        if not isinstance(score, (int, float)) or not math.isfinite(score):
            continue
        cell = out[bin_index(score, top, bins)]
        cell["count"] += 1
        label = labels[n] if labels else None
        if label in ("pass", "fail"):
            cell[label] += 1
    return out


def bin_index(score: float, scale: float, bins: int = BINS) -> int:
    """The bin of a finite ``score`` among ``bins`` equal bins over ``0..scale`` (a score at the
    top of the scale in the last bin; below 0 or above the scale in the first or last)."""
    top = scale if scale and scale > 0 else 1.0
    return min(bins - 1, max(0, int(score / top * bins)))


_WIDTH, _HEIGHT, _LEFT, _TOP = 340.0, 150.0, 30.0, 34.0
_COLOURS = {"pass": "#2da44e", "fail": "#cf222e", "other": "#8c959f"}


def _chart(name: str, bins: list[dict[str, Any]], scale: float,
           lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The geometry of a histogram's SVG: stacked bars (pass, fail, unlabelled), the count
    above each bin, and vertical lines (thresholds) at ``value`` on ``0..scale``."""
    peak = max([1, *(b["count"] for b in bins)])
    step = _WIDTH / len(bins)
    bottom = _TOP + _HEIGHT
    rects, counts = [], []
    for i, b in enumerate(bins):
        x = _LEFT + i * step
        y = bottom
        for part, n in (("pass", b["pass"]), ("fail", b["fail"]),
                        ("other", b["count"] - b["pass"] - b["fail"])):
            if n <= 0:
                continue
            h = n / peak * _HEIGHT
            y -= h
            rects.append({"x": x + 2, "y": y, "w": step - 4, "h": h, "fill": _COLOURS[part],
                          "title": f"{_num(b['low'])}-{_num(b['high'])}: {n} {part}"})
        counts.append({"bin": i, "x": x + step / 2, "y": bottom - b["count"] / peak * _HEIGHT - 3,
                       "count": b["count"]})
    drawn = []
    for n, line in enumerate(lines):
        value = line["value"]
        if value is None or not math.isfinite(float(value)):
            continue
        x = _LEFT + min(1.0, max(0.0, float(value) / scale)) * _WIDTH
        drawn.append({**line, "x": x, "label_y": 12 + 12 * n})
    return {"name": name, "rects": rects, "counts": counts, "lines": drawn, "scale": scale,
            "left": _LEFT, "right": _LEFT + _WIDTH, "top": _TOP, "bottom": bottom,
            "width": _LEFT + _WIDTH + 10, "height": bottom + 24}


def _text(value: Any) -> dict[str, Any]:
    """A value for display: text (JSON for structures), cut to ``MAX_TEXT_CHARS``."""
    if value is None:
        text = ""
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, indent=1, default=str)
    cut = max(0, len(text) - MAX_TEXT_CHARS)
    return {"text": text[:MAX_TEXT_CHARS] if cut else text, "cut": cut, "length": len(text)}


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tracescore", "_offline/reports/templates"),
        autoescape=True,  # every value is escaped, whatever the file name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["pct"] = lambda v: "–" if v is None else f"{v:.1%}"
    return env


def eval_html(report: dict[str, Any]) -> str:
    """The HTML page of an evaluation's JSON report (``result_to_dict(result)``).

    Args:
        report: the ``--report`` dict.

    Returns:
        A complete HTML document.
    """
    summary = report["summary"]
    scorers = []
    for scorer_id, s in summary["scorers"].items():
        scores, labels = [], []
        for item in report["items"]:
            cell = item["scores"].get(scorer_id)
            if cell and cell["status"] == "scored" and cell["score"] is not None:
                scores.append(float(cell["score"]))
                labels.append(cell["label"])
        scale = float(s.get("scale") or 1.0)
        bins = histogram(scores, scale, labels)
        lines = [{"name": "threshold", "value": s["threshold"], "colour": "#0969da",
                  "dashed": False}] if s.get("threshold") is not None else []
        scorers.append({"id": scorer_id, "summary": s, "scale": scale, "bins": bins,
                        "chart": _chart(scorer_id, bins, scale, lines)})
    failing = []
    for item in report["items"]:
        # An item without an id is named by its place in the data, as in the JSON's "index".
        shown_id = item["id"] if item["id"] is not None else f"#{item['index']}"
        base = {"id": shown_id, "index": item["index"], "input": _text(item["input"]),
                "output": _text(item["output"]), "ground_truth": _text(item["ground_truth"])}
        if item["error"] is not None:
            failing.append({**base, "scorer": "target", "score": None, "label": "error",
                            "reason": _text(f'{item["error"]["type"]}: '
                                            f'{item["error"]["message"]}')})
        for scorer_id, cell in item["scores"].items():
            if cell["status"] == "error" or cell["label"] == "fail":
                failing.append({**base, "scorer": scorer_id, "score": cell["score"],
                                "label": cell["label"] or cell["status"],
                                "reason": _text(cell["reason"])})
    return _environment().get_template("eval.html.j2").render(
        report=report, scorers=scorers, failing=failing[:MAX_FAILING_ROWS],
        failing_total=len(failing), max_rows=MAX_FAILING_ROWS, title=_title(report),
    )


def _title(report: dict[str, Any]) -> str:
    return f"tracescore eval {report['experiment']['name']}: {report['verdict']}"


def calibration_html(report: dict[str, Any]) -> str:
    """The HTML page of a calibration's JSON report (``CalibrationResult.to_dict()``).

    Args:
        report: the ``--report`` dict.

    Returns:
        A complete HTML document.
    """
    at = report["at_threshold"]
    best = report["best_threshold"]
    scored = [i for i in report["items"] if i["status"] == "scored" and i["score"] is not None]
    top = max([1.0, *(float(i["score"]) for i in scored)])
    higher = report["higher_is_better"]
    threshold = at["threshold"]

    def judge_pass(score: float) -> bool:
        return score >= threshold if higher else score <= threshold

    lines = [{"name": "threshold", "value": threshold, "colour": "#0969da", "dashed": False}]
    if best is not None and best["threshold"] != threshold:
        lines.append({"name": "advised", "value": best["threshold"], "colour": "#8250df",
                      "dashed": True})
    per_label = []
    for human, wanted in (("pass", True), ("fail", False)):
        scores = [float(i["score"]) for i in scored if i["human_pass"] is wanted]
        # Coloured by the judge's verdict at the threshold: pass green, fail red.
        verdicts: list[str | None] = ["pass" if judge_pass(s) else "fail" for s in scores]
        bins = histogram(scores, top, verdicts)
        per_label.append({"label": human, "n": len(scores), "bins": bins,
                          "chart": _chart(f"human {human}", bins, top, lines)})

    disagreements = [
        {"id": i["id"], "human": "pass" if i["human_pass"] else "fail",
         "judge": "pass" if judge_pass(float(i["score"])) else "fail", "score": i["score"],
         "explanation": _text(i["explanation"])}
        for i in scored if judge_pass(float(i["score"])) is not i["human_pass"]
    ]
    problems = [{"id": i["id"], "status": i["status"], "error_type": i.get("error_type"),
                 "explanation": _text(i["explanation"])}
                for i in report["items"] if i["status"] != "scored"]
    verdict_class = {"passed": "passed", "no better than chance": "chance"}.get(
        report["verdict"], "failed")
    return _environment().get_template("calibrate.html.j2").render(
        report=report, at=at, best=best, verdict_class=verdict_class, per_label=per_label, top=top,
        disagreements=disagreements[:MAX_FAILING_ROWS], disagreements_total=len(disagreements),
        problems=problems[:MAX_FAILING_ROWS], problems_total=len(problems),
        max_rows=MAX_FAILING_ROWS,
        title=f"tracescore calibrate {report['scorer']}",
    )


def rescore_html(report: dict[str, Any]) -> str:
    """The HTML page of a re-scoring's JSON report (``RescoreResult.to_dict()``): the sides
    with their evaluator versions, each side's score histogram with its threshold, each side
    against the baseline, the turns that moved most with both reasons.

    Args:
        report: the ``--report`` dict.

    Returns:
        A complete HTML document.
    """
    charts = []
    for index, side in enumerate(report["sides"]):
        scale = float(side.get("scale") or 1.0)
        # Every turn's score, counted as the run went (the report lists only the first turns).
        bins = side["histogram"]
        lines = [{"name": "threshold", "value": side["threshold"], "colour": "#0969da",
                  "dashed": False}]
        charts.append({"label": side["label"],
                       "chart": _chart(f"side {index}", bins, scale, lines)})
    env = _environment()
    env.globals["text"] = _text
    return env.get_template("rescore.html.j2").render(
        report=report, charts=charts, title="tracescore rescore")


def write_html(html: str, path: str | Path) -> None:
    """Write a rendered page to ``path`` (UTF-8; a lone surrogate shows as ``\\udc80``)."""
    Path(path).write_text(html, encoding="utf-8", errors="backslashreplace")
