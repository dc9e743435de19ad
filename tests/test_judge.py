"""The judge, through litellm, against a real OpenAI-compatible server on loopback."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
from opentelemetry import context as otel_context
from pydantic import BaseModel

from tracescore import (
    ConfigurationError,
    InvalidJudgeOutputError,
    JudgeError,
    JudgeRateLimitedError,
    JudgeTimeoutError,
    JudgeUnavailableError,
    NoJudgeConfiguredError,
)
from tracescore._core import loop as _loop
from tracescore._core.suppress import PLAIN_KEY, is_suppressed, suppressed
from tracescore._judge import Judge, resolve_judge
from tracescore.testing import SCRIPTED_JUDGE_API_KEY as TEST_API_KEY
from tracescore.testing import ScriptedJudge as JudgeServer
from tracescore.testing import make_judge, runtime


@pytest.fixture(autouse=True, params=["direct", "litellm"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every judge built in these tests takes each transport in turn: both pass the same
    suite (``TRACESCORE_JUDGE_TRANSPORT`` is what a ``Judge`` reads when not told)."""
    monkeypatch.setenv("TRACESCORE_JUDGE_TRANSPORT", request.param)
    return str(request.param)


class Statements(BaseModel):
    statements: list[str]


def ask(judge: Judge, name: str = "test_statements", **kwargs: Any) -> Any:
    # A fresh event loop per call, as a user's asyncio.run() would: the judge must not care.
    return asyncio.run(
        judge.acomplete(
            system="Split the answer into statements.",
            user="<answer>\nParis is in France.\n</answer>",
            schema=kwargs.pop("schema", Statements),
            name=name,
            **kwargs,
        )
    )


