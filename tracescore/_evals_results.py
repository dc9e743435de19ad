"""The result types of ``run_evals``: per item, per scorer, and for the whole run.

Plain frozen dataclasses; ``EvalResult.to_dict()`` and ``EvalResult.table()`` render them (see
``_evals_report``).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from ._evals_data import EvalItem

__all__ = [
    "EvalItemResult",
    "EvalResult",
    "ItemScore",
    "ItemStatus",
    "ScorerSummary",
    "TargetError",
    "Verdict",
]

Verdict = Literal["passed", "scored", "failed"]
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
    """What ``run_evals`` returns.

    Attributes:
        scores: scorer id -> unrounded mean over the items it scored (None when it scored
            none), for every scorer and gate.
        summary: a JSON-ready dict: ``total_items``, ``target_errors``, ``duration_seconds``,
            and ``scorers``: scorer id -> ``scored``, ``not_scorable``, ``errors``,
            ``skipped``, ``error_types``, ``mean``, ``threshold``, ``gate``,
            ``higher_is_better``, ``scale``, ``passed``, ``problems``.
        verdict: ``passed``, ``scored`` or ``failed`` (see ``run_evals``).
        reasons: why the verdict is not ``passed``, one sentence each.
        items: one ``EvalItemResult`` per data item, in data order.
        scorers: scorer id -> ``ScorerSummary`` (the typed form of ``summary["scorers"]``).
        experiment_name: the experiment's name.
        experiment_id: a random id of this run (also on its spans).
        started_at: when the run started (UTC).
        source: the data file path, when data came from a file.
        trace_id: the experiment span's trace id (32 hex digits), when traced.

    Example:
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
        from ._evals_report import result_to_dict

        return result_to_dict(self)

    def table(self) -> str:
        """A plain-text table of the scorers, the target errors and the verdict."""
        from ._evals_report import format_table

        return format_table(self)

    def __str__(self) -> str:
        return self.table()
