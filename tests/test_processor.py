"""The scoring processor: sampling, holding, attaching events, deadlines, carriers, overflow."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tests.helpers import ProbeScorer, eval_events, finished, memory_configure


@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    tracescore.shutdown(2000)


def rule(scorer: Any, **kw: Any) -> tracescore.ScoringRule:
    return tracescore.ScoringRule(scorer=scorer, **kw)


def test_sampled_span_exported_once_with_event() -> None:
    probe = ProbeScorer()
    _, exp = memory_configure(scoring=[rule(probe, on="agent", sample_rate=1.0, threshold=0.05)])

    @tracescore.agent
    def answer(q: str) -> str:
        return "x" * 10

    @tracescore.tool
    def helper() -> str:
        return "t"

    answer("q")
    helper()
    spans = finished(exp)
    assert sorted(s.name.split()[0] for s in spans) == ["execute_tool", "invoke_agent"]
    agent = [s for s in spans if s.name.startswith("invoke_agent")][0]
    (event,) = eval_events(agent)
    assert event.pop("gen_ai.evaluation.name") == "probe"
    assert event.pop("gen_ai.evaluation.score.value") == pytest.approx(0.1)
    assert event.pop("gen_ai.evaluation.score.label") == "pass"
    assert event.pop("gen_ai.evaluation.explanation") == "length 10"
    assert event.pop("tracescore.sample_rate") == 1.0
    assert len(event.pop("tracescore.evaluator.version")) == 12  # issue 12: provenance
    assert event == {}
    assert probe.calls == [{"input": "q", "output": "x" * 10}]
    tool_span = [s for s in spans if s.name.startswith("execute_tool")][0]
    assert eval_events(tool_span) == []
    stats = tracescore.stats()
    assert (stats.spans_exported, stats.scores_attached, stats.spans_held) == (2, 1, 0)


def test_sample_rate_zero_scores_nothing() -> None:
    probe = ProbeScorer()
    _, exp = memory_configure(scoring=[rule(probe, sample_rate=0.0)])

    @tracescore.agent
    def answer(q: str) -> str:
        return "a"

    for _ in range(50):
        answer("q")
    spans = finished(exp)
    assert len(spans) == 50
    assert all(eval_events(s) == [] for s in spans)
    assert probe.calls == []


SAMPLING_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    import tracescore
    sys.path.insert(0, {root!r})
    from tests.helpers import ProbeScorer

    class Ids(IdGenerator):
        def __init__(self):
            self.n = 0
        def generate_trace_id(self):
            self.n += 1
            return (self.n * 0x9E3779B97F4A7C15) % (1 << 128) or 1
        def generate_span_id(self):
            self.n += 1
            return self.n

    seen = []
    tracescore.configure(
        tracer_provider=TracerProvider(id_generator=Ids()), exporter=False,
        scoring=[tracescore.ScoringRule(scorer=ProbeScorer(), sample_rate=0.3)],
        on_score=lambda e: seen.append(e.trace_id),
    )

    @tracescore.agent
    def answer(q):
        return "out"

    for i in range(400):
        answer(i)
    tracescore.force_flush(10000)
    print(json.dumps(sorted(seen)))
    """
)


def test_sampling_is_deterministic_across_processes(tmp_path: Any) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = tmp_path / "sample.py"
    script.write_text(SAMPLING_SCRIPT.format(root=root))
    env = dict(os.environ, PYTHONPATH=root)
    runs = [
        json.loads(subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                                  check=True, env=env, timeout=120).stdout)
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    assert 0.2 * 400 < len(runs[0]) < 0.4 * 400


