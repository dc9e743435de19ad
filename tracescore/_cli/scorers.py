"""Scorers by id for the command line: ``--scorer answer-relevancy:0.7`` becomes a scorer.

The ids are ``tracescore.scorers.registry()``'s; this module adds the command line's syntax
and wording. Shared by ``tracescore eval``, ``calibrate`` and ``rescore``; imports none of them.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any

_SCORER_ID = re.compile(r"[a-z0-9][a-z0-9-]*")


class UsageError(Exception):
    """A problem the user must fix before the run can be made (exit code 2)."""



def available_scorers() -> Mapping[str, Callable[..., Any]]:
    """Scorer id -> factory: ``tracescore.scorers.registry()``."""
    from tracescore.scorers import registry

    return registry()


def factory_for(scorer_id: str) -> Callable[..., Any]:
    """The factory of ``scorer_id`` (``tracescore.scorers.get``).

    Raises:
        UsageError: not a scorer id, or no such scorer.
    """
    if not _SCORER_ID.fullmatch(scorer_id):
        raise UsageError(f"{scorer_id!r} is not a scorer id (lowercase, e.g. answer-relevancy)")
    factories = available_scorers()
    if scorer_id not in factories:
        raise UsageError(
            f"unknown scorer {scorer_id!r}; available: {', '.join(factories) or 'none'}")
    return factories[scorer_id]


def parse_scorer(text: str) -> tuple[str, float | None]:
    """``id`` or ``id:threshold`` as (id, threshold or None).

    Raises:
        UsageError: the threshold is not a finite number.
    """
    scorer_id, sep, raw = text.partition(":")
    if not sep:
        return scorer_id, None
    try:
        threshold = float(raw)
    except ValueError:
        raise UsageError(f"--scorer {text}: the threshold {raw!r} is not a number") from None
    if threshold != threshold or threshold in (float("inf"), float("-inf")):
        raise UsageError(f"--scorer {text}: the threshold must be a finite number")
    return scorer_id, threshold


def build_scorer(scorer_id: str, judge: Any, options: dict[str, Any] | None = None) -> Any:
    """The scorer ``scorer_id`` with its defaults, judged by ``judge`` (None: the default).

    Args:
        scorer_id: the scorer's id.
        judge: a ``tracescore.Judge``, a model string, or None.
        options: further factory arguments by name (e.g. ``{"prompt_set": "tracescore-v2"}``).

    Raises:
        UsageError: the id is unknown, an option is not one of the factory's, or the scorer
            needs options the command line lacks.
    """
    from tracescore._core.errors import ConfigurationError

    factory = factory_for(scorer_id)
    kwargs: dict[str, Any] = {}
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    for name, value in (options or {}).items():
        if name not in params or name == "model":
            accepted = ", ".join(p for p in params if p != "model") or "none"
            raise UsageError(f"scorer {scorer_id!r} has no option {name!r} (its options: "
                             f"{accepted}; the judge is judge=MODEL)")
        kwargs[name] = value
    if judge is not None and "model" in params:
        kwargs["model"] = judge
    try:
        return factory(**kwargs)
    except ConfigurationError as exc:
        if options:
            raise UsageError(f"scorer {scorer_id!r}: {exc}") from None
        raise UsageError(
            f"scorer {scorer_id!r} cannot be built from the command line ({exc}); use "
            "tracescore.run_evals() in Python to pass its options"
        ) from None
    except TypeError as exc:
        # A scorer whose options have no default (tool-call-accuracy's tools).
        raise UsageError(
            f"scorer {scorer_id!r} cannot be built from the command line ({exc}); use "
            "tracescore.run_evals() in Python to pass its options"
        ) from None
