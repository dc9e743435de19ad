"""What a judge call hands back: ``JudgeReply``, and its form for a caller that made no call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel

# pydantic is imported lazily: ``import tracescore`` (which imports the judge for
# ``tracescore.Judge``) stays free of it, hence the bound by name.
SchemaT = TypeVar("SchemaT", bound="BaseModel")


@dataclass(frozen=True)
class JudgeReply(Generic[SchemaT]):
    """What one logical judge call produced.

    Attributes:
        parsed: the validated answer, an instance of the requested schema.
        content: the raw text of the answer that validated.
        model: the judge's litellm model string.
        calls: completions actually requested for this reply: 1, or 2 when a repair retry was
            needed (transport-level retries of failed requests are not counted), and 0 when
            the reply came from the judge's cache or from an identical request already in
            flight, whose caller accounts for the call.
        prompt_tokens: input tokens over those completions, as reported by the provider (0 for
            a cached or shared reply).
        completion_tokens: output tokens over those completions (0 for a cached or shared
            reply).
        cost: USD cost from ``litellm.completion_cost``, or ``None`` when litellm has no price
            for the model (``0.0`` for a cached or shared reply).
        cached: the reply was served without a call of its own.
    """

    parsed: SchemaT
    content: str
    model: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    cached: bool = False


def cached_reply(parsed: SchemaT, content: str, model: str) -> JudgeReply[SchemaT]:
    """The reply of a caller served without a call of its own: no calls, tokens or cost.

    Args:
        parsed: this caller's own instance of the answer.
        content: the answer's text.
        model: the judge's litellm model string.
    """
    return JudgeReply(
        parsed=parsed,
        content=content,
        model=model,
        calls=0,
        prompt_tokens=0,
        completion_tokens=0,
        cost=0.0,
        cached=True,
    )
