"""The examples run as a user runs them: as subprocesses, from a fresh working directory.

They are checked through what they print (``--json`` for the demo) and through what a backend
receives: the OTLP/JSON file of the default exporter, or a real OTLP receiver on loopback. The
judge is a real OpenAI-compatible server on loopback, reached through litellm.
"""

from __future__ import annotations

import html
import json
import os
import re
import runpy
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.otlp_receiver import HttpOtlpReceiver
from tracescore.testing import ScriptedJudge as JudgeServer

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "examples" / "halueval_rag.py"
QUICKSTART = REPO / "examples" / "quickstart.py"
DATA = REPO / "examples" / "data" / "halueval_qa_200.jsonl"

EVALUATION_EVENT = "gen_ai.evaluation.result"
AGENT_SPAN = "invoke_agent halueval-rag"
RETRIEVAL_SPAN = "retrieval halueval-bm25"
CHAT_SPAN = "chat replay"


def run_example(
    script: Path, *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """Run an example with a clean tracescore/OTel environment and return the finished process."""
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_", "OPENAI_"))
    }
    clean["LITELLM_OFFLINE_MODE"] = "true"
    # The subprocess must import the tracescore under test (the same tree pytest imports), even
    # when the package is not installed in editable mode.
    clean["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    clean.update(env or {})
    proc = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )
    # tracescore logs internal failures instead of raising: none may happen here.
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def run_demo(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], str]:
    proc = run_example(DEMO, "--json", *args, cwd=cwd, env=env)
    return json.loads(proc.stdout), proc.stderr


def _value(any_value: dict[str, Any]) -> Any:
    ((kind, value),) = any_value.items()
    if kind == "intValue":
        return int(value)
    if kind == "arrayValue":
        return [_value(v) for v in value.get("values", [])]
    return value


