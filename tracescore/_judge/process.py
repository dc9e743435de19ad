"""Judge calls in a child process, so litellm's CPU work leaves the application's GIL.

Opt-in with ``Judge(..., out_of_process=True)``. The child is a plain ``python -m
tracescore._judge.process`` (not ``multiprocessing``, whose spawn mode would re-import the
application's main module) talking over two inherited pipes with pickled messages:
``(request id, kwargs, transport)`` in, ``(request id, reply)`` out. The child runs every call
on one asyncio loop, with the judge's transport (``direct`` or ``litellm``; it imports litellm
only when a litellm judge first asks, in answer to a ``load`` request, so start-up is not timed
as a call), and answers with a ``ChatResponse``, or with the failure already classified
(``failures.classify``), so the parent maps errors exactly as it does for in-process calls and
never imports litellm itself. The child exits when the parent closes its end (or dies).

Nothing in the package imports this module at import time (``transport`` imports it on the
first out-of-process call): ``python -m`` would otherwise find it imported already.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from .direct import ChatChoice, ChatMessage, ChatResponse, ChatUsage, DirectClient
from .failures import RemoteJudgeError, classify, describe, rejects_response_format, status_code
from .loading import load_litellm
from .output import content_of

logger = logging.getLogger("tracescore")


# The reply's shape, kept under its old name: both transports answer with it.
RemoteResponse = ChatResponse


_READY = -1  # the request id of the child's first message: it reads requests
LOAD_LITELLM = "load"  # a request's transport that asks the child to import litellm

# Seconds a judge call waits for the child to start (a fresh interpreter importing litellm:
# several seconds, more on a loaded machine) before it counts as unavailable. Not part of the
# judge's own timeout, which times the call itself.
STARTUP_TIMEOUT = 120.0


class JudgeProcess:
    """The parent's side: one child process, shared by every out-of-process judge."""

    def __init__(self) -> None:
        parent_in, child_out = os.pipe()   # child -> parent
        child_in, parent_out = os.pipe()   # parent -> child
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tracescore._judge.process", str(child_in), str(child_out)],
            pass_fds=(child_in, child_out),
            stdin=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        os.close(child_in)
        os.close(child_out)
        self._send_conn = Connection(parent_out, readable=False)
        self._recv_conn = Connection(parent_in, writable=False)
        self._send_lock = threading.Lock()
        self._ids = itertools.count()
        self._waiting: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = {}
        self._lock = threading.Lock()
        self.ready = threading.Event()
        self.litellm_ready = threading.Event()
        self._reader = threading.Thread(target=self._read, name="tracescore-judge-reader",
                                        daemon=True)
        self._reader.start()

    def alive(self) -> bool:
        """Whether the child runs and its replies are being read."""
        return self._proc.poll() is None and self._reader.is_alive()

    async def wait_ready(self, timeout: float = STARTUP_TIMEOUT, litellm: bool = False) -> None:
        """Wait until the child reads requests and, with ``litellm``, has imported litellm.

        Raises:
            RemoteJudgeError: (``unavailable``) the child exited or did not get ready within
                ``timeout`` seconds.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.ready.is_set():
            if not self.alive():
                raise RemoteJudgeError("the judge process exited while starting", "unavailable",
                                       False, None)
            if loop.time() >= deadline:
                raise RemoteJudgeError(f"the judge process did not start within {timeout:g} s",
                                       "unavailable", False, None)
            await asyncio.sleep(0.02)
        if litellm and not self.litellm_ready.is_set():
            try:
                await asyncio.wait_for(self.acompletion({}, LOAD_LITELLM),
                                       max(0.1, deadline - loop.time()))
            except asyncio.TimeoutError:
                raise RemoteJudgeError(f"the judge process did not import litellm within "
                                       f"{timeout:g} s", "unavailable", False, None) from None
            self.litellm_ready.set()

    async def acompletion(self, kwargs: dict[str, Any], transport: str = "litellm") -> Any:
        """Send one call (``transport``: ``litellm`` or ``direct``) to the child and wait for
        its reply."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        request_id = next(self._ids)
        with self._lock:
            self._waiting[request_id] = (loop, future)
        try:
            with self._send_lock:
                self._send_conn.send((request_id, kwargs, transport))
            reply = await future
        finally:
            with self._lock:
                self._waiting.pop(request_id, None)
        if isinstance(reply, RemoteJudgeError):
            raise reply
        return reply

    def _read(self) -> None:
        try:
            while True:
                try:
                    request_id, reply = self._recv_conn.recv()
                except (EOFError, OSError):
                    raise
                except Exception:  # noqa: BLE001 - one bad message must not stop the reader
                    logger.warning("tracescore could not read a judge reply", exc_info=True)
                    continue
                if request_id == _READY:
                    self.ready.set()
                    continue
                with self._lock:
                    entry = self._waiting.get(request_id)
                if entry is not None:
                    loop, future = entry
                    loop.call_soon_threadsafe(_resolve, future, reply)
        except (EOFError, OSError):
            pass
        finally:
            with self._lock:
                waiting = list(self._waiting.values())
            for loop, future in waiting:
                error = RemoteJudgeError("the judge process exited", "unavailable", False, None)
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_resolve, future, error)

    def close(self) -> None:
        """Close the pipes; the child exits on its own."""
        for conn in (self._send_conn, self._recv_conn):
            with contextlib.suppress(OSError):
                conn.close()
        try:
            self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=2)


