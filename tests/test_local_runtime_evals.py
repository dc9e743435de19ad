"""``run_evals``/``arun_evals`` inside ``with local.activate():`` belong to that local runtime:
its tracer provider and exporter get the experiment, its item spans and their scores, with its
content settings; outside the block, ``configure()``'s get them with its settings. Both
runtimes export to real OTLP receivers on loopback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

import tracescore
from tests.otlp_receiver import HttpOtlpReceiver, Received, ReceivedSpan
from tracescore.scorers import create_content_similarity_scorer
from tracescore.testing import LocalRuntime, local_runtime

QUESTION = "What is the capital of France? " * 8  # 248 characters: cut by the local cap
LOCAL_MAX_LENGTH = 40


@tracescore.agent
def answer(question: str) -> str:
    return "Paris"


def _exporter(receiver: HttpOtlpReceiver) -> OTLPSpanExporter:
    return OTLPSpanExporter(endpoint=receiver.endpoint + "/v1/traces", timeout=5)


@pytest.fixture
def runtimes() -> Iterator[tuple[Received, Received, LocalRuntime]]:
    """``configure()`` capturing no content, exporting to one receiver; a local runtime
    capturing content cut to ``LOCAL_MAX_LENGTH`` characters, exporting to another."""
    with HttpOtlpReceiver() as global_receiver, HttpOtlpReceiver() as local_receiver:
        tracescore.configure(service_name="global", exporter=_exporter(global_receiver),
                             content=tracescore.ContentOptions(capture=False))
        local = local_runtime(service_name="local", exporter=_exporter(local_receiver),
                              content=tracescore.ContentOptions(capture=True,
                                                                max_length=LOCAL_MAX_LENGTH))
        try:
            yield global_receiver.received, local_receiver.received, local
        finally:
            local.shutdown()
            tracescore.shutdown()


def _evaluate(name: str) -> tracescore.EvalResult:
    return tracescore.run_evals(
        data=[{"input": QUESTION, "ground_truth": "Paris"}],
        scorers=[create_content_similarity_scorer()], target=answer,
        experiment_name=name, progress=False)


def _names(received: Received) -> list[str]:
    return sorted(s.name for s in received.spans)


def _item(received: Received, name: str) -> ReceivedSpan:
    (item,) = received.by_name(f"eval_item {name}")
    return item


def _scores(span: ReceivedSpan) -> list[tuple[str, Any]]:
    return [(a["gen_ai.evaluation.name"], a["gen_ai.evaluation.score.value"])
            for event, a in span.events if event == "gen_ai.evaluation.result"]


def test_run_evals_inside_a_local_runtime_goes_to_it_with_its_settings(
        runtimes: tuple[Received, Received, LocalRuntime]) -> None:
    global_received, local_received, local = runtimes
    with local.activate():
        inside = _evaluate("inside")
    outside = _evaluate("outside")
    assert local.force_flush() and tracescore.force_flush()

    assert inside.passed and outside.passed
    # Inside: the experiment, its item and the target's span, at the local receiver only.
    assert _names(local_received) == ["eval_item inside", "experiment inside",
                                      "invoke_agent answer"]
    assert _names(global_received) == ["eval_item outside", "experiment outside",
                                       "invoke_agent answer"]
    assert {s.resource["service.name"] for s in local_received.spans} == {"local"}
    assert {s.resource["service.name"] for s in global_received.spans} == {"global"}
    local_item, global_item = _item(local_received, "inside"), _item(global_received, "outside")
    assert inside.trace_id == local_item.trace_id and outside.trace_id == global_item.trace_id
    # Each item span carries its score, at its own runtime's receiver.
    assert _scores(local_item) == [("content-similarity", 1.0)]
    assert _scores(global_item) == [("content-similarity", 1.0)]
    # The local runtime captures content, cut to its max_length; configure()'s captures none.
    value = local_item.attributes["input.value"]
    assert len(value) <= LOCAL_MAX_LENGTH and value.startswith(json.dumps(QUESTION)[:10])
    assert value != json.dumps(QUESTION)
    assert local_item.attributes["output.value"] == json.dumps("Paris")
    for attribute in ("input.value", "output.value", "tracescore.experiment.item.ground_truth"):
        assert attribute not in global_item.attributes
    assert local.stats().spans_exported == 3


def test_arun_evals_and_run_evals_in_a_running_loop_follow_the_local_runtime(
        runtimes: tuple[Received, Received, LocalRuntime]) -> None:
    global_received, local_received, local = runtimes

    async def evaluate() -> list[tracescore.EvalResult]:
        with local.activate():
            awaited = await tracescore.arun_evals(
                data=[{"input": "awaited", "ground_truth": "Paris"}],
                scorers=[create_content_similarity_scorer()], target=answer,
                experiment_name="awaited", progress=False)
            # run_evals inside a running loop: on a helper thread, in the caller's context.
            threaded = _evaluate("threaded")
        return [awaited, threaded]

    results = asyncio.run(evaluate())
    assert local.force_flush() and tracescore.force_flush()
    assert all(result.passed for result in results)
    assert _names(local_received) == ["eval_item awaited", "eval_item threaded",
                                      "experiment awaited", "experiment threaded",
                                      "invoke_agent answer", "invoke_agent answer"]
    assert _scores(_item(local_received, "awaited")) == [("content-similarity", 1.0)]
    assert _scores(_item(local_received, "threaded")) == [("content-similarity", 1.0)]
    assert global_received.spans == []