def _attrs(items: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {kv["key"]: _value(kv["value"]) for kv in items or []}


def read_otlp_json_file(path: Path) -> list[dict[str, Any]]:
    """Every span in an OTLP/JSON-lines file, flattened with its resource and events."""
    spans = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            request = json.loads(line)
            assert set(request) == {"resourceSpans"}
            for resource_spans in request["resourceSpans"]:
                resource = _attrs(resource_spans["resource"].get("attributes"))
                for scope_spans in resource_spans["scopeSpans"]:
                    for span in scope_spans["spans"]:
                        spans.append(
                            {
                                "name": span["name"],
                                "trace_id": span["traceId"],
                                "span_id": span["spanId"],
                                "parent_span_id": span.get("parentSpanId", ""),
                                "attributes": _attrs(span.get("attributes")),
                                "events": [
                                    (e["name"], _attrs(e.get("attributes")))
                                    for e in span.get("events", [])
                                ],
                                "resource": resource,
                            }
                        )
    return spans


def data_rows() -> list[dict[str, str]]:
    with DATA.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def evaluation_events(span: dict[str, Any]) -> list[dict[str, Any]]:
    return [attrs for name, attrs in span["events"] if name == EVALUATION_EVENT]


# -- the demo without a judge ------------------------------------------------------------------


def test_demo_all_rows_without_judge(tmp_path: Path) -> None:
    export_file = tmp_path / "out" / "traces.jsonl"
    summary, notes = run_demo(cwd=tmp_path, env={"TRACESCORE_EXPORT_FILE": str(export_file)})

    assert summary["items"] == 200
    answers = summary["answers"]
    assert answers["right"] + answers["hallucinated"] == 200
    assert 60 <= answers["hallucinated"] <= 140  # --hallucination-rate 0.5 by default
    assert summary["corpus_passages"] > 300
    # BM25 finds a passage of the question's own knowledge for nearly every question.
    assert summary["retrieval_hit_rate"] >= 0.9

    # The LLM scorers are skipped, said so, and never given a made-up score.
    assert summary["judge"] is None
    assert summary["skipped_scorers"] == ["answer-relevancy", "context-precision"]
    assert "SKIPPED" in notes and "TRACESCORE_JUDGE_MODEL" in notes
    assert set(summary["scorers"]) == {"content-similarity"}

    similarity = summary["scorers"]["content-similarity"]
    assert similarity["scored"] == 200  # sample rate 1: every trace is scored
    assert similarity["not_scorable"] == 0 and similarity["errors"] == 0
    assert similarity["right"]["n"] == answers["right"]
    assert similarity["hallucinated"]["n"] == answers["hallucinated"]
    # A replayed right answer is the ground truth itself; hallucinated ones share few bigrams.
    assert similarity["right"]["mean"] == 1.0
    assert similarity["hallucinated"]["mean"] < 0.3

    stats = summary["stats"]
    assert stats["spans_exported"] == 3 * 200  # agent + retrieval + chat per question
    assert stats["scores_attached"] == similarity["scored"]
    assert stats["scores_late"] == 0 and stats["scoring_errors"] == 0
    assert stats["skipped_queue_full"] == 0
    assert summary["flushed"] is True
    assert summary["exporter"] == f"file {export_file}"

    # What a backend reading the file receives.
    assert not (tmp_path / "tracescore-traces.jsonl").exists()
    spans = read_otlp_json_file(export_file)
    assert Counter(s["name"] for s in spans) == {
        AGENT_SPAN: 200,
        RETRIEVAL_SPAN: 200,
        CHAT_SPAN: 200,
    }
    assert {s["resource"]["service.name"] for s in spans} == {"halueval-rag-demo"}
    by_id = {s["span_id"]: s for s in spans}
    right_answers = {row["question"]: row["right_answer"] for row in data_rows()}
    event_scores: dict[str, list[float]] = {"right": [], "hallucinated": []}
    for span in spans:
        events = evaluation_events(span)
        if span["name"] != AGENT_SPAN:
            assert events == []
            parent = by_id[span["parent_span_id"]]
            assert parent["name"] == AGENT_SPAN and parent["trace_id"] == span["trace_id"]
            continue
        (event,) = events
        assert event["gen_ai.evaluation.name"] == "content-similarity"
        assert event["tracescore.sample_rate"] == 1.0
        assert "error.type" not in event
        question = json.loads(span["attributes"]["input.value"])["question"]
        answer = json.loads(span["attributes"]["output.value"])
        kind = "right" if answer == right_answers[question] else "hallucinated"
        event_scores[kind].append(event["gen_ai.evaluation.score.value"])
    # The exported events carry the scores on_score reported.
    for kind, values in event_scores.items():
        assert len(values) == similarity[kind]["n"]
        assert sum(values) / len(values) == pytest.approx(similarity[kind]["mean"], abs=1e-4)


def test_demo_sampling_scores_every_sampled_trace(tmp_path: Path) -> None:
    export_file = tmp_path / "traces.jsonl"
    summary, _ = run_demo(
        "--limit",
        "40",
        "--sample-rate",
        "0.5",
        "--seed",
        "3",
        cwd=tmp_path,
        env={"TRACESCORE_EXPORT_FILE": str(export_file)},
    )
    similarity = summary["scorers"]["content-similarity"]
    stats = summary["stats"]
    # Trace ids are random, so which traces are sampled varies; every sampled one is scored.
    assert 0 < similarity["scored"] < 40
    assert similarity["scored"] == stats["spans_scored"] == stats["scores_attached"]
    assert stats["spans_exported"] == 3 * 40
    spans = read_otlp_json_file(export_file)
    scored_spans = [s for s in spans if evaluation_events(s)]
    assert len(scored_spans) == similarity["scored"]
    assert all(s["name"] == AGENT_SPAN for s in scored_spans)
    assert all(evaluation_events(s)[0]["tracescore.sample_rate"] == 0.5 for s in scored_spans)


# -- the demo with a judge ---------------------------------------------------------------------


def _blocks(body: dict[str, Any], tag: str) -> list[str]:
    """The unescaped texts of the ``<tag ...>`` data blocks in a judge request's messages."""
    text = "\n".join(m.get("content") or "" for m in body["messages"])
    return [
        html.unescape(m.group(1))
        for m in re.finditer(rf"<{tag}(?: [^>]*)?>\n(.*?)\n</{tag}>", text, re.DOTALL)
    ]


def script_judge(server: JudgeServer, right_answers: set[str]) -> None:
    """Scripted verdicts with a simple, checkable rule.

    answer-relevancy: a right answer is one statement, judged relevant (score 1); any other
    answer is two statements, the first relevant and the second not (score 0.5).
    context-precision: for a right answer only the first passage is useful (MAP 1); for any other
    answer only the last one is (MAP 1/3 with three passages, 0.33 rounded).
    """

    def statements(body: dict[str, Any]) -> dict[str, Any]:
        (answer,) = _blocks(body, "answer")
        if answer in right_answers:
            return {"statements": [answer]}
        return {"statements": [answer, "This is a second statement."]}

    def statement_verdicts(body: dict[str, Any]) -> dict[str, Any]:
        n = len(_blocks(body, "statement"))
        return {
            "results": [
                {"result": "yes" if i == 0 else "no", "reason": "scripted"} for i in range(n)
            ]
        }

    def context_verdicts(body: dict[str, Any]) -> dict[str, Any]:
        (answer,) = _blocks(body, "answer")
        n = len(_blocks(body, "context"))
        useful = 0 if answer in right_answers else n - 1
        return {
            "verdicts": [
                {
                    "context_index": i,
                    "verdict": "yes" if i == useful else "no",
                    "reason": "scripted",
                }
                for i in range(n)
            ]
        }

    server.route("answer_relevancy_statements", statements)
    server.route("answer_relevancy_verdicts", statement_verdicts)
    server.route("answer_relevancy_reason", {"reason": "Scripted reason."})
    server.route("context_precision_verdicts", context_verdicts)
    server.route("context_precision_reason", {"reason": "Scripted reason."})


def test_demo_with_judge(tmp_path: Path, judge_server: JudgeServer) -> None:
    rows = data_rows()
    export_file = tmp_path / "traces.jsonl"
    script_judge(judge_server, {row["right_answer"] for row in rows})
    summary, notes = run_demo(
        "--judge",
        "openai/test-judge",
        "--limit",
        "5",
        cwd=tmp_path,
        env={
            "TRACESCORE_EXPORT_FILE": str(export_file),
            # litellm's own variables for the openai/ provider: no tracescore option needed.
            "OPENAI_API_BASE": judge_server.api_base,
            "OPENAI_API_KEY": "test-key",
        },
    )
    requests = judge_server.requests
    names = Counter(judge_server.schema_names)

    assert summary["judge"] == "openai/test-judge"
    assert summary["skipped_scorers"] == [] and "SKIPPED" not in notes
    answers = summary["answers"]
    # Seed 0 answers the first five questions with both kinds, so both verdict rules are used.
    assert answers["right"] > 0 and answers["hallucinated"] > 0

    scorers = summary["scorers"]
    assert set(scorers) == {"content-similarity", "answer-relevancy", "context-precision"}
    for cell in scorers.values():
        assert cell["scored"] == 5 and cell["not_scorable"] == 0 and cell["errors"] == 0
        assert cell["right"]["n"] == answers["right"]
        assert cell["hallucinated"]["n"] == answers["hallucinated"]
    assert scorers["answer-relevancy"]["right"]["mean"] == 1.0
    assert scorers["answer-relevancy"]["hallucinated"]["mean"] == 0.5
    assert scorers["context-precision"]["right"]["mean"] == 1.0
    assert scorers["context-precision"]["hallucinated"]["mean"] == 0.33

    # Three judge calls per answer-relevancy score, two per context-precision score.
    assert names == {
        "answer_relevancy_statements": 5,
        "answer_relevancy_verdicts": 5,
        "answer_relevancy_reason": 5,
        "context_precision_verdicts": 5,
        "context_precision_reason": 5,
    }
    assert {r["model"] for r in requests} == {"test-judge"}

    stats = summary["stats"]
    assert stats["spans_exported"] == 15
    assert stats["scores_attached"] == 15 and stats["scoring_errors"] == 0

    # Context precision judged exactly the passages the trace's retrieval span returned.
    spans = read_otlp_json_file(export_file)
    agent_by_trace = {s["trace_id"]: s for s in spans if s["name"] == AGENT_SPAN}
    retrieved_by_question = {}
    for span in spans:
        if span["name"] == RETRIEVAL_SPAN:
            agent = agent_by_trace[span["trace_id"]]
            question = json.loads(agent["attributes"]["input.value"])["question"]
            documents = json.loads(span["attributes"]["gen_ai.retrieval.documents"])
            assert len(documents) == 3
            retrieved_by_question[question] = [d["content"] for d in documents]
    judged_by_question = {
        _blocks(r, "question")[0]: _blocks(r, "context")
        for r in requests
        if "<context index=" in r["messages"][-1]["content"]
    }
    assert judged_by_question == retrieved_by_question
    for agent in agent_by_trace.values():
        events = {e["gen_ai.evaluation.name"]: e for e in evaluation_events(agent)}
        assert set(events) == {"content-similarity", "answer-relevancy", "context-precision"}
        assert events["answer-relevancy"]["tracescore.judge.model"] == "openai/test-judge"
        assert events["context-precision"]["gen_ai.evaluation.explanation"] == "Scripted reason."


# -- the demo exporting over OTLP --------------------------------------------------------------


def test_demo_exports_over_otlp(tmp_path: Path) -> None:
    export_file = tmp_path / "traces.jsonl"
    with HttpOtlpReceiver() as receiver:
        summary, _ = run_demo(
            "--limit",
            "10",
            cwd=tmp_path,
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                "OTEL_EXPORTER_OTLP_TIMEOUT": "5",
                "TRACESCORE_EXPORT_FILE": str(export_file),
            },
        )
        # The demo shut tracescore down before exiting: everything was sent already.
        spans = list(receiver.received.spans)

    assert summary["exporter"] == f"OTLP http/protobuf {receiver.endpoint}"
    assert not export_file.exists()
    assert summary["stats"]["spans_exported"] == 30
    assert Counter(s.name for s in spans) == {AGENT_SPAN: 10, RETRIEVAL_SPAN: 10, CHAT_SPAN: 10}
    assert {s.resource["service.name"] for s in spans} == {"halueval-rag-demo"}
    agents = {s.span_id: s for s in spans if s.name == AGENT_SPAN}
    for span in spans:
        if span.name == AGENT_SPAN:
            (event,) = [attrs for name, attrs in span.events if name == EVALUATION_EVENT]
            assert event["gen_ai.evaluation.name"] == "content-similarity"
            assert 0.0 <= event["gen_ai.evaluation.score.value"] <= 1.0
            assert span.attributes["openinference.span.kind"] == "AGENT"
        else:
            assert span.events == []
            assert agents[span.parent_span_id].trace_id == span.trace_id
    retrievals = [s for s in spans if s.name == RETRIEVAL_SPAN]
    assert all(s.attributes["openinference.span.kind"] == "RETRIEVER" for s in retrievals)
    assert all(len(json.loads(s.attributes["gen_ai.retrieval.documents"])) == 3 for s in retrievals)


