"""How many calls a judge has in flight, and the queue the others wait in.

A model server of one's own (llama.cpp's server, Ollama, LM Studio) runs few requests at once,
often one. Sent more, it queues them itself, and the time they wait there counts against each
call's timeout: the last of six calls to a one-slot server waits five answers long before its
own starts. So a judge limits its own calls in flight (``Judge(max_concurrency=...)``, default
``TRACESCORE_JUDGE_MAX_CONCURRENCY``, else automatic) and the others wait here, in
tracescore's queue (first come, first served), where waiting does not count against the
call's timeout nor against the scoring job's (``tracescore._pipeline.waits``).

The automatic limit, decided once per judge on its first call:

- a judge whose server is not local (a hosted API, a gateway): no limit of its own; the
  engine's ``max_concurrency`` bounds the calls;
- a local server (``api_base`` on a loopback, link-local or private address, ``localhost``,
  ``*.local``, ``host.docker.internal``, or an ``ollama/`` model without one) that reports its
  slots: that many (llama.cpp's ``llama-server`` answers ``GET /props`` with ``total_slots``);
- a local vLLM server (``GET /v1/models`` says ``owned_by: vllm``): no limit, vLLM batches;
- Ollama (``GET /api/version`` answers): 1;
- any other server on this machine: 1; on a private network address (it may be a gateway
  serving many): no limit.

This is a fixed limit, not an adaptive one: a server that reports its slots is taken at its
word, and one that does not is most likely a laptop serving one request at a time.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import logging
import urllib.parse
from typing import Any

from tracescore._pipeline import waits as _waits
from tracescore._setup import env as _env

from .scrub import redact_url

logger = logging.getLogger("tracescore")

# Calls in flight for a local server that reports no slot count.
LOCAL_DEFAULT_LIMIT = 1
# Seconds the slot probe may take (a busy one-slot server still answers /props at once).
PROBE_TIMEOUT = 5.0
_LOCAL_NAMES = ("localhost", "host.docker.internal")
_LOCAL_SUFFIXES = (".localhost", ".local")
# litellm's default base URL for its Ollama providers.
_OLLAMA_DEFAULT = "http://localhost:11434"


def api_base_of(model: str, kwargs: dict[str, Any]) -> str | None:
    """The base URL a judge's calls go to, when tracescore can tell: ``api_base`` or
    ``base_url``, else the provider's base URL variable, else litellm's default for Ollama.

    Examples:
        >>> api_base_of("openai/judge", {"api_base": "http://127.0.0.1:8080/v1"})
        'http://127.0.0.1:8080/v1'
    """
    for key in ("api_base", "base_url"):
        value = kwargs.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    from .direct import OPENAI_COMPATIBLE

    prefix = model.split("/", 1)[0] if "/" in model else ""
    if prefix in OPENAI_COMPATIBLE:
        for name in OPENAI_COMPATIBLE[prefix][0]:
            value = _env.provider_setting(name)
            if value:
                return value
        return None
    if prefix in ("ollama", "ollama_chat"):
        return _env.provider_setting("OLLAMA_API_BASE") or _OLLAMA_DEFAULT
    return None


def locality(api_base: str | None) -> str:
    """Where ``api_base`` is: ``"machine"`` (a loopback or link-local address, ``localhost``,
    a ``.localhost``/``.local`` name, ``host.docker.internal``), ``"network"`` (a private
    address: another machine of one's own network, or a gateway inside a cluster), or
    ``"remote"`` (anything else, and names that are not addresses).

    Examples:
        >>> locality("http://127.0.0.1:8080/v1"), locality("http://10.0.0.5:4000")
        ('machine', 'network')
    """
    if not api_base:
        return "remote"
    try:
        host = urllib.parse.urlsplit(api_base if "//" in api_base else f"//{api_base}").hostname
    except ValueError:
        return "remote"
    if not host:
        return "remote"
    host = host.lower().rstrip(".")
    if host in _LOCAL_NAMES or host.endswith(_LOCAL_SUFFIXES):
        return "machine"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "remote"
    if address.is_loopback or address.is_link_local or address.is_unspecified:
        return "machine"
    return "network" if address.is_private else "remote"


def is_local(api_base: str | None) -> bool:
    """Whether ``api_base`` points at a server of one's own: on this machine or on a private
    network address (``locality``).

    Examples:
        >>> is_local("http://127.0.0.1:8080/v1"), is_local("https://api.openai.com/v1")
        (True, False)
    """
    return locality(api_base) != "remote"


def check_max_concurrency(value: object) -> int | None:
    """``value`` when it is a valid ``Judge(max_concurrency=...)``: None (automatic), 0 (no
    limit of the judge's own) or a positive int.

    Raises:
        ConfigurationError: anything else.
    """
    from tracescore._core.errors import ConfigurationError

    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(
            "Judge max_concurrency must be an int >= 1 (calls in flight), 0 for no limit of "
            f"the judge's own, or None for automatic; got {value!r}"
        )
    return value


class CallLimit:
    """One judge's limit on calls in flight, and its first-come-first-served queue.

    Args:
        model: the judge's model string (for messages).
        api_base: where its calls go (None: unknown, treated as not local).
        requested: ``None`` (automatic, see the module), ``0`` (no limit) or the limit.
        headers: headers for the slot probe (the judge's key, when the server wants one).
    """

    def __init__(self, model: str, api_base: str | None, requested: int | None,
                 headers: dict[str, str] | None = None) -> None:
        self.model = model
        self.api_base = api_base
        self.locality = locality(api_base)
        self._headers = dict(headers or {})
        self.limit: int | None = None
        self.source = ""
        self._resolved = False
        if requested is not None:
            self._set(requested or None, f"Judge(max_concurrency={requested})")
        elif self.locality == "remote":
            self._set(None, "not a local server: the engine's max_concurrency bounds the calls")
        self._resolving: asyncio.Future[None] | None = None
        self._in_flight = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def _set(self, limit: int | None, source: str) -> None:
        self.limit, self.source, self._resolved = limit, source, True

    @property
    def in_flight(self) -> int:
        """Calls of this judge in flight now."""
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Calls of this judge waiting in tracescore's queue now."""
        return sum(1 for f in self._waiters if not f.done())

    def describe(self) -> str:
        """The queue, as a timeout's message names it."""
        limit = "no limit" if self.limit is None else f"{self.limit} call(s) in flight at once"
        return f"judge {self.model!r} ({limit}: {self.source})"

    async def resolve(self) -> None:
        """Decide the automatic limit, once: the first caller asks the server, the others wait
        for its answer."""
        if self._resolved:
            return
        if self._resolving is not None and not self._resolving.done():
            await asyncio.shield(self._resolving)
            return
        self._resolving = asyncio.get_running_loop().create_future()
        try:
            limit, source = await probe_slots(self.api_base or "", self._headers,
                                              self.locality == "machine")
            if not self._resolved:
                self._set(limit, source)
                logger.info(
                    "tracescore judge %r: %s (%s); set Judge(max_concurrency=...) or "
                    "TRACESCORE_JUDGE_MAX_CONCURRENCY to change it", self.model,
                    "no limit on calls in flight" if limit is None
                    else f"at most {limit} call(s) in flight, the rest wait in tracescore's queue",
                    source)
        finally:
            self._resolving.set_result(None)

    async def acquire(self) -> None:
        """Wait for a place among the calls in flight (at once when there is one). The wait is
        recorded as queued time of the current scoring job."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # A new tracescore loop (after a fork, or a restart at exit): the calls counted on
            # the old one will never give their places back.
            self._loop, self._in_flight, self._resolving = loop, 0, None
            self._waiters.clear()
        await self.resolve()
        if self.limit is None:
            self._in_flight += 1
            return
        if self._in_flight < self.limit and not self.waiting:
            self._in_flight += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        waits = _waits.current.get()
        if waits is not None:
            waits.queue_started(self.describe())
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # the place was handed over just as the caller gave up
            else:
                future.cancel()
            raise
        finally:
            if waits is not None:
                waits.queue_ended()
            with contextlib.suppress(ValueError):
                self._waiters.remove(future)

    def release(self) -> None:
        """Give a place back: to the first caller still waiting, else to the pool."""
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done():
                future.set_result(None)  # the place passes on: in_flight is unchanged
                return
        self._in_flight = max(0, self._in_flight - 1)


async def probe_slots(api_base: str, headers: dict[str, str],
                      on_this_machine: bool = True) -> tuple[int | None, str]:
    """Ask a local server how many requests it runs at once.

    Args:
        api_base: the server's base URL.
        headers: for the requests (the judge's key, when there is one).
        on_this_machine: the server is on this machine (``locality`` ``"machine"``); one on
            a private network address may be a gateway serving many, so there an unidentified
            server gets no limit rather than 1.

    Returns:
        ``(limit, why)``: the slot count from llama.cpp's ``GET /props`` (``total_slots``);
        ``None`` for vLLM (``GET /v1/models`` owned by ``vllm``), which batches; 1 for Ollama
        (``GET /api/version`` answers); else ``LOCAL_DEFAULT_LIMIT`` on this machine and
        ``None`` on the network. Never raises: a server that does not answer is unidentified.
    """
    from .direct import session_for_loop

    base = api_base.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    where = redact_url(root)
    session = session_for_loop()
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT)

    async def get(url: str) -> Any:
        try:
            async with session.get(url, headers=headers, timeout=timeout) as resp:
                if resp.status == 200:
                    return await resp.json(content_type=None)
        except Exception:  # noqa: BLE001 - no answer is an answer: not this kind of server
            pass
        return None

    props = await get(f"{root}/props")
    slots = props.get("total_slots") if isinstance(props, dict) else None
    if isinstance(slots, int) and not isinstance(slots, bool) and slots >= 1:
        return slots, f"the server at {where} reports {slots} slot(s) (/props)"
    listing = await get(f"{base}/models")
    data = listing.get("data") if isinstance(listing, dict) else None
    owners = {str(m.get("owned_by", "")).lower() for m in data or [] if isinstance(m, dict)}
    if "vllm" in owners:
        return None, f"the server at {where} is vLLM, which batches calls"
    version = await get(f"{root}/api/version")
    if isinstance(version, dict) and "version" in version:
        return 1, (f"the server at {where} is Ollama, one call at a time unless "
                   "OLLAMA_NUM_PARALLEL says more")
    if not on_this_machine:
        return None, (f"the server at {where} on the network reports no slot count (it may be "
                      "a gateway), so no limit")
    return LOCAL_DEFAULT_LIMIT, (f"the local server at {where} reports no slot count, so "
                                 f"{LOCAL_DEFAULT_LIMIT} at a time")
