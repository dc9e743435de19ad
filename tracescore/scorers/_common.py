"""Small pieces shared by the prebuilt judge scorers: the reason schema, the list-of-texts field
type, the count check of a judged list, and the ``options`` of a context scorer.

Only what is the same in meaning lives here; verdict schemas, whose verdicts differ from one
scorer to another, stay with their scorers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel

__all__ = ["Reason", "Texts", "check_count", "context_options", "drop_blank"]


class Reason(BaseModel):
    """Reason answer."""

    reason: str


def drop_blank(value: list[str]) -> list[str]:
    """The texts stripped, blank ones dropped (judges pad lists with empty strings).

    Examples:
        >>> drop_blank([" a ", "", "  "])
        ['a']
    """
    return [text.strip() for text in value if text.strip()]


Texts = Annotated[list[str], AfterValidator(drop_blank)]
"""A schema field holding a list of texts that the judge wrote, stripped, blank ones dropped.

The validator leaves the JSON schema the judge reads as a plain array of strings."""


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
