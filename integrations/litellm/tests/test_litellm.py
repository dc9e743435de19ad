"""litellm calls of an app, instrumented by the real OpenInference package, scored by
tracescore and exported to an OTLP receiver on loopback; the judge's own litellm calls are
neither traced nor scored.

The app is a tracescore agent that retrieves with ``@tracescore.retrieval`` and asks a loopback
OpenAI-protocol server (the model) through ``litellm.completion``; a second loopback server is
the judge, which tracescore also reaches through litellm, with the instrumentation on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import litellm
import pytest
import tracescore_litellm

import tracescore
from tracescore.scorers import create_answer_relevancy_scorer, create_faithfulness_scorer
from tracescore.testing import ScriptedJudge

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower was completed in 1889."
DOCUMENTS = ["The Eiffel Tower in Paris was completed in 1889.", "The tower is 330 metres tall."]
EVENT = "gen_ai.evaluation.result"


@pytest.fixture
def instrumented() -> Iterator[None]:
    tracescore_litellm.instrument()
    yield
    tracescore_litellm.uninstrument()


def _app(model: ScriptedJudge) -> Any:
    @tracescore.retrieval(name="kb")
    def search(query: str) -> list[str]:
        return DOCUMENTS

    @tracescore.agent(name="rag")
    def answer(question: str) -> str:
        context = "\n".join(search(question))
        reply = litellm.completion(
            model="openai/gpt-4o-mini", api_base=model.api_base, api_key="sk-loopback-model",
            messages=[{"role": "system", "content": f"Answer from this context:\n{context}"},
                      {"role": "user", "content": question}])
        return str(reply.choices[0].message.content)

    return answer


def _events(span: Any) -> dict[str, dict[str, Any]]:
    return {attrs["gen_ai.evaluation.name"]: attrs for name, attrs in span.events
            if name == EVENT}


def test_litellm_call_is_scored_and_the_judges_calls_are_not_traced(
        model: ScriptedJudge, judge: ScriptedJudge, receiver: Any, instrumented: None) -> None:
    tracescore.configure(service_name="litellm-app", judge=judge.as_judge(), scoring=[
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="llm"),
        tracescore.ScoringRule(scorer=create_faithfulness_scorer(), on="llm")])
    assert _app(model)(QUESTION) == ANSWER
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: sum(len(_events(s)) for s in spans) >= 2, 20)

    llm_spans = [s for s in receiver.spans if s.attributes.get("openinference.span.kind") == "LLM"
                 and s.scope.startswith("openinference.instrumentation.litellm")]
    # The app's one call; the judge made six through the same, instrumented litellm.
    assert len(llm_spans) == 1, [s.name for s in receiver.spans]
    assert len(judge.requests) == 6
    (span,) = llm_spans
    events = _events(span)
    assert events["answer-relevancy"]["gen_ai.evaluation.score.value"] == 1.0
    assert events["faithfulness"]["gen_ai.evaluation.score.value"] == 1.0
    assert [s for s in receiver.spans if _events(s)] == [span]  # nothing else was scored
    exported = receiver.raw_bytes()
    for body in judge.requests:  # no judge instruction on any exported span
        for message in body["messages"]:
            assert message["content"][:80].encode() not in exported

    prompts = dict(zip(judge.schema_names, judge.prompts, strict=True))
    assert QUESTION in prompts["answer_relevancy_verdicts"]
    assert ANSWER in prompts["answer_relevancy_statements"]
    for doc in DOCUMENTS:  # the tracescore retrieval span's documents, for the foreign LLM span
        assert doc in prompts["faithfulness_verdicts"]
    assert "sk-loopback-model" not in "".join(judge.prompts)


def test_litellm_with_content_hidden_is_not_scorable(
        model: ScriptedJudge, judge: ScriptedJudge, receiver: Any) -> None:
    tracescore.configure(service_name="litellm-app", judge=judge.as_judge(), scoring=[
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="llm")])
    tracescore_litellm.instrument(capture_content=False)
    try:
        _app(model)(QUESTION)
    finally:
        tracescore_litellm.uninstrument()
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: any(_events(s) for s in spans), 20)
    (span,) = [s for s in receiver.spans if _events(s)]
    event = _events(span)["answer-relevancy"]
    assert event["gen_ai.evaluation.score.label"] == "not_scorable"
    assert "OPENINFERENCE_HIDE_INPUTS" in event["gen_ai.evaluation.explanation"]
    assert judge.requests == []
