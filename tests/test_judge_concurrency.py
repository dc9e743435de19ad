"""A judge on a server of one's own: calls in flight limited to what the server runs at once,
the wait for a place not counted against any timeout, the response format learnt once per
judge, a refusal believed only when it is one, and an unreachable server said plainly.

Every test reaches a real loopback OpenAI-protocol server (``ScriptedJudge``), through litellm
and through the direct transport. A one-slot server is played by a route that serves one
request at a time (a lock held for a fixed amount of work), as llama.cpp's server does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

import tracescore
from tracescore import Judge, JudgeTimeoutError, JudgeUnavailableError
from tracescore.testing import CaptureScores, ScriptedJudge, make_judge

NAME = "test_statements"
ANSWER = {"statements": ["Paris is in France."]}
TRANSPORTS = pytest.mark.parametrize("transport", ["litellm", "direct"])
LLAMA_CPP_500 = {"error": {"message": "[{'type': 'literal_error', 'loc': ('body', "
                           "'response_format', 'type'), 'msg': \"Input should be 'text' or "
                           "'json_object'\", 'input': 'json_schema'}]",
                           "type": "internal_server_error"}}


class Statements(BaseModel):
    statements: list[str]


class OneSlot:
    """A route that serves one request at a time, each taking ``work`` seconds, and records
    how many requests were at the server at once."""

    def __init__(self, work: float, reply: Any = None) -> None:
        self.work = work
        self.reply = ANSWER if reply is None else reply
        self._slot = threading.Lock()
        self._count = threading.Lock()
        self.at_server = 0
        self.most_at_server = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        with self._count:
            self.at_server += 1
            self.most_at_server = max(self.most_at_server, self.at_server)
        try:
            with self._slot:
                time.sleep(self.work)  # the model's work, one request at a time
                return self.reply(body) if callable(self.reply) else self.reply
        finally:
            with self._count:
                self.at_server -= 1


def ask_many(judge: Judge, n: int) -> list[Any]:
    """``n`` different requests at once; each result or the exception it raised."""

    async def main() -> list[Any]:
        return await asyncio.gather(*(
            judge.acomplete(system="Split the answer into statements.",
                            user=f"<answer>\nParis is in France ({i}).\n</answer>",
                            schema=Statements, name=NAME)
            for i in range(n)), return_exceptions=True)

    return asyncio.run(main())


def kind_of(request: dict[str, Any]) -> str | None:
    response_format = request.get("response_format")
    if response_format is None:
        return None
    kind = response_format["type"]
    return f"{kind}+schema" if "schema" in response_format else kind


# -- 1. calls in flight fit the server ----------------------------------------------------------


@TRANSPORTS
def test_a_one_slot_server_gets_one_call_at_a_time_and_queued_time_is_not_timed(
    judge_server: ScriptedJudge, transport: str
) -> None:
    # Each call takes 0.4 s of the server's one slot; ten calls sent at once would keep the
    # last one waiting ~3.6 s at the server, past the 2.5 s timeout. Waiting in tracescore's
    # queue instead, each call is timed from when the server takes it.
    judge_server.slots = 1
    server = OneSlot(work=0.4)
    judge_server.route(NAME, server)
    judge = make_judge(judge_server, transport=transport, timeout=2.5, max_retries=0,
                       )

    results = ask_many(judge, 10)

    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, failures[:2]
    assert server.most_at_server == 1
    assert judge.max_concurrency == 1


@TRANSPORTS
def test_the_slot_count_the_server_reports_is_the_limit(
    judge_server: ScriptedJudge, transport: str
) -> None:
    judge_server.slots = 3
    server = OneSlot(work=0.2)
    server._slot = threading.Semaphore(3)  # type: ignore[assignment]  # three slots
    judge_server.route(NAME, server)
    judge = make_judge(judge_server, transport=transport, timeout=30)

    ask_many(judge, 9)

    assert judge.max_concurrency == 3
    assert 1 <= server.most_at_server <= 3


def test_a_server_that_reports_no_slots_gets_one_call_at_a_time(
    judge_server: ScriptedJudge,
) -> None:
    judge_server.slots = None  # GET /props: 404
    server = OneSlot(work=0.1)
    judge_server.route(NAME, server)
    judge = make_judge(judge_server, timeout=30)

    ask_many(judge, 5)

    assert judge.max_concurrency == 1
    assert server.most_at_server == 1


def test_an_explicit_limit_and_the_environment_win_over_the_servers_slots(
    judge_server: ScriptedJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge_server.slots = 1
    judge_server.route(NAME, ANSWER)
    judge = make_judge(judge_server, max_concurrency=4)
    ask_many(judge, 1)
    assert judge.max_concurrency == 4

    monkeypatch.setenv("TRACESCORE_JUDGE_MAX_CONCURRENCY", "2")
    assert make_judge(judge_server).max_concurrency == 2
    monkeypatch.setenv("TRACESCORE_JUDGE_MAX_CONCURRENCY", "0")
    assert make_judge(judge_server).max_concurrency is None  # no limit of the judge's own


def test_hosted_apis_get_no_limit_of_their_own_and_the_usual_timeout() -> None:
    hosted = Judge("openai/gpt-4o-mini", api_key="sk-x")
    assert hosted.max_concurrency is None and hosted.timeout == 60
    local = Judge("openai/judge", api_base="http://127.0.0.1:8080/v1", api_key="none")
    assert local.timeout == 300  # a model on a CPU: tens of seconds a call
    assert Judge("ollama/qwen2.5:1.5b").timeout == 300
    assert Judge("openai/judge", api_base="http://192.168.1.20:8000/v1").timeout == 300
    with pytest.raises(tracescore.ConfigurationError, match="max_concurrency"):
        Judge("openai/judge", max_concurrency=-1)


@dataclass
class Result:
    score: float | None
    reason: str


class AsksTheJudge:
    """A custom LLM scorer: one judge call per score."""

    id = "asks"
    uses_judge = True

    def __init__(self, judge: Judge) -> None:
        self.judge = judge

    async def arun(self, **kwargs: Any) -> Result:
        reply = await self.judge.acomplete(system="Split the answer into statements.",
                                           user=f"<answer>\n{kwargs['output']}\n</answer>",
                                           schema=Statements, name=NAME)
        return Result(float(len(reply.parsed.statements)), "counted")


def test_time_queued_for_the_judge_does_not_count_against_the_job_timeout(
    judge_server: ScriptedJudge,
) -> None:
    # Six scores, 0.5 s of the one slot each: the last job waits ~2.5 s for the judge, past the
    # 1.5 s job timeout, though its own call takes 0.5 s.
    judge_server.slots = 1
    judge_server.route(NAME, OneSlot(work=0.5))
    judge = make_judge(judge_server, timeout=10)
    with CaptureScores(judge_server) as capture:
        capture.configure(judge=judge,
                          limits=tracescore.LimitsOptions(job_timeout=1.5, score_timeout=60),
                          scoring=[tracescore.ScoringRule(scorer=AsksTheJudge(judge),
                                                          on="agent")])

        @tracescore.agent(name="bot")
        def bot(i: int) -> str:
            return f"Paris is in France ({i})."

        for i in range(6):
            bot(i)
        assert capture.flush(60_000)
        events = capture.evaluation_events()

    assert [e.get("error.type") for e in events] == [None] * 6, events
    assert sorted(e["gen_ai.evaluation.score.value"] for e in events) == [1.0] * 6


# -- 3. timeouts say where the time went ---------------------------------------------------------


@TRANSPORTS
def test_a_call_that_times_out_at_the_server_says_so_and_what_to_change(
    judge_server: ScriptedJudge, transport: str
) -> None:
    judge_server.route(NAME, ScriptedJudge.Reply(body=ANSWER, delay=3))
    judge = make_judge(judge_server, transport=transport, timeout=0.5)

    (error,) = ask_many(judge, 1)

    assert isinstance(error, JudgeTimeoutError)
    message = str(error)
    assert "within 0.5 s while the server worked on the call" in message
    assert "Judge(timeout=...)" in message and "--judge-timeout" in message


def test_time_at_the_judges_server_does_not_count_against_the_job_timeout(
    judge_server: ScriptedJudge,
) -> None:
    # A slow local model: one call takes 2 s at the server, the job timeout is 1 s. The call
    # is bounded by the judge's own timeout (30 s); the job is not cut off while it runs.
    judge_server.route(NAME, ScriptedJudge.Reply(body=ANSWER, delay=2))
    judge = make_judge(judge_server, timeout=30)
    with CaptureScores(judge_server) as capture:
        capture.configure(judge=judge,
                          limits=tracescore.LimitsOptions(job_timeout=1, score_timeout=30),
                          scoring=[tracescore.ScoringRule(scorer=AsksTheJudge(judge),
                                                          on="agent")])

        @tracescore.agent(name="bot")
        def bot() -> str:
            return "Paris is in France."

        bot()
        (event,) = capture.evaluation_events()

    assert "error.type" not in event, event
    assert event["gen_ai.evaluation.score.value"] == 1.0


class AsksThenHangs(AsksTheJudge):
    """Calls the judge, then hangs in its own step."""

    async def arun(self, **kwargs: Any) -> Result:
        await super().arun(**kwargs)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_job_timeout_says_where_the_time_went(judge_server: ScriptedJudge) -> None:
    judge_server.route(NAME, ANSWER)
    judge = make_judge(judge_server, timeout=30)
    with CaptureScores(judge_server) as capture:
        capture.configure(judge=judge,
                          limits=tracescore.LimitsOptions(job_timeout=0.5, score_timeout=30),
                          scoring=[tracescore.ScoringRule(scorer=AsksThenHangs(judge),
                                                          on="agent")])

        @tracescore.agent(name="bot")
        def bot() -> str:
            return "Paris is in France."

        bot()
        (event,) = capture.evaluation_events()

    assert event["error.type"] == "timeout"
    explanation = event["gen_ai.evaluation.explanation"]
    assert "job timeout (0.5 s)" in explanation
    assert "it was running the scorer's own steps, not waiting for a judge" in explanation
    assert "its judge calls spent" in explanation and "(neither counted)" in explanation
    assert "LimitsOptions(job_timeout=...)" in explanation


# -- 2. the response format is learnt once per judge ----------------------------------------------


def refusing_json_schema(body: dict[str, Any]) -> Any:
    if kind_of(body) == "json_schema":
        return ScriptedJudge.Reply(status=500, body=LLAMA_CPP_500)
    return ANSWER


@TRANSPORTS
def test_the_format_is_probed_by_one_call_while_the_others_wait(
    judge_server: ScriptedJudge, transport: str
) -> None:
    judge_server.route(NAME, refusing_json_schema)
    judge = make_judge(judge_server, transport=transport, cache_size=0)

    results = ask_many(judge, 8)

    assert not [r for r in results if isinstance(r, BaseException)]
    kinds = [kind_of(b) for b in judge_server.requests]
    assert kinds.count("json_schema") == 1, kinds  # one 500 per judge, not one per call
    assert kinds.count("json_object+schema") == 8


def test_a_probe_that_times_out_lets_the_waiting_calls_go_at_once(
    judge_server: ScriptedJudge,
) -> None:
    # The first call's request hangs past the timeout: the three that waited for it do not
    # then probe one after another (through a server that may not answer), they all go.
    first = threading.Event()

    def answer(body: dict[str, Any]) -> Any:
        if not first.is_set():
            first.set()
            return ScriptedJudge.Reply(body=ANSWER, delay=3)
        return refusing_json_schema(body)

    judge_server.route(NAME, answer)
    judge = make_judge(judge_server, cache_size=0, timeout=1, max_retries=0)

    results = ask_many(judge, 4)

    assert sum(isinstance(r, JudgeTimeoutError) for r in results) == 1, results
    assert sum(not isinstance(r, BaseException) for r in results) == 3, results
    kinds = [kind_of(b) for b in judge_server.requests]
    # Waiting for one another, only the next call would have asked json_schema (2 in all).
    assert kinds.count("json_schema") >= 3, kinds


# -- issue 22.3: a fallback only on a real refusal, never for good after an outage ----------------


def echoing_500(body: dict[str, Any]) -> Any:
    """A gateway's error page during an outage: HTTP 500 echoing the request."""
    return ScriptedJudge.Reply(status=500, body={"error": {
        "message": f"upstream failed for request {json.dumps(body)[:2000]}"}})


