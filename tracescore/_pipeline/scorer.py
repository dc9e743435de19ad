"""What the scoring engine needs from a scorer: the ``Scorer`` protocol and ``as_scorer``.

The engine never depends on ``tracescore.scorers.Scorer`` (the class behind the prebuilt
factories and ``create_scorer``): any object with an async ``arun`` will do, so that users can
bring their own scorer without the framework. ``as_scorer`` is the single place where a partial
object gets the documented defaults for the flags it leaves out; the engine calls it once per
rule and can then read every member without ``getattr(..., default)`` scattered around.

This module sits on the engine's hot path and is imported with ``tracescore``: it imports only
the standard library (no pydantic, no litellm).
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

__all__ = ["SCORER_DEFAULTS", "Scorer", "ScorerResultLike", "as_scorer"]

# The documented default of each member a custom scorer may leave out. A scorer without a
# flag is taken to be the simplest kind: no judge, no context, no tool calls, no ground truth,
# higher is better, scores in [0, 1].
SCORER_DEFAULTS: dict[str, Any] = {
    "id": "custom",
    "uses_judge": False,
    "uses_context": False,
    "uses_tool_calls": False,
    "requires_ground_truth": False,
    "higher_is_better": True,
    "scale": 1.0,
}

_FLAGS = (
    "uses_judge",
    "uses_context",
    "uses_tool_calls",
    "requires_ground_truth",
    "higher_is_better",
)


@runtime_checkable
class ScorerResultLike(Protocol):
    """What ``Scorer.arun`` returns, as far as the engine reads it.

    Required: ``score`` (0..``scale``, or ``None`` when there is no score) and ``reason``.
    Read when present (``getattr`` with a default): ``judge_model`` (``str | None``),
    ``input_tokens`` and ``output_tokens`` (``int``), ``cost`` (USD, ``float | None``) and
    ``not_scorable`` (``bool``; default: ``score is None``).
    ``tracescore.scorers.ScoreResult`` has them all.
    """

    @property
    def score(self) -> float | None:
        """The score, 0..scale; ``None`` when the scorer could not score."""

    @property
    def reason(self) -> str:
        """The explanation of the score, or why there is none."""


@runtime_checkable
class Scorer(Protocol):
    """Structural type of a scorer, as the scoring engine and ``run_evals`` use it.

    ``tracescore.scorers.Scorer`` (every prebuilt factory and ``create_scorer``) implements it
    explicitly; any other object with these members is a scorer too, and ``as_scorer`` fills
    in the flags a custom object leaves out.

    Attributes:
        id: the scorer id, recorded as ``gen_ai.evaluation.name`` (default ``"custom"``).
        uses_judge: whether ``arun`` calls the LLM judge (default ``False``).
        uses_context: whether it judges context pieces, so a rule hands it the trace's
            retrieval documents (default ``False``).
        uses_tool_calls: whether it judges tool calls, so a rule hands it the tool spans'
            calls (default ``False``).
        requires_ground_truth: whether it needs ``ground_truth=`` (default ``False``).
        higher_is_better: ``False`` for scores such as hallucination (default ``True``).
        scale: the maximum score, > 0 (default ``1.0``).

    Examples:
        >>> from tracescore.scorers import create_content_similarity_scorer
        >>> isinstance(create_content_similarity_scorer(), Scorer)
        True
    """

    id: str
    uses_judge: bool
    uses_context: bool
    uses_tool_calls: bool
    requires_ground_truth: bool
    higher_is_better: bool
    scale: float

    async def arun(self, **kwargs: Any) -> Any:
        """Score one case.

        Args:
            **kwargs: ``input``, ``output``, and where the scorer needs them ``ground_truth``,
                ``context``, ``tool_calls`` and any other per-case values.

        Returns:
            A result with ``score`` and ``reason`` (see ``ScorerResultLike``).
        """
        ...


class _ScorerAdapter:
    """A custom scorer object seen through the ``Scorer`` protocol, defaults filled in.

    Members the object has are copied once (the engine builds its rule once); anything else
    (``has_own_context``, ``options``, a test double's ``calls``) is read from the object, so
    the adapter can stand in for it everywhere.
    """

    def __init__(self, wrapped: Any, members: dict[str, Any]) -> None:
        self.wrapped = wrapped
        self.id: str = members["id"]
        self.uses_judge: bool = members["uses_judge"]
        self.uses_context: bool = members["uses_context"]
        self.uses_tool_calls: bool = members["uses_tool_calls"]
        self.requires_ground_truth: bool = members["requires_ground_truth"]
        self.higher_is_better: bool = members["higher_is_better"]
        self.scale: float = members["scale"]

    async def arun(self, **kwargs: Any) -> Any:
        """Score one case with the wrapped object's ``arun``."""
        return await self.wrapped.arun(**kwargs)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the adapter itself lacks.
        if name == "wrapped":  # not set yet (e.g. during unpickling): avoid recursing
            raise AttributeError(name)
        return getattr(self.wrapped, name)

    def __repr__(self) -> str:
        return f"as_scorer({self.wrapped!r})"


def as_scorer(obj: Any) -> Scorer:
    """Return ``obj`` as a ``Scorer``: itself when complete, else wrapped with the defaults.

    The one place where the defaults of the optional members are filled in (see ``Scorer``
    and ``SCORER_DEFAULTS``): ``id="custom"``, ``uses_judge=False``, ``uses_context=False``,
    ``uses_tool_calls=False``, ``requires_ground_truth=False``, ``higher_is_better=True``,
    ``scale=1.0``. An object that has every member is returned unchanged; one that lacks some
    is wrapped in an adapter whose ``arun`` calls the object's and whose other attributes are
    the object's.

    Args:
        obj: a scorer: a prebuilt or ``create_scorer`` scorer, or any object with an async
            ``arun(**kwargs)`` returning something with ``score`` and ``reason``.

    Returns:
        An object satisfying ``Scorer``.

    Raises:
        TypeError: ``obj`` has no callable ``arun``, or a member it has is of the wrong type
            (``id`` not a non-empty string, a flag not a bool, ``scale`` not a finite number
            > 0).

    Examples:
        >>> class Short:
        ...     async def arun(self, **kwargs):
        ...         ...
        >>> scorer = as_scorer(Short())
        >>> scorer.id, scorer.uses_judge, scorer.scale
        ('custom', False, 1.0)
    """
    arun = getattr(obj, "arun", None)
    if not callable(arun):
        raise TypeError(
            f"a scorer needs an async arun(**kwargs) method returning a result with score and "
            f"reason; {type(obj).__name__} object {obj!r} has none. Build one with "
            "tracescore.scorers.create_scorer(...) or a create_<id>_scorer() factory"
        )
    members: dict[str, Any] = {}
    complete = True
    for name, default in SCORER_DEFAULTS.items():
        try:
            members[name] = getattr(obj, name)
        except AttributeError:
            members[name] = default
            complete = False
    _check_members(obj, members)
    if complete:
        return obj  # type: ignore[no-any-return]
    members["scale"] = float(members["scale"])
    return _ScorerAdapter(obj, members)


def _check_members(obj: Any, members: dict[str, Any]) -> None:
    what = f"scorer {type(obj).__name__}"
    scorer_id = members["id"]
    if not isinstance(scorer_id, str) or not scorer_id.strip():
        raise TypeError(f"{what}: id must be a non-empty string, got {scorer_id!r}")
    for flag in _FLAGS:
        if not isinstance(members[flag], bool):
            raise TypeError(f"{what} {scorer_id!r}: {flag} must be a bool, got {members[flag]!r}")
    scale = members["scale"]
    if (
        isinstance(scale, bool)
        or not isinstance(scale, (int, float))
        or not math.isfinite(scale)
        or scale <= 0
    ):
        raise TypeError(f"{what} {scorer_id!r}: scale must be a finite number > 0, got {scale!r}")
