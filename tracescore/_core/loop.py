"""The one background event loop of a process: scoring jobs and judge calls both run on it.

One loop, not one per concern: litellm binds its HTTP clients and logging worker to the first
loop that uses it, and a scoring job that awaits its judge on the same loop pays no cross-thread
hand-off. The loop runs in a daemon thread named ``tracescore``, starts on first use, and starts
afresh in a child process after ``fork()`` (the parent's thread does not survive it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

THREAD_NAME = "tracescore"

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_lock = threading.Lock()


def get_loop() -> asyncio.AbstractEventLoop:
    """The process's tracescore loop, started on first use.

    Raises:
        RuntimeError: the loop could not be created (for example no file descriptors left).
    """
    global _loop, _thread
    loop = _loop
    thread = _thread
    if loop is not None and thread is not None and thread.is_alive():
        return loop
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            try:
                new_loop = asyncio.new_event_loop()
            except BaseException as exc:  # e.g. EMFILE: say so in one exception type
                raise RuntimeError("tracescore could not start its event loop") from exc
            thread = threading.Thread(target=_run, args=(new_loop,), name=THREAD_NAME,
                                      daemon=True)
            thread.start()
            _loop, _thread = new_loop, thread
        return _loop


def _run(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.shutdown_asyncgens())


def is_loop_thread() -> bool:
    """True when called on the loop's own thread."""
    return _thread is not None and threading.current_thread() is _thread


async def on_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the tracescore loop from any event loop. On the loop itself it is
    awaited directly; from another loop it runs there and cancelling the caller cancels it."""
    loop = get_loop()
    if asyncio.get_running_loop() is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the tracescore loop and wait for it, from synchronous code or from
    inside another running event loop (the calling thread blocks; its loop is not re-entered).

    Raises:
        RuntimeError: called from a task already running on the tracescore loop (it would wait
            on itself); use ``await`` there instead.
    """
    loop = get_loop()
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError(
            "Scorer.run() was called from a scorer step; make the step 'async def' and use "
            "'await scorer.arun(...)' instead"
        )
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


def stop(timeout: float = 2.0) -> None:
    """Cancel what is left on the loop, close litellm's clients there, and stop it (at
    interpreter exit, after the final flush)."""
    global _loop, _thread
    with _lock:
        loop, thread = _loop, _thread
        _loop = _thread = None
    if loop is None or thread is None or not thread.is_alive():
        return

    async def cancel_pending() -> None:
        litellm = sys.modules.get("litellm")
        close_clients = getattr(litellm, "close_litellm_async_clients", None)
        if close_clients is not None:
            # The HTTP clients were created on this loop: close them here, not from another.
            await asyncio.wait_for(close_clients(), timeout=timeout / 2)
            await asyncio.sleep(0.01)  # lets the closed transports finish closing
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout / 2)

    with contextlib.suppress(Exception):  # best effort at exit
        asyncio.run_coroutine_threadsafe(cancel_pending(), loop).result(timeout=timeout)
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=timeout)
    if not thread.is_alive():
        loop.close()


def _after_fork_in_child() -> None:
    global _loop, _thread, _lock
    _loop = _thread = None
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
