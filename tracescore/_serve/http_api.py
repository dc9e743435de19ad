"""The OTLP/HTTP receiver and the admin endpoints, on aiohttp's web server.

aiohttp (already a dependency of tracescore, for the judge's transport) parses HTTP with
llhttp: a ``Content-Length`` that is negative, not a number or given twice, a bad chunk size or
an oversized header line is answered 400 by the parser itself; chunked bodies are read as any
other. On top of it, per connection and request:

- ``header_timeout``: a new connection that has not sent a request's headers within it is
  closed; ``idle_timeout``: a keep-alive connection with no request (or a request whose headers
  are still incomplete) is closed after it;
- ``body_timeout``: a body not received within it is answered 408;
- a body passing ``max_request_bytes`` (announced or counted as it arrives, chunked or not) is
  answered 413 and the connection closed, without reading the rest; the bytes being read at
  once are bounded (``2 x max_request_bytes`` in all): past it new bodies get 503 with
  ``Retry-After`` until room frees;
- the listen backlog is ``backlog``; TLS and the bearer token as configured.

``POST /v1/traces`` and ``POST /v1/logs`` take ``application/x-protobuf`` bodies (OTLP/JSON is
answered 415). Errors carry a ``google.rpc.Status`` body, as the OTLP specification asks; 429
and 503 carry ``Retry-After``. ``GET /healthz`` answers 200 while the process runs, ``/readyz``
200 while it takes requests, ``/stats`` the counters as JSON and ``/metrics`` the service's
gauges and counters in Prometheus' text format: on the admin port when one is configured
(no TLS, no auth: for probes and scrapers), else here, behind TLS and auth.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import ssl
import threading
from concurrent import futures
from typing import Any

from .config import Listen
from .intake import (
    INVALID,
    OK,
    THROTTLED,
    TOO_LARGE,
    UNAUTHENTICATED,
    UNAVAILABLE,
    UNSUPPORTED,
    Intake,
    Outcome,
)

logger = logging.getLogger("tracescore")

_STATUS = {OK: 200, INVALID: 400, TOO_LARGE: 413, THROTTLED: 429, UNAVAILABLE: 503,
           UNAUTHENTICATED: 401, UNSUPPORTED: 415}
# google.rpc.Code values of the Status body.
_RPC_CODE = {INVALID: 3, TOO_LARGE: 8, THROTTLED: 8, UNAVAILABLE: 14, UNAUTHENTICATED: 16,
             UNSUPPORTED: 3}
_READ_CHUNK = 64 * 1024
_OTLP_PATHS = {"/v1/traces": "traces", "/v1/logs": "logs"}
_ADMIN_PATHS = ("/healthz", "/readyz", "/stats", "/metrics")


def _status_body(code: str, message: str) -> bytes:
    from google.rpc import status_pb2  # type: ignore[import-untyped, unused-ignore]

    return bytes(status_pb2.Status(code=_RPC_CODE.get(code, 2), message=message)
                 .SerializeToString())


class _ByteBudget:
    """Bytes of bodies being read at once (on the server's loop only)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0

    def take(self, size: int) -> bool:
        if self.used + size > self.total:
            return False
        self.used += size
        return True

    def give(self, size: int) -> None:
        self.used -= size


class _ServerLog:
    """aiohttp's server logger, one line per problem: a request the HTTP parser refuses (bad
    ``Content-Length``, a broken chunk, an oversized header) is counted and logged as a refused
    request, without the traceback aiohttp would print."""

    def __init__(self, server: HttpServer) -> None:
        self._server = server

    def exception(self, msg: str, *args: Any, exc_info: Any = None, **_: Any) -> None:
        import sys

        exc = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        detail = " ".join(str(getattr(exc, "message", None) or exc or "").split())[:200]
        peer = str(args[0]) if args and "%s" in msg else ""
        intake = self._server.intake
        if intake is not None:
            intake.refuse(INVALID, "bad_http", "traces", peer,
                          f"{type(exc).__name__ if exc else 'error'}: {detail}")
        else:
            logger.warning("tracescore serve: %s: %s: %s", self._server.name,
                           type(exc).__name__ if exc else "error", detail)

    def error(self, msg: str, *args: Any, **kw: Any) -> None:
        self.exception(msg, *args, **kw)

    def warning(self, msg: str, *args: Any, **kw: Any) -> None:
        logger.warning("tracescore serve: " + msg, *args)

    def info(self, msg: str, *args: Any, **kw: Any) -> None:
        logger.debug("tracescore serve: " + msg, *args)

    def debug(self, msg: str, *args: Any, **kw: Any) -> None:
        logger.debug("tracescore serve: " + msg, *args)

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802 - logging's name
        return logger.isEnabledFor(level)


class HttpServer:
    """An aiohttp server on its own thread and event loop.

    Args:
        intake: takes OTLP requests (None: admin endpoints only).
        service: the ``ScoringService`` (health, readiness, counters).
        listen: the address.
        ssl_context: TLS, or None.
        token_check: the bearer-token check, or None.
        admin: answer ``/healthz``, ``/readyz``, ``/stats``, ``/metrics`` here.
        max_request_bytes: a body's bound.
        header_timeout, body_timeout, idle_timeout: seconds (module docstring).
        backlog: the listen backlog.
        workers: threads that decode and take requests.
    """

    def __init__(self, intake: Intake | None, service: Any, listen: Listen, *,
                 ssl_context: ssl.SSLContext | None = None, token_check: Any = None,
                 admin: bool = True, max_request_bytes: int = 16 << 20,
                 header_timeout: float = 10.0, body_timeout: float = 30.0,
                 idle_timeout: float = 60.0, backlog: int = 1024, workers: int = 8,
                 name: str = "tracescore-serve-http") -> None:
        self.intake = intake
        self.service = service
        self.listen = listen
        self.ssl_context = ssl_context
        self.token_check = token_check
        self.admin = admin
        self.max_request_bytes = max_request_bytes
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.idle_timeout = idle_timeout
        self.backlog = backlog
        self.name = name
        self.port = 0
        self._pool = futures.ThreadPoolExecutor(max_workers=workers,
                                                thread_name_prefix=f"{name}-worker")
        self._budget = _ByteBudget(2 * max_request_bytes)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: Any = None
        self._thread: threading.Thread | None = None
        # Connections that have not sent a request yet (by id: aiohttp's protocol objects take
        # no weak references); the header timeout's check removes each.
        self._waiting: set[int] = set()

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> int:
        """Bind and serve on a daemon thread; returns the bound port.

        Raises:
            OSError: the address cannot be bound.
        """
        started: futures.Future[int] = futures.Future()
        self._thread = threading.Thread(target=self._run, args=(started,), name=self.name,
                                        daemon=True)
        self._thread.start()
        self.port = started.result()
        return self.port

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening, close connections, stop the thread (``timeout`` seconds at most)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        done = asyncio.run_coroutine_threadsafe(self._cleanup(), loop)
        try:
            done.result(timeout)
        except Exception:
            logger.debug("tracescore serve: the HTTP server did not stop cleanly", exc_info=True)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _cleanup(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def _run(self, started: futures.Future[int]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            port = loop.run_until_complete(self._start())
        except BaseException as exc:
            started.set_exception(exc)
            loop.close()
            return
        started.set_result(port)
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _start(self) -> int:
        from aiohttp import web

        outer = self

        class Server(web.Server):  # type: ignore[misc]
            """Arms the header timeout of each new connection."""

            def __call__(self) -> Any:
                protocol = super().__call__()
                outer._waiting.add(id(protocol))
                asyncio.get_running_loop().call_later(outer.header_timeout,
                                                      outer._check_started, protocol)
                return protocol

        server = Server(self._handle, keepalive_timeout=self.idle_timeout,
                        auto_decompress=False, access_log=None, max_field_size=16384,
                        handler_cancellation=True, logger=_ServerLog(self))
        self._runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.listen.host, self.listen.port,
                           ssl_context=self.ssl_context, backlog=self.backlog,
                           reuse_address=True)
        await site.start()
        return int(self._runner.addresses[0][1])

    def _check_started(self, protocol: Any) -> None:
        waiting = id(protocol) in self._waiting
        self._waiting.discard(id(protocol))
        if waiting and protocol.transport is not None:
            self._refused("header_timeout", "no request headers within "
                          f"{self.header_timeout:g}s (receivers.header_timeout)")
            protocol.force_close()

    def _refused(self, reason: str, message: str, signal: str = "traces",
                 peer: str = "") -> None:
        if self.intake is not None:
            self.intake.refuse(UNAVAILABLE, reason, signal, peer, message)

    # -- requests ------------------------------------------------------------------------------
    async def _handle(self, request: Any) -> Any:
        from aiohttp import web

        self._waiting.discard(id(request.protocol))
        path = request.path.rstrip("/") or "/"
        peer = str(request.remote or "")
        signal = _OTLP_PATHS.get(path)
        if signal is not None and self.intake is not None:
            if request.method != "POST":
                return web.Response(status=405, text="POST only\n", headers={"Allow": "POST"})
            refusal = self._refusal(request)
            if refusal is not None:
                return self._answer(self.intake.refuse(
                    UNAUTHENTICATED, "unauthenticated", signal, peer, refusal), close=True,
                    extra={"WWW-Authenticate": 'Bearer realm="tracescore"'})
            return await self._otlp(request, signal, peer)
        if path in _ADMIN_PATHS and self.admin and request.method in ("GET", "HEAD"):
            refusal = self._refusal(request)
            if refusal is not None:
                return web.Response(status=401, text=refusal + "\n",
                                    headers={"WWW-Authenticate": 'Bearer realm="tracescore"'})
            return self._admin(path)
        return web.Response(status=404, text="not found\n")

    def _refusal(self, request: Any) -> str | None:
        """Why the request's credentials are refused (every ``Authorization`` header counts,
        not the first); None when let in or when no token is configured."""
        if self.token_check is None:
            return None
        values = request.headers.getall("Authorization", [])
        return self.token_check.refusal(values)  # type: ignore[no-any-return]

    async def _otlp(self, request: Any, signal: str, peer: str) -> Any:
        assert self.intake is not None
        intake = self.intake
        content_type = (request.headers.get("Content-Type") or "").lower()
        if "json" in content_type:
            return self._answer(intake.refuse(
                UNSUPPORTED, "json", signal, peer,
                "OTLP/JSON is not supported: send application/x-protobuf"), close=True)
        limit = self.max_request_bytes
        announced = request.content_length
        if announced is not None and announced > limit:
            return self._answer(intake.refuse(
                TOO_LARGE, "body_too_large", signal, peer,
                f"Content-Length {announced} passes the limit of {limit} bytes "
                "(receivers.max_request_bytes)"), close=True)
        reserved = announced or 0
        if not self._budget.take(reserved):
            return self._answer(intake.refuse(
                UNAVAILABLE, "receiver_busy", signal, peer,
                "too many bytes of bodies being received; retry", retry_after=1.0),
                close=True)
        budget = [reserved]
        try:
            try:
                body, refused = await asyncio.wait_for(
                    self._read(request, signal, peer, budget), self.body_timeout)
            except asyncio.TimeoutError:
                intake.refuse(UNAVAILABLE, "body_timeout", signal, peer,
                              f"the body did not arrive within {self.body_timeout:g}s "
                              "(receivers.body_timeout)")
                return self._plain(408, "body timeout\n")
            except Exception as exc:  # the client went away, or sent a broken chunk
                intake.refuse(INVALID, "bad_body", signal, peer,
                              f"the body could not be read ({type(exc).__name__}: {exc})")
                return self._plain(400, "the body could not be read\n")
            if refused is not None:
                return refused
            encoding = request.headers.get("Content-Encoding") or ""
            take = intake.traces if signal == "traces" else intake.logs
            # The bytearray itself (zlib and protobuf read it): no copy.
            outcome = await asyncio.get_running_loop().run_in_executor(
                self._pool, take, body, encoding, peer)
            del body
        finally:
            self._budget.give(budget[0])
        return self._answer(outcome)

    async def _read(self, request: Any, signal: str, peer: str,
                    budget: list[int]) -> tuple[bytearray, Any]:
        """The body, or the answer that refuses it (too large, no room); ``budget[0]`` holds
        the bytes reserved so far."""
        assert self.intake is not None
        limit = self.max_request_bytes
        body = bytearray()
        while True:
            chunk = await request.content.readany()
            if not chunk:
                return body, None
            if len(body) + len(chunk) > limit:
                return body, self._answer(self.intake.refuse(
                    TOO_LARGE, "body_too_large", signal, peer,
                    f"the body passes the limit of {limit} bytes "
                    "(receivers.max_request_bytes)"), close=True)
            more = len(body) + len(chunk) - budget[0]
            if more > 0:
                if not self._budget.take(more):
                    return body, self._answer(self.intake.refuse(
                        UNAVAILABLE, "receiver_busy", signal, peer,
                        "too many bytes of bodies being received; retry", retry_after=1.0),
                        close=True)
                budget[0] += more
            body += chunk

    @staticmethod
    def _plain(status: int, text: str) -> Any:
        from aiohttp import web

        response = web.Response(status=status, text=text)
        response.force_close()
        return response

    def _answer(self, outcome: Outcome, close: bool = False,
                extra: dict[str, str] | None = None) -> Any:
        from aiohttp import web

        status = _STATUS[outcome.code]
        headers = dict(extra or {})
        if outcome.retry_after is not None and outcome.code in (THROTTLED, UNAVAILABLE):
            headers["Retry-After"] = str(max(1, math.ceil(outcome.retry_after)))
        # An empty ExportTraceServiceResponse / ExportLogsServiceResponse is zero bytes.
        body = b"" if outcome.code == OK else _status_body(outcome.code, outcome.message)
        response = web.Response(status=status, body=body, headers=headers,
                                content_type="application/x-protobuf")
        if close:
            response.force_close()
        return response

    def _admin(self, path: str) -> Any:
        from aiohttp import web

        service = self.service
        if path == "/healthz":
            return web.Response(text="ok\n")
        if path == "/readyz":
            ready = service.ready()
            return web.Response(status=200 if ready else 503,
                                text="ready\n" if ready else "draining\n")
        if path == "/stats":
            return web.Response(body=json.dumps(service.snapshot()).encode(),
                                content_type="application/json")
        text = service.metrics.prometheus_text()
        return web.Response(body=text.encode(), headers={
            "Content-Type": "text/plain; version=0.0.4; charset=utf-8"})
