"""The surfaces of the last round, attacked: ``tracescore view`` and ``rescore`` given hostile
files, the first-run console given terminal escapes, usage and cost given hostile responses and
price files, calibrate given hostile labels.

Each case failed before its fix (docs/security.md lists them, with what held). The commands run
in process through ``tracescore.cli.main``; instrumentation runs through the public decorators
with an in-memory exporter or a real OTLP receiver on loopback.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tracescore
from tracescore.cli import main

ROOT = Path(__file__).resolve().parent.parent
TRACE = "0af7651916cd43dd8448eb211c80319c"
KEY = "sk-proj-AAAAAb3Cd5Ef7Gh9Jk2Lm4"


def _kv(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": value}


def _span(span_id: str = "b7ad6b7169203331", name: str = "invoke_agent a",
          **fields: Any) -> dict[str, Any]:
    span = {"traceId": TRACE, "spanId": span_id, "name": name,
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000001000000000", "attributes": [], "events": []}
    span.update(fields)
    return span


def _line(*spans: dict[str, Any]) -> str:
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                          "scopeSpans": [{"spans": list(spans)}]}]})


def _score_event(**values: dict[str, Any]) -> dict[str, Any]:
    attrs = [_kv("gen_ai.evaluation.name", {"stringValue": "relevancy"})]
    attrs += [_kv(k, v) for k, v in values.items()]
    return {"name": "gen_ai.evaluation.result", "timeUnixNano": "1", "attributes": attrs}


def _view(tmp_path: Path, capsys: pytest.CaptureFixture[str], *lines: str) -> tuple[int, str,
                                                                                        str]:
    src = tmp_path / "spans.jsonl"
    src.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    out = tmp_path / "view.html"
    code = main(["view", str(src), "-o", str(out)])
    captured = capsys.readouterr()
    page = out.read_text(encoding="utf-8") if out.exists() else ""
    return code, captured.out + captured.err, page


# -- tracescore view ------------------------------------------------------------------------------

HOSTILE_SHAPES = {
    "a time past the platform's range": _line(_span(startTimeUnixNano="9" * 30,
                                                    endTimeUnixNano="9" * 31)),
    "a time too large for a float": _line(_span(startTimeUnixNano="1" + "0" * 400,
                                                endTimeUnixNano="1" + "0" * 401)),
    "a score too large for a float": _line(_span(events=[_score_event(**{
        "gen_ai.evaluation.score.value": {"intValue": "1" + "0" * 400}})])),
    "a kvlist key that is a list": _line(_span(attributes=[_kv("a", {"kvlistValue": {
        "values": [{"key": [1], "value": {"stringValue": "x"}}]}})])),
    "an arrayValue that is a list": _line(_span(attributes=[_kv("a", {"arrayValue": [1, 2]})])),
    "a kvlistValue that is a string": _line(_span(attributes=[_kv("a", {"kvlistValue": "z"})])),
    "a resource that is a list": json.dumps({"resourceSpans": [{"resource": [1]}]}),
    "resourceSpans a number": json.dumps({"resourceSpans": 5}),
    "scopeSpans a number": json.dumps({"resourceSpans": [{"scopeSpans": 5}]}),
    "spans a number": json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": 5}]}]}),
    "events a number": _line(_span(events=5)),
}


@pytest.mark.parametrize("case", HOSTILE_SHAPES)
def test_view_reads_hostile_shapes_without_a_traceback(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: OverflowError, TypeError or AttributeError tracebacks (exit 1), no page.
    code, said, page = _view(tmp_path, capsys, HOSTILE_SHAPES[case],
                             _line(_span("c7ad6b7169203331", "invoke_agent good",
                                        traceId="1af7651916cd43dd8448eb211c80319c")))
    assert code == 0, said
    assert "Traceback" not in said
    assert "invoke_agent good" in page


def test_view_shows_spans_whose_parents_form_a_cycle(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: "1 traces, 0 spans": spans whose parent chain never reaches a root vanished.
    code, said, page = _view(tmp_path, capsys, _line(
        _span("1111111111111111", "invoke_agent first", parentSpanId="2222222222222222"),
        _span("2222222222222222", "invoke_agent second", parentSpanId="1111111111111111"),
        _span("3333333333333333", "invoke_agent itself", parentSpanId="3333333333333333")))
    assert code == 0, said
    assert "3 spans" in said
    for name in ("invoke_agent first", "invoke_agent second", "invoke_agent itself"):
        assert f'data-name="{name}"' in page


def test_view_bounds_every_text_it_keeps(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    # Before: span names, status messages, attribute and event names, scorer ids and labels
    # were kept whole (a 1 MB name twice on the page), and every score of a span was kept.
    big = "N" * 1_000_000
    events = [_score_event(**{"gen_ai.evaluation.score.value": {"doubleValue": 0.5}})
              for _ in range(5_000)]
    events.append({"name": big, "attributes": [_kv(big, {"stringValue": "v"})]})
    code, said, page = _view(tmp_path, capsys, _line(_span(
        name=big, status={"code": 2, "message": big},
        attributes=[_kv(big, {"stringValue": "v"}), _kv("tracescore.span.kind",
                                                        {"stringValue": big})],
        events=events)))
    assert code == 0, said
    assert len(page) < 2_000_000
    assert big[:5_000] not in page
    assert page.count('class="score ') <= 1_000
    assert "5000 results" in page or ">5000<" in page  # every score is still counted


def test_view_mean_of_huge_scores_is_not_infinite(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    event = _score_event(**{"gen_ai.evaluation.score.value": {"doubleValue": 1.7e308}})
    code, said, page = _view(tmp_path, capsys, _line(_span(events=[event, event])))
    assert code == 0, said
    mean = re.search(r'data-field="mean">([^<]*)<', page)
    assert mean is not None and "inf" not in mean.group(1).lower()


# -- tracescore rescore ---------------------------------------------------------------------------

SIDES = ["--scorer", "completeness", "--scorer", "keyword-coverage"]


@pytest.fixture
def stored_traces(tmp_path: Path) -> tuple[Path, str, str]:
    """A span file of three agent turns, the header line rescore writes for SIDES and the
    first trace's id."""
    path = tmp_path / "traces.jsonl"
    code = subprocess.run([sys.executable, "-c", """
import tracescore
tracescore.configure(output=tracescore.OutputOptions(console=False), service_name="rs")
@tracescore.agent
def answer(q):
    return "Paris is the capital of France"
for _ in range(3):
    answer("What is the capital of France?")
tracescore.shutdown(5000)
"""], env={**os.environ, "TRACESCORE_EXPORT_FILE": str(path), "PYTHONPATH": str(ROOT),
           "LITELLM_OFFLINE_MODE": "true"}, cwd=tmp_path, timeout=120).returncode
    assert code == 0
    state = tmp_path / "first.state"
    assert main(["rescore", str(path), *SIDES, "--state", str(state), "--no-progress"]) == 0
    header, first, *_ = state.read_text(encoding="utf-8").splitlines()
    return path, header, json.loads(first)["trace"]


