"""Verdict types for judge schemas: compared after ``strip().lower()`` (SCORERS.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

__all__ = ["YesNo", "YesUnsureNo", "normalise_verdict"]


def normalise_verdict(value: Any) -> Any:
    """``" Yes "`` -> ``"yes"``; non-strings are left for the schema to reject."""
    return value.strip().lower() if isinstance(value, str) else value


YesNo = Annotated[Literal["yes", "no"], BeforeValidator(normalise_verdict)]
YesUnsureNo = Annotated[Literal["yes", "unsure", "no"], BeforeValidator(normalise_verdict)]
