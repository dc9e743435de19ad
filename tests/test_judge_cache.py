"""The judge's request cache and single flight, against the loopback judge; and online, two
claim-checking rules on one span that decompose the answer once."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

import tracescore
from tests.otlp_receiver import HttpOtlpReceiver
from tracescore import ConfigurationError, InvalidJudgeOutputError, JudgeUnavailableError
from tracescore._judge import Judge, JudgeCacheInfo
from tracescore._judge.cache import key_prefix
from tracescore.scorers import create_faithfulness_scorer, create_hallucination_scorer
from tracescore.testing import ScriptedJudge as JudgeServer
from tracescore.testing import make_judge


@pytest.fixture(autouse=True, params=["direct", "litellm"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every judge built in these tests takes each transport in turn: both pass the same
    suite (``TRACESCORE_JUDGE_TRANSPORT`` is what a ``Judge`` reads when not told)."""
    monkeypatch.setenv("TRACESCORE_JUDGE_TRANSPORT", request.param)
    return str(request.param)


class Statements(BaseModel):
    statements: list[str]


class Sentences(BaseModel):
    statements: list[str]
    count: int


async def ask_async(
    judge: Judge, user: str = "<answer>\nParis is in France.\n</answer>", **kwargs: Any
) -> Any:
    return await judge.acomplete(
        system="Split the answer into statements.",
        user=user,
        schema=kwargs.pop("schema", Statements),
        name=kwargs.pop("name", "test_statements"),
        **kwargs,
    )


def ask(judge: Judge, user: str = "<answer>\nParis is in France.\n</answer>", **kwargs: Any) -> Any:
    return asyncio.run(ask_async(judge, user, **kwargs))


