"""Reading Phoenix's REST API from a server that misbehaves: each case is a real HTTP server on
loopback doing one thing wrong, read through ``calibrate_feedback(phoenix_url=...)`` and
``tracescore calibrate --phoenix-url`` as a user would. The reader must end with a one-line
error, never loop, never wait past its deadline, never read an unbounded answer."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

import tracescore
from tracescore.__main__ import main

Respond = Callable[["Handler", str, dict[str, list[str]], int], None]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: Server

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        url = urlparse(self.path)
        with self.server.lock:
            self.server.requests += 1
            count = self.server.requests
        self.server.respond(self, url.path, parse_qs(url.query), count)

    def send_json(self, body: Any, status: int = 200) -> None:
        out = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, respond: Respond) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.respond = respond
        self.requests = 0
        self.lock = threading.Lock()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def phoenix() -> Iterator[Callable[[Respond], Server]]:
    servers: list[Server] = []

    def start(respond: Respond) -> Server:
        server = Server(respond)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def span(i: int) -> dict[str, Any]:
    return {"context": {"trace_id": "ab" * 16, "span_id": f"{i:016x}"}, "name": "agent"}


def read(server: Server, **kwargs: Any) -> Any:
    return tracescore.calibrate_feedback("faithfulness", phoenix_url=server.url,
                                         phoenix_project="bot", **kwargs)


def test_a_cursor_handed_back_again_stops_the_listing(phoenix: Any) -> None:
    def respond(h: Handler, path: str, query: dict[str, list[str]], n: int) -> None:
        # The same page and cursor every time (a broken server); it gives up after 300.
        h.send_json({"data": [span(1)], "next_cursor": "same" if n < 300 else None})

    server = phoenix(respond)
    with pytest.raises(tracescore.ConfigurationError, match="handed back the cursor 'same'"):
        read(server)
    assert server.requests == 2


def test_a_listing_stops_at_the_page_limit(phoenix: Any) -> None:
    def respond(h: Handler, path: str, query: dict[str, list[str]], n: int) -> None:
        # A new cursor and a new span on every page, for 1,000 pages.
        if path.endswith("/spans"):
            h.send_json({"data": [span(n)], "next_cursor": f"c{n}" if n < 1000 else None})
        else:
            h.send_json({"data": [], "next_cursor": None})

    server = phoenix(respond)
    with pytest.raises(tracescore.ConfigurationError, match="after 200 pages"):
        read(server)
    assert server.requests == 200


def test_a_body_trickled_a_byte_at_a_time_ends_at_the_deadline(phoenix: Any) -> None:
    stop = threading.Event()

    def respond(h: Handler, path: str, query: dict[str, list[str]], n: int) -> None:
        body = json.dumps({"data": [], "next_cursor": None}).encode() + b" " * 40
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        for byte in body:  # one byte every 0.25 s: the whole body would take 17 s
            if stop.wait(0.25):
                return
            h.wfile.write(bytes([byte]))
            h.wfile.flush()

    server = phoenix(respond)
    try:
        with pytest.raises(tracescore.ConfigurationError) as caught:
            read(server, phoenix_timeout=1.0)
    finally:
        stop.set()
    assert "did not answer in full within 1 s" in str(caught.value)


@pytest.mark.parametrize("declared", [True, False])
def test_an_answer_over_the_size_limit_is_refused(phoenix: Any, declared: bool) -> None:
    sent = []

    def respond(h: Handler, path: str, query: dict[str, list[str]], n: int) -> None:
        tail = json.dumps({"data": [], "next_cursor": None}).encode()
        pad = b" " * (40 * 1024 * 1024)  # 40 MiB of whitespace, then a valid page
        h.send_response(200)
        if declared:
            h.send_header("Content-Length", str(len(pad) + len(tail)))
        else:
            h.send_header("Connection", "close")  # the body ends when the socket closes
        h.end_headers()
        try:
            for start in range(0, len(pad), 1 << 20):
                h.wfile.write(pad[start:start + (1 << 20)])
                sent.append(1 << 20)
            h.wfile.write(tail)
        except OSError:
            pass  # the reader hung up
        h.close_connection = True

    server = phoenix(respond)
    with pytest.raises(tracescore.ConfigurationError, match="more than the limit of 33,554,432"):
        read(server)


SHAPES = [
    ("spans", [], "answered a JSON array, not an object"),
    ("spans", {"data": {"a": 1}}, "answered 'data' as a JSON object, not a list"),
    ("spans", {"data": ["x"]}, r"answered data\[0\] as a JSON string"),
    ("spans", {"data": [{"context": "x"}]}, "without string context.trace_id"),
    ("spans", {"data": [{"context": {"span_id": 7, "trace_id": "ab"}}]},
     "without string context.trace_id"),
    ("spans", {"data": [span(1)], "next_cursor": 5}, "'next_cursor' as a JSON number"),
    ("annotations", {"data": [{"span_id": "01", "result": [1]}]}, "'result' is a JSON array"),
    ("annotations", {"data": [{"span_id": "01", "result": {"score": "high"}}]},
     "result.score is a JSON string"),
    ("annotations", {"data": [{"span_id": "01", "metadata": "x"}]}, "'metadata' is a JSON string"),
    ("annotations", "not json", "not JSON"),
]


@pytest.mark.parametrize(("where", "body", "message"), SHAPES,
                         ids=[f"{w}-{i}" for i, (w, _, _) in enumerate(SHAPES)])
def test_an_answer_of_another_shape_is_a_one_line_error(
        phoenix: Any, capsys: pytest.CaptureFixture[str], where: str, body: Any,
        message: str) -> None:
    def respond(h: Handler, path: str, query: dict[str, list[str]], n: int) -> None:
        if "cursor" in query:  # a second page, for the one case that names a cursor
            h.send_json({"data": [], "next_cursor": None})
        elif path.endswith("/spans") and where == "annotations":
            h.send_json({"data": [span(1)], "next_cursor": None})
        elif body == "not json":
            out = b"<html>oops</html>"
            h.send_response(200)
            h.send_header("Content-Length", str(len(out)))
            h.end_headers()
            h.wfile.write(out)
        else:
            h.send_json(body)

    server = phoenix(respond)
    code = main(["calibrate", "--phoenix-url", server.url, "--phoenix-project", "bot",
                 "--scorer", "faithfulness"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("tracescore calibrate: error: Phoenix at ")
    assert re.search(message, err), err


def test_an_error_status_and_credentials_stay_out_of_the_message(phoenix: Any) -> None:
    def respond(h: Handler, path: str, query: dict[str, list[str]], n: int) -> None:
        out = b"no\nsuch project"
        h.send_response(404)
        h.send_header("Content-Length", str(len(out)))
        h.end_headers()
        h.wfile.write(out)

    server = phoenix(respond)
    url = server.url.replace("http://", "http://user:s3cr3t-pw@")
    with pytest.raises(tracescore.ConfigurationError) as caught:
        tracescore.calibrate_feedback("faithfulness", phoenix_url=url, phoenix_project="bot")
    text = str(caught.value)
    assert "HTTP 404" in text and "no such project" in text
    assert "s3cr3t" not in text and "\n" not in text


def test_a_redirect_is_named_not_followed(phoenix: Any) -> None:
    def respond(h: Handler, path: str, query: dict[str, list[str]], n: int) -> None:
        h.send_response(302)
        h.send_header("Location", "https://user:pw@phoenix.example/v1/projects/bot/spans")
        h.send_header("Content-Length", "0")
        h.end_headers()

    server = phoenix(respond)
    with pytest.raises(tracescore.ConfigurationError) as caught:
        read(server)
    text = str(caught.value)
    assert "redirect (HTTP 302) to 'https://phoenix.example/v1/projects/bot/spans'" in text
    assert "pw" not in text and server.requests == 1


def test_a_well_behaved_listing_still_reads_every_page(phoenix: Any) -> None:
    annotations = [{"span_id": f"{i:016x}", "name": "faithfulness", "annotator_kind": kind,
                    "result": {"score": 0.9, "label": "pass"},
                    "updated_at": f"2026-12-01T1{kind == 'HUMAN'}:00:00+00:00"}
                   for i in range(1, 8) for kind in ("LLM", "HUMAN")]

    def respond(h: Handler, path: str, query: dict[str, list[str]], n: int) -> None:
        if path.endswith("/spans"):
            page = int((query.get("cursor") or ["0"])[0])
            h.send_json({"data": [span(i) for i in range(1 + 3 * page, min(8, 4 + 3 * page))],
                         "next_cursor": str(page + 1) if page < 2 else None})
        else:
            wanted = set(query["span_ids"])
            h.send_json({"data": [a for a in annotations if a["span_id"] in wanted],
                         "next_cursor": None})

    server = phoenix(respond)
    result = read(server)
    assert len(result.items) == 7 and server.requests == 4
