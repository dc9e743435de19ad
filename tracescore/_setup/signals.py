"""Flushing before a SIGTERM death: how ``docker stop`` and Kubernetes stop a process.

With SIGTERM's default disposition the kernel ends the process at once: no ``atexit`` hook
runs, so every span still queued for export or held for its scores is lost (measured: 0 of 100
spans arrived from a process stopped 2 s into its work). When ``configure()`` finds that default
disposition (and runs in the main thread, the only one ``signal.signal`` works in), it installs
``_on_sigterm``: flush within the deadline, then die of SIGTERM exactly as the default would
(the parent sees ``-15``, a shell ``143``). A handler someone else installed, before or after
``configure()``, is never replaced; servers that install their own (gunicorn, uvicorn, Celery)
flush through their shutdown hooks instead (see docs/stopping.md).

The handler runs in the main thread between two bytecodes, possibly while that thread holds a
lock of tracescore, of the SDK or of ``threading`` itself. So the flush runs on a helper thread
started with ``_thread`` (``threading.Thread.start`` takes a lock the interrupted thread may
hold), and the main thread only waits, with the deadline, on a lock nobody else knows: the
worst an interrupted critical section can do is cost the flush, never hang the process.

This module imports nothing of tracescore: ``configure()`` hands it what to call.
"""

from __future__ import annotations

import _thread
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

# What the handler calls on the helper thread, with the deadline in seconds: tracescore's
# shutdown of the current configuration. Set by ``update``; plain attribute reads in the handler.
_stop: Callable[[float], Any] | None = None
_timeout: float = 0.0


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Default disposition first: a second SIGTERM while we flush ends the process at once, as
    # it would have without us (an impatient operator, or a supervisor's second signal).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    stop, timeout = _stop, _timeout
    if stop is not None and timeout > 0:
        done = _thread.allocate_lock()
        done.acquire()

        def run() -> None:
            try:
                stop(timeout)
            except BaseException:  # noqa: BLE001 - dying anyway; nothing may escape a thread
                pass
            finally:
                done.release()

        try:
            _thread.start_new_thread(run, ())
        except Exception:  # no new threads (interpreter finalizing): die without the flush
            pass
        else:
            done.acquire(timeout=timeout)
    # As the default disposition would have ended it: killed by SIGTERM, no atexit hooks.
    os.kill(os.getpid(), signal.SIGTERM)
    # Only reached when this thread blocks SIGTERM (pthread_sigmask): exit with the shell's
    # status of a SIGTERM death rather than carry on after the operator asked us to stop.
    os._exit(128 + signal.SIGTERM)


def installed() -> bool:
    """Whether tracescore's SIGTERM handler is the one in force."""
    return _supported() and signal.getsignal(signal.SIGTERM) is _on_sigterm


def update(enabled: bool, stop: Callable[[float], Any], timeout: float) -> bool:
    """Install, keep or remove tracescore's SIGTERM handler; called by every ``configure()``.

    Installs it only when SIGTERM has its default disposition (``SIG_DFL``): a handler the
    application or its server installed, or ``SIG_IGN``, is left alone. With ``enabled`` False
    it removes its own handler (restoring the default) and nothing else.

    Args:
        enabled: ``ExportOptions(flush_on_sigterm=...)``, default ``TRACESCORE_FLUSH_ON_SIGTERM``,
            else True.
        stop: called on a helper thread with the deadline in seconds when SIGTERM arrives;
            shuts tracescore down (flushing what is held and queued).
        timeout: that deadline in seconds (``flush_timeout``); the process dies of SIGTERM
            when it passes, flushed or not.

    Returns:
        True when tracescore's handler is in force afterwards.
    """
    global _stop, _timeout
    if not _supported() or threading.current_thread() is not threading.main_thread():
        return False
    try:
        current = signal.getsignal(signal.SIGTERM)
        if not enabled:
            if current is _on_sigterm:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
            return False
        # Published before the handler can run.
        _stop, _timeout = stop, timeout
        if current is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
            return True
        return current is _on_sigterm
    except (ValueError, OSError):  # embedded interpreters may refuse signal handlers
        return False


def _supported() -> bool:
    # On Windows SIGTERM is never delivered by the system and os.kill means TerminateProcess:
    # there is no disposition to honour.
    return os.name == "posix" and hasattr(signal, "SIGTERM")
