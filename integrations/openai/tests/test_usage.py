"""Token usage of the OpenAI SDK's calls, as OpenInference records it, kept on the exported
span and counted by tracescore per agent (tokens and cost, one count per model call), read
through a real metric reader; the model is a loopback OpenAI-protocol server."""

from __future__ import annotations

from typing import Any

import openai
import tracescore_openai
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import tracescore
from tracescore.testing import InMemoryScoreExporter, ScriptedJudge

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."


def _points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, Any], float]]:
    out = []
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    out.extend((dict(p.attributes), getattr(p, "sum", getattr(p, "value", 0)))
                               for p in metric.data.data_points)
    return out


def test_openinference_usage_is_kept_and_counted_once_per_agent(model: ScriptedJudge) -> None:
    reader = InMemoryMetricReader()
    exporter = InMemoryScoreExporter()
    inst = tracescore.configure(exporter=exporter,
                                output=tracescore.OutputOptions(
                                    meter_provider=MeterProvider(metric_readers=[reader])))
    # this configuration's provider: an earlier test's configure() may have set the global one
    tracescore_openai.instrument(tracer_provider=inst.tracer_provider)
    replies = []
    try:
        with openai.OpenAI(base_url=model.api_base, api_key="sk-loopback-model") as client:
            @tracescore.llm(provider="openai")
            def decorated(question: str) -> Any:
                # the instrumented SDK call inside a decorated one: one model call
                return client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": question}])

            @tracescore.agent(name="support-bot")
            def agent(question: str) -> None:
                replies.append(client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": question}]))
                replies.append(decorated(question))

            agent(QUESTION)
        tracescore.force_flush(10_000)
        spans = list(exporter.get_finished_spans())
    finally:
        tracescore_openai.uninstrument()
        tracescore.shutdown(5000)
    oi_spans = [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"
                and s.instrumentation_scope.name != "tracescore"]
    assert len(oi_spans) == 2
    for span, reply in zip(oi_spans, replies, strict=True):
        # OpenInference's own counts reach the backend as it wrote them
        assert span.attributes["llm.token_count.prompt"] == reply.usage.prompt_tokens > 0
        assert span.attributes["llm.token_count.completion"] == reply.usage.completion_tokens
        # priced at export from tracescore's table (gpt-4o-mini: 0.15 / 0.60 USD per million)
        expected = (reply.usage.prompt_tokens * 0.15 + reply.usage.completion_tokens * 0.6) / 1e6
        assert abs(span.attributes["llm.cost.total"] - expected) < 1e-12
        assert span.attributes["gen_ai.usage.cost"] == span.attributes["llm.cost.total"]
    (ours,) = [s for s in spans if s.name.startswith("chat ")
               and s.instrumentation_scope.name == "tracescore"]
    assert ours.attributes["gen_ai.usage.input_tokens"] == replies[1].usage.prompt_tokens
    assert ours.attributes["gen_ai.response.id"] == replies[1].id
    # the SDK call's span inside carries this call's cost: a trace's costs add up once
    assert "gen_ai.usage.cost" not in ours.attributes
    inputs = sum(v for a, v in _points(reader, "gen_ai.client.token.usage")
                 if a.get("gen_ai.agent.name") == "support-bot"
                 and a["gen_ai.token.type"] == "input")
    assert inputs == sum(r.usage.prompt_tokens for r in replies)  # two calls, not three
    (cost,) = _points(reader, "tracescore.llm.cost")
    assert cost[0]["gen_ai.agent.name"] == "support-bot"
    # gpt-4o-mini: 0.15 / 0.60 USD per million input / output tokens (the shipped table)
    assert abs(cost[1] - sum(r.usage.prompt_tokens * 0.15 + r.usage.completion_tokens * 0.6
                             for r in replies) / 1e6) < 1e-12
