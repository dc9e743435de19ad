"""Where a judge call runs: litellm in this process, or the judge child process.

Either way the caller awaits it on the one tracescore loop (``tracescore._loop``): litellm binds
its HTTP clients and its logging worker to the loop that first used them, and breaks (or leaks
sockets) when a process calls it from several loops, as ``Scorer.run()``, the scoring engine
and users' own ``asyncio.run`` would. ``stop()`` ends both at interpreter exit.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Coroutine
from typing import Any

from tracescore import _loop

from .loading import load_litellm

_PROCESS_MODULE = f"{__package__}.process"


async def start_call(kwargs: dict[str, Any], out_of_process: bool) -> Coroutine[Any, Any, Any]:
    """Make ready for one ``litellm.acompletion(**kwargs)`` and return it, not yet awaited.

    Out of process, this waits for the child to start (importing litellm takes seconds), so
    that the caller can time the call alone. litellm must be imported already.

    Args:
        kwargs: the arguments of ``litellm.acompletion``.
        out_of_process: make the call in the shared judge child process.

    Returns:
        The call's coroutine; awaiting it gives the chat completion (``RemoteResponse`` from
        the child) or raises litellm's exception (``RemoteJudgeError`` from the child).

    Raises:
        RemoteJudgeError: (``unavailable``) the child exited or did not start in time.
    """
    if not out_of_process:
        return load_litellm().acompletion(**kwargs)  # type: ignore[no-any-return]
    from .process import shared_process

    child = shared_process()
    await child.wait_ready()  # its start-up is not the call's time
    return child.acompletion(kwargs)


def stop() -> None:
    """Stop the tracescore loop (cancelling what is left on it, closing litellm's clients),
    then the judge child process if one was started. For interpreter exit."""
    try:
        _loop.stop()
    finally:
        module = sys.modules.get(_PROCESS_MODULE)
        if module is not None:
            with contextlib.suppress(Exception):
                module.close_shared_process()
