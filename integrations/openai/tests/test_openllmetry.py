"""OpenLLMetry with the real packages: traceloop-sdk's ``@workflow`` decorator around the real
OpenAI SDK, instrumented by traceloop's ``opentelemetry-instrumentation-openai``, against a
loopback OpenAI-protocol server (the model); scores from a second loopback server (the judge),
exported to an OTLP receiver on loopback.

A rule ``on="agent"`` must score the workflow span (``traceloop.span.kind=workflow``) with the
function's argument as the input and its return value as the output.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore.scorers import create_answer_relevancy_scorer
from tracescore.testing import ScriptedJudge

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."
EVENT = "gen_ai.evaluation.result"


@pytest.fixture
def traceloop(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Traceloop's SDK started as its users start it, with its OpenAI instrumentation; yields
    its ``workflow`` decorator. ``Traceloop.init`` sets up (or reuses) the global provider and
    adds its own processor, here with an in-memory exporter: nothing leaves the machine. Its
    tracer is a process-wide singleton and stays; the OpenAI instrumentation is turned off
    afterwards. (This file runs after ``test_openai.py``, whose ``configure()`` calls without
    ``tracer_provider=`` rely on tracescore owning the global provider.)
    """
    monkeypatch.setenv("TRACELOOP_TELEMETRY", "false")
    monkeypatch.setenv("TRACELOOP_SUPPRESS_WARNINGS", "true")
    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "true")
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    from traceloop.sdk import Instruments, Traceloop
    from traceloop.sdk.decorators import workflow

    Traceloop.init(app_name="openllmetry-app", exporter=InMemorySpanExporter(),
                   disable_batch=True, instruments={Instruments.OPENAI})
    yield workflow
    OpenAIInstrumentor().uninstrument()
    # opentelemetry-instrumentation-openai 0.62.4's uninstrument leaves its chat wrappers on
    # (its unwrap calls name the class inside the attribute, which unwrap does not resolve):
    # take off the ones this test goes through, or later tests' OpenAI calls get its spans too.
    from openai.resources.chat import completions
    from opentelemetry.instrumentation.utils import unwrap

    unwrap(completions.Completions, "create")
    unwrap(completions.AsyncCompletions, "create")


def _events(span: Any) -> dict[str, dict[str, Any]]:
    return {attrs["gen_ai.evaluation.name"]: attrs for name, attrs in span.events
            if name == EVENT}


def test_openllmetry_workflow_is_scored_with_its_argument_and_return_value(
        model: ScriptedJudge, judge: ScriptedJudge, receiver: Any, traceloop: Any) -> None:
    # A traceloop app already has a provider: tracescore adds its processors to it.
    tracescore.configure(tracer_provider=trace.get_tracer_provider(), judge=judge.as_judge(),
                         scoring=[tracescore.ScoringRule(
                             scorer=create_answer_relevancy_scorer(), on="agent")])
    workflow = traceloop

    @workflow(name="answer_question")
    def answer(question: str) -> str:
        with openai.OpenAI(base_url=model.api_base, api_key="sk-loopback-model") as client:
            reply = client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": question}])
        return str(reply.choices[0].message.content)

    assert answer(QUESTION) == ANSWER
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: any(_events(s) for s in spans), 20)

    (scored,) = [s for s in receiver.spans if _events(s)]
    assert scored.attributes["traceloop.span.kind"] == "workflow"
    assert scored.name == "answer_question.workflow"
    assert scored.parent_span_id == ""
    event = _events(scored)["answer-relevancy"]
    assert event["gen_ai.evaluation.score.value"] == 1.0
    llm = [s for s in receiver.spans if s.scope == "opentelemetry.instrumentation.openai.v1"]
    assert llm and llm[0].parent_span_id == scored.span_id  # traceloop's OpenAI span, unscored

    prompts = dict(zip(judge.schema_names, judge.prompts, strict=True))
    assert QUESTION in prompts["answer_relevancy_verdicts"]  # the workflow's argument
    assert ANSWER in prompts["answer_relevancy_statements"]  # its return value
    assert '"args"' not in prompts["answer_relevancy_verdicts"]  # not the JSON envelope
    assert "sk-loopback-model" not in "".join(judge.prompts)
