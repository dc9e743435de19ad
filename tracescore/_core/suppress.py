"""Suppressing OpenTelemetry instrumentation, so tracescore never traces or scores itself.

OpenTelemetry's API has no public name for "instrumentation is suppressed here". The API keeps
its key private (``opentelemetry.context._SUPPRESS_INSTRUMENTATION_KEY``, a ``create_key`` key
with a random suffix in every release from 1.30 to 1.45), and ``opentelemetry-instrumentation``,
which the contrib instrumentations use, sets and reads that key together with the plain string
``"suppress_instrumentation"`` it keeps for older instrumentations.

When ``opentelemetry-instrumentation`` is installed, its public ``suppress_instrumentation()``
and ``is_instrumentation_enabled()`` are used as they are. Without it, tracescore sets and reads
both keys itself; the API's private key is looked up with ``getattr``, so a release that renames
it leaves the plain key working instead of failing at import. The package is looked up on first
use, not at import: ``import tracescore`` stays light.

Examples:
    >>> from tracescore._core.suppress import is_suppressed, suppressed
    >>> with suppressed():
    ...     is_suppressed()
    True
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry import context as otel_context

__all__ = ["is_suppressed", "suppressed"]

# What opentelemetry-instrumentation calls _SUPPRESS_INSTRUMENTATION_KEY_PLAIN.
PLAIN_KEY = "suppress_instrumentation"


@contextlib.contextmanager
def suppressed() -> Iterator[None]:
    """Suppress OpenTelemetry instrumentation in the current context, until the block ends.

    Instrumentations (the contrib HTTP clients', OpenInference's, tracescore's own decorators)
    create no spans inside the block. The suppression is a context value: it follows the
    current thread or asyncio task and nothing else.

    Examples:
        >>> with suppressed():
        ...     pass  # calls here are not traced
    """
    contrib = _contrib_suppress()
    if contrib is not None:
        with contrib():
            yield
        return
    ctx = otel_context.get_current()
    for key in _keys():
        ctx = otel_context.set_value(key, True, ctx)
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def is_suppressed() -> bool:
    """Whether OpenTelemetry instrumentation is suppressed in the current context.

    True inside ``suppressed()``, inside ``opentelemetry-instrumentation``'s
    ``suppress_instrumentation()``, and wherever either suppression key is set (as the SDK's
    exporters do around their own requests).

    Examples:
        >>> is_suppressed()
        False
    """
    check = _check
    if check is None:
        check = _resolve_check()
    return check()


# How is_suppressed() decides, resolved on its first call (it runs on every decorated call).
_check: Callable[[], bool] | None = None


def _resolve_check() -> Callable[[], bool]:
    global _check
    enabled = _contrib_enabled()
    if enabled is not None:
        def check() -> bool:
            return not enabled()
    else:
        keys = _keys()
        first, second = keys[0], keys[-1]  # one or two keys (see _keys)

        def check() -> bool:
            # Two plain look-ups, no generator: this runs on every decorated call.
            current = otel_context.get_current()
            return bool(current.get(first) or current.get(second))
    _check = check
    return check


def _keys() -> tuple[str, ...]:
    api_key = getattr(otel_context, "_SUPPRESS_INSTRUMENTATION_KEY", None)
    return (api_key, PLAIN_KEY) if isinstance(api_key, str) else (PLAIN_KEY,)


@functools.lru_cache(maxsize=1)
def _contrib_utils() -> Any:
    try:
        return importlib.import_module("opentelemetry.instrumentation.utils")
    except Exception:  # noqa: BLE001 - absent, or broken by a version mismatch: use the keys
        return None


def _contrib_suppress() -> Callable[[], contextlib.AbstractContextManager[None]] | None:
    function = getattr(_contrib_utils(), "suppress_instrumentation", None)
    return function if callable(function) else None


def _contrib_enabled() -> Callable[[], bool] | None:
    function = getattr(_contrib_utils(), "is_instrumentation_enabled", None)
    return function if callable(function) else None
