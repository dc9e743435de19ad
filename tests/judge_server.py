"""A real OpenAI-compatible chat-completions server on loopback, used as the judge in tests.

The server speaks enough of the OpenAI protocol for litellm's ``openai/<name>`` provider:
``POST /v1/chat/completions`` (and ``/chat/completions``) answer with a ``chat.completion``
object whose ``usage`` is derived from text lengths, so token accounting is testable.

Routing: a request is routed by the name of the JSON schema it asks for, that is
``body["response_format"]["json_schema"]["name"]``. When the request has no JSON schema
(``response_format`` of type ``json_object`` or none at all, which is what tracescore's judge sends
after a provider rejected ``json_schema``), the name is read from the first line
``Schema name: <name>`` found in the messages (system messages first). tracescore's judge writes
that line whenever it puts the schema into the prompt.

Example::

    with JudgeServer() as server:
        server.route("answer_relevancy_statements", {"statements": ["Paris is the capital."]})
        server.route("answer_relevancy_verdicts", [JudgeServer.Reply(status=429), {"results": []}])
        ...
        assert len(server.requests) == 3
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["TEST_API_KEY", "JudgeServer", "make_judge"]

# The key every test judge is configured with: it may appear in the Authorization header and
# nowhere else.
TEST_API_KEY = "sk-test-SECRET-4c0ffee"

_SCHEMA_NAME_LINE = re.compile(r"^Schema name: ([A-Za-z0-9_.-]+)\s*$", re.MULTILINE)


@dataclass
class Reply:
    """A scripted reply with full control over status, body and latency.

    Attributes:
        status: HTTP status. 200 answers with a chat completion whose message content is
            ``body`` (a dict or list is JSON-encoded, a str is sent as is). Any other status
            answers with ``body`` as the raw HTTP body (a dict is JSON-encoded); the default
            body is an OpenAI-style error object.
        body: see ``status``.
        delay: seconds to wait before answering (added to the server's global ``delay``).
        headers: extra response headers (for example ``{"retry-after": "0"}``).
    """

    status: int = 200
    body: Any = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


ReplySpec = Any  # dict | str | list | Reply | Callable[[dict], ReplySpec]


class JudgeServer:
    """An OpenAI chat-completions server on ``127.0.0.1`` with an ephemeral port.

    Args:
        reject_json_schema: answer HTTP 400 (``response_format`` not supported) to every
            request that asks for ``response_format`` of type ``json_schema``, like providers
            without structured outputs do.

    Attributes:
        api_base: ``http://127.0.0.1:<port>/v1``, to pass as litellm's ``api_base``.
        delay: global latency in seconds added to every answer.
    """

    Reply = Reply

    def __init__(self, *, reject_json_schema: bool = False) -> None:
        self.reject_json_schema = reject_json_schema
        self.delay = 0.0
        self._lock = threading.Lock()
        self._routes: dict[str, list[ReplySpec]] = {}
        self._requests: list[dict[str, Any]] = []
        self._headers: list[dict[str, str]] = []
        self._names: list[str | None] = []
        self._closed = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="judge-server", daemon=True
        )
        self._thread.start()

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        """Stop serving; pending delayed answers are abandoned."""
        self._closed.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def reset(self) -> None:
        """Forget routes, recorded requests, ``delay`` and ``reject_json_schema``."""
        with self._lock:
            self._routes.clear()
            self._requests.clear()
            self._headers.clear()
            self._names.clear()
            self.delay = 0.0
            self.reject_json_schema = False

    def __enter__(self) -> JudgeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scripting -------------------------------------------------------------------------
    def route(self, schema_name: str, reply: ReplySpec) -> None:
        """Script the answers for one schema name (``"*"`` matches any unrouted name).

        Args:
            schema_name: the ``response_format.json_schema.name`` the judge asks for.
            reply: a dict or list-free JSON value (sent as JSON message content), a str (raw
                content), a callable taking the request body and returning a reply, a
                ``JudgeServer.Reply``, or a list of those consumed in order (the last one
                repeats).
        """
        with self._lock:
            self._routes[schema_name] = list(reply) if isinstance(reply, list) else [reply]

    # -- observations ----------------------------------------------------------------------
    @property
    def requests(self) -> list[dict[str, Any]]:
        """The parsed JSON bodies received, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def headers(self) -> list[dict[str, str]]:
        """The request headers received, in order (a copy; names lowercased)."""
        with self._lock:
            return list(self._headers)

    @property
    def schema_names(self) -> list[str | None]:
        """The schema name each request was routed by, in order."""
        with self._lock:
            return list(self._names)

    def count(self, schema_name: str) -> int:
        """How many requests asked for ``schema_name``."""
        return self.schema_names.count(schema_name)

    # -- internals -------------------------------------------------------------------------
    def _next_reply(self, name: str | None) -> ReplySpec | None:
        with self._lock:
            key = name if name in self._routes else "*"
            queue = self._routes.get(key)
            if not queue:
                return None
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def _record(self, body: dict[str, Any], headers: dict[str, str], name: str | None) -> None:
        with self._lock:
            self._requests.append(body)
            self._headers.append(headers)
            self._names.append(name)


def schema_name_of(body: dict[str, Any]) -> str | None:
    """The schema name a request asks for (see the module docstring)."""
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        json_schema = response_format.get("json_schema") or {}
        name = json_schema.get("name")
        if isinstance(name, str):
            return name
    messages = body.get("messages") or []
    ordered = sorted(messages, key=lambda m: 0 if m.get("role") == "system" else 1)
    for message in ordered:
        match = _SCHEMA_NAME_LINE.search(_text_of(message.get("content")))
        if match:
            return match.group(1)
    return None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: JudgeServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": f"judge_server: unknown path {self.path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send(400, {"error": {"message": "judge_server: body is not JSON"}})
            return
        name = schema_name_of(body)
        owner._record(body, {k.lower(): v for k, v in self.headers.items()}, name)

        response_format = body.get("response_format")
        if (
            owner.reject_json_schema
            and isinstance(response_format, dict)
            and response_format.get("type") == "json_schema"
        ):
            self._send(
                400,
                {
                    "error": {
                        "message": "Invalid parameter: 'response_format' of type "
                        "'json_schema' is not supported with this model.",
                        "type": "invalid_request_error",
                        "param": "response_format",
                        "code": None,
                    }
                },
            )
            return

        spec = owner._next_reply(name)
        while callable(spec) and not isinstance(spec, Reply):
            spec = spec(body)
        if spec is None:
            self._send(500, {"error": {"message": f"judge_server: no route for schema {name!r}"}})
            return
        reply = spec if isinstance(spec, Reply) else Reply(body=spec)
        if owner._closed.wait(owner.delay + reply.delay):
            return
        if reply.status != 200:
            error_body = reply.body
            if error_body is None:
                error_body = {
                    "error": {
                        "message": f"judge_server: scripted status {reply.status}",
                        "type": "server_error",
                    }
                }
            self._send(reply.status, error_body, reply.headers)
            return
        content = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
        prompt_text = "".join(_text_of(m.get("content")) for m in body.get("messages") or [])
        prompt_tokens, completion_tokens = _tokens(prompt_text), _tokens(content)
        completion = {
            "id": f"chatcmpl-test-{len(owner.requests)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model", "test-judge"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        self._send(200, completion, reply.headers)

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (timeout): nothing to answer.
            pass


def make_judge(server: JudgeServer, **overrides: Any) -> Any:
    """A ``tracescore.Judge`` pointed at ``server``: 5 s timeout, 2 retries, 10 ms backoff."""
    from tracescore._judge import Judge

    model = overrides.pop("model", "openai/test-judge")
    options: dict[str, Any] = {
        "api_base": server.api_base,
        "api_key": TEST_API_KEY,
        "timeout": 5,
        "max_retries": 2,
        "retry_backoff": 0.01,
    }
    options.update(overrides)
    return Judge(model, **options)
