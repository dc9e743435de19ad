"""Production monitoring: rule filters, error capture, rate limits, budgets, backpressure under
overload, score metrics and self-metrics, log-based score events, backends going away."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import tracescore
from tests.helpers import ProbeScorer, eval_events, finished, memory_configure, scaled
from tests.otlp_receiver import HttpOtlpReceiver
from tracescore.scorers import create_answer_relevancy_scorer
from tracescore.testing import ScriptedJudge as JudgeServer


@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    tracescore.shutdown(3000)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class CostlyResult:
    score: float
    reason: str
    judge_model: str = "openai/test-judge"
    input_tokens: int = 60
    output_tokens: int = 10
    cost: float | None = 0.002


class CostlyScorer(ProbeScorer):
    async def arun(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return CostlyResult(0.75, "fine")


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    out: dict[str, list[Any]] = {}
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


def total(points: list[Any], **attrs: Any) -> float:
    return sum(p.value for p in points
               if all(p.attributes.get(k) == v for k, v in attrs.items()))


# -- rules -------------------------------------------------------------------------------------
def test_span_name_and_attribute_filters() -> None:
    probe = ProbeScorer()
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(
        scorer=probe, on="agent", span_name="invoke_agent support-*",
        attributes={"app.tier": "gold"})])

    def make(name: str, tier: str) -> Any:
        @tracescore.agent(name=name, attributes={"app.tier": tier})
        def answer(q: str) -> str:
            return "ok"

        return answer

    make("support-bot", "gold")("q")
    make("support-bot", "free")("q")
    make("sales-bot", "gold")("q")
    spans = {(s.name, s.attributes["app.tier"]): s for s in finished(exp)}
    assert len(eval_events(spans[("invoke_agent support-bot", "gold")])) == 1
    assert eval_events(spans[("invoke_agent support-bot", "free")]) == []
    assert eval_events(spans[("invoke_agent sales-bot", "gold")]) == []


def test_errors_are_always_scored_when_asked() -> None:
    probe = ProbeScorer()
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(
        scorer=probe, sample_rate=0.0, score_errors=True)])

    @tracescore.agent
    def answer(fail: bool) -> str:
        if fail:
            raise RuntimeError("boom")
        return "ok"

    answer(False)
    with pytest.raises(RuntimeError):
        answer(True)
    spans = finished(exp)
    scored = [s for s in spans if eval_events(s)]
    assert len(scored) == 1 and scored[0].status.status_code.name == "ERROR"
    (event,) = eval_events(scored[0])
    assert event["tracescore.selected_on_error"] is True
    assert event["tracescore.sample_rate"] == 0.0


def test_rate_limit_skips_exactly_what_it_should() -> None:
    clock = FakeClock()
    probe = ProbeScorer()
    # 60 per minute = 1 per second, burst 1.
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(
        scorer=probe, max_per_minute=60, clock=clock)])

    @tracescore.agent
    def answer(i: int) -> str:
        return "ok"

    # A span is admitted as it is routed, just after it ended: stats() waits for that, so the
    # fake clock moves only between routings.
    for i in range(5):
        answer(i)  # t=1000: only the first is admitted
    tracescore.stats()
    clock.now += 0.5
    answer(5)  # half a token: skipped
    tracescore.stats()
    clock.now += 0.5
    answer(6)  # one token: admitted
    tracescore.stats()
    clock.now += 10
    answer(7)
    answer(8)  # the bucket holds one token at most: 7 admitted, 8 skipped
    spans = finished(exp)
    assert len(spans) == 9
    assert sorted(c["input"] for c in probe.calls) == [0, 6, 7]  # concurrent: any order
    assert tracescore.stats().skipped_rate_limited == 6


def test_token_and_cost_budgets_skip_and_recover() -> None:
    clock = FakeClock()
    tokens = CostlyScorer(id="tokens")
    cost = CostlyScorer(id="cost")
    _, exp = memory_configure(scoring=[
        tracescore.ScoringRule(scorer=tokens, max_tokens_per_hour=100, clock=clock),
        tracescore.ScoringRule(scorer=cost, max_cost_per_hour=0.005, clock=clock),
    ])

    @tracescore.agent
    def answer(i: int) -> str:
        return "ok"

    for i in range(4):
        answer(i)
        tracescore.force_flush(5000)  # each job's spend is recorded before the next span
        clock.now += 60
    # tokens: 0 -> 70 -> 140 (stop): calls 0, 1. cost: 0.002 -> 0.004 -> 0.006 (stop): 0, 1, 2.
    assert [c["input"] for c in tokens.calls] == [0, 1]
    assert [c["input"] for c in cost.calls] == [0, 1, 2]
    assert tracescore.stats().skipped_budget == 2 + 1
    clock.now += 3600  # the hour rolls over
    answer(9)
    finished(exp)
    assert tokens.calls[-1]["input"] == 9 and cost.calls[-1]["input"] == 9


@pytest.mark.parametrize(
    "kwargs",
    [{"max_per_minute": 0}, {"max_tokens_per_hour": -1}, {"max_cost_per_hour": float("nan")},
     {"span_name": 3}, {"attributes": ["a"]}, {"score_errors": "yes"}],
)
def test_bad_limit_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(tracescore.ConfigurationError):
        tracescore.ScoringRule(scorer=ProbeScorer(), **kwargs)


# -- backpressure ------------------------------------------------------------------------------
def test_overload_stays_within_caps_and_exports_every_span() -> None:
    release = threading.Event()

    class SlowScorer(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            # held until the test releases it (a bound only so that a failed test cannot hang):
            # the 10,000 calls take longer than any short bound on a loaded machine
            await asyncio.get_running_loop().run_in_executor(None, release.wait, 600)
            return await super().arun(**kwargs)

    reader = InMemoryMetricReader()
    inst, exp = memory_configure(
        scoring=[tracescore.ScoringRule(scorer=SlowScorer(id="slow"))],
        limits=tracescore.LimitsOptions(max_queue_size=20, max_held_spans=8, max_concurrency=4,
                                        score_timeout=600),
        output=tracescore.OutputOptions(meter_provider=MeterProvider(metric_readers=[reader])),
    )
    processor = inst.processor

    @tracescore.agent
    def answer(i: int) -> str:
        return "ok"

    try:
        peak_held = peak_pending = 0
        for i in range(10_000):
            answer(i)
            peak_held = max(peak_held, processor.held_spans())
            peak_pending = max(peak_pending, processor.pending_jobs())
        assert processor.held_spans() <= 8 and processor.pending_jobs() <= 20
        assert peak_held <= 8 and peak_pending <= 20
        stats = tracescore.stats()
        assert stats.spans_scored == 8
        assert stats.skipped_held_full == 10_000 - 8
        points = metric_points(reader)
        assert total(points["tracescore.scoring.jobs"], **{"tracescore.outcome": "skipped",
                     "tracescore.skip.reason": "held_spans_full"}) == 10_000 - 8
    finally:
        release.set()
    spans = finished(exp, timeout_millis=20_000)
    assert len(spans) == 10_000
    assert sum(len(eval_events(s)) for s in spans) == 8


# -- metrics and logs --------------------------------------------------------------------------
def test_score_metrics_and_self_metrics() -> None:
    reader = InMemoryMetricReader()
    costly = CostlyScorer(id="costly")
    failing = ProbeScorer(id="failing", fail_with=tracescore.JudgeTimeoutError("slow"))
    empty = ProbeScorer(id="empty")
    _, exp = memory_configure(
        scoring=[tracescore.ScoringRule(scorer=costly, threshold=0.5),
                 tracescore.ScoringRule(scorer=failing),
                 tracescore.ScoringRule(scorer=empty, on="tool")],
        output=tracescore.OutputOptions(meter_provider=MeterProvider(metric_readers=[reader])),
    )

    @tracescore.tool
    def nothing() -> None:
        return None

    @tracescore.agent
    def answer(i: int) -> str:
        nothing()
        return "ok"

    for i in range(3):
        answer(i)
    finished(exp)
    points = metric_points(reader)
    (hist,) = [p for p in points["tracescore.evaluation.score"]
               if p.attributes["gen_ai.evaluation.name"] == "costly"]
    assert hist.count == 3 and hist.sum == pytest.approx(2.25)
    assert hist.attributes["gen_ai.evaluation.score.label"] == "pass"
    jobs = points["tracescore.scoring.jobs"]
    assert total(jobs, **{"gen_ai.evaluation.name": "costly", "tracescore.outcome": "scored"}) == 3
    assert total(jobs, **{"tracescore.outcome": "error", "error.type": "timeout"}) == 3
    assert total(jobs, **{"gen_ai.evaluation.name": "empty",
                          "tracescore.outcome": "not_scorable"}) == 3
    tokens = points["tracescore.judge.token.usage"]
    assert total(tokens, **{"gen_ai.token.type": "input"}) == 180
    assert total(tokens, **{"gen_ai.token.type": "output"}) == 30
    assert total(points["tracescore.judge.cost"]) == pytest.approx(0.006)
    durations = points["tracescore.scoring.duration"]
    assert sum(p.count for p in durations) == 9
    assert "tracescore.scoring.queue.size" in points
    assert "tracescore.spans.held" in points


def test_log_based_events_carry_the_scored_span_ids() -> None:
    logs = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=ProbeScorer())],
                              output=tracescore.OutputOptions(logger_provider=provider))

    @tracescore.agent
    def answer(q: str) -> str:
        return "x" * 40

    answer("q")
    (span,) = finished(exp)
    (record,) = logs.get_finished_logs()
    log = record.log_record
    assert log.event_name == "gen_ai.evaluation.result"
    assert log.trace_id == span.context.trace_id
    assert log.span_id == span.context.span_id
    assert log.attributes["gen_ai.evaluation.name"] == "probe"
    assert log.attributes["gen_ai.evaluation.score.value"] == pytest.approx(0.4)


# -- failing dependencies ----------------------------------------------------------------------
def test_judge_calls_recorded_with_genai_client_metrics(judge_server: JudgeServer) -> None:
    judge_server.route("answer_relevancy_statements", {"statements": ["Paris is the capital."]})
    judge_server.route("answer_relevancy_verdicts", [
        JudgeServer.Reply(status=503, body={"error": {"message": "busy"}}),
        {"results": [{"result": "yes", "reason": "on topic"}]},
    ])
    judge_server.route("answer_relevancy_reason", {"reason": "It answers the question."})
    judge = tracescore.Judge("openai/test-judge", api_base=judge_server.api_base,
                             api_key="sk-test-metrics", max_retries=2, retry_backoff=0.01)
    reader = InMemoryMetricReader()
    _, exp = memory_configure(
        scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(model=judge))],
        output=tracescore.OutputOptions(meter_provider=MeterProvider(metric_readers=[reader])),
    )

    @tracescore.agent
    def answer(q: str) -> str:
        return "Paris is the capital of France."

    started = time.monotonic()
    answer("What is the capital of France?")
    (span,) = finished(exp, timeout_millis=20_000)
    bracket = time.monotonic() - started
    (event,) = eval_events(span)
    assert event["gen_ai.evaluation.score.value"] == 1.0
    points = metric_points(reader)
    durations = points["gen_ai.client.operation.duration"]
    base = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "openai/test-judge",
            # an OpenAI-protocol judge with an api_base takes the direct transport
            "tracescore.judge.transport": judge.transport}
    ok = [p for p in durations if "error.type" not in p.attributes]
    failed = [p for p in durations if "error.type" in p.attributes]
    assert sum(p.count for p in ok) == 3  # statements, verdicts (after the 503), reason
    assert [dict(p.attributes) for p in failed] == [{**base, "error.type": "judge_unavailable"}]
    assert failed[0].count == 1
    assert all({**base, **dict(p.attributes)} == dict(p.attributes) for p in ok)
    # Seconds, not milliseconds: the calls fit inside the wall time that contains them, on a
    # machine of any speed (a fixed bound would be a timing assertion).
    assert all(0 < p.sum <= bracket for p in durations)
    tokens = points["gen_ai.client.token.usage"]
    by_type = {t: sum(p.sum for p in tokens if p.attributes["gen_ai.token.type"] == t)
               for t in ("input", "output")}
    assert by_type["input"] > 0 and by_type["output"] > 0
    # The same tokens the job-level counter saw for the score.
    assert by_type["input"] + by_type["output"] == total(points["tracescore.judge.token.usage"])
    assert "sk-test-metrics" not in repr([dict(p.attributes) for p in durations + tokens])


@pytest.mark.parametrize(("model", "provider"), [
    ("openai/gpt-4o-mini", "openai"), ("anthropic/claude-3-5-haiku-latest", "anthropic"),
    ("bedrock/anthropic.claude-3-haiku", "aws.bedrock"),
    ("vertex_ai/gemini-1.5-pro", "gcp.vertex_ai"),
    ("azure/my-deployment", "azure.ai.openai"), ("gpt-4o-mini", "openai"),
])
def test_judge_provider_name_follows_the_conventions(model: str, provider: str) -> None:
    from tracescore._judge.metrics import provider_name

    assert provider_name(tracescore.Judge(model).model) == provider


def test_jobs_cut_by_shutdown_are_counted_as_dropped() -> None:
    class Hung(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            await asyncio.Event().wait()

    reader = InMemoryMetricReader()
    quick = ProbeScorer(id="quick")
    inst, exp = memory_configure(
        scoring=[tracescore.ScoringRule(scorer=Hung(id="hung")),
                 tracescore.ScoringRule(scorer=quick)],
        limits=tracescore.LimitsOptions(max_concurrency=1),
        output=tracescore.OutputOptions(meter_provider=MeterProvider(metric_readers=[reader])),
    )

    @tracescore.agent
    def answer(i: int) -> str:
        return "ok"

    for i in range(3):
        answer(i)
    tracescore.shutdown(500)
    # One hung job ran and was cancelled; the others waited behind it for the one place and
    # never started (a quick job may have run first: the order of one span's jobs is free).
    assert len(exp.get_finished_spans()) == 3

    # The hung job held the loop past the deadline, so the engine counts the dropped jobs once
    # the loop has stopped them (its on_late_drop), just after shutdown returns: wait for that
    # count (a loaded machine delays it) rather than read the metrics at once.
    def dropped_jobs() -> dict[str, float]:
        points = metric_points(reader).get("tracescore.scoring.jobs", [])
        return {p.attributes["gen_ai.evaluation.name"]: p.value for p in points
                if p.attributes["tracescore.outcome"] == "dropped"}

    def counted() -> bool:  # every scorer's drops recorded (one scorer's may come first)
        got = dropped_jobs()
        return got.get("hung") == 3 and got.get("quick", 0) == 3 - len(quick.calls)

    deadline = time.monotonic() + scaled(5)
    while not counted() and time.monotonic() < deadline:
        time.sleep(0.01)
    dropped = dropped_jobs()
    assert dropped["hung"] == 3
    assert dropped["quick"] == 3 - len(quick.calls)
    assert inst.stats().jobs_dropped == 6 - len(quick.calls)


def test_storm_of_429s(judge_server: JudgeServer) -> None:
    judge_server.route("*", JudgeServer.Reply(status=429, body={"error": {"message": "slow"}}))
    reader = InMemoryMetricReader()
    judge = tracescore.Judge("openai/test-judge", api_base=judge_server.api_base,
                             api_key="sk-test", timeout=5, max_retries=1, retry_backoff=0.01)
    _, exp = memory_configure(
        judge=judge, scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer())],
        output=tracescore.OutputOptions(meter_provider=MeterProvider(metric_readers=[reader])),
    )

    @tracescore.agent
    def answer(i: int) -> str:
        return f"answer {i}"

    assert [answer(i) for i in range(30)] == [f"answer {i}" for i in range(30)]
    spans = finished(exp, timeout_millis=30_000)
    assert len(spans) == 30
    assert all(eval_events(s)[0]["error.type"] == "rate_limited" for s in spans)
    jobs = metric_points(reader)["tracescore.scoring.jobs"]
    assert total(jobs, **{"error.type": "rate_limited"}) == 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_backend_down_then_up(monkeypatch: pytest.MonkeyPatch) -> None:
    receiver = HttpOtlpReceiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    # The receiver's socket is bound but not serving yet: the backend is "down".
    receiver._server.socket.close()
    tracescore.configure(scoring=[tracescore.ScoringRule(scorer=ProbeScorer())])

    @tracescore.agent
    def answer(i: int) -> str:
        return "ok"

    answer(1)
    tracescore.force_flush(1500)  # returns by its deadline (the batch is lost, as OTel does)
    tracescore.shutdown(1500)
    with HttpOtlpReceiver() as up:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", up.endpoint)
        tracescore.configure(scoring=[tracescore.ScoringRule(scorer=ProbeScorer())])
        answer(2)
        assert tracescore.force_flush(5000)
        assert up.received.wait_for(lambda spans: len(spans) == 1)
        assert up.received.spans[0].events[0][0] == "gen_ai.evaluation.result"


EXIT_SCRIPT = """
import os, sys
sys.path.insert(0, {root!r})
import tracescore
from tracescore.scorers import create_answer_relevancy_scorer
judge = tracescore.Judge("openai/test-judge", api_base={api_base!r}, api_key="sk-test",
                         timeout=10, max_retries=0)
