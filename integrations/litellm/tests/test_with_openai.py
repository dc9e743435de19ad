"""litellm with the OpenAI client instrumented too (``tracescore_litellm`` and
``tracescore_openai`` at once): one ``litellm.completion`` makes a litellm span and, beneath
it, the OpenAI client's span. A rule ``on="llm"`` judges one of them, the client's (the
innermost span of the nest: the messages sent and the text received).
"""

from __future__ import annotations

from typing import Any

import litellm
import pytest
import tracescore_litellm

import tracescore
from tracescore.scorers import create_answer_relevancy_scorer
from tracescore.testing import ScriptedJudge

tracescore_openai = pytest.importorskip("tracescore_openai")

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower was completed in 1889."
EVENT = "gen_ai.evaluation.result"


def _events(span: Any) -> list[dict[str, Any]]:
    return [attrs for name, attrs in span.events if name == EVENT]


def test_one_model_call_is_one_judged_span(
        model: ScriptedJudge, judge: ScriptedJudge, receiver: Any) -> None:
    inst = tracescore.configure(service_name="litellm-openai", judge=judge.as_judge(),
                                scoring=[tracescore.ScoringRule(
                                    scorer=create_answer_relevancy_scorer(), on="llm")])
    # this configuration's provider (the global one stays the first configuration's)
    tracescore_litellm.instrument(inst.tracer_provider)
    tracescore_openai.instrument(inst.tracer_provider)
    try:
        reply = litellm.completion(model="openai/gpt-4o-mini", api_base=model.api_base,
                                   api_key="sk-loopback-model",
                                   messages=[{"role": "user", "content": QUESTION}])
        assert reply.choices[0].message.content == ANSWER
    finally:
        tracescore_openai.uninstrument()
        tracescore_litellm.uninstrument()
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: any(_events(s) for s in spans), 20)
    spans = receiver.spans
    llms = [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"]
    assert len(llms) == 2, [(s.scope, s.name) for s in spans]
    assert len({s.trace_id for s in llms}) == 1
    scored = [s for s in spans if _events(s)]
    assert len(scored) == 1 and len(_events(scored[0])) == 1, [
        (s.scope, s.name) for s in scored]
    assert scored[0].scope == "openinference.instrumentation.openai"
