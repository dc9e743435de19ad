"""End to end: decorated RAG agent -> sampled scoring through litellm against a loopback judge ->
score events on the agent span -> OTLP http/protobuf to a loopback receiver."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import tracescore
from tests.otlp_receiver import HttpOtlpReceiver
from tracescore.scorers import (
    create_answer_relevancy_scorer,
    create_content_similarity_scorer,
    create_context_precision_scorer,
)
from tracescore.testing import ScriptedJudge as JudgeServer

SECRET = "sk-test-SECRET-do-not-leak-42"

CONTEXT = [
    "Paris is the capital and largest city of France.",
    "The Eiffel Tower was completed in 1889.",
    "France's capital has been Paris since 987.",
    "Bananas are rich in potassium.",
]


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Any:
    with HttpOtlpReceiver() as rec:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rec.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
        yield rec.received
        tracescore.shutdown(3000)


def judge(server: JudgeServer, **kwargs: Any) -> tracescore.Judge:
    kwargs.setdefault("timeout", 5)
    kwargs.setdefault("max_retries", 2)
    kwargs.setdefault("retry_backoff", 0.01)
    return tracescore.Judge("openai/test-judge", api_base=server.api_base, api_key=SECRET,
                            **kwargs)


def script_rag_judge(server: JudgeServer) -> None:
    server.route("answer_relevancy_statements", {"statements": [
        "Paris is the capital of France.", "It has been since 987.", "Bananas are yellow.",
        "The city is large."]})
    server.route("answer_relevancy_verdicts", {"results": [
        {"result": "yes", "reason": "answers the question"},
        {"result": "yes", "reason": "on topic"},
        {"result": "no", "reason": "unrelated"},
        {"result": "unsure", "reason": "partly"}]})
    server.route("answer_relevancy_reason", {"reason": "Mostly relevant; one statement is off."})
    server.route("context_precision_verdicts", {"verdicts": [
        {"context_index": 0, "verdict": "yes", "reason": "states the capital"},
        {"context_index": 1, "verdict": "no", "reason": "about the tower"},
        {"context_index": 2, "verdict": "yes", "reason": "states the capital"},
        {"context_index": 3, "verdict": "no", "reason": "about bananas"}]})
    server.route("context_precision_reason", {"reason": "Relevant pieces come first."})


def build_agent() -> Any:
    @tracescore.retrieval(name="kb")
    def search(query: str) -> list[dict[str, Any]]:
        return [{"id": f"d{i}", "content": text, "score": 1.0 - i / 10}
                for i, text in enumerate(CONTEXT)]

    @tracescore.agent(name="rag")
    def answer(question: str) -> str:
        search(question)
        return ("Paris is the capital of France. It has been since 987. Bananas are yellow. "
                "The city is large.")

    return answer


def configure_rag(server: JudgeServer, **kwargs: Any) -> None:
    kwargs.setdefault("judge", judge(server))
    tracescore.configure(
        service_name="e2e",
        scoring=[
            tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent",
                                   sample_rate=1.0, threshold=0.7),
            tracescore.ScoringRule(scorer=create_context_precision_scorer(), on="agent",
                                   sample_rate=1.0),
        ],
        **kwargs,
    )


def test_rag_agent_scored_end_to_end(receiver: Any, judge_server: JudgeServer) -> None:
    script_rag_judge(judge_server)
    configure_rag(judge_server)
    answer = build_agent()
    assert answer("What is the capital of France?").startswith("Paris")
    assert tracescore.force_flush(30_000)
    assert receiver.wait_for(lambda spans: len(spans) == 2)
    agents = receiver.by_name("invoke_agent rag")
    assert len(agents) == 1  # exported exactly once
    (agent,) = agents
    (retrieval,) = receiver.by_name("retrieval kb")
    assert retrieval.parent_span_id == agent.span_id
    events = {attrs["gen_ai.evaluation.name"]: attrs for name, attrs in agent.events
              if name == "gen_ai.evaluation.result"}
    assert set(events) == {"answer-relevancy", "context-precision"}
    relevancy = events["answer-relevancy"]
    # (2 yes + 0.3 * 1 unsure) / 4 = 0.575 -> 0.58 (half up)
    assert relevancy.pop("gen_ai.evaluation.score.value") == 0.58
    assert relevancy.pop("gen_ai.evaluation.score.label") == "fail"
    assert relevancy.pop("gen_ai.evaluation.explanation") == (
        "Mostly relevant; one statement is off.")
    assert relevancy.pop("tracescore.judge.model") == "openai/test-judge"
    assert relevancy.pop("tracescore.sample_rate") == 1.0
    assert len(relevancy.pop("tracescore.evaluator.version")) == 12  # issue 12: provenance
    assert relevancy.pop("gen_ai.evaluation.name") == "answer-relevancy"
    assert relevancy == {}
    precision = events["context-precision"]
    # MAP over [yes, no, yes, no] = (1/1 + 2/3) / 2 = 0.8333 -> 0.83
    assert precision["gen_ai.evaluation.score.value"] == 0.83
    assert precision["gen_ai.evaluation.explanation"] == "Relevant pieces come first."
    assert "gen_ai.evaluation.score.label" not in precision
    # The context judged was the retrieval span's documents, in order.
    verdict_requests = [r for r in judge_server.requests
                        if r["response_format"]["json_schema"]["name"]
                        == "context_precision_verdicts"]
    prompt = "\n".join(m["content"] for m in verdict_requests[0]["messages"])
    positions = [prompt.index(text) for text in CONTEXT]
    assert positions == sorted(positions)
    # 3 calls for answer relevancy, 2 for context precision.
    assert len(judge_server.requests) == 5
    # The key is sent to the judge in its Authorization header and nowhere else.
    assert all(SECRET not in str(r) for r in judge_server.requests)
    assert SECRET.encode() not in receiver.raw_bytes()
    assert all(SECRET not in str(h) for h in receiver.headers)
    stats = tracescore.stats()
    assert stats.scores_attached == 2 and stats.scoring_errors == 0


@pytest.mark.parametrize(
    ("failure", "error_type"),
    [
        (JudgeServer.Reply(status=500, body={"error": {"message": "boom"}}), "judge_unavailable"),
        (JudgeServer.Reply(status=429, body={"error": {"message": "slow down"}}),
         "rate_limited"),
        (JudgeServer.Reply(status=200, body="this is not json at all", delay=0), 
         "invalid_judge_output"),
        (JudgeServer.Reply(status=200, body={"statements": []}, delay=3.0), "timeout"),
    ],
    ids=["http-500", "http-429", "non-json", "timeout"],
)
def test_failing_judge_still_exports_with_error_type(
    receiver: Any, judge_server: JudgeServer, failure: Any, error_type: str
) -> None:
    judge_server.route("answer_relevancy_statements", failure)
    tracescore.configure(
        judge=judge(judge_server, timeout=0.5, max_retries=1),
        scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer())],
    )

    @tracescore.agent(name="rag")
    def answer(question: str) -> str:
        return "Paris."

    assert answer("capital?") == "Paris."
    tracescore.force_flush(15_000)
    assert receiver.wait_for(lambda spans: len(spans) == 1)
    (span,) = receiver.spans
    (name, event), = span.events
    assert name == "gen_ai.evaluation.result"
    assert event["error.type"] == error_type
    assert "gen_ai.evaluation.score.value" not in event
    assert SECRET not in event["gen_ai.evaluation.explanation"]
    assert SECRET.encode() not in receiver.raw_bytes()


def test_slow_judge_does_not_delay_the_call_and_late_score_uses_carrier(
    receiver: Any, judge_server: JudgeServer
) -> None:
    release = threading.Event()

    def slow_statements(request: dict[str, Any]) -> Any:
        release.wait(10)
        return {"statements": ["Paris is the capital."]}

    judge_server.route("answer_relevancy_statements", slow_statements)
    judge_server.route("answer_relevancy_verdicts",
                       {"results": [{"result": "yes", "reason": "direct"}]})
    judge_server.route("answer_relevancy_reason", {"reason": "Direct answer."})
    inst = tracescore.configure(
        judge=judge(judge_server, timeout=20),
        scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer())],
        limits=tracescore.LimitsOptions(score_timeout=0.2),
    )

    @tracescore.agent(name="rag")
    def answer(question: str) -> str:
        return "Paris is the capital."

    # The judge is blocked until we release it: the call returning proves it did not wait.
    assert answer("capital?") == "Paris is the capital."
    assert receiver.wait_for(lambda spans: len(spans) == 1, timeout=10)
    (scored,) = receiver.spans
    assert scored.events == []  # the deadline passed first
    assert inst.stats().deadline_exports == 1
    release.set()
    assert tracescore.force_flush(30_000)
    assert receiver.wait_for(lambda spans: len(spans) == 2)
    (carrier,) = receiver.by_name("evaluation answer-relevancy")
    assert carrier.trace_id == scored.trace_id
    assert carrier.parent_span_id == scored.span_id
    assert carrier.links == [(scored.trace_id, scored.span_id)]
    (name, event), = carrier.events
    assert event["gen_ai.evaluation.score.value"] == 1.0


def test_slow_judge_scored_by_force_flush_before_deadline(
    receiver: Any, judge_server: JudgeServer
) -> None:
    judge_server.delay = 0.3
    script_rag_judge(judge_server)
    configure_rag(judge_server)
    answer = build_agent()

    async def many() -> list[str]:
        return await asyncio.gather(*(asyncio.to_thread(answer, f"q{i}") for i in range(4)))

    assert len(asyncio.run(many())) == 4
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: len(spans) == 8)
    agents = receiver.by_name("invoke_agent rag")
    assert len(agents) == 4
    for agent in agents:
        assert sorted(a["gen_ai.evaluation.name"] for _, a in agent.events) == [
            "answer-relevancy", "context-precision"]


def test_sample_rate_zero_makes_no_judge_calls(receiver: Any, judge_server: JudgeServer) -> None:
    script_rag_judge(judge_server)
    tracescore.configure(
        judge=judge(judge_server),
        scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(),
                                        sample_rate=0.0)],
    )
    answer = build_agent()
    for i in range(20):
        answer(f"q{i}")
    assert tracescore.force_flush(5000)
    assert receiver.wait_for(lambda spans: len(spans) == 40)
    assert all(s.events == [] for s in receiver.spans)
    assert judge_server.requests == []


def test_no_judge_configured_records_error(receiver: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACESCORE_JUDGE_MODEL", raising=False)
    tracescore.configure(scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer())])

    @tracescore.agent
    def answer(q: str) -> str:
        return "a"

    answer("q")
    tracescore.force_flush(5000)
    assert receiver.wait_for(lambda spans: len(spans) == 1)
    (_, event), = receiver.spans[0].events
    assert event["error.type"] == "no_judge"


@pytest.mark.parametrize(
    ("value", "label"),
    [(None, "not_scorable"), (b"", "not_scorable"), ("", "not_scorable")],
    ids=["none", "empty-bytes", "empty-str"],
)
def test_bad_outputs_are_not_scorable_without_judge_calls(
    receiver: Any, judge_server: JudgeServer, value: Any, label: str
) -> None:
    tracescore.configure(
        judge=judge(judge_server),
        scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer())],
    )

    @tracescore.agent
    def answer(q: str) -> Any:
        return value

    assert answer("q") is value
    tracescore.force_flush(5000)
    assert receiver.wait_for(lambda spans: len(spans) == 1)
    (_, event), = receiver.spans[0].events
    assert event["gen_ai.evaluation.score.label"] == label
    assert event["gen_ai.evaluation.explanation"]
    assert judge_server.requests == []


def test_huge_and_odd_outputs_scored_on_text(receiver: Any) -> None:
    class Weird:
        def __repr__(self) -> str:
            return "Paris"

    outputs = ["Paris " * 2_000_000, b"Paris", Weird()]
    tracescore.configure(
        content=tracescore.ContentOptions(max_length=2048),
        scoring=[tracescore.ScoringRule(scorer=create_content_similarity_scorer(),
                                        ground_truth=lambda span, q: "Paris")],
    )

    @tracescore.agent
    def answer(i: int) -> Any:
        return outputs[i]

    for i in range(len(outputs)):
        answer(i)
    tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: len(spans) == 3)
    for span in receiver.spans:
        assert len(span.attributes["output.value"]) <= 2048
        (_, event), = span.events
        assert "error.type" not in event
        assert 0.0 <= event["gen_ai.evaluation.score.value"] <= 1.0
