"""CPU-bound steps off the tracescore loop: a small, bounded thread pool.

The loop (``tracescore._core.loop``) serves every scoring job and every judge call. A synchronous
step that takes long there (a heuristic scorer on a long text, JSON repair of a runaway judge
reply) would stall all of them, and the flush deadline passes for spans whose scores were
nearly done. Such steps run in one of ``WORKERS`` threads instead.

Because of the GIL this adds no CPU: pure-Python work in a worker still holds the interpreter,
but the interpreter switches threads every 5 ms (``sys.getswitchinterval()``), so the loop keeps
answering. The work itself is bounded elsewhere (``tracescore._pipeline.input_caps``, the judge's
reply
cap): a worker cannot be cancelled, so a job that times out leaves its step to finish there.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

# Two: one per core of the machines this is sized for; more threads would only queue on the GIL.
WORKERS = 2
THREAD_NAME_PREFIX = "tracescore-cpu"

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def executor() -> ThreadPoolExecutor:
    """The process's pool, created on first use (and afresh in a child after ``fork()``)."""
    global _pool
    pool = _pool
    if pool is None:
        with _lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=WORKERS,
                                           thread_name_prefix=THREAD_NAME_PREFIX)
            pool = _pool
    return pool


async def run_cpu(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in the pool and await its result from the running loop.

    Raises:
        Whatever ``fn`` raises. Cancelling the caller stops waiting, not ``fn``.

    Examples:
        >>> await run_cpu(sorted, big_list)  # doctest: +SKIP
    """
    loop = asyncio.get_running_loop()
    call = functools.partial(fn, *args)
    try:
        future = loop.run_in_executor(executor(), call)
    except RuntimeError:
        # Thread pools refuse new work once the interpreter is exiting, and the exit hook's
        # final flush may still score spans: do the step here rather than lose the score.
        return call()
    return await future


def in_worker() -> bool:
    """True when called on one of the pool's threads (a step running off the loop)."""
    return threading.current_thread().name.startswith(THREAD_NAME_PREFIX)


def _after_fork_in_child() -> None:
    global _pool, _lock
    _pool = None  # the parent's worker threads do not exist here
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