def test_import_does_not_import_litellm() -> None:
    code = textwrap.dedent(
        """
        import sys
        import tracescore, tracescore.scorers, tracescore._judge
        from tracescore.scorers import create_answer_relevancy_scorer
        create_answer_relevancy_scorer(model="openai/x")
        assert "litellm" not in sys.modules, "litellm was imported"
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_request_asks_for_the_named_schema_at_temperature_zero(
    judge_server: JudgeServer, judge: Judge
) -> None:
    judge_server.route("test_statements", {"statements": ["Paris is in France."]})

    reply = ask(judge)

    assert reply.parsed == Statements(statements=["Paris is in France."])
    assert (reply.calls, reply.model, reply.cost) == (1, "openai/test-judge", None)
    assert reply.prompt_tokens > 0 and reply.completion_tokens > 0
    (body,) = judge_server.requests
    assert body["model"] == "test-judge"
    assert body["temperature"] == 0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"].startswith("Split the answer into statements.")
    assert body["messages"][1]["content"] == "<answer>\nParis is in France.\n</answer>"
    response_format = body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "test_statements"
    assert response_format["json_schema"]["schema"]["properties"]["statements"]["type"] == "array"


def test_token_usage_comes_from_the_provider(judge_server: JudgeServer, judge: Judge) -> None:
    content = json.dumps({"statements": ["a" * 400]})
    judge_server.route("test_statements", content)

    reply = ask(judge)

    prompt_chars = sum(len(m["content"]) for m in judge_server.requests[0]["messages"])
    assert reply.prompt_tokens == prompt_chars // 4
    assert reply.completion_tokens == len(content) // 4


def test_cost_is_computed_for_a_priced_model(judge_server: JudgeServer) -> None:
    judge = make_judge(judge_server, model="openai/gpt-4o-mini")
    judge_server.route("test_statements", {"statements": ["x"]})

    reply = ask(judge)

    assert isinstance(reply.cost, float) and reply.cost > 0


def test_call_runs_with_instrumentation_suppressed(judge_server: JudgeServer, judge: Judge) -> None:
    judge_server.route("test_statements", {"statements": ["x"]})
    seen: list[Any] = []

    ask(
        judge,
        validate=lambda parsed: seen.append(
            (
                is_suppressed(),
                # The SDK's own key too: its exporters and OpenInference read it directly.
                otel_context.get_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY),
                otel_context.get_value(PLAIN_KEY),
            )
        ),
    )

    assert seen == [(True, True, True)]
    assert not is_suppressed()
    assert otel_context.get_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY) is None


def test_suppression_follows_the_context() -> None:
    assert not is_suppressed()
    with suppressed():
        assert is_suppressed()
        assert otel_context.get_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY) is True
        assert otel_context.get_value(PLAIN_KEY) is True
    assert not is_suppressed()
    # Either key alone counts: set by the SDK's exporters, or by older instrumentations.
    for key in (otel_context._SUPPRESS_INSTRUMENTATION_KEY, PLAIN_KEY):
        token = otel_context.attach(otel_context.set_value(key, True))
        try:
            assert is_suppressed()
        finally:
            otel_context.detach(token)


def test_calls_run_on_the_one_tracescore_loop(judge_server: JudgeServer, judge: Judge) -> None:
    judge_server.route("test_statements", {"statements": ["x"]})
    threads: list[str] = []

    # Twice, the second from the cache: each caller's own check runs on the loop either way.
    for _ in range(2):
        ask(judge, validate=lambda parsed: threads.append(threading.current_thread().name))

    assert threads == [_loop.THREAD_NAME] * 2
    assert judge.cache_info().hits == 1


def test_broken_json_is_repaired_without_a_retry(judge_server: JudgeServer, judge: Judge) -> None:
    judge_server.route("test_statements", '```json\n{"statements": ["a", "b",]\n```')

    reply = ask(judge)

    assert reply.parsed.statements == ["a", "b"]
    assert len(judge_server.requests) == 1


def test_non_json_reply_gets_one_repair_retry(judge_server: JudgeServer, judge: Judge) -> None:
    judge_server.route("test_statements", ["I am not able to do that.", {"statements": ["a"]}])

    reply = ask(judge)

    assert reply.parsed.statements == ["a"]
    assert reply.calls == 2
    first, second = judge_server.requests
    assert reply.prompt_tokens > len(first["messages"][1]["content"]) // 4
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
    assert second["messages"][2]["content"] == "I am not able to do that."
    repair = second["messages"][3]["content"]
    assert "not a JSON object" in repair
    assert "Schema name: test_statements" in repair
    assert '"statements"' in repair  # the JSON schema itself
    assert second["response_format"]["json_schema"]["name"] == "test_statements"


def test_schema_mismatch_twice_is_invalid_output(judge_server: JudgeServer, judge: Judge) -> None:
    judge_server.route("test_statements", {"sentences": ["a"]})

    with pytest.raises(InvalidJudgeOutputError) as info:
        ask(judge)

    assert info.value.error_type == "invalid_judge_output"
    assert "statements" in str(info.value)
    assert len(judge_server.requests) == 2


def test_validator_failure_triggers_the_repair_retry(
    judge_server: JudgeServer, judge: Judge
) -> None:
    judge_server.route("test_statements", [{"statements": ["a"]}, {"statements": ["a", "b"]}])

    def two_items(parsed: Statements) -> None:
        if len(parsed.statements) != 2:
            raise ValueError(f"expected 2 statements, got {len(parsed.statements)}")

    reply = ask(judge, validate=two_items)

    assert reply.parsed.statements == ["a", "b"]
    assert "expected 2 statements, got 1" in judge_server.requests[1]["messages"][3]["content"]


def test_rate_limit_then_success_is_retried(judge_server: JudgeServer, judge: Judge) -> None:
    judge_server.route("test_statements", [JudgeServer.Reply(status=429), {"statements": ["a"]}])

    reply = ask(judge)

    assert reply.parsed.statements == ["a"]
    assert reply.calls == 1  # a transport retry is not a judge completion
    assert len(judge_server.requests) == 2


def test_rate_limit_forever_raises_after_the_retries(judge_server: JudgeServer) -> None:
    judge = make_judge(judge_server, max_retries=3)
    judge_server.route("test_statements", JudgeServer.Reply(status=429))

    with pytest.raises(JudgeRateLimitedError) as info:
        ask(judge)

    assert info.value.error_type == "rate_limited"
    assert len(judge_server.requests) == 4


def test_server_error_forever_is_unavailable(judge_server: JudgeServer, judge: Judge) -> None:
    judge_server.route("test_statements", JudgeServer.Reply(status=500))

    with pytest.raises(JudgeUnavailableError) as info:
        ask(judge)

    assert info.value.error_type == "judge_unavailable"
    assert len(judge_server.requests) == 3  # 1 + max_retries=2


def test_503_then_success(judge_server: JudgeServer, judge: Judge) -> None:
    judge_server.route("test_statements", [JudgeServer.Reply(status=503), {"statements": ["a"]}])

    assert ask(judge).parsed.statements == ["a"]
    assert len(judge_server.requests) == 2


def test_connection_refused_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    judge = Judge(
        "openai/test-judge",
        api_base=f"http://127.0.0.1:{port}/v1",
        api_key=TEST_API_KEY,
        timeout=5,
        max_retries=1,
        retry_backoff=0.01,
    )

    with pytest.raises(JudgeUnavailableError) as info:
        ask(judge)

    assert TEST_API_KEY not in str(info.value)


def test_timeout_is_not_retried(judge_server: JudgeServer) -> None:
    judge = make_judge(judge_server, timeout=0.3)
    judge_server.route("test_statements", JudgeServer.Reply(body={"statements": []}, delay=3))

    with pytest.raises(JudgeTimeoutError) as info:
        ask(judge)

    assert info.value.error_type == "timeout"
    assert len(judge_server.requests) == 1


def test_client_error_is_a_judge_error_without_the_key(
    judge_server: JudgeServer, judge: Judge
) -> None:
    judge_server.route(
        "test_statements",
        JudgeServer.Reply(
            status=401,
            body={"error": {"message": f"Incorrect API key provided: {TEST_API_KEY}"}},
        ),
    )

    with pytest.raises(JudgeError) as info:
        ask(judge)

    assert type(info.value) is JudgeError
    assert info.value.error_type == "judge_error"
    assert TEST_API_KEY not in str(info.value)
    assert "[REDACTED]" in str(info.value)
    assert len(judge_server.requests) == 1


def test_rejected_json_schema_falls_back_to_json_mode(
    judge_server: JudgeServer, judge: Judge
) -> None:
    judge_server.reject_json_schema = True
    judge_server.route("test_statements", {"statements": ["a"]})

    assert ask(judge).parsed.statements == ["a"]
    judge.cache_clear()  # the same request again must reach the server
    assert ask(judge).parsed.statements == ["a"]

    first, second, third = judge_server.requests
    assert first["response_format"]["type"] == "json_schema"
    for body in (second, third):  # the fallback is remembered
        # JSON mode, with the schema attached for servers that constrain decoding with it.
        assert body["response_format"]["type"] == "json_object"
        assert body["response_format"]["schema"]["properties"]["statements"]["type"] == "array"
        system = body["messages"][0]["content"]
        assert "Schema name: test_statements" in system
        assert '"statements"' in system
    assert judge_server.schema_names == ["test_statements"] * 3


def test_secrets_stay_out_of_bodies_and_reprs(judge_server: JudgeServer) -> None:
    judge = make_judge(judge_server, extra_headers={"X-Gateway-Token": "gw-SECRET-token"})
    judge_server.route("test_statements", {"statements": ["a"]})

    reply = ask(judge)

    assert reply.parsed.statements == ["a"]
    for secret in (TEST_API_KEY, "gw-SECRET-token"):
        assert secret not in repr(judge)
        assert secret not in json.dumps(judge_server.requests)
    headers = judge_server.headers[0]
    assert headers["authorization"] == f"Bearer {TEST_API_KEY}"
    assert headers["x-gateway-token"] == "gw-SECRET-token"
    others = {k: v for k, v in headers.items() if k not in ("authorization", "x-gateway-token")}
    assert TEST_API_KEY not in json.dumps(others)


def test_repr_redacts_credentials_in_the_api_base() -> None:
    judge = Judge(
        "openai/x", api_base="https://user:pw-SECRET@gateway.example/v1?key=q-SECRET", api_key="k"
    )
    assert repr(judge) == (
        "Judge(model='openai/x', api_base='https://***@gateway.example/v1', timeout=60.0, "
        "max_retries=3)"
    )


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("",), {}),
        (("   ",), {}),
        ((None,), {}),
        ((42,), {}),
        (("openai/x",), {"timeout": 0}),
        (("openai/x",), {"timeout": "5"}),
        (("openai/x",), {"max_retries": -1}),
        (("openai/x",), {"max_retries": 1.5}),
        (("openai/x",), {"retry_backoff": -1}),
        (("openai/x",), {"messages": []}),
        (("openai/x",), {"response_format": {"type": "json_object"}}),
    ],
)
def test_invalid_judge_arguments_fail_early(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        Judge(*args, **kwargs)


def test_judge_defaults() -> None:
    judge = Judge("openai/gpt-4o-mini")
    assert (judge.model, judge.timeout, judge.max_retries) == ("openai/gpt-4o-mini", 60.0, 3)
    assert repr(judge) == "Judge(model='openai/gpt-4o-mini', timeout=60.0, max_retries=3)"


def test_invalid_schema_name_is_a_configuration_error(judge: Judge) -> None:
    with pytest.raises(ConfigurationError):
        ask(judge, name="has spaces")


def test_resolve_judge_order(monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = Judge("openai/explicit")
    assert resolve_judge(explicit) is explicit
    assert resolve_judge("openai/by-string").model == "openai/by-string"
    assert resolve_judge("openai/by-string") is resolve_judge("openai/by-string")

    monkeypatch.setattr(runtime(), "judge", None)
    monkeypatch.delenv("TRACESCORE_JUDGE_MODEL", raising=False)
    with pytest.raises(NoJudgeConfiguredError) as info:
        resolve_judge(None)
    assert info.value.error_type == "no_judge"
    assert "TRACESCORE_JUDGE_MODEL" in str(info.value) and "model=" in str(info.value)

    monkeypatch.setenv("TRACESCORE_JUDGE_MODEL", " openai/from-env ")
    assert resolve_judge(None).model == "openai/from-env"

    configured = Judge("openai/configured")
    monkeypatch.setattr(runtime(), "judge", configured)
    assert resolve_judge(None) is configured


def test_resolve_judge_rejects_other_types() -> None:
    with pytest.raises(ConfigurationError):
        resolve_judge(3.14)  # type: ignore[arg-type]