@TRANSPORTS
def test_one_500_echoing_json_schema_then_recovery_keeps_the_response_format(
    judge_server: ScriptedJudge, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    judge_server.route(NAME, [echoing_500] + [ANSWER] * 10)
    judge = make_judge(judge_server, transport=transport, cache_size=0)
    caplog.set_level(logging.INFO, logger="tracescore")

    for _ in range(3):
        ask_many(judge, 1)
    # The 500 named json_schema and the same call without it was answered: a fallback, but a
    # provisional one, asked again after a while (here: now).
    judge._caller._modes._reprobe_at = 0.0
    for _ in range(2):
        ask_many(judge, 1)

    kinds = [kind_of(b) for b in judge_server.requests]
    assert kinds == ["json_schema", "json_object+schema", "json_object+schema",
                     "json_object+schema", "json_schema", "json_schema"], kinds
    steps = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()
             or "again" in r.getMessage()]
    assert len([s for s in steps if "the server refused json_schema" in s]) == 1, steps
    assert len([s for s in steps if "answered json_schema again" in s]) == 1, steps


@TRANSPORTS
def test_an_outage_echoing_every_format_changes_no_mode(
    judge_server: ScriptedJudge, transport: str
) -> None:
    # Down for one whole call (every mode and every retry answered with the echoing 500),
    # then up: the next call still asks json_schema.
    judge_server.route(NAME, [echoing_500] * 20)
    judge = make_judge(judge_server, transport=transport, cache_size=0, max_retries=1)

    (error,) = ask_many(judge, 1)
    assert isinstance(error, JudgeUnavailableError), error
    judge_server.reset()
    judge_server.route(NAME, ANSWER)
    ask_many(judge, 2)

    assert [kind_of(b) for b in judge_server.requests] == ["json_schema", "json_schema"]


