"""The result types of ``run_evals``: per item, per scorer, and for the whole run.

Plain frozen dataclasses, and the two renderings of a result that its own methods return:
``format_table`` (``EvalResult.table()``) and ``result_to_dict`` (``EvalResult.to_dict()``).
They live here, not in ``_evals_report``, so that the dependency runs one way:
``_evals_report`` (the files CI reads: the JSON report, JUnit XML) imports this module, and
this module imports nothing of it.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from tracescore._core.serialize import to_json
from tracescore._offline.evals.data import EvalItem

__all__ = [
    "EvalItemResult",
    "EvalResult",
    "ItemScore",
    "ItemStatus",
    "ScorerSummary",
    "TargetError",
    "Verdict",
    "format_table",
    "result_to_dict",
]

Verdict = Literal["passed", "warned", "failed"]
ItemStatus = Literal["scored", "not_scorable", "error", "skipped"]


@dataclass(frozen=True)
class TargetError:
    """What the target raised for one item (the item was then not scored).

    Attributes:
        type: the exception's class name, e.g. ``ValueError``.
        message: ``str(exception)``.
        traceback: the formatted traceback, for CI logs.
        exception: the exception object itself (not part of reports).
    """

    type: str
    message: str
    traceback: str = ""
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_exception(cls, exc: BaseException) -> TargetError:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return cls(type(exc).__qualname__, str(exc), text, exc)


@dataclass(frozen=True)
class ItemScore:
    """One scorer's outcome on one item.

    Attributes:
        scorer_id: e.g. ``answer-relevancy``.
        status: ``scored``; ``not_scorable`` (the scorer could not score these inputs, e.g. no
            ground truth); ``error`` (the scorer failed: see ``error_type``); ``skipped`` (the
            target raised, so the scorer was not run).
        score: the score, or None unless ``status == "scored"``.
        label: ``pass``/``fail`` against the scorer's threshold (a gate's threshold is its best
            score), ``not_scorable``, or None (no threshold, or not scored).
        reason: the scorer's reason, or what went wrong.
        error_type: ``timeout``, ``rate_limited``, ``invalid_judge_output``,
            ``judge_unavailable``, ``judge_error``, ``no_judge`` or ``scorer_error`` when
            ``status == "error"``; else None.
        result: the scorer's full ``ScoreResult`` (step results, prompts, tokens), when it
            returned one.
    """

    scorer_id: str
    status: ItemStatus
    score: float | None
    label: str | None
    reason: str
    error_type: str | None = None
    result: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class EvalItemResult:
    """Everything about one item: what went in, what came out, and each scorer's outcome.

    Attributes:
        item: the checked item (``input``, ``ground_truth``, ``metadata``, ...).
        output: the target's return value (streams joined), or None when it raised.
        error: what the target raised, or None.
        scores: scorer id -> ``ItemScore``, one entry per scorer and gate.
        duration: seconds spent on the item (target and scoring).
        trace_id: the item span's trace id as 32 hex digits, when traced.
        span_id: the item span's id as 16 hex digits, when traced.
    """

    item: EvalItem
    output: Any
    error: TargetError | None
    scores: dict[str, ItemScore]
    duration: float
    trace_id: str | None = None
    span_id: str | None = None

    @property
    def input(self) -> Any:
        """The item's input."""
        return self.item.input

    @property
    def ground_truth(self) -> Any:
        """The item's ground truth, or None."""
        return self.item.ground_truth


