"""Rounding of LLM-judged scores."""

from __future__ import annotations

import math

__all__ = ["round_half_up"]

# Number.EPSILON in JavaScript: nudges values such as 0.125, stored as 0.12499999..., up.
_EPSILON = 2.220446049250313e-16


def round_half_up(value: float) -> float:
    """Round to 2 decimals, halves up, as JavaScript's ``Math.round`` does.

    Formula (the Mastra evals round the same way):
    ``floor((x + 2.220446049250313e-16) * 100 + 0.5) / 100``. Python's ``round`` rounds
    halves to even and would give 0.12 for 0.125.

    Args:
        value: a finite float.

    Returns:
        ``value`` rounded to 2 decimals.

    Examples:
        >>> round_half_up(0.125)
        0.13
        >>> round_half_up(0.575)
        0.58
    """
    return math.floor((value + _EPSILON) * 100 + 0.5) / 100
