"""The OTLP/HTTP receiver and the health endpoints, on the standard library's HTTP server.

``POST /v1/traces`` and ``POST /v1/logs`` take ``application/x-protobuf`` bodies, plain or
``Content-Encoding: gzip``/``deflate`` (OTLP/JSON is answered 415). A refused request gets 429
with ``Retry-After`` (503 while draining): the OTLP specification makes both retryable with the
hint honoured. ``GET /healthz`` answers 200 while the process runs; ``GET /readyz`` 200 while it
takes requests, 503 once it drains; ``GET /stats`` the counters as JSON.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .config import Listen
from .decode import parse_logs, parse_traces
from .service import ScoringService

logger = logging.getLogger("tracescore")


def start_http(service: ScoringService, listen: Listen, *,
               max_body: int) -> tuple[ThreadingHTTPServer, int]:
    """Start the HTTP receiver on a daemon thread. Returns the server and its port.

    Raises:
        OSError: the address cannot be bound.
    """

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Without it every keep-alive response waits ~40 ms for Nagle's algorithm.
        disable_nagle_algorithm = True
        server_version = "tracescore-serve"

        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, code: int, body: bytes = b"", content_type: str = "text/plain",
                   headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0].rstrip("/")
            if path == "/healthz":
                self._reply(200, b"ok\n")
            elif path == "/readyz":
                ready = service.ready()
                self._reply(200 if ready else 503, b"ready\n" if ready else b"draining\n")
            elif path == "/stats":
                self._reply(200, json.dumps(service.snapshot()).encode(), "application/json")
            else:
                self._reply(404, b"not found\n")

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0].rstrip("/")
            length = int(self.headers.get("Content-Length") or 0)
            if length > max_body:
                self.close_connection = True
                self._reply(413, b"request too large\n")
                return
            body = self.rfile.read(length)
            if path not in ("/v1/traces", "/v1/logs"):
                self._reply(404, b"not found\n")
                return
            if "json" in (self.headers.get("Content-Type") or "").lower():
                self._reply(415, b"OTLP/JSON is not supported: send application/x-protobuf\n")
                return
            encoding = (self.headers.get("Content-Encoding") or "").lower()
            try:
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                request = parse_traces(body) if path == "/v1/traces" else parse_logs(body)
            except Exception:
                self._reply(400, b"cannot decode the request\n")
                return
            if path == "/v1/traces":
                refusal = service.accept_traces(request, len(body))
            else:
                refusal = service.accept_logs(body, request)
            if refusal is not None:
                code = 503 if refusal.reason == "draining" else 429
                self._reply(code, f"{refusal.reason}\n".encode(),
                            headers={"Retry-After": str(max(1, math.ceil(refusal.retry_after)))})
                return
            # An empty ExportTraceServiceResponse / ExportLogsServiceResponse is zero bytes.
            self._reply(200, b"", "application/x-protobuf")

    server = ThreadingHTTPServer((listen.host, listen.port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="tracescore-serve-http",
                     daemon=True).start()
    return server, server.server_address[1]
