"""Token usage and cost of litellm calls, as OpenInference's litellm instrumentation records
them (``llm.token_count.*``, ``llm.cost.total``), kept on the exported span and counted by
tracescore per agent (tokens and that cost), read through a real metric reader; the model is a
loopback OpenAI-protocol server."""

from __future__ import annotations

from typing import Any

import litellm
import tracescore_litellm
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import tracescore
from tracescore.testing import InMemoryScoreExporter, ScriptedJudge

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower was completed in 1889."


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


def test_litellm_usage_is_kept_and_counted_per_agent(model: ScriptedJudge) -> None:
    reader = InMemoryMetricReader()
    exporter = InMemoryScoreExporter()
    inst = tracescore.configure(exporter=exporter,
                                output=tracescore.OutputOptions(
                                    meter_provider=MeterProvider(metric_readers=[reader])))
    # this configuration's provider: an earlier test's configure() may have set the global one
    tracescore_litellm.instrument(tracer_provider=inst.tracer_provider)
    try:
        @tracescore.agent(name="rag")
        def agent(question: str) -> Any:
            return litellm.completion(
                model="openai/gpt-4o-mini", api_base=model.api_base, api_key="sk-loopback-model",
                messages=[{"role": "user", "content": question}])

        reply = agent(QUESTION)
        tracescore.force_flush(10_000)
        spans = list(exporter.get_finished_spans())
    finally:
        tracescore_litellm.uninstrument()
        tracescore.shutdown(5000)
    (llm,) = [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"]
    assert llm.attributes["llm.token_count.prompt"] == reply.usage.prompt_tokens > 0
    assert llm.attributes["llm.token_count.completion"] == reply.usage.completion_tokens
    # OpenInference records litellm's own cost (llm.cost.total): kept, and not priced again
    expected = (reply.usage.prompt_tokens * 0.15 + reply.usage.completion_tokens * 0.6) / 1e6
    assert abs(llm.attributes["llm.cost.total"] - expected) < 1e-12
    assert "gen_ai.usage.cost" not in llm.attributes
    tokens = {a["gen_ai.token.type"]: v for a, v in _points(reader, "gen_ai.client.token.usage")
              if a.get("gen_ai.agent.name") == "rag"}
    assert tokens == {"input": reply.usage.prompt_tokens,
                      "output": reply.usage.completion_tokens}
    (cost,) = _points(reader, "tracescore.llm.cost")
    assert cost[0]["gen_ai.agent.name"] == "rag"
    assert abs(cost[1] - (reply.usage.prompt_tokens * 0.15
                          + reply.usage.completion_tokens * 0.6) / 1e6) < 1e-12
