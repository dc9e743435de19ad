"""The direct transport and what it keeps out of the application: which judges take it, the
wire format it shares with litellm, prices without litellm, its telemetry, Retry-After, and an
application that never imports litellm (direct in process, or any judge out of process)."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from pydantic import BaseModel

import tracescore
from tests.helpers import eval_events, finished, memory_configure, scaled
from tracescore import ConfigurationError
from tracescore._judge import Judge, direct, prices, strict_schema
from tracescore.scorers import create_answer_relevancy_scorer
from tracescore.testing import ScriptedJudge as JudgeServer
from tracescore.testing import make_judge


class Statements(BaseModel):
    statements: list[str]


def ask(judge: Judge) -> Any:
    return asyncio.run(judge.acomplete(system="Split.", user="<a>Paris.</a>",
                                       schema=Statements, name="test_statements"))


@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    tracescore.shutdown(3000)


# -- which judges take it ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "kwargs", "expected"),
    [
        ("openai/gpt-4o-mini", {}, "direct"),
        ("openai/judge", {"api_base": "http://127.0.0.1:1/v1", "temperature": 0.2}, "direct"),
        ("hosted_vllm/qwen", {"api_base": "http://127.0.0.1:1/v1"}, "direct"),
        ("hosted_vllm/qwen", {}, "litellm"),  # no api_base: litellm says what is missing
        ("lm_studio/qwen", {"api_base": "http://127.0.0.1:1/v1"}, "direct"),
        ("azure/my-deployment", {"api_base": "https://x.example", "api_version": "2024-10-21"},
         "litellm"),  # direct only when asked for
        ("anthropic/claude-3-5-haiku", {}, "litellm"),
        ("gpt-4o-mini", {}, "litellm"),  # no provider prefix: litellm resolves it
        ("openai/gpt-4o-mini", {"metadata": {"team": "a"}}, "litellm"),  # litellm-only argument
    ],
)
def test_auto_takes_the_direct_path_for_the_openai_protocol(
    model: str, kwargs: dict[str, Any], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOSTED_VLLM_API_BASE", raising=False)
    assert Judge(model, **kwargs).transport == expected


def test_explicit_transports() -> None:
    assert Judge("openai/gpt-4o-mini", transport="litellm").transport == "litellm"
    azure = Judge("azure/dep", transport="direct", api_base="https://x.example/",
                  api_version="2024-10-21", api_key="k")
    assert azure.transport == "direct"
    assert azure._caller.route.client is not None
    assert azure._caller.route.client.url == (
        "https://x.example/openai/deployments/dep/chat/completions?api-version=2024-10-21")
    with pytest.raises(ConfigurationError, match="transport='direct' cannot call"):
        Judge("anthropic/claude-3-5-haiku", transport="direct")
    with pytest.raises(ConfigurationError, match="transport must be one of"):
        Judge("openai/x", transport="httpx")


def test_the_choice_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="tracescore"):
        Judge("openai/gpt-4o-mini")
        Judge("anthropic/claude-3-5-haiku")
    messages = [r.getMessage() for r in caplog.records]
    assert ("tracescore judge 'openai/gpt-4o-mini': direct transport "
            "(auto: OpenAI chat-completions protocol)") in messages
    assert any(m.startswith("tracescore judge 'anthropic/claude-3-5-haiku': litellm transport "
                            "(auto: provider 'anthropic'") for m in messages)


# -- the same request as litellm's ----------------------------------------------------------
def _scorer_schemas() -> list[type[BaseModel]]:
    import importlib
    import pkgutil

    import tracescore.scorers as package

    found: dict[str, type[BaseModel]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, BaseModel) and value is not BaseModel
                    and value.__module__ == module.__name__):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


def test_strict_schema_matches_litellms_for_every_scorer_schema() -> None:
    from litellm.llms.base_llm.base_utils import type_to_response_format_param

    schemas = _scorer_schemas()
    assert len(schemas) >= 10
    for schema in schemas:
        theirs = type_to_response_format_param(schema)
        assert theirs is not None
        theirs["json_schema"]["name"] = "step"
        assert strict_schema.response_format(schema, "step") == theirs, schema


@pytest.mark.parametrize("transport", ["direct", "litellm"])
def test_both_transports_send_the_same_body(judge_server: JudgeServer, transport: str) -> None:
    judge_server.route("test_statements", {"statements": ["Paris."]})
    ask(make_judge(judge_server, transport=transport, temperature=0.1, seed=7,
                   extra_headers={"X-Team": "evals"}))
    (body,) = judge_server.requests
    (headers,) = judge_server.headers
    assert {k: body[k] for k in ("model", "temperature", "seed")} == {
        "model": "test-judge", "temperature": 0.1, "seed": 7}
    assert body["response_format"] == strict_schema.response_format(Statements, "test_statements")
    assert headers["x-team"] == "evals"
    assert headers["authorization"].startswith("Bearer ")


# -- prices ---------------------------------------------------------------------------------
def test_price_table_is_litellms_own() -> None:
    import litellm

    price = prices.lookup("openai/gpt-4o-mini")
    assert price is not None and price.provider == "openai"
    usage = litellm.Usage(prompt_tokens=1000, completion_tokens=200, total_tokens=1200)
    response = litellm.ModelResponse(model="gpt-4o-mini", usage=usage)
    expected = litellm.completion_cost(completion_response=response, model="gpt-4o-mini")
    assert prices.cost(price, 1000, 200) == pytest.approx(expected)
    assert prices.lookup("openai/no-such-model-anywhere") is None


def test_direct_reply_is_priced_once_per_model(judge_server: JudgeServer) -> None:
    judge_server.route("test_statements", {"statements": ["x"]})
    direct._PRICES.pop("openai/gpt-4o-mini", None)
    prices.lookup.cache_clear()
    judge = make_judge(judge_server, model="openai/gpt-4o-mini", cache_size=0,
                       transport="direct")
    first, second = ask(judge), ask(judge)
    assert first.cost and first.cost == second.cost
    assert prices.lookup.cache_info().misses == 1


# -- telemetry ------------------------------------------------------------------------------
@pytest.mark.parametrize("transport", ["direct", "litellm"])
def test_client_metrics_name_the_transport(judge_server: JudgeServer, transport: str) -> None:
    reader = InMemoryMetricReader()
    memory_configure(
        output=tracescore.OutputOptions(meter_provider=MeterProvider(metric_readers=[reader])))
    judge_server.route("test_statements", {"statements": ["x"]})
    ask(make_judge(judge_server, transport=transport))
    data = reader.get_metrics_data()
    seen = [dict(point.attributes)
            for rm in data.resource_metrics for sm in rm.scope_metrics for metric in sm.metrics
            if metric.name == "gen_ai.client.operation.duration"
            for point in metric.data.data_points]
    assert [a.get("tracescore.judge.transport") for a in seen] == [transport]
    assert seen[0]["gen_ai.provider.name"] == "openai"


# -- retries and failures -------------------------------------------------------------------
def test_direct_honours_retry_after_and_keeps_the_key_out(
    judge_server: JudgeServer, caplog: pytest.LogCaptureFixture
) -> None:
    judge_server.route("test_statements", [
        JudgeServer.Reply(status=429, headers={"Retry-After": "0.2"},
                          body={"error": {"message": "slow down"}}),
        {"statements": ["x"]},
    ])
    with caplog.at_level(logging.DEBUG, logger="tracescore"):
        reply = ask(make_judge(judge_server, transport="direct", cache_size=0))
    assert reply.parsed.statements == ["x"]
    assert ("tracescore judge 'openai/test-judge': retrying after 0.2 s (Retry-After)"
            in [r.getMessage() for r in caplog.records])


def test_one_session_for_every_direct_judge(judge_server: JudgeServer) -> None:
    judge_server.route("test_statements", {"statements": ["x"]})
    for _ in range(2):
        ask(make_judge(judge_server, transport="direct", cache_size=0))
    from tracescore._core import loop as _loop

    assert direct.has_session(_loop.get_loop())
    assert sum(1 for s in direct._sessions.values() if not s.closed) == 1


# -- an application without litellm ---------------------------------------------------------
_APP = textwrap.dedent(
    """
    import json, os, sys
    os.environ["LITELLM_OFFLINE_MODE"] = "true"
    import tracescore
    from tracescore.scorers import create_answer_relevancy_scorer
    from tracescore.testing import InMemoryScoreExporter, ScriptedJudge, make_judge

    with ScriptedJudge() as server:
        server.route("answer_relevancy_statements", {"statements": ["Paris."]})
        server.route("answer_relevancy_verdicts", {"results": [{"result": "yes", "reason": "r"}]})
        server.route("answer_relevancy_reason", {"reason": "On topic."})
        judge = make_judge(server, transport=sys.argv[1], out_of_process=sys.argv[2] == "1")
        exporter = InMemoryScoreExporter()
        tracescore.configure(exporter=exporter, scoring=[tracescore.ScoringRule(
            scorer=create_answer_relevancy_scorer(model=judge))])

        @tracescore.agent
        def answer(q):
            return "Paris."

        answer("Capital of France?")
        assert tracescore.force_flush(int(sys.argv[3]))  # a child importing litellm: seconds
        scores = [e.attributes["gen_ai.evaluation.score.value"]
                  for s in exporter.get_finished_spans() for e in s.events
                  if e.name == "gen_ai.evaluation.result"]
        print(json.dumps({"scores": scores, "litellm": "litellm" in sys.modules,
                          "openai": "openai" in sys.modules}))
        tracescore.shutdown()
    """
)


@pytest.mark.parametrize(
    ("transport", "out_of_process"),
    [("direct", False), ("direct", True), ("litellm", True)],
)
def test_application_never_imports_litellm(transport: str, out_of_process: bool) -> None:
    # Out of process means out of process: the parent builds requests, classifies failures
    # and prices replies without litellm, whichever transport the child uses.
    run = subprocess.run([sys.executable, "-c", _APP, transport, "1" if out_of_process else "0",
                          str(int(scaled(60_000)))],
                         capture_output=True, text=True, timeout=scaled(180))
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result == {"scores": [1.0], "litellm": False, "openai": False}


def test_online_scoring_through_the_direct_transport(judge_server: JudgeServer) -> None:
    judge_server.route("answer_relevancy_statements", {"statements": ["Paris."]})
    judge_server.route("answer_relevancy_verdicts", {"results": [{"result": "yes",
                                                                   "reason": "r"}]})
    judge_server.route("answer_relevancy_reason", {"reason": "On topic."})
    _, exporter = memory_configure(scoring=[tracescore.ScoringRule(
        scorer=create_answer_relevancy_scorer(model=make_judge(judge_server,
                                                                transport="direct")))])

    @tracescore.agent
    def answer(q: str) -> str:
        return "Paris."

    answer("Capital of France?")
    (span,) = finished(exporter, 10_000)
    (event,) = eval_events(span)
    assert event["gen_ai.evaluation.score.value"] == 1.0


def test_a_hosted_openai_judge_without_a_key_fails_at_once_as_judge_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The README's Quickstart without OPENAI_API_KEY: an event saying so, not retries of a call
    # that cannot succeed (nor a DNS error on an offline machine).
    from tracescore.scorers import create_answer_relevancy_scorer
    from tracescore.testing import InMemoryScoreExporter

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    judge = tracescore.Judge("openai/gpt-4o-mini")
    assert judge.transport == "direct"
    exporter = InMemoryScoreExporter()
    tracescore.configure(exporter=exporter, scoring=[tracescore.ScoringRule(
        scorer=create_answer_relevancy_scorer(model=judge), on="agent")])
    try:
        @tracescore.agent
        def answer(q: str) -> str:
            return "Paris"

        answer("What is the capital of France?")
        assert tracescore.force_flush(20_000)
        (event,) = exporter.evaluation_events()
        assert event["error.type"] == "judge_error"
        assert "Missing credentials" in event["gen_ai.evaluation.explanation"]
        assert "OPENAI_API_KEY" in event["gen_ai.evaluation.explanation"]
    finally:
        tracescore.shutdown(2000)
