"""Structured output across the servers people use as judges: each way a server refuses a
``response_format`` (HTTP 400, llama.cpp's HTTP 500, TGI's 422) makes the judge step down a
mode at once, without retrying the refusal as an outage, and remember where it settled; the
mode can be fixed up front. Against the loopback scripted judge, through litellm."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from pydantic import BaseModel

from tracescore import ConfigurationError, Judge, JudgeError, JudgeUnavailableError
from tracescore.testing import ScriptedJudge, make_judge

NAME = "test_statements"
ANSWER = {"statements": ["Paris is in France."]}

# What each server answers to a response format it does not take (bodies as they send them).
OPENAI_400 = {"error": {"message": "Invalid parameter: 'response_format' of type 'json_schema' "
                        "is not supported with this model.", "type": "invalid_request_error",
                        "param": "response_format", "code": None}}
# llama-cpp-python's server validates the request with pydantic and answers HTTP 500.
LLAMA_CPP_500 = {"error": {"message": "[{'type': 'literal_error', 'loc': ('body', "
                           "'response_format', 'type'), 'msg': \"Input should be 'text' or "
                           "'json_object'\", 'input': 'json_schema'}]",
                           "type": "internal_server_error"}}
# Text Generation Inference (older releases) refuses both OpenAI forms with HTTP 422.
TGI_422 = {"error": "Failed to deserialize the JSON body into the target type: response_format:"
           " unknown variant `json_object`, expected `json` or `regex` at line 1 column 80",
           "error_type": "validation"}


class Statements(BaseModel):
    statements: list[str]


def ask(judge: Judge) -> Any:
    return asyncio.run(judge.acomplete(system="Split the answer into statements.",
                                       user="<answer>\nParis is in France.\n</answer>",
                                       schema=Statements, name=NAME))


def refusing(status: int, body: Any, refused: set[str | None]) -> Any:
    """A route answering ``status``/``body`` to requests whose response_format type (None for
    no response_format) is in ``refused``, and the scripted answer to the others. A JSON-mode
    request with the schema attached counts as type ``"json_object+schema"``."""

    def answer(request: dict[str, Any]) -> Any:
        return (ScriptedJudge.Reply(status=status, body=body)
                if kind_of(request) in refused else ANSWER)

    return answer


def kind_of(request: dict[str, Any]) -> str | None:
    response_format = request.get("response_format")
    if response_format is None:
        return None
    kind = response_format["type"]
    return f"{kind}+schema" if "schema" in response_format else kind


def kinds(server: ScriptedJudge) -> list[str | None]:
    return [kind_of(body) for body in server.requests]


@pytest.mark.parametrize(
    ("status", "body"),
    [(400, OPENAI_400), (500, LLAMA_CPP_500), (422, TGI_422)],
    ids=["openai-400", "llama.cpp-500", "tgi-422"],
)
def test_a_refused_json_schema_falls_back_to_json_mode_without_retrying(
    judge_server: ScriptedJudge, status: int, body: Any
) -> None:
    judge_server.route(NAME, refusing(status, body, {"json_schema"}))
    judge = make_judge(judge_server, max_retries=3)

    assert ask(judge).parsed.statements == ANSWER["statements"]

    # One refused request (not 1 + max_retries), then JSON mode with the schema attached.
    assert kinds(judge_server) == ["json_schema", "json_object+schema"]
    schema = judge_server.requests[1]["response_format"]["schema"]
    assert schema["properties"]["statements"]["type"] == "array"
    assert "Schema name: test_statements" in judge_server.requests[1]["messages"][0]["content"]


def test_the_mode_is_remembered_per_judge(judge_server: ScriptedJudge) -> None:
    judge_server.route(NAME, refusing(500, LLAMA_CPP_500, {"json_schema"}))
    judge = make_judge(judge_server, cache_size=0)
    other = make_judge(judge_server, cache_size=0)

    for _ in range(3):
        ask(judge)
    ask(other)  # another judge probes for itself

    assert kinds(judge_server) == ["json_schema", "json_object+schema",
                                   "json_object+schema", "json_object+schema",
                                   "json_schema", "json_object+schema"]


def test_each_refusal_steps_down_to_plain_json_instructions(
    judge_server: ScriptedJudge,
) -> None:
    # TGI-like: refuses every OpenAI response format; only a request without one is answered.
    judge_server.route(NAME, refusing(422, TGI_422,
                                      {"json_schema", "json_object+schema", "json_object"}))
    judge = make_judge(judge_server, cache_size=0)

    ask(judge)
    ask(judge)

    assert kinds(judge_server) == ["json_schema", "json_object+schema", "json_object", None,
                                   None]
    system = judge_server.requests[-1]["messages"][0]["content"]
    assert "Schema name: test_statements" in system and '"statements"' in system


def test_a_strict_server_refusing_the_schema_key_gets_plain_json_mode(
    judge_server: ScriptedJudge,
) -> None:
    strict = {"error": {"message": "Invalid 'response_format': unknown field 'schema'",
                        "type": "invalid_request_error"}}
    judge_server.route(NAME, refusing(400, strict, {"json_schema", "json_object+schema"}))

    ask(make_judge(judge_server))

    assert kinds(judge_server) == ["json_schema", "json_object+schema", "json_object"]


def test_an_outage_that_does_not_name_the_format_is_still_retried(
    judge_server: ScriptedJudge,
) -> None:
    judge_server.route(NAME, ScriptedJudge.Reply(status=500))  # "scripted status 500"
    judge = make_judge(judge_server, max_retries=2)

    with pytest.raises(JudgeUnavailableError):
        ask(judge)

    assert kinds(judge_server) == ["json_schema"] * 3


def test_the_settled_mode_is_logged_at_debug_level(
    judge_server: ScriptedJudge, caplog: pytest.LogCaptureFixture
) -> None:
    judge_server.route(NAME, refusing(500, LLAMA_CPP_500, {"json_schema"}))
    judge = make_judge(judge_server, cache_size=0)

    with caplog.at_level(logging.DEBUG, logger="tracescore"):
        ask(judge)
        ask(judge)

    settled = [r.getMessage() for r in caplog.records if "settled on" in r.getMessage()]
    assert settled == [
        "tracescore judge 'openai/test-judge': structured output settled on json_object with "
        "the schema attached (response_format=auto)"
    ]


def test_a_fixed_mode_is_used_from_the_first_call(judge_server: ScriptedJudge) -> None:
    judge_server.route(NAME, refusing(500, LLAMA_CPP_500, {"json_schema"}))

    ask(make_judge(judge_server, response_format="json_object"))
    ask(make_judge(judge_server, response_format="none", cache_size=0))

    assert kinds(judge_server) == ["json_object+schema", None]


def test_a_fixed_mode_that_is_refused_is_an_error_not_a_fallback(
    judge_server: ScriptedJudge,
) -> None:
    judge_server.route(NAME, refusing(500, LLAMA_CPP_500, {"json_schema"}))
    judge = make_judge(judge_server, response_format="json_schema", max_retries=3)

    with pytest.raises(JudgeError) as info:
        ask(judge)

    assert type(info.value) is JudgeError
    assert "response_format='json_schema'" in str(info.value)
    assert kinds(judge_server) == ["json_schema"]


@pytest.mark.parametrize("value", ["xml", "JSON_OBJECT", {"type": "json_object"}, None, 1])
def test_response_format_is_validated(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="response_format must be one of"):
        Judge("openai/x", response_format=value)


def test_the_child_process_falls_back_the_same_way(judge_server: ScriptedJudge) -> None:
    judge_server.route(NAME, refusing(500, LLAMA_CPP_500, {"json_schema"}))
    judge = make_judge(judge_server, out_of_process=True, max_retries=3)

    assert ask(judge).parsed.statements == ANSWER["statements"]
    assert kinds(judge_server) == ["json_schema", "json_object+schema"]