tracescore.configure(
    judge=judge, exporter=tracescore.FileSpanExporter({path!r}),
    limits=tracescore.LimitsOptions(flush_timeout=20),
    scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer())],
)

@tracescore.agent(name="exiting")
def answer(q):
    return "Paris is the capital of France."

answer("What is the capital of France?")
# No flush: the exit hook must score and export before the interpreter goes away.
"""


def test_exit_hook_scores_pending_spans_with_a_real_judge(
    judge_server: JudgeServer, tmp_path: Any
) -> None:
    import json
    import os
    import subprocess
    import sys

    judge_server.delay = 0.3
    judge_server.route("answer_relevancy_statements", {"statements": ["Paris is the capital."]})
    judge_server.route("answer_relevancy_verdicts",
                       {"results": [{"result": "yes", "reason": "direct"}]})
    judge_server.route("answer_relevancy_reason", {"reason": "It answers the question."})
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = tmp_path / "spans.jsonl"
    script = tmp_path / "exit.py"
    script.write_text(EXIT_SCRIPT.format(root=root, api_base=judge_server.api_base,
                                         path=str(out)))
    env = dict(os.environ, LITELLM_OFFLINE_MODE="true")
    subprocess.run([sys.executable, str(script)], check=True, env=env, timeout=120)
    spans = [s for line in out.read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"]
             for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert [s["name"] for s in spans] == ["invoke_agent exiting"]
    (event,) = spans[0]["events"]
    attrs = {a["key"]: a["value"] for a in event["attributes"]}
    assert attrs["gen_ai.evaluation.score.value"] == {"doubleValue": 1.0}
    assert "error.type" not in attrs


def test_auth_errors_are_not_retried(judge_server: JudgeServer) -> None:
    judge_server.route("answer_relevancy_statements",
                       JudgeServer.Reply(status=401, body={"error": {"message": "bad key"}}))
    judge = tracescore.Judge("openai/test-judge", api_base=judge_server.api_base,
                             api_key="sk-wrong", timeout=5, max_retries=3, retry_backoff=0.01)
    with pytest.raises(tracescore.JudgeError) as info:
        create_answer_relevancy_scorer(model=judge).run(input="q?", output="An answer.")
    assert info.value.error_type == "judge_error"
    assert judge_server.count("answer_relevancy_statements") == 1


LATE_LOGGER_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from opentelemetry import _logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
import tracescore
from tests.helpers import ProbeScorer
tracescore.configure(exporter=False, scoring=[tracescore.ScoringRule(scorer=ProbeScorer())])

@tracescore.agent
def answer(q):
    return "x" * 40

answer("before")
tracescore.force_flush(5000)
logs = InMemoryLogRecordExporter()
provider = LoggerProvider()
provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
_logs.set_logger_provider(provider)
before = len(logs.get_finished_logs())
answer("after")
tracescore.force_flush(5000)
print(before, [r.log_record.event_name for r in logs.get_finished_logs()])
"""


def test_log_events_go_to_a_global_logger_provider_set_later(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = tmp_path / "late.py"
    script.write_text(LATE_LOGGER_SCRIPT.format(root=root))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         check=True, timeout=60).stdout.strip()
    assert out == "0 ['gen_ai.evaluation.result']"
