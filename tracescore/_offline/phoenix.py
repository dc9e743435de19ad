"""A small client of Arize Phoenix's REST API, for the commands that read Phoenix: calibration
on human feedback (``calibrate --phoenix-url``, ``calibrate_feedback``) and ``tracescore
rescore --phoenix-url``.

It reads paginated lists (``{"data": [...], "next_cursor": ...}``): a project's spans
(``GET /v1/projects/{project}/spans``) and their annotations
(``GET /v1/projects/{project}/span_annotations?span_ids=...``). A server that misbehaves cannot
hold a command hostage:

* every request has one deadline for all of it (connecting, the headers and the whole body),
  enforced by closing the socket when it passes: a body trickled a byte at a time cannot
  stretch ``timeout`` (the standard library's socket timeout applies to each read instead);
* a response larger than ``max_bytes`` is refused (from its ``Content-Length``, or as soon as
  that many bytes have come);
* a listing stops with an error after ``max_pages`` pages, and at once when the server hands
  back a ``next_cursor`` it gave before (a loop);
* an answer of another shape than the documented one (a list instead of an object, ``data``
  that is not a list, an item that is not an object, a cursor that is neither a string nor
  null, a span without ids) is a ``PhoenixError`` of one line naming the request and what was
  wrong.

Messages name Phoenix by scheme, host and port only: credentials in the URL or in ``headers``
never appear in them.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from tracescore._core.errors import ConfigurationError

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_PAGES", "DEFAULT_TIMEOUT", "PhoenixClient",
           "PhoenixError"]

DEFAULT_TIMEOUT = 30.0
"""Seconds a whole request may take (connect, headers, body)."""
DEFAULT_MAX_PAGES = 200
"""Pages one listing may take before it stops with an error."""
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
"""Bytes one response body may have."""
SPAN_PAGE = 500
"""Spans asked for per page."""
ANNOTATION_SPANS = 100
"""Span ids per annotation request (they go in the query string)."""
_CHUNK = 64 * 1024


class PhoenixError(ConfigurationError):
    """Phoenix could not be read: unreachable, an error status, too slow, too large, a loop
    of cursors or an answer of an unexpected shape. The message is one line."""


class PhoenixClient:
    """Reads Phoenix's REST API with a deadline per request, a size cap per response and a
    page limit per listing.

    Args:
        base_url: Phoenix's base URL, e.g. ``http://127.0.0.1:6006`` (``http`` or ``https``).
        headers: extra request headers (e.g. ``{"Authorization": "Bearer ..."}``); never
            shown in a message.
        timeout: seconds one request may take in all, body included. Default 30.
        max_pages: pages one listing may take. Default 200.
        max_bytes: bytes one response body may have. Default 32 MiB.

    Raises:
        PhoenixError: the URL is not ``http(s)://host[:port][/path]``, or an option is out of
            range.

    Examples:
        >>> client = PhoenixClient("http://127.0.0.1:6006", timeout=10)
        >>> spans = list(client.spans("default", limit=1000))  # doctest: +SKIP
    """

    def __init__(self, base_url: str, *, headers: Mapping[str, str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT, max_pages: int = DEFAULT_MAX_PAGES,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        parts = urllib.parse.urlsplit(str(base_url).strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PhoenixError(f"the Phoenix URL must be http(s)://host[:port], got "
                               f"{_safe_url(str(base_url))!r}")
        try:
            port = parts.port
        except ValueError:
            raise PhoenixError(f"the Phoenix URL {_safe_url(str(base_url))!r} has an invalid "
                               "port") from None
        if not (isinstance(timeout, (int, float)) and 0 < timeout < float("inf")):
            raise PhoenixError(f"the Phoenix timeout must be a positive number of seconds, got "
                               f"{timeout!r}")
        if not (isinstance(max_pages, int) and max_pages >= 1):
            raise PhoenixError(f"max_pages must be an int >= 1, got {max_pages!r}")
        if not (isinstance(max_bytes, int) and max_bytes >= 1):
            raise PhoenixError(f"max_bytes must be an int >= 1, got {max_bytes!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = port
        self._prefix = parts.path.rstrip("/")
        self.where = f"{parts.scheme}://{parts.hostname}" + (f":{port}" if port else "")
        self._headers = {"Accept": "application/json", **dict(headers or {})}
        self.timeout = float(timeout)
        self.max_pages = max_pages
        self.max_bytes = max_bytes

    # -- one request ---------------------------------------------------------------------------
    def get_json(self, path: str, params: Iterable[tuple[str, Any]] = ()) -> Any:
        """``GET path?params`` and its JSON body.

        Raises:
            PhoenixError: unreachable, an HTTP error, over the deadline or the size cap, or
                a body that is not JSON.
        """
        query = urllib.parse.urlencode(list(params))
        target = self._prefix + path + (f"?{query}" if query else "")
        body = self._fetch(target, path)
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PhoenixError(f"Phoenix at {self.where} ({path}) answered with something that "
                               f"is not JSON ({_one_line(exc)})") from None

    def _fetch(self, target: str, path: str) -> bytes:
        where = f"Phoenix at {self.where} ({path})"
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=self.timeout)
        deadline = time.monotonic() + self.timeout
        expired = threading.Event()
        sock: list[socket.socket] = []

        def expire() -> None:
            # The one deadline of the request: closing the socket ends any read in progress,
            # however the server paces its bytes.
            expired.set()
            for s in sock:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(self.timeout, expire)
        timer.daemon = True
        timer.start()
        try:
            conn.connect()
            if conn.sock is not None:
                sock.append(conn.sock)
                if expired.is_set():
                    expire()
            conn.request("GET", target, headers=self._headers)
            response = conn.getresponse()
            if 300 <= response.status < 400:
                location = _safe_url(response.getheader("Location") or "")
                raise PhoenixError(f"{where} answered a redirect (HTTP {response.status}) to "
                                   f"{location[:200]!r}: give that URL instead")
            if response.status >= 400 or response.status < 200:
                detail = response.read(2000).decode("utf-8", "replace")
                raise PhoenixError(f"{where} answered HTTP {response.status} "
                                   f"{_one_line(response.reason)}: {_one_line(detail)[:300]}")
            declared = response.getheader("Content-Length")
            if declared is not None and declared.strip().isdigit() \
                    and int(declared) > self.max_bytes:
                raise PhoenixError(f"{where} answered {int(declared):,} bytes, more than the "
                                   f"limit of {self.max_bytes:,}")
            chunks: list[bytes] = []
            size = 0
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or expired.is_set():
                    raise TimeoutError
                for s in sock:
                    s.settimeout(remaining)
                chunk = response.read1(_CHUNK)
                if not chunk:
                    break
                size += len(chunk)
                if size > self.max_bytes:
                    raise PhoenixError(f"{where} answered more than the limit of "
                                       f"{self.max_bytes:,} bytes")
                chunks.append(chunk)
            if expired.is_set():  # the body ended because the deadline closed the socket
                raise TimeoutError
            return b"".join(chunks)
        except PhoenixError:
            raise
        except Exception as exc:
            if expired.is_set() or isinstance(exc, (TimeoutError, socket.timeout)):
                raise PhoenixError(f"{where} did not answer in full within {self.timeout:g} s "
                                   "(the deadline of one request)") from None
            raise PhoenixError(f"cannot read {where}: {type(exc).__name__}: "
                               f"{_one_line(exc)}") from None
        finally:
            timer.cancel()
            conn.close()

    # -- listings ------------------------------------------------------------------------------
    def pages(self, path: str,
              params: Iterable[tuple[str, Any]] = ()) -> Iterator[list[dict[str, Any]]]:
        """The ``data`` of each page of a paginated list, following ``next_cursor``.

        Raises:
            PhoenixError: as ``get_json``; a page of another shape; a cursor handed back twice;
                more than ``max_pages`` pages.
        """
        fixed = list(params)
        seen: set[str] = set()
        cursor: str | None = None
        for _ in range(self.max_pages):
            page = self.get_json(path, fixed + ([("cursor", cursor)] if cursor else []))
            data, cursor = self._page(page, path)
            yield data
            if cursor is None:
                return
            if cursor in seen:
                raise PhoenixError(
                    f"Phoenix at {self.where} ({path}) handed back the cursor "
                    f"{_one_line(cursor)[:60]!r} it gave before: stopped after {len(seen) + 1} "
                    "page(s) instead of reading them in a loop")
            seen.add(cursor)
        raise PhoenixError(f"Phoenix at {self.where} ({path}) still had more after "
                           f"{self.max_pages} pages: stopped (the page limit)")

    def _page(self, page: Any, path: str) -> tuple[list[dict[str, Any]], str | None]:
        where = f"Phoenix at {self.where} ({path})"
        if not isinstance(page, dict):
            raise PhoenixError(f"{where} answered a JSON {_kind(page)}, not an object with "
                               "'data' and 'next_cursor'")
        data = page.get("data")
        if not isinstance(data, list):
            raise PhoenixError(f"{where} answered 'data' as a JSON {_kind(data)}, not a list")
        for i, item in enumerate(data):
            if not isinstance(item, dict):
                raise PhoenixError(f"{where} answered data[{i}] as a JSON {_kind(item)}, not "
                                   "an object")
        cursor = page.get("next_cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise PhoenixError(f"{where} answered 'next_cursor' as a JSON {_kind(cursor)}, not "
                               "a string or null")
        return data, (cursor or None)

    def spans(self, project: str, *, limit: int | None = None) -> Iterator[dict[str, Any]]:
        """The spans of ``project`` as Phoenix gives them (``context`` with ``trace_id`` and
        ``span_id``, ``name``, ``parent_id``, ``attributes``, ...), newest first, at most
        ``limit`` (None: all, within the page limit).

        Raises:
            PhoenixError: as ``pages``; a span without string ``context.trace_id`` and
                ``context.span_id``.
        """
        path = f"/v1/projects/{urllib.parse.quote(project, safe='')}/spans"
        taken = 0
        size = SPAN_PAGE if limit is None else max(1, min(SPAN_PAGE, limit))
        for data in self.pages(path, [("limit", size)]):
            for i, span in enumerate(data):
                context = span.get("context")
                if not isinstance(context, dict) or not isinstance(context.get("span_id"), str) \
                        or not isinstance(context.get("trace_id"), str):
                    raise PhoenixError(
                        f"Phoenix at {self.where} ({path}) answered a span (data[{i}]) without "
                        "string context.trace_id and context.span_id")
                yield span
                taken += 1
                if limit is not None and taken >= limit:
                    return

    def span_annotations(self, project: str,
                         span_ids: Iterable[str]) -> Iterator[dict[str, Any]]:
        """The annotations of the given spans of ``project`` (``span_id``, ``name``,
        ``annotator_kind``, ``result`` with ``score``/``label``/``explanation``, ``metadata``,
        ``created_at``/``updated_at``), ``ANNOTATION_SPANS`` span ids a request.

        Raises:
            PhoenixError: as ``pages``; an annotation whose ``result`` or ``metadata`` is not
                an object, or whose ``score`` is not a number.
        """
        path = f"/v1/projects/{urllib.parse.quote(project, safe='')}/span_annotations"
        ids = list(span_ids)
        for start in range(0, len(ids), ANNOTATION_SPANS):
            chunk = ids[start:start + ANNOTATION_SPANS]
            params = [("span_ids", s) for s in chunk] + [("limit", 1000)]
            for data in self.pages(path, params):
                for i, annotation in enumerate(data):
                    self._check_annotation(annotation, f"{path} data[{i}]")
                    yield annotation

    def _check_annotation(self, a: dict[str, Any], where: str) -> None:
        problem = None
        for key in ("result", "metadata"):
            if a.get(key) is not None and not isinstance(a.get(key), dict):
                problem = f"'{key}' is a JSON {_kind(a.get(key))}, not an object"
        result = a.get("result") if isinstance(a.get("result"), dict) else {}
        score = result.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            problem = f"result.score is a JSON {_kind(score)}, not a number"
        for key in ("span_id", "name", "annotator_kind"):
            if a.get(key) is not None and not isinstance(a.get(key), str):
                problem = f"'{key}' is a JSON {_kind(a.get(key))}, not a string"
        if result.get("label") is not None and not isinstance(result.get("label"), str):
            problem = f"result.label is a JSON {_kind(result.get('label'))}, not a string"
        if problem:
            raise PhoenixError(f"Phoenix at {self.where} ({where}) answered an annotation whose "
                               f"{problem}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _one_line(value: Any) -> str:
    return " ".join(str(value).split())


def _safe_url(url: str) -> str:
    """``url`` without user information (``user:password@``), for messages."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
