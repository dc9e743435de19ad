"""Verdict types for judge schemas: compared after ``strip().lower()``.

Judges, small local models especially, sometimes write the verdict as a sentence ("Yes, the
model addresses the question."). A leading ``yes``, ``no`` or ``unsure`` followed by
punctuation or a space is taken as the verdict; anything else is left for the schema to reject
(and the judge gets its repair retry).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

__all__ = ["YesNo", "YesUnsureNo", "normalise_verdict"]

# The word, then the end or a character that cannot continue a word ("no" in "none" is not one).
_LEADING_VERDICT = re.compile(r"(yes|no|unsure)(?![\w'’-])")


def normalise_verdict(value: Any) -> Any:
    """``" Yes "`` -> ``"yes"``; ``"No, it does not."`` -> ``"no"``; non-strings are left for
    the schema to reject.

    Examples:
        >>> normalise_verdict("Yes, the model addresses the question."), normalise_verdict("None")
        ('yes', 'none')
    """
    if not isinstance(value, str):
        return value
    text = value.strip().lower()
    match = _LEADING_VERDICT.match(text)
    return match.group(1) if match else text


YesNo = Annotated[Literal["yes", "no"], BeforeValidator(normalise_verdict)]
YesUnsureNo = Annotated[Literal["yes", "unsure", "no"], BeforeValidator(normalise_verdict)]
