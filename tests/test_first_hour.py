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


# -- The Quickstart's short script: configure, call once, flush --------------------------------

SHORT_SCRIPT = r'''
import importlib.abc, importlib.machinery, json, sys, threading

# litellm's import takes 4-6 s on a loaded 2-core machine. Here it takes as long as the test
# says: it finishes only once the flush is waiting for it, or once the flush gave up. (The wait
# is in the module's execution, where only litellm's own import lock is held.)
gate = threading.Event()


class SlowLoader(importlib.abc.Loader):
    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module):
        gate.wait(120)
        self.real.exec_module(module)


class SlowImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "litellm":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = SlowLoader(spec.loader)
        return spec


sys.meta_path.insert(0, SlowImport())

import tracescore
from tracescore._setup import config as _config
from tracescore.scorers import create_answer_relevancy_scorer
from tracescore.testing import InMemoryScoreExporter, ScriptedJudge

judge = ScriptedJudge()
judge.route("answer_relevancy_statements", {"statements": ["Paris is the capital."]})
judge.route("answer_relevancy_verdicts", {"results": [{"result": "yes", "reason": "ok"}]})
judge.route("answer_relevancy_reason", {"reason": "Direct answer."})
exporter = InMemoryScoreExporter()
tracescore.configure(
    judge=judge.as_judge(), exporter=exporter, limits=tracescore.LimitsOptions(flush_timeout=3),
    scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent")],
)


@tracescore.agent
def answer(question):
    return "Paris is the capital."


answer("What is the capital of France?")
result = {}
done = threading.Event()


def flush():
    result["ok"] = tracescore.force_flush()
    done.set()


threading.Thread(target=flush).start()
waiting = getattr(_config, "_flush_waiting_for_preload", None)
while not (done.is_set() or (waiting is not None and waiting.is_set())):
    done.wait(0.01)
gate.set()
done.wait(120)
(agent,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
events = [e for e in agent.events if e.name == "gen_ai.evaluation.result"]
print(json.dumps({"ok": result.get("ok"), "scores_on_span": len(events)}))
tracescore.shutdown()
'''


def test_a_short_script_gets_its_scores_on_the_span_despite_a_slow_judge_start(
    tmp_path: Path,
) -> None:
    import os
    import subprocess
    import sys

    script = tmp_path / "short.py"
    script.write_text(SHORT_SCRIPT, encoding="utf-8")
    repo = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    env.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(repo))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # Before issue 12: {"ok": false, "scores_on_span": 0} - the flush spent its deadline on the
    # import and the span went out without its score.
    assert json.loads(proc.stdout.splitlines()[-1]) == {"ok": True, "scores_on_span": 1}


def test_a_flush_that_times_out_with_scores_pending_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import asyncio

    import tracescore
    from tests.helpers import memory_configure

    release = threading.Event()

    class Stuck:
        id = "stuck"

        async def arun(self, **kwargs: object) -> object:
            while not release.is_set():
                await asyncio.sleep(0.01)
            return type("R", (), {"score": 1.0, "reason": "late"})()

    @tracescore.agent
    def agent(q: str) -> str:
        return "a"

    memory_configure(scoring=[tracescore.ScoringRule(scorer=Stuck(), on="agent")],
                     limits=tracescore.LimitsOptions(flush_timeout=0.2))
    agent("q")
    try:
        with caplog.at_level("WARNING", logger="tracescore"):
            assert tracescore.force_flush() is False
        (record,) = [r for r in caplog.records if "still pending" in r.getMessage()]
        assert "1 score(s) still pending after 0.2 s" in record.getMessage()
    finally:
        release.set()
        tracescore.shutdown()
