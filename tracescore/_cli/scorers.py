"""Scorers by id for the command line: ``--scorer answer-relevancy:0.7`` becomes a scorer.

Shared by ``tracescore eval`` and ``tracescore calibrate``; imports neither of them.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from typing import Any

_SCORER_ID = re.compile(r"[a-z0-9][a-z0-9-]*")
_FACTORY = re.compile(r"create_([a-z0-9_]+)_scorer")
_VARIANT_FACTORY = re.compile(r"create_[a-z0-9_]+_scorer_[a-z0-9]+")


class UsageError(Exception):
    """A problem the user must fix before the run can be made (exit code 2)."""



def available_scorers() -> dict[str, Callable[..., Any]]:
    """Scorer id -> factory, for every ``create_<id>_scorer`` exported by ``tracescore.scorers``."""
    import tracescore.scorers as package

    found = {}
    for name in dir(package):
        match = _FACTORY.fullmatch(name)
        factory = getattr(package, name)
        if match and callable(factory):
            found[match.group(1).replace("_", "-")] = factory
    return dict(sorted(found.items()))


def _variant_factories() -> dict[str, Callable[..., Any]]:
    """Scorer id -> factory for ``create_<name>_scorer_<variant>`` (tool-call-accuracy's
    ``_llm`` and ``_code``): the id is the factory module's ``SCORER_ID``, since only the module
    knows it (``tool-call-accuracy`` for the LLM variant, ``tool-call-accuracy-code``)."""
    import tracescore.scorers as package

    found = {}
    for name in dir(package):
        factory = getattr(package, name)
        if _VARIANT_FACTORY.fullmatch(name) and callable(factory):
            module = importlib.import_module(factory.__module__)
            scorer_id = getattr(module, "SCORER_ID", None)
            if isinstance(scorer_id, str):
                found[scorer_id] = factory
    return found


def factory_for(scorer_id: str) -> Callable[..., Any]:
    """The factory of ``scorer_id``.

    Raises:
        UsageError: not a scorer id, or no such scorer.
    """
    if not _SCORER_ID.fullmatch(scorer_id):
        raise UsageError(f"{scorer_id!r} is not a scorer id (lowercase, e.g. answer-relevancy)")
    factories = available_scorers()
    if scorer_id in factories:
        return factories[scorer_id]
    variant = _variant_factories().get(scorer_id)
    if variant is not None:
        return variant
    # Scorers are added by several people; one may exist as a module before the package
    # exports it.
    module_name = scorer_id.replace("-", "_")
    try:
        module = importlib.import_module(f"tracescore.scorers.{module_name}")
    except ImportError:
        module = None
    factory = getattr(module, f"create_{module_name}_scorer", None)
    if callable(factory):
        return factory  # type: ignore[no-any-return]
    raise UsageError(f"unknown scorer {scorer_id!r}; available: {', '.join(factories) or 'none'}")


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