@dataclass(frozen=True)
class ScorerSummary:
    """How one scorer did over the whole run.

    Attributes:
        scorer_id: e.g. ``answer-relevancy``.
        mean: the unrounded mean over scored items (not scorable, failed and skipped items
            left out), or None when no item was scored.
        scored: items with a score.
        not_scorable: items the scorer could not score.
        errors: items on which the scorer failed.
        skipped: items not scored because the target raised.
        error_types: ``error.type`` -> count, over the failed items.
        threshold: the threshold given, or None. A gate's is its best score.
        gate: whether the scorer is a gate.
        higher_is_better: False for scorers such as hallucination, where the threshold is a
            maximum.
        scale: the scorer's maximum score.
        passed: whether the scorer met its requirement (see ``run_evals``).
        problems: why it did not, one sentence each.
    """

    scorer_id: str
    mean: float | None
    scored: int
    not_scorable: int
    errors: int
    skipped: int
    error_types: dict[str, int]
    threshold: float | None
    gate: bool
    higher_is_better: bool
    scale: float
    passed: bool
    problems: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape used in ``EvalResult.summary``."""
        return {
            "mean": self.mean,
            "scored": self.scored,
            "not_scorable": self.not_scorable,
            "errors": self.errors,
            "skipped": self.skipped,
            "error_types": dict(self.error_types),
            "threshold": self.threshold,
            "gate": self.gate,
            "higher_is_better": self.higher_is_better,
            "scale": self.scale,
            "passed": self.passed,
            "problems": list(self.problems),
        }


@dataclass(frozen=True)
class EvalResult:
    """What ``run_evals`` returns, decided for CI:

    - **Means** are unrounded, over the items a scorer *scored*. An item the scorer could not
      score (not scorable), failed on (a judge timeout, invalid judge output, ...) or skipped
      (the target raised) is left out of the mean and counted in ``summary``; a failure is never
      averaged in as 0.
    - **Thresholds** (``{"scorer": s, "threshold": 0.7}``) are compared with the mean:
      ``mean >= threshold``, or ``mean <= threshold`` for scorers where lower is better
      (``higher_is_better=False``, e.g. hallucination).
    - **Gates** must reach their best score on every item: a mean of ``scale`` (1.0 by default;
      0 for lower-is-better scorers), with no failed or skipped item and at least one scored.
    - **Verdict**: ``failed`` when a gate is not met; else ``warned`` when a threshold is
      missed (or no item could be scored), a scorer failed on any item, or the target raised on
      any item; else ``passed``. ``reasons`` says why.

    Attributes:
        scores: scorer id -> unrounded mean over the items it scored (None when it scored
            none), for every scorer and gate.
        summary: a JSON-ready dict: ``total_items``, ``target_errors``, ``duration_seconds``,
            and ``scorers``: scorer id -> ``scored``, ``not_scorable``, ``errors``,
            ``skipped``, ``error_types``, ``mean``, ``threshold``, ``gate``,
            ``higher_is_better``, ``scale``, ``passed``, ``problems``.
        verdict: ``passed``, ``warned`` or ``failed`` (as above).
        reasons: why the verdict is not ``passed``, one sentence each.
        items: one ``EvalItemResult`` per data item, in data order.
        scorers: scorer id -> ``ScorerSummary`` (the typed form of ``summary["scorers"]``).
        experiment_name: the experiment's name.
        experiment_id: a random id of this run (also on its spans).
        started_at: when the run started (UTC).
        source: the data file path, when data came from a file.
        trace_id: the experiment span's trace id (32 hex digits), when traced.

    Examples:
        >>> result = tracescore.run_evals(data=data, scorers=[scorer], target=agent)
        >>> result.verdict, result.scores
        ('passed', {'content-similarity': 0.93})
    """

    scores: dict[str, float | None]
    summary: dict[str, Any]
    verdict: Verdict
    reasons: tuple[str, ...]
    items: tuple[EvalItemResult, ...]
    scorers: dict[str, ScorerSummary]
    experiment_name: str
    experiment_id: str
    started_at: datetime
    source: str | None = None
    trace_id: str | None = None

    @property
    def passed(self) -> bool:
        """``verdict == "passed"``."""
        return self.verdict == "passed"

    def to_dict(self) -> dict[str, Any]:
        """The full result as JSON-ready data: what ``tracescore eval --report`` writes."""
        return result_to_dict(self)

    def table(self) -> str:
        """A plain-text table of the scorers, the target errors and the verdict."""
        return format_table(self)

    def __str__(self) -> str:
        return self.table()


def _jsonable(value: Any) -> Any:
    # Uncapped, but safe for anything: cycles, bytes, objects that are not JSON-serialisable.
    return json.loads(to_json(value, 0))


def number_text(value: float | None) -> str:
    """A mean as it appears in the table and JUnit XML: 4 decimals, or ``-`` for None."""
    return "-" if value is None else f"{value:.4f}"


def requirement_text(s: ScorerSummary) -> str:
    """A scorer's requirement, e.g. ``>= 0.7``, ``<= 0.2``, ``== 1`` for a gate, or ``-``."""
    if s.threshold is None:
        return "-"
    if s.gate:
        return f"== {s.threshold:g}"
    return f"{'>=' if s.higher_is_better else '<='} {s.threshold:g}"


def format_table(result: EvalResult) -> str:
    """A fixed-width table of every scorer (mean, requirement, counts, status), the target's
    errors and the verdict with its reasons."""
    header = ("scorer", "mean", "required", "scored", "n/s", "errors", "skipped", "status")
    rows = [header]
    for s in result.scorers.values():
        rows.append(
            (
                f"gate {s.scorer_id}" if s.gate else s.scorer_id,
                number_text(s.mean),
                requirement_text(s),
                str(s.scored),
                str(s.not_scorable),
                str(s.errors),
                str(s.skipped),
                "ok" if s.passed else "FAIL",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = []
    for row in rows:
        cells = [
            cell.ljust(width) if i in (0, 2, 7) else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    total = result.summary["total_items"]
    errors = result.summary["target_errors"]
    lines.append("")
    lines.append(
        f"{total} item(s), target errors: {errors}, "
        f"{result.summary['duration_seconds']:.2f} s — experiment {result.experiment_name!r} "
        f"({result.experiment_id})"
    )
    lines.append(f"verdict: {result.verdict}")
    lines.extend(f"  - {reason}" for reason in result.reasons)
    return "\n".join(lines)


def _score_dict(score: ItemScore) -> dict[str, Any]:
    result = score.result
    dumped = None
    if result is not None:
        dump = getattr(result, "model_dump", None)
        dumped = dump(mode="json") if callable(dump) else _jsonable(result)
    return {
        "status": score.status,
        "score": score.score,
        "label": score.label,
        "reason": score.reason,
        "error_type": score.error_type,
        "result": dumped,
    }


def _item_dict(item_result: EvalItemResult) -> dict[str, Any]:
    item = item_result.item
    error = item_result.error
    return {
        "index": item.index,
        "id": item.id,
        "input": _jsonable(item.input),
        "ground_truth": _jsonable(item.ground_truth),
        "metadata": _jsonable(item.metadata),
        "output": _jsonable(item_result.output),
        "error": None
        if error is None
        else {"type": error.type, "message": error.message, "traceback": error.traceback},
        "duration_seconds": item_result.duration,
        "trace_id": item_result.trace_id,
        "span_id": item_result.span_id,
        "scores": {k: _score_dict(v) for k, v in item_result.scores.items()},
    }


def result_to_dict(result: EvalResult) -> dict[str, Any]:
    """The full result as JSON-ready data (the ``--report`` file)."""
    return {
        "experiment": {
            "name": result.experiment_name,
            "id": result.experiment_id,
            "started_at": result.started_at.isoformat(),
            "source": result.source,
            "trace_id": result.trace_id,
        },
        "verdict": result.verdict,
        "passed": result.passed,
        "reasons": list(result.reasons),
        "scores": dict(result.scores),
        "summary": result.summary,
        "items": [_item_dict(r) for r in result.items],
    }
