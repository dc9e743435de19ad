"""LangChain with the OpenAI client instrumented too (``tracescore_langchain`` and
``tracescore_openai`` at once): one model call makes a LangChain ``ChatOpenAI`` span and an
OpenAI ``ChatCompletion`` span. Both belong to the chain's trace (the chat model's span is
current while it calls the client), and a rule ``on="llm"`` judges one of them, the client's:
the innermost span of the nest.
"""

from __future__ import annotations

from typing import Any

import pytest
import tracescore_langchain
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_openai import ChatOpenAI

import tracescore
from tracescore.scorers import create_answer_relevancy_scorer
from tracescore.testing import ScriptedJudge

tracescore_openai = pytest.importorskip("tracescore_openai")

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower was completed in 1889."
EVENT = "gen_ai.evaluation.result"


def _events(span: Any) -> list[dict[str, Any]]:
    return [attrs for name, attrs in span.events if name == EVENT]


@pytest.mark.parametrize("kind", ["llm", "agent"])
def test_one_model_call_is_one_judged_span_in_the_chains_trace(
        model: ScriptedJudge, judge: ScriptedJudge, receiver: Any, kind: str) -> None:
    inst = tracescore.configure(service_name="lc-openai", judge=judge.as_judge(), scoring=[
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on=kind)])
    # this configuration's provider (the global one stays the first configuration's)
    tracescore_langchain.instrument(inst.tracer_provider)
    tracescore_openai.instrument(inst.tracer_provider)
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=model.api_base, api_key="sk-loopback-model",
                     max_retries=0)
    try:
        chain = ChatPromptTemplate.from_messages([("human", "{question}")]) | llm \
            | StrOutputParser()
        assert chain.invoke({"question": QUESTION}) == ANSWER
    finally:
        tracescore_openai.uninstrument()
        tracescore_langchain.uninstrument()
        llm.root_client.close()
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: any(_events(s) for s in spans), 20)
    spans = receiver.spans
    llms = [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"]
    assert sorted(s.scope for s in llms) == ["openinference.instrumentation.langchain",
                                             "openinference.instrumentation.openai"]
    assert len({s.trace_id for s in spans}) == 1  # the client's span is no root of its own
    client = next(s for s in llms if s.scope == "openinference.instrumentation.openai")
    wrapper = next(s for s in llms if s is not client)
    assert client.parent_span_id == wrapper.span_id
    scored = [s for s in spans if _events(s)]
    assert len(scored) == 1 and len(_events(scored[0])) == 1
    expected = client if kind == "llm" else next(s for s in spans if s.parent_span_id == "")
    assert scored[0].span_id == expected.span_id
    assert _events(scored[0])[0]["gen_ai.evaluation.score.value"] == 1.0
