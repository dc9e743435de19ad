"""The public testing kit, ``tracescore.testing``: exporter, scripted judge, ids, fixtures."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
import tracescore.testing
from tracescore.scorers import create_answer_relevancy_scorer
from tracescore.testing import (
    SCRIPTED_JUDGE_API_KEY,
    CaptureScores,
    InMemoryScoreExporter,
    Reply,
    ScriptedJudge,
    SequentialIdGenerator,
    evaluation_events,
    make_judge,
    schema_name_of,
)

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."


@tracescore.agent
def answer(question: str) -> str:
    return ANSWER


@tracescore.tool
def lookup(city: str) -> str:
    return "capital"


@tracescore.agent(name="geo")
def geo(question: str) -> str:
    lookup("Paris")
    return ANSWER


def script_relevant(judge: ScriptedJudge) -> None:
    judge.route("answer_relevancy_statements", {"statements": [ANSWER]})
    judge.route("answer_relevancy_verdicts", {"results": [{"result": "yes", "reason": "on topic"}]})
    judge.route("answer_relevancy_reason", {"reason": "Direct answer."})


def relevancy_rule() -> tracescore.ScoringRule:
    return tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent")


def post(judge: ScriptedJudge, body: Any, path: str = "/v1/chat/completions") -> tuple[int, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{judge.port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer k"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def ask(schema: str | None, text: str = "hello") -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": text}]}
    if schema is not None:
        body["response_format"] = {
            "type": "json_schema", "json_schema": {"name": schema, "schema": {}}
        }
    return body


def content_of(completion: dict[str, Any]) -> Any:
    return json.loads(completion["choices"][0]["message"]["content"])


# -- the whole path: decorated agent -> scoring -> scripted judge -> events ----------------------


def test_capscore_scores_a_decorated_agent_through_the_scripted_judge(capscore: Any) -> None:
    script_relevant(capscore.judge)
    capscore.configure(scoring=[relevancy_rule()])

    assert answer(QUESTION) == ANSWER

    span = capscore.span("invoke_agent answer")
    (event,) = capscore.evaluation_events(span)
    assert event.pop("gen_ai.evaluation.name") == "answer-relevancy"
    assert event.pop("gen_ai.evaluation.score.value") == 1.0
    assert event.pop("gen_ai.evaluation.explanation") == "Direct answer."
    assert event.pop("tracescore.judge.model") == "openai/test-judge"
    assert event.pop("tracescore.sample_rate") == 1.0
    assert len(event.pop("tracescore.evaluator.version")) == 12  # issue 12: provenance
    assert event == {}
    assert capscore.scores() == {"answer-relevancy": [1.0]}
    assert capscore.judge.schema_names == [
        "answer_relevancy_statements", "answer_relevancy_verdicts", "answer_relevancy_reason"
    ]
    # The prompts the scorer sent are there to assert on; the key only in the auth header.
    assert ANSWER in capscore.judge.prompts[0]
    assert QUESTION in capscore.judge.prompts[1]
    assert all(
        h["authorization"] == f"Bearer {SCRIPTED_JUDGE_API_KEY}" for h in capscore.judge.headers
    )
    assert all(SCRIPTED_JUDGE_API_KEY not in str(d) for d in capscore.spans_as_dicts())


def agent_span(name: str, trace: int, span: int, ticks: tuple[int, int, int]) -> dict[str, Any]:
    start, end, scored = (t * 1_000_000_000 for t in ticks)
    return {
        "name": f"invoke_agent {name}",
        "trace_id": f"{trace:032x}",
        "span_id": f"{span:016x}",
        "parent_span_id": None,
        "kind": "INTERNAL",
        "start_time": start,
        "end_time": end,
        "status": {"code": "UNSET", "description": None},
        "attributes": {
            "gen_ai.agent.name": name,
            "gen_ai.operation.name": "invoke_agent",
            "input.mime_type": "application/json",
            "input.value": json.dumps({"question": QUESTION}),
            "openinference.span.kind": "AGENT",
            "output.mime_type": "application/json",
            "output.value": json.dumps(ANSWER),
            "tracescore.span.kind": "agent",
            "tracescore.score.answer_relevancy": 1.0,  # searchable (issue 12)
        },
        "events": [
            {
                "name": "gen_ai.evaluation.result",
                "timestamp": scored,
                "attributes": {
                    "gen_ai.evaluation.name": "answer-relevancy",
                    "gen_ai.evaluation.score.value": 1.0,
                    "gen_ai.evaluation.explanation": "Direct answer.",
                    "tracescore.judge.model": "openai/test-judge",
                    "tracescore.sample_rate": 1.0,
                    "tracescore.evaluator.version": EVALUATOR_VERSION,
                },
            }
        ],
        "links": [],
    }


# The evaluator version of the default answer-relevancy scorer: a fixed value, so a change to
# its prompts or options shows up here as a new version (issue 12: provenance).
EVALUATOR_VERSION = create_answer_relevancy_scorer().fingerprint


def test_whole_spans_compare_with_sequential_ids_and_ticks(capscore: Any) -> None:
    script_relevant(capscore.judge)
    capscore.configure(scoring=[relevancy_rule()])

    geo(QUESTION)
    # Scores are judged in the background: flushing here puts the first score's time before
    # the second call, so the tick order does not depend on the judge's speed.
    capscore.flush()
    answer(QUESTION)

    assert capscore.spans_as_dicts() == [
        agent_span("geo", trace=1, span=1, ticks=(1, 4, 5)),
        {
            "name": "execute_tool lookup",
            "trace_id": f"{1:032x}",
            "span_id": f"{2:016x}",
            "parent_span_id": f"{1:016x}",
            "kind": "INTERNAL",
            "start_time": 2_000_000_000,
            "end_time": 3_000_000_000,
            "status": {"code": "UNSET", "description": None},
            "attributes": {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                "gen_ai.tool.call.result": '"capital"',
                "gen_ai.tool.name": "lookup",
                "input.mime_type": "application/json",
                "input.value": '{"city": "Paris"}',
                "openinference.span.kind": "TOOL",
                "output.mime_type": "application/json",
                "output.value": '"capital"',
                "tool.name": "lookup",
                "tracescore.span.kind": "tool",
            },
            "events": [],
            "links": [],
        },
        agent_span("answer", trace=2, span=3, ticks=(6, 7, 8)),
    ]


def test_capscore_configure_keeps_the_exporter_across_configurations(capscore: Any) -> None:
    answer(QUESTION)
    capscore.configure(capture_content=False)
    answer(QUESTION)

    first, second = capscore.spans()
    assert "input.value" in first.attributes and "input.value" not in second.attributes
    assert capscore.scores() == {}
    with pytest.raises(tracescore.ConfigurationError, match="exporter"):
        capscore.configure(exporter=InMemorySpanExporter())


def test_capture_scores_without_pytest_owns_its_judge() -> None:
    with CaptureScores() as capture:
        script_relevant(capture.judge)
        capture.configure(scoring=[relevancy_rule()])
        answer(QUESTION)
        assert capture.scores() == {"answer-relevancy": [1.0]}
        judge = capture.judge
    with pytest.raises(OSError):
        post(judge, ask("answer_relevancy_statements"))


# -- InMemoryScoreExporter --------------------------------------------------------------------


def scored_spans(exporter: InMemoryScoreExporter) -> TracerProvider:
    provider = TracerProvider(id_generator=SequentialIdGenerator(), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("a") as span:
        span.add_event("gen_ai.evaluation.result",
                       {"gen_ai.evaluation.name": "bias", "gen_ai.evaluation.score.value": 0.5})
        span.add_event("other", {"x": 1})
        span.add_event("gen_ai.evaluation.result", {
            "gen_ai.evaluation.name": "toxicity", "gen_ai.evaluation.score.label": "not_scorable"
        })
    with tracer.start_as_current_span("b", attributes={"tags": ("x", "y")}) as span:
        span.add_event("gen_ai.evaluation.result",
                       {"gen_ai.evaluation.name": "bias", "gen_ai.evaluation.score.value": 1})
    return provider


def test_exporter_reads_scores_and_events() -> None:
    exporter = InMemoryScoreExporter()
    scored_spans(exporter)

    a = exporter.span("a")
    assert evaluation_events(a) == exporter.evaluation_events(a) == [
        {"gen_ai.evaluation.name": "bias", "gen_ai.evaluation.score.value": 0.5},
        {"gen_ai.evaluation.name": "toxicity", "gen_ai.evaluation.score.label": "not_scorable"},
    ]
    assert len(exporter.evaluation_events()) == 3
    assert exporter.scores(a) == {"bias": [0.5], "toxicity": [None]}
    assert exporter.scores() == {"bias": [0.5, 1.0], "toxicity": [None]}
    with pytest.raises(AssertionError, match=re.escape("finished spans: ['a', 'b']")):
        exporter.span("c")


def test_exporter_dicts_real_or_ticked_times() -> None:
    exporter = InMemoryScoreExporter()
    scored_spans(exporter)

    real = exporter.spans_as_dicts()
    a, b = exporter.spans_as_dicts(deterministic_times=True, include_resource=True)
    assert real[0]["start_time"] == exporter.span("a").start_time
    assert [a["start_time"], *(e["timestamp"] for e in a["events"])][:2] == [10**9, 2 * 10**9]
    assert a["start_time"] < a["end_time"] < b["start_time"] < b["end_time"]
    assert b["attributes"] == {"tags": ["x", "y"]}
    assert b["trace_id"] == "00000000000000000000000000000002"
    assert a["resource"]["telemetry.sdk.language"] == "python"
    assert "resource" not in real[0]


def test_exporter_behaves_as_otel_in_memory_exporter() -> None:
    exporter = InMemoryScoreExporter()
    assert isinstance(exporter, InMemorySpanExporter)
    provider = scored_spans(exporter)
    assert len(exporter.get_finished_spans()) == 2
    exporter.clear()
    assert exporter.get_finished_spans() == ()
    exporter.shutdown()
    assert exporter.export([]) is SpanExportResult.FAILURE
    provider.shutdown()


# -- SequentialIdGenerator --------------------------------------------------------------------


def test_sequential_ids_count_from_one_and_reset() -> None:
    ids = SequentialIdGenerator()
    assert [ids.generate_trace_id(), ids.generate_trace_id()] == [1, 2]
    assert [ids.generate_span_id(), ids.generate_span_id(), ids.generate_span_id()] == [1, 2, 3]
    assert ids.is_trace_id_random() is False
    ids.reset()
    assert (ids.generate_trace_id(), ids.generate_span_id()) == (1, 1)


def test_sequential_trace_ids_still_sample_a_fraction(capscore: Any) -> None:
    script_relevant(capscore.judge)
    capscore.configure(scoring=[tracescore.ScoringRule(
        scorer=create_answer_relevancy_scorer(), on="agent", sample_rate=0.5)])
    for _ in range(20):
        answer(QUESTION)

    # sampling hashes the trace id, so 1..20 is not "all in" or "all out"
    assert 0 < len(capscore.scores()["answer-relevancy"]) < 20


# -- ScriptedJudge ----------------------------------------------------------------------------


def test_scripted_judge_speaks_chat_completions(scripted_judge: ScriptedJudge) -> None:
    scripted_judge.route("s", {"ok": True})
    status, completion = post(scripted_judge, ask("s", "x" * 40), "/chat/completions")

    assert status == 200
    assert completion["object"] == "chat.completion"
    assert completion["choices"][0]["message"]["role"] == "assistant"
    assert content_of(completion) == {"ok": True}
    assert completion["usage"]["prompt_tokens"] == 10
    assert post(scripted_judge, ask("s"), "/v1/embeddings")[0] == 404


def test_scripted_judge_routes_by_schema_then_catch_all(scripted_judge: ScriptedJudge) -> None:
    scripted_judge.route("first", [{"n": 1}, {"n": 2}])
    scripted_judge.route("*", lambda body: {"echo": body["messages"][0]["content"]})

    answers = [content_of(post(scripted_judge, ask(n, "hi"))[1]) for n in ("first",) * 3]
    assert answers == [{"n": 1}, {"n": 2}, {"n": 2}]  # the last reply repeats
    assert content_of(post(scripted_judge, ask("other", "hi"))[1]) == {"echo": "hi"}
    assert scripted_judge.schema_names == ["first", "first", "first", "other"]
    assert scripted_judge.count("first") == 3


def test_scripted_judge_prompt_routes_come_first(scripted_judge: ScriptedJudge) -> None:
    scripted_judge.route("s", {"by": "schema"})
    scripted_judge.route_prompt("Peru", {"by": "prompt"})
    scripted_judge.route_prompt("Chile", {"by": "chile in t"}, schema_name="t")

    assert content_of(post(scripted_judge, ask("s", "capital of Peru?"))[1]) == {"by": "prompt"}
    assert content_of(post(scripted_judge, ask("s", "capital of Chile?"))[1]) == {"by": "schema"}
    assert content_of(post(scripted_judge, ask("t", "Chile"))[1]) == {"by": "chile in t"}
    assert scripted_judge.prompts == ["capital of Peru?", "capital of Chile?", "Chile"]


def test_scripted_judge_errors_and_unscripted_requests(scripted_judge: ScriptedJudge) -> None:
    scripted_judge.route("s", [Reply(status=429, headers={"retry-after": "0"}), "not json"])

    status, body = post(scripted_judge, ask("s"))
    assert (status, body["error"]["type"]) == (429, "server_error")
    _, completion = post(scripted_judge, ask("s"))
    assert completion["choices"][0]["message"]["content"] == "not json"
    status, body = post(scripted_judge, ask("nobody"))
    assert status == 500 and "no route for schema 'nobody'" in body["error"]["message"]


def test_scripted_judge_delay_meets_the_judge_timeout(scripted_judge: ScriptedJudge) -> None:
    script_relevant(scripted_judge)
    scripted_judge.route("answer_relevancy_statements", Reply(body={"statements": []}, delay=3))
    scorer = create_answer_relevancy_scorer(
        model=scripted_judge.as_judge(timeout=0.3, max_retries=0)
    )

    with pytest.raises(tracescore.JudgeTimeoutError):
        scorer.run(input=QUESTION, output=ANSWER)


def test_scripted_judge_without_json_schema_routes_by_the_prompt_line(
    scripted_judge: ScriptedJudge,
) -> None:
    scripted_judge.reject_json_schema = True
    body = ask(None, "Schema name: answer_relevancy_statements\nReturn JSON.")
    assert schema_name_of(body) == "answer_relevancy_statements"
    assert schema_name_of(ask("x")) == "x" and schema_name_of(ask(None)) is None
    assert post(scripted_judge, ask("x"))[0] == 400  # providers without structured outputs

    script_relevant(scripted_judge)
    result = create_answer_relevancy_scorer(model=scripted_judge.as_judge()).run(
        input=QUESTION, output=ANSWER
    )
    assert result.score == 1.0


def test_make_judge_points_a_public_judge_at_the_server(scripted_judge: ScriptedJudge) -> None:
    judge = make_judge(scripted_judge, timeout=1)
    assert isinstance(judge, tracescore.Judge)
    assert judge.model == "openai/test-judge"


def test_public_names_are_pinned() -> None:
    assert tracescore.testing.__all__ == [
        "SCRIPTED_JUDGE_API_KEY",
        "CaptureScores",
        "EvalRunner",
        "InMemoryScoreExporter",
        "LocalRuntime",
        "Reply",
        "ScriptedJudge",
        "SequentialIdGenerator",
        "assert_passed",
        "capscore",
        "evaluation_events",
        "failure_message",
        "local_runtime",
        "make_judge",
        "prompt_of",
        "runtime",
        "schema_name_of",
        "scripted_judge",
        "span_as_dict",
        "tracescore_evals",
    ]
    assert all(hasattr(tracescore.testing, name) for name in tracescore.testing.__all__)


# -- the pytest plugin ------------------------------------------------------------------------


def test_plugin_is_registered_and_light() -> None:
    (entry,) = importlib.metadata.entry_points(group="pytest11", name="tracescore")
    assert entry.value == "tracescore.testing._plugin"
    code = ("import sys, tracescore.testing._plugin; "
            "print([m for m in ('litellm', 'pydantic') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def run_pytest(directory: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "OTEL_", "PYTEST"))}
    env.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(directory)],
        capture_output=True, text=True, env=env, cwd=directory, timeout=300,
    )


def test_the_testing_page_snippet_runs_as_a_user_test_without_a_conftest(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "testing.md").read_text(), re.S)
    (snippet,) = [b for b in blocks if "def test_" in b and "capscore" in b]
    (tmp_path / "test_readme_kit.py").write_text(snippet)

    result = run_pytest(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"\b1 passed\b", result.stdout)


def test_fixtures_also_load_through_pytest_plugins(tmp_path: Path) -> None:
    # What the older docs said to write: it must keep working next to the entry point.
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tracescore.testing"]\n')
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        def test_fixtures(capscore, scripted_judge, tracescore_evals):
            assert capscore.judge is scripted_judge
            assert tracescore_evals.results == []
    """))

    result = run_pytest(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