def test_demo_serves_its_metrics_for_prometheus_until_stopped(tmp_path: Path) -> None:
    # docs/see-your-scores/grafana.md: `--metrics-port` serves the score metrics and keeps
    # serving them after the summary, until SIGTERM (or Ctrl-C), so Prometheus gets to scrape.
    from prometheus_client.parser import text_string_to_metric_families

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    env.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(REPO),
               TRACESCORE_EXPORT_FILE=str(tmp_path / "t.jsonl"))
    proc = subprocess.Popen(
        [sys.executable, str(DEMO), "--limit", "10", "--metrics-port", "0"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert proc.stdout is not None
        printed = []
        for line in proc.stdout:  # the process serves until stopped: read up to its last note
            printed.append(line)
            if "serving the metrics until Ctrl-C" in line:
                break
        text = "".join(printed)
        assert "serving the metrics until Ctrl-C" in text, text
        (url,) = re.findall(r"^metrics for Prometheus: (http://\S+)$", text, re.M)
        with urllib.request.urlopen(url, timeout=30) as response:
            exposition = response.read().decode()
    finally:
        proc.terminate()  # SIGTERM: the demo shuts tracescore down and exits 0
        rest = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, text + rest

    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == "tracescore_evaluation_score_count":
                counts[sample.labels["gen_ai_evaluation_score_label"]] += int(sample.value)
    # 10 questions, answered right or hallucinated; the summary says how many passed.
    scored = re.search(r"^content-similarity\s+\S+\s+\S+\s+(\d+)\s", text, re.M)
    assert scored and int(scored.group(1)) == 10, text
    assert sum(counts.values()) == 10 and set(counts) <= {"pass", "fail"}, counts
    assert counts["fail"] > 0


# -- the quickstart ----------------------------------------------------------------------------


def test_quickstart(tmp_path: Path) -> None:
    proc = run_example(QUICKSTART, cwd=tmp_path)
    lines = proc.stdout.splitlines()
    scores = [line for line in lines if ": content-similarity = " in line]
    assert len(scores) == 3
    values = []
    for line in scores:
        value = float(line.split(" = ")[1].split()[0])
        assert 0.5 < value <= 1.0
        values.append(value)
    # Nothing on stderr but where the spans went and, at exit, what went there (no warning).
    mean = float(f"{sum(values) / 3:.3g}")
    assert proc.stderr.splitlines() == [
        "tracescore: no OTLP endpoint set: spans and scores go to tracescore-traces.jsonl "
        "(see them: tracescore view tracescore-traces.jsonl; quiet: TRACESCORE_CONSOLE=false)",
        "tracescore: wrote 6 spans to tracescore-traces.jsonl with 3 evaluation results",
        f"  content-similarity  3 scored (mean {mean:.3g})",
        "  see them: tracescore view tracescore-traces.jsonl  (an HTML page of the traces and "
        "their scores)",
    ]
    assert lines[-1] == "spans went to: file tracescore-traces.jsonl"

    spans = read_otlp_json_file(tmp_path / "tracescore-traces.jsonl")
    assert Counter(s["name"] for s in spans) == {
        "invoke_agent faq-bot": 3,
        "retrieval faq-search": 3,
    }
    for span in spans:
        events = evaluation_events(span)
        if span["name"] == "invoke_agent faq-bot":
            assert [e["gen_ai.evaluation.name"] for e in events] == ["content-similarity"]
        else:
            assert events == []


def test_demo_splits_knowledge_into_passages() -> None:
    split_passages = runpy.run_path(str(DEMO), run_name="halueval_rag")["split_passages"]
    knowledge = (
        "Arthur's Magazine was published in the 19th century.First for Women is a magazine. "
        "It is sold in the U.S.Widnes Vikings R.L.F.C. is a club in World War II.Junkers is "
        'owned by "Time Inc." It was founded.e.Dams won the race."Apocalyptic" is a song.'
    )
    assert split_passages(knowledge) == [
        "Arthur's Magazine was published in the 19th century.",
        "First for Women is a magazine. It is sold in the U.S.Widnes Vikings R.L.F.C. is a club "
        "in World War II.",
        'Junkers is owned by "Time Inc." It was founded.e.Dams won the race.',
        '"Apocalyptic" is a song.',
    ]