async def until(predicate: Any, timeout: float = 10.0) -> None:
    """Wait for a condition another thread makes true (never a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


# -- the cache ----------------------------------------------------------------------------------
def test_identical_request_is_answered_from_the_cache(
    judge_server: JudgeServer, judge: Judge
) -> None:
    judge_server.route("test_statements", {"statements": ["Paris is in France."]})

    first = ask(judge)
    second = ask(judge)

    assert len(judge_server.requests) == 1
    assert (first.calls, first.cached) == (1, False)
    assert first.prompt_tokens > 0
    # Accounting counts calls actually made: the cached reply cost nothing.
    assert (second.calls, second.prompt_tokens, second.completion_tokens, second.cost) == (
        0,
        0,
        0,
        0.0,
    )
    assert second.cached is True
    assert second.parsed == first.parsed and second.parsed is not first.parsed
    assert second.content == first.content and second.model == first.model
    assert judge.cache_info() == JudgeCacheInfo(hits=1, misses=1, maxsize=1024, currsize=1)


def test_different_prompts_schemas_and_names_are_not_shared(
    judge_server: JudgeServer, judge: Judge
) -> None:
    judge_server.route("*", {"statements": ["a"], "count": 1})

    ask(judge)
    ask(judge, user="<answer>\nBerlin is in Germany.\n</answer>")  # another user prompt
    ask(judge, name="other_statements")  # another schema name
    ask(judge, schema=Sentences)  # same name, another JSON schema
    asyncio.run(  # another system prompt
        judge.acomplete(system="Other task.", user="x", schema=Statements, name="test_statements")
    )
    asyncio.run(
        judge.acomplete(system="Other task.", user="x", schema=Statements, name="test_statements")
    )

    assert len(judge_server.requests) == 5
    assert judge.cache_info().hits == 1


def test_different_models_and_parameters_are_not_shared(judge_server: JudgeServer) -> None:
    judge_server.route("test_statements", {"statements": ["a"]})
    judges = [
        make_judge(judge_server),
        make_judge(judge_server, model="openai/other-judge"),
        make_judge(judge_server, max_tokens=50),
    ]

    for judge in judges:
        ask(judge)
        ask(judge)

    assert [r["model"] for r in judge_server.requests] == [
        "test-judge",
        "other-judge",
        "test-judge",
    ]
    assert [judge.cache_info().hits for judge in judges] == [1, 1, 1]


def test_key_covers_model_api_base_and_parameters_but_no_secrets() -> None:
    base = {"api_base": "http://a/v1", "api_key": "sk-SECRET-1", "temperature": 0}
    prefix = key_prefix("openai/x", base)

    assert b"SECRET" not in prefix
    assert b"http://a/v1" in prefix and b"openai/x" in prefix
    # A different key (or gateway token) reaches the same model: same answers.
    assert prefix == key_prefix(
        "openai/x", {**base, "api_key": "sk-SECRET-2", "extra_headers": {"X-Token": "t"}}
    )
    assert prefix != key_prefix("openai/y", base)
    assert prefix != key_prefix("openai/x", {**base, "api_base": "http://b/v1"})
    assert prefix != key_prefix("openai/x", {**base, "temperature": 0.7})
    assert prefix != key_prefix("openai/x", {**base, "max_tokens": 10})  # not a secret
    # temperature 0 is what the judge sends by default.
    assert prefix == key_prefix("openai/x", {"api_base": "http://a/v1"})


def test_lru_eviction_at_the_bound(judge_server: JudgeServer) -> None:
    judge = make_judge(judge_server, cache_size=2)
    judge_server.route("test_statements", {"statements": ["a"]})

    def q(text: str) -> None:
        ask(judge, user=f"<answer>\n{text}\n</answer>")

    q("A")
    q("B")
    q("A")  # hit: A becomes the most recently used
    q("C")  # evicts B, the least recently used
    assert len(judge_server.requests) == 3
    q("A")  # still cached
    assert len(judge_server.requests) == 3
    q("B")  # evicted: asked again (and evicts C)
    assert len(judge_server.requests) == 4
    q("C")
    assert len(judge_server.requests) == 5
    assert judge.cache_info() == JudgeCacheInfo(hits=2, misses=5, maxsize=2, currsize=2)


def test_cache_size_zero_disables_cache_and_sharing(judge_server: JudgeServer) -> None:
    judge = make_judge(judge_server, cache_size=0)
    judge_server.route("test_statements", JudgeServer.Reply(body={"statements": ["a"]}, delay=0.2))

    replies = [ask(judge), ask(judge)]

    async def together() -> list[Any]:
        return list(await asyncio.gather(ask_async(judge), ask_async(judge)))

    replies += asyncio.run(together())
    assert len(judge_server.requests) == 4
    assert [r.calls for r in replies] == [1, 1, 1, 1]
    assert judge.cache_info() == JudgeCacheInfo(hits=0, misses=0, maxsize=0, currsize=0)


def test_cache_clear(judge_server: JudgeServer, judge: Judge) -> None:
    judge_server.route("test_statements", {"statements": ["a"]})
    ask(judge)
    judge.cache_clear()
    assert judge.cache_info() == JudgeCacheInfo(0, 0, 1024, 0)
    ask(judge)
    assert len(judge_server.requests) == 2


def test_failed_calls_are_not_cached(judge_server: JudgeServer) -> None:
    judge = make_judge(judge_server, max_retries=0)
    judge_server.route(
        "test_statements",
        [JudgeServer.Reply(status=500), {"statements": ["a"]}],
    )

    with pytest.raises(JudgeUnavailableError):
        ask(judge)
    assert ask(judge).parsed.statements == ["a"]
    assert len(judge_server.requests) == 2


def test_invalid_output_is_not_cached(judge_server: JudgeServer, judge: Judge) -> None:
    judge_server.route("test_statements", ["not json", "still not json", {"statements": ["a"]}])

    with pytest.raises(InvalidJudgeOutputError):
        ask(judge)  # the first answer and its repair retry
    assert ask(judge).parsed.statements == ["a"]
    assert len(judge_server.requests) == 3
    assert judge.cache_info().currsize == 1


def test_a_cached_answer_is_checked_by_each_callers_validator(
    judge_server: JudgeServer, judge: Judge
) -> None:
    judge_server.route("test_statements", [{"statements": ["a"]}, {"statements": ["a", "b"]}])

    def two_statements(parsed: Statements) -> None:
        if len(parsed.statements) != 2:
            raise ValueError("expected 2 statements")

    assert ask(judge).parsed.statements == ["a"]
    # The cached answer does not satisfy this caller: it asks the judge itself.
    reply = ask(judge, validate=two_statements)
    assert (reply.parsed.statements, reply.calls) == (["a", "b"], 1)
    assert len(judge_server.requests) == 2


# -- single flight --------------------------------------------------------------------------
def test_concurrent_identical_requests_share_one_call(
    judge_server: JudgeServer, judge: Judge
) -> None:
    release = threading.Event()

    def held(body: dict[str, Any]) -> Any:
        release.wait(10)
        return {"statements": ["a"]}

    judge_server.route("test_statements", held)

    async def main() -> list[Any]:
        first = asyncio.ensure_future(ask_async(judge))
        await until(lambda: len(judge_server.requests) == 1)
        second = asyncio.ensure_future(ask_async(judge))
        await until(lambda: judge.cache_info().hits == 1)  # the second joined the first
        release.set()
        return list(await asyncio.gather(first, second))

    first, second = asyncio.run(main())

    assert len(judge_server.requests) == 1
    assert (first.calls, first.cached, second.calls, second.cached) == (1, False, 0, True)
    assert first.parsed == second.parsed and first.parsed is not second.parsed


def test_concurrent_requests_share_a_failure_but_do_not_cache_it(
    judge_server: JudgeServer,
) -> None:
    judge = make_judge(judge_server, max_retries=0)
    release = threading.Event()

    def failing_then_ok(body: dict[str, Any]) -> Any:
        if not release.is_set():
            release.wait(10)
            return JudgeServer.Reply(status=500)
        return {"statements": ["a"]}

    judge_server.route("test_statements", failing_then_ok)

    async def main() -> list[Any]:
        calls = [asyncio.ensure_future(ask_async(judge)) for _ in range(3)]
        # The call is held at the server and the two others have joined it.
        await until(lambda: len(judge_server.requests) == 1 and judge.cache_info().hits == 2)
        release.set()
        return list(await asyncio.gather(*calls, return_exceptions=True))

    outcomes = asyncio.run(main())

    assert all(isinstance(o, JudgeUnavailableError) for o in outcomes), outcomes
    assert len(judge_server.requests) == 1
    assert ask(judge).parsed.statements == ["a"]  # not cached: asked again
    assert len(judge_server.requests) == 2


def test_a_cancelled_caller_does_not_cancel_the_shared_call(
    judge_server: JudgeServer, judge: Judge
) -> None:
    release = threading.Event()

    def held(body: dict[str, Any]) -> Any:
        release.wait(10)
        return {"statements": ["a"]}

    judge_server.route("test_statements", held)

    async def main() -> Any:
        first = asyncio.ensure_future(ask_async(judge))
        await until(lambda: len(judge_server.requests) == 1)
        second = asyncio.ensure_future(ask_async(judge))
        await until(lambda: judge.cache_info().hits == 1)
        first.cancel()  # e.g. its scorer hit a deadline
        with pytest.raises(asyncio.CancelledError):
            await first
        release.set()
        return await second

    reply = asyncio.run(main())

    assert reply.parsed.statements == ["a"]
    # The only caller left gets the call's accounting.
    assert reply.calls == 1
    assert len(judge_server.requests) == 1
    assert judge.cache_info().currsize == 1


@pytest.mark.parametrize("size", [-1, 1.5, True, "10"])
def test_invalid_cache_size_fails_early(size: Any) -> None:
    with pytest.raises(ConfigurationError, match="cache_size"):
        Judge("openai/x", cache_size=size)


def test_default_cache_size() -> None:
    judge = Judge("openai/x")
    assert judge.cache_size == 1024
    assert judge.cache_info() == JudgeCacheInfo(hits=0, misses=0, maxsize=1024, currsize=0)
    assert Judge("openai/x", cache_size=0).cache_size == 0


# -- scorers ----------------------------------------------------------------------------------
CONTEXT = [
    "The Eiffel Tower in Paris was completed in 1889.",
    "The tower is 330 metres tall.",
    "Bananas are rich in potassium.",
]
OUTPUT = "The Eiffel Tower was completed in 1889. It is 330 metres tall. It is painted gold."
CLAIMS = [
    "The Eiffel Tower was completed in 1889.",
    "The Eiffel Tower is 330 metres tall.",
    "The Eiffel Tower is painted gold.",
]


def verdicts(*values: str) -> dict[str, Any]:
    return {
        "verdicts": [
            {"claim_index": i, "verdict": v, "reason": f"claim {i}"} for i, v in enumerate(values)
        ]
    }


def script_claims(server: JudgeServer) -> None:
    server.route("output_claims", {"claims": CLAIMS})
    server.route("faithfulness_verdicts", verdicts("yes", "yes", "unsure"))
    server.route("faithfulness_reason", {"reason": "The colour is not in the context."})
    server.route("hallucination_verdicts", verdicts("no", "no", "yes"))
    server.route("hallucination_reason", {"reason": "One claim is made up."})
    server.route("hallucination_reason_v2", {"reason": "One claim is not in the context."})


@pytest.mark.parametrize(
    ("prompt_set", "hallucination_calls"),
    [("default", 1), ("mastra", 2)],  # default: claims and verdicts shared; mastra: claims only
)
def test_faithfulness_and_hallucination_decompose_the_output_once(
    judge_server: JudgeServer, judge: Judge, prompt_set: str, hallucination_calls: int
) -> None:
    script_claims(judge_server)
    faithfulness = create_faithfulness_scorer(model=judge, context=CONTEXT)
    hallucination = create_hallucination_scorer(
        model=judge, context=CONTEXT, prompt_set=prompt_set)  # type: ignore[arg-type]

    first = faithfulness.run(output=OUTPUT)
    second = hallucination.run(output=OUTPUT)

    assert judge_server.count("output_claims") == 1
    assert first.preprocess_step_result == second.preprocess_step_result == {"claims": CLAIMS}
    assert first.preprocess_prompt == second.preprocess_prompt
    # 2 supported of 3 -> 0.67; 1 hallucinated (mastra) or not supported (default) of 3 -> 0.33.
    assert (first.score, second.score) == (0.67, 0.33)
    # judge_calls counts calls actually made: the second scorer's shared requests came from
    # the cache.
    assert (first.judge_calls, second.judge_calls) == (3, hallucination_calls)
    assert len(judge_server.requests) == 3 + hallucination_calls


def test_concurrent_scorers_share_the_claims_call(judge_server: JudgeServer, judge: Judge) -> None:
    script_claims(judge_server)
    judge_server.route("output_claims", JudgeServer.Reply(body={"claims": CLAIMS}, delay=0.3))
    faithfulness = create_faithfulness_scorer(model=judge, context=CONTEXT)
    hallucination = create_hallucination_scorer(model=judge, context=CONTEXT)

    async def both() -> list[Any]:
        return list(
            await asyncio.gather(
                faithfulness.arun(output=OUTPUT), hallucination.arun(output=OUTPUT)
            )
        )

    first, second = asyncio.run(both())

    assert judge_server.count("output_claims") == 1
    assert judge_server.count("faithfulness_verdicts") == 1
    assert (first.score, second.score) == (0.67, 0.33)
    assert first.judge_calls + second.judge_calls == len(judge_server.requests) == 4


# -- online -----------------------------------------------------------------------------------
@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Any:
    with HttpOtlpReceiver() as rec:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rec.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
        yield rec.received
        tracescore.shutdown(3000)


def test_online_rules_judge_the_retrieved_documents_and_extract_claims_once(
    receiver: Any, judge_server: JudgeServer
) -> None:
    script_claims(judge_server)
    tracescore.configure(
        service_name="claims-e2e",
        judge=make_judge(judge_server),
        scoring=[
            tracescore.ScoringRule(scorer=create_faithfulness_scorer(), on="agent"),
            tracescore.ScoringRule(scorer=create_hallucination_scorer(), on="agent", threshold=0.2),
        ],
    )

    @tracescore.retrieval(name="kb")
    def search(query: str) -> list[dict[str, Any]]:
        return [{"id": f"d{i}", "content": text} for i, text in enumerate(CONTEXT)]

    @tracescore.agent(name="rag")
    def answer(question: str) -> str:
        search(question)
        return OUTPUT

    assert answer("Tell me about the Eiffel Tower.") == OUTPUT
    assert tracescore.force_flush(30_000)
    assert receiver.wait_for(lambda spans: len(spans) == 2)

    (agent,) = receiver.by_name("invoke_agent rag")
    (retrieval,) = receiver.by_name("retrieval kb")
    assert retrieval.parent_span_id == agent.span_id
    events = {
        attrs["gen_ai.evaluation.name"]: attrs
        for name, attrs in agent.events
        if name == "gen_ai.evaluation.result"
    }
    assert set(events) == {"faithfulness", "hallucination"}
    faithfulness = events["faithfulness"]
    # 2 supported claims of 3 ("unsure" is unsupported): 0.666... -> 0.67
    assert faithfulness.pop("gen_ai.evaluation.score.value") == 0.67
    assert faithfulness.pop("gen_ai.evaluation.explanation") == (
        "The colour is not in the context."
    )
    assert faithfulness.pop("gen_ai.evaluation.name") == "faithfulness"
    assert faithfulness.pop("tracescore.judge.model") == "openai/test-judge"
    assert faithfulness.pop("tracescore.sample_rate") == 1.0
    assert len(faithfulness.pop("tracescore.evaluator.version")) == 12  # issue 12: provenance
    assert faithfulness == {}
    hallucination = events["hallucination"]
    # 1 hallucinated claim of 3: 0.33, above the 0.2 threshold where lower is better: fail.
    assert hallucination["gen_ai.evaluation.score.value"] == 0.33
    assert hallucination["gen_ai.evaluation.score.label"] == "fail"
    assert "error.type" not in hallucination

    # The context judged (one verdicts request, shared) was the retrieval span's documents, in
    # order.
    for schema in ("faithfulness_verdicts",):
        (request,) = [
            r
            for r, n in zip(judge_server.requests, judge_server.schema_names, strict=True)
            if n == schema
        ]
        prompt = request["messages"][-1]["content"]
        positions = [
            prompt.index(f'<context index="{i}">\n{text}\n</context>')
            for i, text in enumerate(CONTEXT)
        ]
        assert positions == sorted(positions)
    # The answer was broken into claims and judged once for both rules, then each wrote its
    # reason: 1 + 1 + 2 requests.
    assert judge_server.count("output_claims") == 1
    assert judge_server.count("faithfulness_verdicts") == 1
    assert len(judge_server.requests) == 4
