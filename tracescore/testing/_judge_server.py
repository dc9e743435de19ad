"""``ScriptedJudge``: a real OpenAI-compatible chat-completions server on loopback.

The server speaks enough of the OpenAI protocol for litellm's ``openai/<name>`` provider:
``POST /v1/chat/completions`` (and ``/chat/completions``) answer with a ``chat.completion``
object whose ``usage`` is derived from text lengths (4 characters a token), so token
accounting is testable. Because the judge is reached over HTTP through litellm, a test
exercises the whole path a production score takes.

A request is answered by the first of these that matches:

1. a prompt route (``route_prompt``): a substring of the request's messages, optionally
   limited to one schema name;
2. a schema route (``route``): the name of the JSON schema the request asks for, that is
   ``body["response_format"]["json_schema"]["name"]``. When the request carries no JSON
   schema (``response_format`` of type ``json_object`` or none, which is what tracescore's
   judge sends after a provider rejected ``json_schema``), the name is read from the first
   line ``Schema name: <name>`` in the messages (system messages first);
3. the catch-all schema route ``"*"``.

A request nothing matches gets HTTP 500 naming the schema, so a missing script fails loudly.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._judge import Judge

__all__ = [
    "SCRIPTED_JUDGE_API_KEY", "Reply", "ScriptedJudge", "make_judge", "prompt_of", "schema_name_of",
]

# A dummy key: litellm's OpenAI provider wants one. It reaches the server in the
# Authorization header only, so a test can assert that it appears nowhere else (spans, logs).
SCRIPTED_JUDGE_API_KEY = "sk-test-SECRET-4c0ffee"

_SCHEMA_NAME_LINE = re.compile(r"^Schema name: ([A-Za-z0-9_.-]+)\s*$", re.MULTILINE)


@dataclass
class Reply:
    """A scripted answer with full control over status, body and latency.

    Attributes:
        status: HTTP status. 200 answers with a chat completion whose message content is
            ``body`` (a dict or list is JSON-encoded, a str is sent as is). Any other status
            answers with ``body`` as the raw HTTP body (a dict is JSON-encoded); the default
            body is an OpenAI-style error object.
        body: see ``status``.
        delay: seconds to wait before answering, on top of the server's ``delay``.
        headers: extra response headers, e.g. ``{"retry-after": "0"}``.

    Examples:
        >>> judge.route("answer_relevancy_statements",
        ...             [Reply(status=429), {"statements": ["Paris is the capital."]}])
    """

    status: int = 200
    body: Any = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


# A dict | str | Reply | a callable taking the request body and returning one of these.
ReplySpec = Any


@dataclass
class _PromptRoute:
    substring: str
    schema_name: str | None
    replies: list[Any]


class ScriptedJudge:
    """An OpenAI chat-completions server on ``127.0.0.1`` with an ephemeral port.

    It starts serving on construction, on a daemon thread; ``close()`` (or leaving a ``with``
    block) stops it. Every request is recorded, so a test can assert on the prompts the
    scorers sent.

    Args:
        reject_json_schema: answer HTTP 400 (``response_format`` not supported) to every
            request that asks for ``response_format`` of type ``json_schema``, as providers
            without structured outputs do. Default False.
        slots: the slot count it reports on ``GET /props`` (``total_slots``), as llama.cpp's
            server does: a judge on loopback takes it as its limit on calls in flight
            (``Judge(max_concurrency=...)``). ``None`` answers 404 there, as a server that
            reports none (the judge then sends one call at a time). Default 64. It serves
            every request at once whatever it reports.

    Attributes:
        delay: seconds added to every answer (default 0), e.g. to test ``score_timeout``.
        reject_json_schema: see Args; may be changed at any time.

    Examples:
        >>> with ScriptedJudge() as judge:
        ...     judge.route("answer_relevancy_statements", {"statements": ["Paris."]})
        ...     scorer = create_answer_relevancy_scorer(model=judge.as_judge())
    """

    Reply = Reply

    def __init__(self, *, reject_json_schema: bool = False, slots: int | None = 64) -> None:
        self.reject_json_schema = reject_json_schema
        self.slots = slots
        self.delay = 0.0
        self._lock = threading.Lock()
        self._routes: dict[str, list[Any]] = {}
        self._prompt_routes: list[_PromptRoute] = []
        self._requests: list[dict[str, Any]] = []
        self._headers: list[dict[str, str]] = []
        self._names: list[str | None] = []
        self._closed = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="tracescore-scripted-judge", daemon=True
        )
        self._thread.start()

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return int(self._httpd.server_address[1])

    @property
    def api_base(self) -> str:
        """``http://127.0.0.1:<port>/v1``, litellm's ``api_base`` for this server."""
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        """Stop serving; answers still being delayed are abandoned."""
        self._closed.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def reset(self) -> None:
        """Forget routes, recorded requests, ``delay`` and ``reject_json_schema``; report 64
        slots again."""
        with self._lock:
            self._routes.clear()
            self._prompt_routes.clear()
            self._requests.clear()
            self._headers.clear()
            self._names.clear()
            self.delay = 0.0
            self.reject_json_schema = False
            self.slots = 64

    def __enter__(self) -> ScriptedJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def as_judge(self, **overrides: Any) -> Judge:
        """A ``tracescore.Judge`` pointed at this server; see ``make_judge``."""
        return make_judge(self, **overrides)

    # -- scripting -------------------------------------------------------------------------
    def route(self, schema_name: str, reply: ReplySpec | list[ReplySpec]) -> None:
        """Script the answers to requests for one structured-output schema.

        Args:
            schema_name: the ``response_format.json_schema.name`` the judge asks for, e.g.
                ``"answer_relevancy_statements"``; ``"*"`` answers any name without a route.
            reply: a dict (sent as JSON message content), a str (raw content, e.g. broken
                JSON), a ``Reply`` (status, delay, headers), a callable taking the request
                body and returning one of these, or a list of those consumed in order (the
                last one repeats). Replaces an earlier route for the same name.

        Examples:
            >>> judge.route("answer_relevancy_verdicts",
            ...             {"results": [{"result": "yes", "reason": "on topic"}]})
        """
        with self._lock:
            self._routes[schema_name] = list(reply) if isinstance(reply, list) else [reply]

    def route_prompt(
        self, substring: str, reply: ReplySpec | list[ReplySpec], *, schema_name: str | None = None
    ) -> None:
        """Script the answers to requests whose messages contain ``substring``.

        Prompt routes are tried before schema routes, in the order they were added.

        Args:
            substring: text to look for in the request's messages (case-sensitive).
            reply: as for ``route``.
            schema_name: only match requests for this schema. Default: any schema.

        Examples:
            >>> judge.route_prompt("capital of Peru", {"statements": ["Lima."]},
            ...                    schema_name="answer_relevancy_statements")
        """
        replies = list(reply) if isinstance(reply, list) else [reply]
        with self._lock:
            self._prompt_routes.append(_PromptRoute(substring, schema_name, replies))

    # -- observations ----------------------------------------------------------------------
    @property
    def requests(self) -> list[dict[str, Any]]:
        """The parsed JSON bodies received, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def prompts(self) -> list[str]:
        """The text of each request's messages joined by newlines, in order."""
        return [prompt_of(body) for body in self.requests]

    @property
    def headers(self) -> list[dict[str, str]]:
        """The request headers received, in order (a copy; names lowercased)."""
        with self._lock:
            return list(self._headers)

    @property
    def schema_names(self) -> list[str | None]:
        """The schema name of each request received, in order (None when it had none)."""
        with self._lock:
            return list(self._names)

    def count(self, schema_name: str) -> int:
        """How many requests asked for ``schema_name``."""
        return self.schema_names.count(schema_name)

    # -- internals -------------------------------------------------------------------------
    def _next_reply(self, name: str | None, body: dict[str, Any]) -> Any:
        with self._lock:
            queue: list[Any] | None = None
            if self._prompt_routes:
                text = prompt_of(body)
                for prompt_route in self._prompt_routes:
                    if prompt_route.substring in text and prompt_route.schema_name in (
                        None, name
                    ):
                        queue = prompt_route.replies
                        break
            if queue is None:
                queue = self._routes.get(name if name in self._routes else "*")
            if not queue:
                return None
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def _record(self, body: dict[str, Any], headers: dict[str, str], name: str | None) -> int:
        with self._lock:
            self._requests.append(body)
            self._headers.append(headers)
            self._names.append(name)
            return len(self._requests)


