"""A new user's first hour (issue 12): what a short script and a CI gate get with defaults."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.test_cli import tracescore_cli, workdir  # noqa: F401 - the fixture


class _RefusingJudge(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that knows no model: every call is a 404."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"error": {"message": "The model `no-such-model` does not exist",
                                     "type": "invalid_request_error",
                                     "code": "model_not_found"}}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_judge() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RefusingJudge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_eval_with_a_misconfigured_judge_fails_and_says_why(
    workdir: Path, refusing_judge: str  # noqa: F811 - the fixture
) -> None:
    proc = tracescore_cli(
        "eval", "data.jsonl", "--target", "agent_mod:answer",
        "--scorer", "answer-relevancy:0.7", "--judge", "openai/no-such-model",
        "--no-progress", "--no-trace",
        cwd=workdir, env={"OPENAI_API_BASE": refusing_judge, "OPENAI_API_KEY": "none"},
    )
    # Before issue 12: "verdict: scored", exit 0 - a CI gate that passed with nothing judged.
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "verdict: failed" in proc.stdout
    assert "answer-relevancy: scored no item of 3 (error: 3); first error: " in proc.stdout
    # The cause itself, not only a count: the provider's message reaches the terminal.
    assert "does not exist" in proc.stdout
