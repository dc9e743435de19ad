"""Judge calls in a child process (``Judge(out_of_process=True)``), through the same paths."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

import tracescore
from tests.helpers import eval_events, finished, memory_configure
from tracescore.scorers import create_answer_relevancy_scorer
from tracescore.testing import ScriptedJudge as JudgeServer


@pytest.fixture(autouse=True, params=["direct", "litellm"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every judge built in these tests takes each transport in turn: both pass the same
    suite (``TRACESCORE_JUDGE_TRANSPORT`` is what a ``Judge`` reads when not told)."""
    monkeypatch.setenv("TRACESCORE_JUDGE_TRANSPORT", request.param)
    return str(request.param)

@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    tracescore.shutdown(3000)


def remote_judge(server: JudgeServer, **kwargs: Any) -> tracescore.Judge:
    kwargs.setdefault("max_retries", 1)
    kwargs.setdefault("timeout", 5)
    return tracescore.Judge("openai/test-judge", api_base=server.api_base, api_key="sk-test",
                            retry_backoff=0.01, cache_size=0, out_of_process=True, **kwargs)


def script(server: JudgeServer) -> None:
    server.route("answer_relevancy_statements", {"statements": ["Paris is the capital.",
                                                                "Bananas are yellow."]})
    server.route("answer_relevancy_verdicts", {"results": [
        {"result": "yes", "reason": "direct"}, {"result": "no", "reason": "off topic"}]})
    server.route("answer_relevancy_reason", {"reason": "Half of it answers."})


def test_scores_through_the_child_process(judge_server: JudgeServer) -> None:
    from tracescore._judge import process as _judge_process

    script(judge_server)
    result = create_answer_relevancy_scorer(model=remote_judge(judge_server)).run(
        input="What is the capital of France?", output="Paris is the capital. Bananas are yellow.")
    assert result.score == 0.5
    assert result.reason == "Half of it answers."
    assert result.judge_calls == 3 and result.input_tokens > 0
    child = _judge_process.shared_process()
    assert child.alive() and child._proc.pid != os.getpid()


@pytest.mark.parametrize(
    ("reply", "error_type"),
    [(JudgeServer.Reply(status=429), "rate_limited"),
     (JudgeServer.Reply(status=500), "judge_unavailable"),
     (JudgeServer.Reply(status=401), "judge_error"),
     ("not json", "invalid_judge_output")],
)
def test_errors_keep_their_classification(judge_server: JudgeServer, reply: Any,
                                          error_type: str) -> None:
    judge_server.route("answer_relevancy_statements", reply)
    with pytest.raises(tracescore.ScoringError) as info:
        create_answer_relevancy_scorer(model=remote_judge(judge_server)).run(
            input="q?", output="An answer.")
    assert info.value.error_type == error_type


def test_online_scoring_with_an_out_of_process_judge(judge_server: JudgeServer) -> None:
    script(judge_server)
    _, exp = memory_configure(
        judge=remote_judge(judge_server),
        scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer())],
    )

    @tracescore.agent
    def answer(q: str) -> str:
        return "Paris is the capital. Bananas are yellow."

    for i in range(3):
        answer(f"What is the capital of France? ({i})")
    spans = finished(exp, timeout_millis=30_000)
    assert [eval_events(s)[0]["gen_ai.evaluation.score.value"] for s in spans] == [0.5] * 3


# The two tests below close the shared child on purpose and start a fresh one. They come after
# the tests that share it, so that the child imports litellm (seconds; tens of seconds on a busy
# machine) once before them rather than again after each restart.
def test_child_start_up_does_not_count_against_the_call_timeout(
    judge_server: JudgeServer,
) -> None:
    # A fresh child imports litellm for seconds; a judge with a 1 s timeout must still get its
    # first answer (the start-up is awaited apart from the timed call).
    from tracescore._judge import process as _judge_process

    _judge_process.close_shared_process()
    script(judge_server)
    result = create_answer_relevancy_scorer(
        model=remote_judge(judge_server, max_retries=0, timeout=1)
    ).run(input="What is the capital of France?",
          output="Paris is the capital. Bananas are yellow.")
    assert result.score == 0.5
    assert _judge_process.shared_process().ready.is_set()


def test_configure_starts_the_child_ahead_of_the_first_score(judge_server: JudgeServer) -> None:
    from tracescore._judge import process as _judge_process
    from tracescore._setup import config as _config

    _judge_process.close_shared_process()
    _config._preloaded.clear()
    memory_configure(scoring=[tracescore.ScoringRule(
        scorer=create_answer_relevancy_scorer(model=remote_judge(judge_server)))])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        child = _judge_process._shared
        if child is not None and child.ready.is_set():
            break
        time.sleep(0.05)
    else:
        pytest.fail("configure() did not start the judge process")


def test_env_turns_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_JUDGE_OUT_OF_PROCESS", "true")
    assert tracescore.Judge("openai/x").out_of_process is True
    monkeypatch.setenv("TRACESCORE_JUDGE_OUT_OF_PROCESS", "false")
    assert tracescore.Judge("openai/x").out_of_process is False
    with pytest.raises(tracescore.ConfigurationError):
        tracescore.Judge("openai/x", out_of_process="yes")  # type: ignore[arg-type]
