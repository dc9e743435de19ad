"""One OTLP request from bytes to an answer, whichever receiver took it (gRPC or HTTP).

In order, each step refusing the whole request before any span of it is kept:

1. inflate (``gzip``/``deflate``), stopping as soon as the output passes
   ``max_request_bytes``: a small compressed body cannot make a large one in memory;
2. parse the protobuf message (a body that is not one, or nests deeper than protobuf's
   recursion limit, is malformed);
3. validate (``validate``): ids, kinds, status codes, duplicate span ids;
4. admission and intake (``ScoringService.accept_traces``/``accept_logs``).

The answer is an ``Outcome`` that each receiver turns into its protocol's terms, as the OTLP
specification maps them: malformed (HTTP 400, gRPC ``INVALID_ARGUMENT``: not retried), too large
(413, ``RESOURCE_EXHAUSTED`` without retry information: not retried), throttled (429 with
``Retry-After``, ``RESOURCE_EXHAUSTED`` with ``RetryInfo``), unavailable (503,
``UNAVAILABLE``), unauthenticated (401, ``UNAUTHENTICATED``). Each refused request is counted
by reason (``/stats`` ``requests_invalid``, the ``tracescore.serve.requests.invalid`` metric)
and logged on one line, without a traceback and at most once a second per reason (the lines
skipped meanwhile are counted in the next one).
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .decode import parse_logs, parse_traces
from .validate import logs_problem, traces_problem

logger = logging.getLogger("tracescore")

OK = "ok"
INVALID = "invalid"
TOO_LARGE = "too_large"
THROTTLED = "throttled"
UNAVAILABLE = "unavailable"
UNAUTHENTICATED = "unauthenticated"
UNSUPPORTED = "unsupported"

# Output produced per inflate step at most: the bound is checked between steps.
_INFLATE_STEP = 256 * 1024
_LOG_INTERVAL = 1.0


@dataclass(frozen=True)
class Outcome:
    """The answer to one request.

    Attributes:
        code: ``ok``, ``invalid``, ``too_large``, ``throttled``, ``unavailable``,
            ``unauthenticated`` or ``unsupported``.
        message: what the client is told (never a credential).
        retry_after: seconds to wait before a retry (throttled, unavailable), else None.
    """

    code: str
    message: str = ""
    retry_after: float | None = None


ACCEPTED = Outcome(OK)


class TooLarge(Exception):
    """The body, inflated, passes the bound."""


def inflate(body: bytes | bytearray, encoding: str, limit: int) -> bytes | bytearray:
    """``body`` decompressed (``gzip``, ``deflate`` in its zlib or raw form, or ``identity``/
    empty: as is), never holding more than ``limit`` bytes of output.

    Raises:
        TooLarge: the output would pass ``limit`` bytes.
        ValueError: an unknown encoding, or a body that is not what it says (truncated,
            corrupt).
    """
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding in ("gzip", "x-gzip"):
        wbits = 16 + zlib.MAX_WBITS
    elif encoding == "deflate":
        # RFC 9110's deflate is the zlib format; some clients send raw deflate.
        wbits = zlib.MAX_WBITS if body[:1] and (body[0] & 0x0F) == 8 else -zlib.MAX_WBITS
    else:
        raise ValueError(f"unsupported Content-Encoding {encoding!r} (gzip, deflate, identity)")
    out = bytearray()
    data = body
    try:
        while data:
            inflater = zlib.decompressobj(wbits)
            while True:
                chunk = inflater.decompress(data, min(_INFLATE_STEP, limit + 1 - len(out)))
                out += chunk
                if len(out) > limit:
                    raise TooLarge(f"the body inflates to more than {limit} bytes")
                data = inflater.unconsumed_tail
                if not data and (inflater.eof or not chunk):
                    break
            if not inflater.eof:
                raise ValueError(f"the {encoding} body is truncated")
            # gzip allows several members one after the other.
            data = inflater.unused_data if wbits > zlib.MAX_WBITS else b""
    except zlib.error as exc:
        raise ValueError(f"the body is not valid {encoding}: {exc}") from None
    return out  # protobuf parses a bytearray as it is: no copy


class Intake:
    """Takes requests for one service; shared by its receivers.

    Args:
        service: the ``ScoringService``.
        max_request_bytes: bound of a request as received and as inflated.
    """

    def __init__(self, service: Any, max_request_bytes: int) -> None:
        self.service = service
        self.max_request_bytes = max_request_bytes
        self.refused: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._last_log: dict[str, float] = {}
        self._skipped: Counter[str] = Counter()
        self.on_refuse: Any = None  # the service's metrics (reason, signal)

    # -- requests ------------------------------------------------------------------------------
    def traces(self, body: bytes | bytearray, encoding: str = "", peer: str = "") -> Outcome:
        """Take an ``ExportTraceServiceRequest`` body (compressed as ``encoding`` says)."""
        return self._take("traces", body, encoding, peer)

    def logs(self, body: bytes | bytearray, encoding: str = "", peer: str = "") -> Outcome:
        """Take an ``ExportLogsServiceRequest`` body."""
        return self._take("logs", body, encoding, peer)

    def _take(self, signal: str, body: bytes | bytearray, encoding: str,
              peer: str) -> Outcome:
        if len(body) > self.max_request_bytes:
            return self.refuse(TOO_LARGE, "body_too_large", signal, peer,
                               f"the body has {len(body)} bytes; the limit is "
                               f"{self.max_request_bytes} (receivers.max_request_bytes)")
        try:
            raw = inflate(body, encoding, self.max_request_bytes)
        except TooLarge as exc:
            return self.refuse(TOO_LARGE, "inflated_too_large", signal, peer,
                               f"{exc} (receivers.max_request_bytes)")
        except ValueError as exc:
            return self.refuse(INVALID, "bad_encoding", signal, peer, str(exc))
        del body
        try:
            request = parse_traces(raw) if signal == "traces" else parse_logs(raw)
        except Exception as exc:  # DecodeError, or protobuf's recursion limit
            kind = "ExportTraceServiceRequest" if signal == "traces" else \
                "ExportLogsServiceRequest"
            detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            return self.refuse(INVALID, "malformed", signal, peer,
                               f"the body is not an OTLP {kind} ({detail})")
        problem = traces_problem(request) if signal == "traces" else logs_problem(request)
        if problem is not None:
            return self.refuse(INVALID, "invalid_span" if signal == "traces" else
                               "invalid_log_record", signal, peer, problem)
        try:
            if signal == "traces":
                refusal = self.service.accept_traces(request, len(raw))
            else:
                refusal = self.service.accept_logs(bytes(raw), request)
        except Exception as exc:
            logger.error("tracescore serve: taking a %s request failed (%s: %s); answered as "
                         "unavailable, the sender retries it", signal, type(exc).__name__, exc)
            return Outcome(UNAVAILABLE, "internal error; retry", 1.0)
        if refusal is None:
            return ACCEPTED
        if refusal.reason == "draining":
            return Outcome(UNAVAILABLE, "tracescore serve is shutting down",
                           refusal.retry_after)
        if refusal.reason == "too_large":
            return self.refuse(TOO_LARGE, "too_many_spans", signal, peer, refusal.message)
        if refusal.reason == "not_forwarded":
            return Outcome(UNAVAILABLE, refusal.message, refusal.retry_after)
        return Outcome(THROTTLED, f"{refusal.reason}; retry after {refusal.retry_after:g}s",
                       refusal.retry_after)

    # -- refusals ------------------------------------------------------------------------------
    def refuse(self, code: str, reason: str, signal: str, peer: str, message: str,
               retry_after: float | None = None) -> Outcome:
        """Count and log (one line, rate-limited per reason) a request refused before
        admission, and return its outcome."""
        with self._lock:
            self.refused[reason] += 1
            now = time.monotonic()
            due = now - self._last_log.get(reason, -_LOG_INTERVAL) >= _LOG_INTERVAL
            if due:
                self._last_log[reason] = now
                skipped = self._skipped.pop(reason, 0)
            else:
                self._skipped[reason] += 1
        hook = self.on_refuse
        if hook is not None:
            try:
                hook(reason, signal)
            except Exception:
                logger.debug("tracescore serve: counting a refusal failed", exc_info=True)
        if due:
            more = f" ({skipped} more like it in the last second)" if skipped else ""
            logger.warning("tracescore serve: refused a %s request%s: %s: %s%s", signal,
                           f" from {peer}" if peer else "", reason, message, more)
        return Outcome(code, message, retry_after)
