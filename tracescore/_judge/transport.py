"""Where and how a judge call runs: the direct HTTP client or litellm, in this process or in
the judge child process.

The transport (``Judge(transport=...)``, default ``TRACESCORE_JUDGE_TRANSPORT``, else
``auto``):

- ``direct`` (``tracescore._judge.direct``): one JSON POST to an OpenAI chat-completions
  endpoint over a shared aiohttp session; imports neither litellm nor the ``openai`` SDK.
- ``litellm``: ``litellm.acompletion``, for every provider litellm knows.
- ``auto`` picks ``direct`` for the providers that speak the OpenAI protocol (``openai/...``,
  ``hosted_vllm/...``, ``lm_studio/...``, ``llamafile/...``: OpenAI itself and any
  OpenAI-compatible server given as ``api_base``) when every judge argument is one the direct
  client understands, and ``litellm`` otherwise (other providers, bare model names, Azure, or
  litellm-only arguments). The choice is logged at debug level and recorded on the judge's
  GenAI client metrics (``tracescore.judge.transport``).

Either way the caller awaits the call on the one tracescore loop (``tracescore._core.loop``):
litellm binds its HTTP clients and its logging worker to the loop that first used them, and so
does the direct client's session. ``stop()`` ends both at interpreter exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Coroutine
from typing import Any

from tracescore._core import loop as _loop
from tracescore._core.errors import ConfigurationError

from . import direct
from .loading import load_litellm, load_litellm_async

logger = logging.getLogger("tracescore")

_PROCESS_MODULE = f"{__package__}.process"
TRANSPORTS = ("auto", "direct", "litellm")


class Route:
    """How one judge's calls go.

    Attributes:
        name: ``direct`` or ``litellm``.
        client: the direct client (None for litellm).
        reason: why ``auto`` chose litellm, or "" when it did not.
    """

    def __init__(self, model: str, kwargs: dict[str, Any], requested: str) -> None:
        if requested not in TRANSPORTS:
            raise ConfigurationError(
                f"Judge transport must be one of {', '.join(TRANSPORTS)}, got {requested!r}"
            )
        why_not = None if requested == "litellm" else direct.unsupported(model, kwargs)
        if requested == "direct" and why_not is not None:
            raise ConfigurationError(
                f"Judge transport='direct' cannot call {model!r}: {why_not}; use "
                "transport='litellm' (or 'auto')"
            )
        if requested == "auto" and why_not is None and model.startswith("azure/"):
            why_not = "Azure OpenAI goes through litellm unless transport='direct' is asked for"
        self.name = "direct" if why_not is None and requested != "litellm" else "litellm"
        self.client = direct.DirectClient(model, kwargs) if self.name == "direct" else None
        self.reason = why_not or ""
        logger.debug("tracescore judge %r: %s transport (%s)", model, self.name,
                     f"asked for {requested}" if requested != "auto" else
                     (f"auto: {why_not}" if why_not else "auto: OpenAI chat-completions protocol"))


def choose(model: str, kwargs: dict[str, Any], requested: str) -> str:
    """The transport a judge of ``model`` with ``kwargs`` would take (``direct``/``litellm``),
    without building it; for the start-up preload.

    Examples:
        >>> choose("openai/gpt-4o-mini", {}, "auto"), choose("anthropic/claude", {}, "auto")
        ('direct', 'litellm')
    """
    if requested == "litellm":
        return "litellm"
    why_not = direct.unsupported(model, kwargs)
    if requested == "auto" and model.startswith("azure/"):
        why_not = why_not or "azure"
    return "direct" if why_not is None else "litellm"


async def prepare(route: Route, out_of_process: bool) -> None:
    """Import what this route needs in this process: litellm for an in-process litellm judge
    (on a worker thread, so the loop keeps running), nothing otherwise."""
    if route.client is None and not out_of_process:
        await load_litellm_async()


async def start_call(
    kwargs: dict[str, Any], out_of_process: bool, route: Route | None = None
) -> Coroutine[Any, Any, Any]:
    """Make ready for one call and return it, not yet awaited.

    Out of process, this waits for the child to start (and, for a litellm judge, to import
    litellm: seconds), so that the caller can time the call alone. In process, litellm must
    be imported already for a litellm judge (``prepare``).

    Args:
        kwargs: the arguments of ``litellm.acompletion`` (the direct client reads the same).
        out_of_process: make the call in the shared judge child process.
        route: the judge's route; None means litellm.

    Returns:
        The call's coroutine; awaiting it gives the chat completion (a ``ChatResponse`` from
        the direct client or the child) or raises (litellm's exception, or a
        ``RemoteJudgeError`` already classified).

    Raises:
        RemoteJudgeError: (``unavailable``) the child exited or did not start in time.
    """
    client = route.client if route is not None else None
    if not out_of_process:
        if client is not None:
            return client.acompletion(kwargs)
        return load_litellm().acompletion(**kwargs)  # type: ignore[no-any-return]
    from .process import shared_process

    child = shared_process()
    await child.wait_ready(litellm=client is None)  # its start-up is not the call's time
    return child.acompletion(kwargs, "direct" if client is not None else "litellm")


def stop() -> None:
    """Close the direct client's session and stop the tracescore loop (cancelling what is left
    on it, closing litellm's clients), then the judge child process if one was started. For
    interpreter exit."""
    try:
        loop, thread = _loop._loop, _loop._thread
        if (loop is not None and thread is not None and thread.is_alive()
                and direct.has_session(loop)):
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(direct.close_session(), loop).result(timeout=1)
        _loop.stop()
    finally:
        module = sys.modules.get(_PROCESS_MODULE)
        if module is not None:
            with contextlib.suppress(Exception):
                module.close_shared_process()
