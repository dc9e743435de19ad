"""Small pieces shared by the prebuilt judge scorers: the reason schema, the count check of a
judged list, and the ``options`` of a context scorer.

Only what is the same in meaning lives here; verdict schemas, whose verdicts differ from one
scorer to another, stay with their scorers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

__all__ = ["Reason", "check_count", "context_options"]


class Reason(BaseModel):
    """Reason answer."""

    reason: str


def check_count(got: Sequence[Any], expected: int, items: str, per: str) -> None:
    """A ``JudgePrompt`` validator's check: the judge answered one item per input, in order.

    Raises:
        ValueError: ``len(got) != expected`` ("expected 3 verdicts, one per claim in order,
            got 2"), which has the judge asked once more.
    """
    if len(got) != expected:
        raise ValueError(f"expected {expected} {items}, one per {per} in order, got {len(got)}")


def context_options(
    context: Sequence[Any] | None,
    context_extractor: Callable[[Any, Any], Sequence[Any]] | None,
    scale: float,
) -> dict[str, Any]:
    """The ``options`` of a context scorer taking ``context``, ``context_extractor``, ``scale``."""
    return {
        "context": None if context is None else list(context),
        "context_extractor": context_extractor,
        "scale": float(scale),
    }
