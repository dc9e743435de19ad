"""The writer that calls the user's ``configure(on_score=...)`` with a ``ScoreEvent``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracescore._pipeline.request import ScoreOutcome

logger = logging.getLogger("tracescore")


@dataclass(frozen=True)
class ScoreEvent:
    """One score, handed to ``configure(on_score=...)`` callbacks.

    Attributes:
        scorer_id: e.g. ``answer-relevancy``.
        score: the value (0..scale), or None when not scorable or failed.
        label: ``pass``/``fail``/``not_scorable`` or None.
        explanation: the scorer's reason, or the error message.
        error_type: set only when scoring failed.
        trace_id: the scored span's trace id (int).
        span_id: the scored span's span id (int).
        span_name: the scored span's name.
        attributes: the event's attributes as exported.
        result: the scorer's full result object, when there is one.
    """

    scorer_id: str
    score: float | None
    label: str | None
    explanation: str
    error_type: str | None
    trace_id: int
    span_id: int
    span_name: str
    attributes: dict[str, Any]
    result: Any = None

    @classmethod
    def from_outcome(cls, outcome: ScoreOutcome) -> ScoreEvent:
        """The public view of an engine outcome."""
        request = outcome.request
        return cls(
            scorer_id=outcome.scorer_id,
            score=outcome.score,
            label=outcome.label,
            explanation=outcome.explanation,
            error_type=outcome.error_type,
            trace_id=request.trace_id,
            span_id=request.span_id,
            span_name=request.span_name,
            attributes=dict(outcome.attributes),
            result=outcome.result,
        )


class CallbackWriter:
    """Calls ``callback(ScoreEvent)`` for every outcome; whatever it raises is logged.

    Args:
        callback: the user's function; it runs on tracescore's thread and should be fast.
    """

    def __init__(self, callback: Callable[[ScoreEvent], Any]) -> None:
        self.callback = callback

    def write(self, outcome: ScoreOutcome) -> None:
        try:
            self.callback(ScoreEvent.from_outcome(outcome))
        except BaseException:  # noqa: BLE001 - user code on our thread: nothing may escape
            logger.warning("tracescore on_score callback raised", exc_info=True)