def test_decorated_call_does_not_wait_for_scoring() -> None:
    release = threading.Event()

    class Blocking(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            await asyncio.get_running_loop().run_in_executor(None, release.wait, 10)
            return await super().arun(**kwargs)

    _, exp = memory_configure(scoring=[rule(Blocking(id="slow"))],
                              limits=tracescore.LimitsOptions(score_timeout=30))

    @tracescore.agent
    def answer(q: str) -> str:
        return "done"

    assert answer("q") == "done"  # returns while the scorer is still blocked
    assert exp.get_finished_spans() == ()  # held, not exported yet
    assert tracescore.stats().spans_held == 1
    release.set()
    (span,) = finished(exp)
    (event,) = eval_events(span)
    assert event["gen_ai.evaluation.name"] == "slow"


def test_late_score_goes_on_carrier_span() -> None:
    release = threading.Event()

    class Blocking(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            await asyncio.get_running_loop().run_in_executor(None, release.wait, 10)
            return await super().arun(**kwargs)

    inst, exp = memory_configure(scoring=[rule(Blocking(id="slow"))],
                                 limits=tracescore.LimitsOptions(score_timeout=0.05))

    @tracescore.agent
    def answer(q: str) -> str:
        return "done"

    answer("q")
    # The deadline passes: the span goes out without its score.
    for _ in range(200):
        if inst.stats().deadline_exports:
            break
        threading.Event().wait(0.01)
    inst.processor._downstream.force_flush(2000)
    (scored,) = exp.get_finished_spans()
    assert eval_events(scored) == []
    release.set()
    spans = finished(exp)
    assert len(spans) == 2
    carrier = [s for s in spans if s.name == "evaluation slow"][0]
    assert carrier.context.trace_id == scored.context.trace_id
    assert carrier.parent.span_id == scored.context.span_id
    assert [link.context.span_id for link in carrier.links] == [scored.context.span_id]
    (event,) = eval_events(carrier)
    assert event["gen_ai.evaluation.name"] == "slow"
    assert "gen_ai.evaluation.score.value" in event
    assert tracescore.stats().scores_late == 1


def test_force_flush_deadline_exports_held_span_and_returns_false() -> None:
    release = threading.Event()

    class Blocking(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            await asyncio.get_running_loop().run_in_executor(None, release.wait, 10)
            return await super().arun(**kwargs)

    _, exp = memory_configure(scoring=[rule(Blocking(id="slow"))],
                              limits=tracescore.LimitsOptions(score_timeout=30))

    @tracescore.agent
    def answer(q: str) -> str:
        return "done"

    answer("q")
    assert tracescore.force_flush(100) is False
    # Released to the exporter at the flush's deadline, unscored; the export itself may take
    # longer than what was left of 100 ms on a loaded machine, so wait for it (bounded).
    assert tracescore.stats().deadline_exports == 1
    deadline = time.monotonic() + 10
    while not exp.get_finished_spans() and time.monotonic() < deadline:
        tracescore.force_flush(200)
    assert len(exp.get_finished_spans()) == 1
    release.set()
    assert tracescore.force_flush(5000) is True
    names = sorted(s.name for s in exp.get_finished_spans())
    assert names[0] == "evaluation slow"


@pytest.mark.parametrize(
    ("error", "error_type"),
    [
        (tracescore.JudgeTimeoutError("judge timed out"), "timeout"),
        (tracescore.JudgeRateLimitedError("429"), "rate_limited"),
        (RuntimeError("scorer bug"), "scorer_error"),
    ],
)
def test_scorer_failure_becomes_error_event(error: BaseException, error_type: str) -> None:
    _, exp = memory_configure(scoring=[rule(ProbeScorer(fail_with=error))])

    @tracescore.agent
    def answer(q: str) -> str:
        return "fine"

    assert answer("q") == "fine"
    (span,) = finished(exp)
    (event,) = eval_events(span)
    assert event["error.type"] == error_type
    assert "gen_ai.evaluation.score.value" not in event
    assert event["gen_ai.evaluation.explanation"]
    assert tracescore.stats().scoring_errors == 1


def test_not_scorable_label() -> None:
    _, exp = memory_configure(scoring=[rule(ProbeScorer())])

    @tracescore.agent
    def answer(q: str) -> None:
        return None

    answer("q")
    (span,) = finished(exp)
    (event,) = eval_events(span)
    assert event["gen_ai.evaluation.score.label"] == "not_scorable"
    assert "gen_ai.evaluation.score.value" not in event
    assert event["gen_ai.evaluation.explanation"] == "output is empty"


def test_context_scorer_gets_trace_documents_in_retrieval_order() -> None:
    probe = ProbeScorer(id="ctx", uses_context=True)
    _, exp = memory_configure(scoring=[rule(probe)])

    @tracescore.retrieval
    def search(q: str) -> list[str]:
        return [f"{q}-1", f"{q}-2"]

    @tracescore.agent
    def answer(q: str) -> str:
        search("first")
        search("second")
        return "ok"

    answer("q")
    answer("other")
    finished(exp)
    assert [c["context"] for c in probe.calls] == [
        ["first-1", "first-2", "second-1", "second-2"],
        ["first-1", "first-2", "second-1", "second-2"],
    ]


def test_ground_truth_from_callable_and_attribute() -> None:
    by_callable = ProbeScorer(id="gt-callable", requires_ground_truth=True)
    by_attr = ProbeScorer(id="gt-attr", requires_ground_truth=True)
    _, exp = memory_configure(scoring=[
        rule(by_callable, ground_truth=lambda span, q: {"q1": "ref1"}[q]),
        rule(by_attr, ground_truth="app.reference"),
    ])

    @tracescore.agent(attributes={"app.reference": "from-attr"})
    def answer(q: str) -> str:
        return "out"

    answer("q1")
    finished(exp)
    assert by_callable.calls[0]["ground_truth"] == "ref1"
    assert by_attr.calls[0]["ground_truth"] == "from-attr"


def test_rule_requiring_ground_truth_is_refused() -> None:
    with pytest.raises(tracescore.ConfigurationError, match="ground truth"):
        rule(ProbeScorer(requires_ground_truth=True))


@pytest.mark.parametrize(
    "kwargs",
    [{"on": "agents"}, {"sample_rate": 1.5}, {"sample_rate": "0.1"}, {"threshold": "x"},
     {"on": 3}],
)
def test_bad_rule_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(tracescore.ConfigurationError):
        rule(ProbeScorer(), **kwargs)


def test_bad_configure_arguments() -> None:
    with pytest.raises(tracescore.ConfigurationError):
        tracescore.configure(scoring=[object()])  # type: ignore[list-item]
    with pytest.raises(tracescore.ConfigurationError):
        tracescore.configure(exporter="otlp")  # type: ignore[arg-type]
    with pytest.raises(tracescore.ConfigurationError):
        tracescore.configure(limits=tracescore.LimitsOptions(score_timeout=-1))
    with pytest.raises(tracescore.ConfigurationError):
        tracescore.configure(judge=42)  # type: ignore[arg-type]


def test_bad_env_values_fall_back(monkeypatch: pytest.MonkeyPatch,
                                  caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("TRACESCORE_SCORE_TIMEOUT", "soon")
    inst, _ = memory_configure()
    assert inst.processor._score_timeout == 30.0
    assert "TRACESCORE_SCORE_TIMEOUT" in caplog.text


def test_queue_overflow_skips_and_exports_every_span() -> None:
    release = threading.Event()

    class Blocking(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            await asyncio.get_running_loop().run_in_executor(None, release.wait, 10)
            return await super().arun(**kwargs)

    _, exp = memory_configure(scoring=[rule(Blocking(id="slow"))],
                              limits=tracescore.LimitsOptions(max_queue_size=3, max_concurrency=1,
                                                              score_timeout=30))

    @tracescore.agent
    def answer(q: int) -> str:
        return "done"

    for i in range(10):
        answer(i)
    stats = tracescore.stats()
    assert stats.skipped_queue_full == 7
    assert stats.spans_held == 3
    release.set()
    spans = finished(exp)
    assert len(spans) == 10
    assert sum(len(eval_events(s)) for s in spans) == 3


def test_predicate_rule_and_two_rules_on_one_span() -> None:
    a, b = ProbeScorer(id="a"), ProbeScorer(id="b")
    _, exp = memory_configure(scoring=[
        rule(a, on=lambda span: span.name == "execute_tool special"),
        rule(b, on="tool"),
    ])

    @tracescore.tool(name="special")
    def special() -> str:
        return "s"

    @tracescore.tool(name="plain")
    def plain() -> str:
        return "p"

    special()
    plain()
    spans = {s.name: s for s in finished(exp)}
    assert sorted(e["gen_ai.evaluation.name"] for e in eval_events(
        spans["execute_tool special"])) == ["a", "b"]
    assert [e["gen_ai.evaluation.name"] for e in eval_events(spans["execute_tool plain"])] == ["b"]


def test_user_tracer_provider_is_used_and_global_untouched() -> None:
    from opentelemetry import trace

    provider = TracerProvider()
    own = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(own))
    scored = InMemorySpanExporter()
    before = trace.get_tracer_provider()
    tracescore.configure(tracer_provider=provider, exporter=scored,
                         scoring=[rule(ProbeScorer())])

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("q")
    tracescore.force_flush(5000)
    assert trace.get_tracer_provider() is before
    assert len(own.get_finished_spans()) == 1  # the user's own processor sees the span
    (span,) = scored.get_finished_spans()
    assert len(eval_events(span)) == 1


def test_reconfigure_replaces_previous() -> None:
    first = ProbeScorer(id="first")
    _, exp1 = memory_configure(scoring=[rule(first)])
    second = ProbeScorer(id="second")
    _, exp2 = memory_configure(scoring=[rule(second)])

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("q")
    spans = finished(exp2)
    assert len(spans) == 1 and eval_events(spans[0])[0]["gen_ai.evaluation.name"] == "second"
    assert first.calls == [] and exp1.get_finished_spans() == ()


def test_on_score_callback_errors_do_not_escape() -> None:
    got: list[Any] = []

    def cb(event: Any) -> None:
        got.append(event)
        raise RuntimeError("callback bug")

    _, exp = memory_configure(scoring=[rule(ProbeScorer())], on_score=cb)

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("q")
    (span,) = finished(exp)
    assert len(eval_events(span)) == 1
    assert got[0].scorer_id == "probe" and got[0].span_name == span.name


def test_exporter_false_still_scores() -> None:
    got: list[Any] = []
    tracescore.configure(exporter=False, scoring=[rule(ProbeScorer())], on_score=got.append)

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("q")
    assert tracescore.force_flush(5000)
    assert len(got) == 1


def test_tool_scorer_sees_tool_calls_under_the_agent_span() -> None:
    probe = ProbeScorer(id="tools")
    probe.uses_tool_calls = True  # type: ignore[attr-defined]
    _, exp = memory_configure(scoring=[rule(probe)])

    @tracescore.tool(name="lookup_order")
    def lookup(order_id: str) -> dict[str, str]:
        return {"status": "shipped"}

    @tracescore.tool(name="refund")
    def refund(order_id: str, amount: float) -> str:
        raise ValueError("not allowed")

    @tracescore.agent(name="inner")
    def inner() -> str:
        lookup("B2")
        return "inner done"

    @tracescore.agent(name="outer")
    def outer(q: str) -> str:
        lookup("A1")
        with contextlib.suppress(ValueError):
            refund("A1", 3.5)
        inner()
        return "done"

    lookup("outside")  # another trace: never counted
    outer("q")
    finished(exp)
    by_span = {c["output"]: c["tool_calls"] for c in probe.calls}
    assert by_span["inner done"] == [
        {"name": "lookup_order", "arguments": {"order_id": "B2"}, "result": {"status": "shipped"}}]
    assert by_span["done"] == [
        {"name": "lookup_order", "arguments": {"order_id": "A1"}, "result": {"status": "shipped"}},
        {"name": "refund", "arguments": {"order_id": "A1", "amount": 3.5}, "result": None,
         "error": "ValueError: not allowed"},
        {"name": "lookup_order", "arguments": {"order_id": "B2"}, "result": {"status": "shipped"}},
    ]


def test_rule_inputs_feed_extra_run_arguments() -> None:
    probe = ProbeScorer(id="noise")
    probe.run_inputs = ("baseline_response", "noisy_query")  # type: ignore[attr-defined]
    with pytest.raises(tracescore.ConfigurationError, match="baseline_response"):
        rule(probe)
    _, exp = memory_configure(scoring=[rule(probe, inputs={
        "baseline_response": "app.baseline",
        "noisy_query": lambda span, q: q + " (noisy)",
    })])

    @tracescore.agent(attributes={"app.baseline": "base answer"})
    def answer(q: str) -> str:
        return "out"

    answer("q")
    finished(exp)
    assert probe.calls[0]["baseline_response"] == "base answer"
    assert probe.calls[0]["noisy_query"] == "q (noisy)"