def schema_name_of(body: dict[str, Any]) -> str | None:
    """The structured-output schema name a chat-completions request body asks for.

    Read from ``response_format.json_schema.name``, else from a ``Schema name: <name>`` line
    in the messages (system messages first); None when neither is there.
    """
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


def prompt_of(body: dict[str, Any]) -> str:
    """The text of a chat-completions request's messages, joined by newlines."""
    return "\n".join(_text_of(m.get("content")) for m in body.get("messages") or [])


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
    owner: ScriptedJudge


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        slots = self.server.owner.slots
        if self.path.rstrip("/") == "/props" and slots is not None:
            self._send(200, {"total_slots": slots})
            return
        self._send(404, {"error": {"message": f"scripted judge: unknown path {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": f"scripted judge: unknown path {self.path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send(400, {"error": {"message": "scripted judge: body is not JSON"}})
            return
        name = schema_name_of(body)
        number = owner._record(body, {k.lower(): v for k, v in self.headers.items()}, name)

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

        spec = owner._next_reply(name, body)
        while callable(spec) and not isinstance(spec, Reply):
            spec = spec(body)
        if spec is None:
            self._send(500, {"error": {"message": f"scripted judge: no route for schema {name!r}"}})
            return
        reply = spec if isinstance(spec, Reply) else Reply(body=spec)
        if owner._closed.wait(owner.delay + reply.delay):
            return
        if reply.status != 200:
            error_body = reply.body
            if error_body is None:
                error_body = {
                    "error": {
                        "message": f"scripted judge: scripted status {reply.status}",
                        "type": "server_error",
                    }
                }
            self._send(reply.status, error_body, reply.headers)
            return
        content = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
        prompt_tokens, completion_tokens = _tokens(prompt_of(body)), _tokens(content)
        completion = {
            "id": f"chatcmpl-scripted-{number}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model", "scripted-judge"),
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
            # The client gave up (its timeout passed): nobody to answer.
            pass


def make_judge(server: ScriptedJudge, **overrides: Any) -> Judge:
    """A ``tracescore.Judge`` pointed at ``server``.

    Args:
        server: a running ``ScriptedJudge``.
        **overrides: ``tracescore.Judge`` arguments that replace the defaults:
            ``model="openai/test-judge"``, ``api_key=SCRIPTED_JUDGE_API_KEY``, ``timeout=5``
            (seconds), ``max_retries=2``, ``retry_backoff=0.01`` (seconds).

    Examples:
        >>> scorer = create_answer_relevancy_scorer(model=make_judge(server, timeout=1))
    """
    from tracescore import Judge

    model = overrides.pop("model", "openai/test-judge")
    options: dict[str, Any] = {
        "api_base": server.api_base,
        "api_key": SCRIPTED_JUDGE_API_KEY,
        "timeout": 5,
        "max_retries": 2,
        "retry_backoff": 0.01,
    }
    options.update(overrides)
    return Judge(model, **options)
