"""The conformance apps' model: an OpenAI-protocol server on loopback that can call tools.

``tracescore.testing.ScriptedJudge`` answers with text only; the agent frameworks also need a
model that asks for a tool, answers in a stream and embeds text. This server speaks the part of
the OpenAI protocol they use:

* ``POST /v1/chat/completions``: a scripted turn per request (``script(body) -> Turn``), as one
  ``chat.completion`` or, with ``"stream": true``, as server-sent ``chat.completion.chunk``
  events (text deltas, tool-call deltas, a usage chunk when asked);
* ``POST /v1/embeddings``: deterministic bag-of-words vectors (a word's hash picks its
  dimension), so a vector store ranks the document that shares the query's words first.

Every request is recorded (``requests``). The default script plays a one-tool agent: a request
that offers tools and carries no tool result yet calls the first tool with ``TOOL_ARGUMENTS``;
otherwise it answers ``answer``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIMENSIONS = 64
API_KEY = "sk-conformance-model"


@dataclass
class Turn:
    """One scripted model turn: ``text``, or ``tool_calls`` as ``(name, arguments)`` pairs."""

    text: str | None = None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


Script = Callable[[dict[str, Any]], Turn]


def one_tool_agent(answer: str, arguments: dict[str, Any] | None = None) -> Script:
    """Call the first offered tool once (with ``arguments``, default ``{}``), then answer."""

    def script(body: dict[str, Any]) -> Turn:
        tools = body.get("tools") or []
        messages = body.get("messages") or []
        called = any(m.get("role") == "tool" for m in messages if isinstance(m, dict))
        if tools and not called:
            name = tools[0].get("function", tools[0]).get("name")
            return Turn(tool_calls=[(str(name), dict(arguments or {}))])
        return Turn(text=answer)

    return script


def final_tool_agent(answer: str, arguments: dict[str, Any] | None = None,
                     final_tool: str = "final_answer") -> Script:
    """An agent that answers through a tool (smolagents' ``ToolCallingAgent``): call the first
    offered tool other than ``final_tool`` once, then ``final_tool`` with ``{"answer": answer}``
    once a tool's result came back (as a ``tool`` message, or as a user message after a tool
    call, which is how some frameworks send it)."""

    def script(body: dict[str, Any]) -> Turn:
        tools = [t.get("function", t).get("name") for t in body.get("tools") or []]
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        asked = any(m.get("role") == "assistant" and (m.get("tool_calls") or "Calling tools"
                                                         in json.dumps(m.get("content")))
                    for m in messages)
        answered = any(m.get("role") == "tool" for m in messages) or asked
        others = [str(n) for n in tools if n != final_tool]
        if others and not answered:
            return Turn(tool_calls=[(others[0], dict(arguments or {}))])
        if final_tool in tools:
            return Turn(tool_calls=[(final_tool, {"answer": answer})])
        return Turn(text=answer)

    return script


def embed(text: str) -> list[float]:
    """A unit bag-of-words vector of ``DIMENSIONS`` floats."""
    vector = [0.0] * DIMENSIONS
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % DIMENSIONS] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class ModelServer:
    """The server; it serves from construction until ``close()`` (or the ``with`` block ends).

    Args:
        script: decides each chat turn from the request body.
    """

    def __init__(self, script: Script) -> None:
        self.script = script
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        name="conformance-model", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The request bodies received, in order (``path`` added)."""
        with self._lock:
            return list(self._requests)

    def chat_requests(self) -> list[dict[str, Any]]:
        """The chat-completion request bodies."""
        return [r for r in self.requests if r["path"].endswith("chat/completions")]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ModelServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: ModelServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # keep-alive without ~40 ms per request
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        owner = self.server.owner
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON"}})
            return
        path = self.path.rstrip("/")
        with owner._lock:
            owner._requests.append({**body, "path": path})
            number = len(owner._requests)
        if path.endswith("/embeddings"):
            inputs = body.get("input")
            texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
            self._json(200, {
                "object": "list", "model": body.get("model", "embed"),
                "data": [{"object": "embedding", "index": i, "embedding": embed(str(t))}
                         for i, t in enumerate(texts)],
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
            })
            return
        if not path.endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"unknown path {self.path}"}})
            return
        turn = owner.script(body)
        calls = [{"id": f"call_{number}_{i}", "type": "function",
                  "function": {"name": name, "arguments": json.dumps(args)}}
                 for i, (name, args) in enumerate(turn.tool_calls)]
        finish = "tool_calls" if calls else "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        head = {"id": f"chatcmpl-conf-{number}", "created": 1_700_000_000,
                "model": body.get("model", "model")}
        if body.get("stream"):
            self._stream(head, turn.text, calls, finish, usage, body)
            return
        message: dict[str, Any] = {"role": "assistant", "content": turn.text}
        if calls:
            message["tool_calls"] = calls
        self._json(200, {**head, "object": "chat.completion", "usage": usage,
                         "choices": [{"index": 0, "message": message, "finish_reason": finish}]})

    def _stream(self, head: dict[str, Any], text: str | None, calls: list[dict[str, Any]],
                finish: str, usage: dict[str, int], body: dict[str, Any]) -> None:
        chunks: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        if text:
            words = text.split(" ")
            chunks += [{"content": w if i == 0 else " " + w} for i, w in enumerate(words)]
        for i, call in enumerate(calls):
            chunks.append({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                           "function": {"name": call["function"]["name"],
                                                        "arguments": ""}}]})
            chunks.append({"tool_calls": [{"index": i, "function": {
                "arguments": call["function"]["arguments"]}}]})
        events = [{**head, "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                  for delta in chunks]
        events.append({**head, "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({**head, "object": "chat.completion.chunk", "choices": [],
                           "usage": usage})
        data = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)
        data += b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
