"""The prebuilt scorers by id: the one registry that the command line, ``tracescore serve``,
calibration and feedback read.

It keeps no list of its own. Each scorer module declares its id once (``SCORER_ID``, the
Mastra-style id its scores carry, e.g. ``answer-relevancy``), and ``tracescore.scorers`` exports
the module's factory; the registry maps each exported factory's module id to that factory. A new
scorer is registered by exporting its factory.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from tracescore._core.errors import ConfigurationError

# create_<name>_scorer and its variants (create_tool_call_accuracy_scorer_llm); create_scorer,
# the custom scorer's factory, names no id.
_FACTORY = re.compile(r"create_[a-z0-9_]+_scorer(_[a-z0-9]+)?")


@functools.cache
def _built() -> Mapping[str, Callable[..., Any]]:
    # The package that imports this module (loaded by then), read without importing it: an
    # import back up would tie the two into a cycle.
    package = sys.modules[__name__.rpartition(".")[0]]
    found: dict[str, Callable[..., Any]] = {}
    for name in package.__all__:
        factory = getattr(package, name)
        if not _FACTORY.fullmatch(name) or not callable(factory):
            continue
        scorer_id = getattr(sys.modules.get(factory.__module__), "SCORER_ID", None)
        if not isinstance(scorer_id, str):
            continue  # a factory whose module declares no id (tests catch it)
        if scorer_id in found:
            raise RuntimeError(f"two tracescore scorer factories claim the id {scorer_id!r}: "
                               f"{found[scorer_id].__name__} and {name}")
        found[scorer_id] = factory
    return MappingProxyType(dict(sorted(found.items())))


def registry() -> Mapping[str, Callable[..., Any]]:
    """Every prebuilt scorer's factory by scorer id, ids in alphabetical order.

    The id is the one the scorer's results and score events carry (``gen_ai.evaluation.name``);
    the factory is the ``create_..._scorer`` function of ``tracescore.scorers`` that builds it.
    ``tracescore scorers``, ``tracescore eval --scorer ID``, a serve file's ``scorer: ID``,
    ``tracescore.calibrate(scorer=ID)`` and ``tracescore.calibrate_feedback(scorer=ID)`` all
    read this mapping. ``create_scorer`` (custom scorers) is not in it.

    Returns:
        A read-only mapping ``{scorer id: factory}``.

    Examples:
        >>> from tracescore import scorers
        >>> scorers.registry()["content-similarity"] is scorers.create_content_similarity_scorer
        True
    """
    return _built()


def ids() -> tuple[str, ...]:
    """The ids of the prebuilt scorers, in alphabetical order (``registry()``'s keys).

    Examples:
        >>> from tracescore import scorers
        >>> "tool-call-accuracy" in scorers.ids()
        True
    """
    return tuple(_built())


def get(scorer_id: str) -> Callable[..., Any]:
    """The factory of the prebuilt scorer ``scorer_id``.

    Args:
        scorer_id: a scorer id such as ``"answer-relevancy"`` (``ids()`` lists them).

    Returns:
        Its ``create_..._scorer`` function; call it with the scorer's options.

    Raises:
        ConfigurationError: no prebuilt scorer has this id (the message lists the known ids).

    Examples:
        >>> from tracescore import scorers
        >>> scorers.get("content-similarity")().run(output="Paris", ground_truth="paris").score
        1.0
    """
    factory = _built().get(scorer_id)
    if factory is None:
        raise ConfigurationError(
            f"unknown scorer {scorer_id!r}; known: {', '.join(_built()) or 'none'}")
    return factory


def options_of(factory: Callable[..., Any]) -> Mapping[str, inspect.Parameter]:
    """The keyword arguments ``factory`` takes, by name (empty when it cannot be read)."""
    try:
        return inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}


def build(scorer_id: str, judge: Any = None, options: Mapping[str, Any] | None = None) -> Any:
    """The scorer ``scorer_id`` with ``options`` and its defaults, judged by ``judge``.

    Args:
        scorer_id: a registered id.
        judge: a ``tracescore.Judge`` or model string given to a factory that takes
            ``model=`` and gets none in ``options``; None: the scorer's default judge.
        options: further factory arguments by name.

    Raises:
        ConfigurationError: the id is unknown, an option is not one of the factory's, a
            required option is missing, or the factory refused a value.
    """
    factory = get(scorer_id)
    params = options_of(factory)
    kwargs = dict(options or {})
    for name in kwargs:
        if params and name not in params:
            accepted = ", ".join(p for p in params if p != "model") or "none"
            raise ConfigurationError(
                f"scorer {scorer_id!r} has no option {name!r} (its options: {accepted})")
    if judge is not None and "model" in params and "model" not in kwargs:
        kwargs["model"] = judge
    try:
        return factory(**kwargs)
    except TypeError as exc:
        # An option without a default (tool-call-accuracy-code's expected_tool, ...).
        raise ConfigurationError(f"scorer {scorer_id!r}: {exc}") from None