@TRANSPORTS
def test_a_real_refusal_is_still_learnt_and_asked_again_only_after_a_while(
    judge_server: ScriptedJudge, transport: str
) -> None:
    judge_server.route(NAME, refusing_json_schema)
    judge = make_judge(judge_server, transport=transport, cache_size=0)

    for _ in range(3):
        ask_many(judge, 1)
    judge._caller._modes._reprobe_at = 0.0  # the re-probe is due: refused again
    for _ in range(2):
        ask_many(judge, 1)

    assert [kind_of(b) for b in judge_server.requests] == [
        "json_schema", "json_object+schema", "json_object+schema", "json_object+schema",
        "json_schema", "json_object+schema", "json_object+schema"]
    assert judge._caller._modes._interval == 3600.0  # the next re-probe waits twice as long


# -- issue 22.5: a refused connection fails fast and says so --------------------------------------


@TRANSPORTS
@pytest.mark.timeout(60)
def test_a_refused_connection_fails_at_once_with_a_plain_message(
    transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # A retry would wait 100 s (backoff): the test's timeout catches it.
    judge = Judge("openai/test-judge", api_base=f"http://127.0.0.1:{port}/v1", api_key="none",
                  transport=transport, max_retries=3, retry_backoff=100)

    errors = ask_many(judge, 3)

    for error in errors:
        assert isinstance(error, JudgeUnavailableError), error
        message = str(error)
        assert f"connection refused at http://127.0.0.1:{port}/v1" in message
        assert "is the judge's server running" in message
        assert "ssl" not in message.lower()
    warnings = [r for r in caplog.records if "connection refused" in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.timeout(120)
def test_eval_against_a_judge_that_is_not_there_says_so_plainly(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "agent_mod.py").write_text("def answer(q):\n    return 'Paris.'\n")
    (tmp_path / "data.jsonl").write_text("".join(
        json.dumps({"input": f"capital of France ({i})?"}) + "\n" for i in range(6)))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TRACESCORE_", "OTEL_", "OPENAI_"))}
    env.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(repo))

    proc = subprocess.run(
        [sys.executable, "-m", "tracescore", "eval", "data.jsonl", "--target",
         "agent_mod:answer", "--scorer", "answer-relevancy", "--judge", "judge",
         "--judge-api-base", f"http://127.0.0.1:{port}/v1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=110)

    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert f"connection refused at http://127.0.0.1:{port}/v1" in output, output
    assert "ssl" not in output.lower(), output


def test_a_local_judge_bounds_the_tokens_a_call_may_generate(judge_server: ScriptedJudge) -> None:
    judge_server.route(NAME, ANSWER)
    ask_many(make_judge(judge_server), 1)
    ask_many(make_judge(judge_server, max_tokens=200), 1)

    assert [b.get("max_tokens") for b in judge_server.requests] == [1024, 200]
    assert "max_tokens" not in Judge("openai/gpt-4o-mini", api_key="sk-x")._kwargs