def _outcome(status: str = "scored", score: Any = 0.5, **more: Any) -> dict[str, Any]:
    return {"status": status, "score": score, "label": None, "error_type": None,
            "explanation": "", "evaluator_version": None, **more}


def _item(*outcomes: Any, span_name: str = "invoke_agent answer",
          trace_id: str = TRACE) -> dict[str, Any]:
    return {"trace_id": trace_id, "span_id": "b7ad6b7169203331", "span_name": span_name,
            "outcomes": list(outcomes)}


HOSTILE_STATES = {
    "a turn that is a number": [1],
    "an outcome that is a number": [_item(1, _outcome())],
    "a turn without fields": [{}],
    "a score that is a string": [_item(_outcome(score="high"), _outcome())],
    "an unknown status": [_item(_outcome(status="weird"), _outcome())],
    "one outcome for two sides": [_item(_outcome())],
    "a score that is not finite": [_item(_outcome(score=math.nan), _outcome(score=math.inf))],
    "a score past a float's range": [_item(_outcome(score=10 ** 400), _outcome())],
}


@pytest.mark.parametrize("case", HOSTILE_STATES)
def test_rescore_refuses_a_corrupt_state_file_in_one_line(
        case: str, stored_traces: tuple[Path, str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Before: AttributeError, KeyError, TypeError or IndexError tracebacks, or a report whose
    # means read nan and inf.
    traces, header, trace_id = stored_traces
    state = tmp_path / "planted.state"
    record = {"trace": trace_id, "items": HOSTILE_STATES[case]}
    state.write_text(f"{header}\n{json.dumps(record)}\n", encoding="utf-8")
    capsys.readouterr()
    code = main(["rescore", str(traces), *SIDES, "--state", str(state), "--no-progress"])
    said = capsys.readouterr()
    assert code == 2, said
    assert "Traceback" not in said.err
    (line,) = said.err.strip().splitlines()
    assert line.startswith(f"tracescore rescore: error: state file {state} line 2: not a "
                           "rescore record")


def test_rescore_reads_a_planted_state_file_redacted_and_prints_no_escape(
        stored_traces: tuple[Path, str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    traces, header, trace_id = stored_traces
    state = tmp_path / "planted.state"
    hostile = f"\x1b]52;c;ZXZpbA==\x07\x1b[2J {KEY}"
    record = {"trace": trace_id, "items": [_item(
        _outcome(score=0.1, explanation=f"key {KEY}", label=KEY),
        _outcome(score=0.9), span_name=hostile, trace_id=trace_id)]}
    state.write_text(f"{header}\n{json.dumps(record)}\n", encoding="utf-8")
    report = tmp_path / "report.json"
    capsys.readouterr()
    code = main(["rescore", str(traces), *SIDES, "--state", str(state), "--report",
                 str(report), "--no-progress"])
    said = capsys.readouterr()
    assert code == 0, said
    assert "\x1b" not in said.out + said.err
    assert "\\x1b]52;c;ZXZpbA==\\x07" in said.out  # shown, not run
    assert KEY not in said.out + report.read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", ["a device", "a line with no end"])
def test_rescore_refuses_a_state_file_it_cannot_read_in_bounded_memory(
        kind: str, stored_traces: tuple[Path, str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Before: a MemoryError traceback after filling the memory (the whole "line" was read).
    traces, header, trace_id = stored_traces
    if kind == "a device":
        state = Path("/dev/zero")
    else:
        state = tmp_path / "sparse.state"
        state.write_text(header + "\n", encoding="utf-8")
        os.truncate(state, 1 << 30)  # 1 GiB of NUL bytes, no newline, no disk used
    capsys.readouterr()
    code = main(["rescore", str(traces), *SIDES, "--state", str(state), "--no-progress"])
    said = capsys.readouterr()
    assert code == 2, said
    (line,) = said.err.strip().splitlines()
    assert line.startswith(f"tracescore rescore: error: state file {state}")


# -- the first-run console ------------------------------------------------------------------------

def test_the_exit_summary_shows_escape_sequences_without_running_them(tmp_path: Path) -> None:
    # Before: the first error's OSC 52 (write the clipboard) and colour sequences, taken from
    # the application's output, reached the terminal as they were.
    script = f"""
import tracescore
from tracescore.scorers import create_scorer

def judge_it(run):
    raise RuntimeError("bad output: " + run.output_text)

tracescore.configure(service_name="console", scoring=[tracescore.ScoringRule(
    scorer=create_scorer(id="strict", generate_score=judge_it), on="agent")])

@tracescore.agent
def answer(question):
    return "\\x1b]52;c;ZXZpbA==\\x07\\x1b[31mred\\u202e password=Hunter2Secret! {KEY}"

answer("q")
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACESCORE_"))}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**env, "PYTHONPATH": str(ROOT),
                                                       "LITELLM_OFFLINE_MODE": "true"})
    assert done.returncode == 0, done.stderr
    assert "first error: " in done.stderr
    assert "\x1b" not in done.stderr and "\u202e" not in done.stderr
    assert "\\x1b]52;c;ZXZpbA==\\x07\\x1b[31mred\\u202e" in done.stderr
    assert "Hunter2Secret" not in done.stderr and KEY not in done.stderr


# -- usage and cost -------------------------------------------------------------------------------

@pytest.fixture
def recorded() -> Any:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracescore.configure(exporter=spans, output=tracescore.OutputOptions(
        console=False, meter_provider=MeterProvider(metric_readers=[reader])))
    yield spans, reader
    tracescore.shutdown(3000)


def _token_values(reader: Any) -> list[float]:
    data = reader.get_metrics_data()
    return [point.sum for rm in (data.resource_metrics if data else ()) for sm in rm.scope_metrics
            for metric in sm.metrics if metric.name == "gen_ai.client.token.usage"
            for point in metric.data.data_points]


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": 10 ** 30, "completion_tokens": 5},
    {"prompt_tokens": 1e300, "completion_tokens": 5},
    {"prompt_tokens": -1000, "completion_tokens": 5},
])
def test_a_token_count_no_call_can_have_is_not_reported(usage: dict[str, Any],
                                                        recorded: Any) -> None:
    # Before: 10**30 tokens went on the span (OTLP's encoder then dropped the attribute with an
    # error) and into the token histogram, whose cumulative sum no later export could encode:
    # every token metric of the process was lost from then on; -1000 went out as it was; the
    # cost was priced from them (1.5e+23 USD).
    spans, reader = recorded

    @tracescore.llm(name="hostile")
    def call(messages: list[Any]) -> dict[str, Any]:
        return {"model": "gpt-4o-mini", "id": "resp-1", "usage": usage}

    call([{"role": "user", "content": "hi"}])
    assert tracescore.force_flush(10_000)
    (span,) = spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert "gen_ai.usage.input_tokens" not in attributes
    assert "llm.token_count.prompt" not in attributes
    assert "gen_ai.usage.cost" not in attributes
    assert attributes["gen_ai.usage.output_tokens"] == 5
    assert all(0 <= value < 2 ** 53 for value in _token_values(reader))


def test_texts_of_a_response_are_bounded(recorded: Any) -> None:
    # Before: a 2-million-character model name and response id went on the span whole.
    spans, _ = recorded

    @tracescore.llm(name="long")
    def call(messages: list[Any]) -> dict[str, Any]:
        return {"model": "m" * 2_000_000, "id": "i" * 2_000_000,
                "choices": [{"finish_reason": "stop"}] * 100_000,
                "usage": {"prompt_tokens": 1, "completion_tokens": 1}}

    call([])
    assert tracescore.force_flush(10_000)
    (span,) = spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert len(attributes["gen_ai.response.model"]) <= 300
    assert len(attributes["gen_ai.response.id"]) <= 300
    assert len(attributes["gen_ai.response.finish_reasons"]) <= 128


def test_a_response_whose_property_raises_base_exception_still_ends_the_span(
        recorded: Any) -> None:
    # Before: the span never ended and stayed the current span: every later span of the
    # thread became its child.
    spans, _ = recorded

    class Interrupting:
        @property
        def model(self) -> str:
            raise KeyboardInterrupt

    @tracescore.llm(name="interrupted")
    def call(messages: list[Any]) -> Any:
        return Interrupting()

    with pytest.raises(KeyboardInterrupt):
        call([])
    with tracescore.span("after"):
        pass
    assert tracescore.force_flush(10_000)
    by_name = {s.name: s for s in spans.get_finished_spans()}
    assert "chat interrupted" in by_name
    assert by_name["after"].parent is None


HOSTILE_PRICE_FILES = {
    "an infinite token limit": '{"models": {"m": {"input": 1, "output": 1, '
                               '"max_input_tokens": 1e400}}}',
    "a NaN price": '{"models": {"m": {"input": NaN, "output": Infinity}}}',
    "JSON nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
}


@pytest.mark.parametrize("case", [*HOSTILE_PRICE_FILES, "a named pipe", "a device"])
def test_a_hostile_price_file_from_the_environment_costs_its_prices_only(
        case: str, tmp_path: Path) -> None:
    # Before: configure() raised OverflowError or RecursionError, hung on a named pipe, read
    # /dev/zero until memory ran out, and priced calls at NaN.
    if case == "a named pipe":
        path = tmp_path / "prices.json"
        os.mkfifo(path)
    elif case == "a device":
        path = Path("/dev/zero")
    else:
        path = tmp_path / "prices.json"
        path.write_text(HOSTILE_PRICE_FILES[case], encoding="utf-8")
    script = """
import tracescore
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
spans = InMemorySpanExporter()
tracescore.configure(exporter=spans, output=tracescore.OutputOptions(console=False))

@tracescore.llm(name="priced")
def call(messages):
    return {"model": "m", "usage": {"prompt_tokens": 10, "completion_tokens": 10}}

call([])
tracescore.force_flush(5000)
(span,) = spans.get_finished_spans()
print(sorted(k for k in span.attributes if "cost" in k))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACESCORE_"))}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
        env={**env, "PYTHONPATH": str(ROOT), "LITELLM_OFFLINE_MODE": "true",
             "TRACESCORE_PRICE_FILE": str(path)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"  # "m" has no price: the user's file was not used
    assert "could not be read" in done.stderr or "not a regular file" in done.stderr \
        or "takes a number >= 0 (finite)" in done.stderr
    assert "Traceback" not in done.stderr


# -- calibrate ------------------------------------------------------------------------------------

def _labelled(tmp_path: Path, first_label: str) -> Path:
    data = tmp_path / "labelled.jsonl"
    data.write_text(
        f'{{"input": "capital France", "output": "Paris capital France", "label": {first_label}}}\n'
        '{"input": "capital Spain", "output": "no idea", "label": "fail"}\n', encoding="utf-8")
    return data


def test_calibrate_refuses_a_label_past_a_float_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: an OverflowError traceback.
    data = _labelled(tmp_path, "1" + "0" * 400)
    code = main(["calibrate", str(data), "--scorer", "keyword-coverage", "--no-progress"])
    said = capsys.readouterr()
    assert code == 2
    (line,) = said.err.strip().splitlines()
    assert line.startswith(f"tracescore calibrate: error: {data} line 1: the label '1000")
    assert line.endswith("is not a finite number")


@pytest.mark.parametrize("option", ["--min-accuracy", "--min-kappa", "--label-threshold"])
def test_calibrate_refuses_a_bound_that_is_not_a_number(
        option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: --min-accuracy nan was a gate no run could fail (every comparison with NaN is
    # False): exit 0 whatever the accuracy.
    data = _labelled(tmp_path, '"pass"')
    with pytest.raises(SystemExit) as exit_:
        main(["calibrate", str(data), "--scorer", "keyword-coverage", "--no-progress",
              option, "nan"])
    assert exit_.value.code == 2
    assert "takes a finite number" in capsys.readouterr().err
    with pytest.raises(tracescore.ConfigurationError, match="must be a finite number"):
        tracescore.calibrate(str(data), "keyword-coverage",
                             **{option[2:].replace("-", "_"): math.nan})


# -- leftovers of the last round: control characters, tracestate, long attribute names ----------

@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Any:
    from tests.otlp_receiver import HttpOtlpReceiver

    with HttpOtlpReceiver() as rec:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rec.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("TRACESCORE_LOG_RECORDS", "false")
        yield rec.received
        tracescore.shutdown(3000)


def test_control_characters_tracestate_and_long_names_leave_redacted(receiver: Any) -> None:
    # Before: a NUL or a terminal escape inside a key or a secret name let it out in clear, a
    # tracestate value went out as it was, and a 1,000,000-character attribute name went out
    # whole.
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import (
        NonRecordingSpan,
        SpanContext,
        TraceFlags,
        TraceState,
        set_span_in_context,
    )

    provider = TracerProvider()
    tracescore.configure(service_name="leftovers", tracer_provider=provider)
    tracer = provider.get_tracer("acme.jobs")
    secrets = [f"{KEY[:8]}\x00{KEY[8:]}", f"{KEY[:8]}\x1b[0m{KEY[8:]}", "Hx7Vw2Qp9Lz4Secret"]
    parent = set_span_in_context(NonRecordingSpan(SpanContext(
        0xABC, 0xDEF, True, TraceFlags(TraceFlags.SAMPLED),
        TraceState([("vendor", KEY), ("acme", "plain-value")]))))
    with tracer.start_as_current_span("leftovers", context=parent) as span:
        span.set_attribute("note.nul", secrets[0])
        span.set_attribute("note.escape", f"key {secrets[1]} end")
        span.set_attribute("pass\x00word", secrets[2])
        span.set_attribute("N" * 1_000_000, "kept")
        span.set_attribute("plain \x1b[31mred\x1b[0m", "kept too")
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: len(spans) >= 1)
    raw = receiver.raw_bytes()
    assert not [s for s in [KEY, KEY[8:], *secrets] if s.encode() in raw]
    (exported,) = receiver.by_name("leftovers")
    attributes = exported.attributes
    assert attributes["note.nul"] == "[REDACTED]"
    assert attributes["note.escape"] == "key [REDACTED] end"
    long_name = "N" * (256 - len("...[truncated 999744 chars]")) + "...[truncated 999744 chars]"
    assert attributes[long_name] == "kept"
    assert attributes["plain \x1b[31mred\x1b[0m"] == "kept too"  # nothing to hide: as it was
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    request = trace_service_pb2.ExportTraceServiceRequest()
    request.ParseFromString(receiver.requests[-1])
    (otlp_span,) = [s for rs in request.resource_spans for ss in rs.scope_spans
                    for s in ss.spans if s.name == "leftovers"]
    assert otlp_span.trace_state == "vendor=[REDACTED],acme=plain-value"