def _resolve(future: asyncio.Future[Any], reply: Any) -> None:
    if not future.done():
        future.set_result(reply)


_shared: JudgeProcess | None = None
_shared_pid = 0
_shared_lock = threading.Lock()


def shared_process() -> JudgeProcess:
    """The process-wide judge child, started on first use (and again after ``fork()``)."""
    global _shared, _shared_pid
    with _shared_lock:
        if _shared is None or _shared_pid != os.getpid() or not _shared.alive():
            _shared = JudgeProcess()
            _shared_pid = os.getpid()
        return _shared


def close_shared_process() -> None:
    """Stop the judge child (at exit, after the last flush)."""
    global _shared
    with _shared_lock:
        proc, _shared = _shared, None
    if proc is not None and _shared_pid == os.getpid():
        proc.close()


# -- the child ------------------------------------------------------------------------------
def _to_remote(response: Any) -> ChatResponse:
    usage = getattr(response, "usage", None)
    hidden = getattr(response, "_hidden_params", None)
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if not isinstance(cost, (int, float)):
        # litellm did not price it: the same answer as in process (metrics.cost), here where
        # litellm is imported, so that the parent never needs it.
        from .metrics import cost as litellm_cost

        cost = litellm_cost(response)
    return ChatResponse(
        choices=[ChatChoice(ChatMessage(content_of(response)))],
        usage=ChatUsage(int(getattr(usage, "prompt_tokens", 0) or 0),
                        int(getattr(usage, "completion_tokens", 0) or 0)),
        model=str(getattr(response, "model", "") or ""),
        cost=float(cost) if isinstance(cost, (int, float)) else None,
    )


async def _serve(recv: Connection, send: Connection) -> None:
    loop = asyncio.get_running_loop()
    send_lock = threading.Lock()
    send.send((_READY, None))  # reading requests from here on

    def reply(request_id: int, value: Any) -> None:
        with send_lock:
            send.send((request_id, value))

    async def handle(request_id: int, kwargs: dict[str, Any], transport: str) -> None:
        try:
            if transport == LOAD_LITELLM:
                await asyncio.to_thread(load_litellm)
                value: Any = True
            elif transport == "direct":
                value = await DirectClient(kwargs["model"], kwargs).acompletion(kwargs)
            else:
                litellm = load_litellm()  # imported already: the parent asked for it first
                value = _to_remote(await litellm.acompletion(**kwargs))
        except Exception as exc:  # noqa: BLE001 - classified and sent back
            value = exc if isinstance(exc, RemoteJudgeError) else RemoteJudgeError(
                describe(exc), classify(exc), rejects_response_format(exc), status_code(exc)
            )
        await loop.run_in_executor(None, reply, request_id, value)

    tasks: set[asyncio.Task[None]] = set()
    while True:
        try:
            request_id, kwargs, transport = await loop.run_in_executor(None, recv.recv)
        except (EOFError, OSError):
            break
        task = loop.create_task(handle(request_id, kwargs, transport))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    with contextlib.suppress(Exception):
        from .direct import close_session

        await close_session()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the child: ``python -m tracescore._judge.process IN_FD OUT_FD``."""
    args = sys.argv[1:] if argv is None else argv
    recv = Connection(int(args[0]), writable=False)
    send = Connection(int(args[1]), readable=False)
    asyncio.run(_serve(recv, send))


if __name__ == "__main__":
    # Run the copy imported under its real name, so that what the child pickles names
    # ``tracescore._judge.process.RemoteResponse``, not ``__main__.RemoteResponse``.
    from tracescore._judge.process import main as _main

    _main()
