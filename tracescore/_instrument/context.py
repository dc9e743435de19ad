"""Carrying the current trace context into threads."""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def bind_context(func: Callable[..., T]) -> Callable[..., T]:
    """Return ``func`` bound to the context current now, so that spans it creates in another
    thread are children of the current span.

    ``asyncio`` tasks (``asyncio.gather``, ``create_task``) copy the context by themselves;
    threads do not: a function handed to ``ThreadPoolExecutor.submit`` or
    ``threading.Thread`` starts with an empty context and its spans would start new traces.

    Args:
        func: any callable.

    Returns:
        A callable with the same arguments and return value; each call runs in a fresh copy
        of the captured context, so concurrent calls do not interfere.

    Examples:
        >>> with ThreadPoolExecutor() as pool:
        ...     docs = list(pool.map(tracescore.bind_context(search), queries))
    """
    captured = contextvars.copy_context()

    def run(*args: Any, **kwargs: Any) -> T:
        return captured.copy().run(func, *args, **kwargs)

    # Metadata is a nicety: a callable whose attributes raise is still bound.
    with contextlib.suppress(Exception):
        functools.update_wrapper(run, func)
    return run
