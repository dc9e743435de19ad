"""``tracescore rescore``: stored traces scored again, side by side.

The traces are the local file default written by tracescore itself (``FileSpanExporter``, a
decorated agent with a retrieval beneath it), read back as a user would: the command line, the
loopback OpenAI-protocol judge (``ScriptedJudge``) reached through the whole judge path, the
JSON report. Phoenix is played by a stdlib HTTP server speaking Phoenix's documented REST shapes
(``GET /v1/projects/{project}/spans``: ``data``, ``next_cursor``; spans with ``context``,
``parent_id``, ``attributes``, ISO times): no Phoenix runs in these tests.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

import tracescore
from tracescore.__main__ import main
from tracescore.scorers import (
    create_completeness_scorer,
    create_faithfulness_scorer,
)
from tracescore.testing import ScriptedJudge, make_judge, prompt_of

TURNS = 6
# Side A (the default prompt set) supports both claims of even turns, one of odd turns: 1.0 / 0.5.
# Side B (tracescore-v1) supports both claims of turns 0-2, none of turns 3-5: 1.0 / 0.0.
A_SCORES = [1.0, 0.5, 1.0, 0.5, 1.0, 0.5]
B_SCORES = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]


@pytest.fixture(autouse=True)
def _shutdown() -> Iterator[None]:
    yield
    tracescore.shutdown()


@tracescore.retrieval
def search(query: str) -> list[str]:
    return [f"CTX{query[1]} The tower is in Paris. It was finished in 1889."]


@tracescore.agent
def answer(question: str) -> str:
    search(question)
    return f"ANS{question[1]} The tower is in Paris."


def write_traces(path: Path, scoring: list[Any] | None = None, first: int = 0) -> None:
    """Run a decorated agent whose retrieval feeds its answer; tracescore writes the spans."""
    tracescore.configure(exporter=tracescore.FileSpanExporter(path), scoring=scoring or [])
    for i in range(first, first + TURNS):
        answer(f"Q{i}: where is the tower?")
    assert tracescore.force_flush(30_000)
    tracescore.shutdown()


def script(server: ScriptedJudge, broken: int | None = None) -> None:
    for i in range(TURNS):
        marker = f"ANS{i}"
        claims = [f"{marker} claim {k}" for k in range(2)]
        server.route_prompt(marker, {"claims": claims}, schema_name="output_claims")
        server.route_prompt(marker, {"verdicts": [
            {"claim_index": k, "verdict": "yes" if k == 0 or i % 2 == 0 else "no",
             "reason": "r"} for k in range(2)]}, schema_name="faithfulness_verdicts")
        if i == broken:
            server.route_prompt(marker, ScriptedJudge.Reply(status=401),
                                schema_name="answer_claims_v1")
        server.route_prompt(marker, {"claims": claims}, schema_name="answer_claims_v1")
        server.route_prompt(marker, {"verdicts": [
            {"claim_index": k, "evidence": "none", "verdict": "yes" if i < 3 else "no"}
            for k in range(2)], "reason": "v1 reason"}, schema_name="claim_support_v1")
    server.route("faithfulness_reason", {"reason": "default reason"})


def sides(server: ScriptedJudge) -> list[str]:
    return ["--scorer", "faithfulness:0.75", "--scorer",
            "faithfulness:0.75,prompt_set=tracescore-v1,label=candidate",
            "--judge", "test-judge", "--judge-api-base", server.api_base, "--no-progress"]


def scores(report: dict[str, Any], side: int) -> list[float | None]:
    by_question = sorted(report["items"], key=lambda item: item["trace_id"])
    return [item["outcomes"][side]["score"] for item in by_question]


def by_turn(report: dict[str, Any], traces: Path, side: int) -> list[float | None]:
    """A side's scores in the order the agent answered (from the file's agent spans)."""
    order = []
    for line in traces.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    if span["name"] == "invoke_agent answer":
                        question = next(a["value"]["stringValue"] for a in span["attributes"]
                                        if a["key"] == "input.value")
                        order.append((question, span["spanId"]))
    order.sort()
    found = {item["span_id"]: item["outcomes"][side]["score"] for item in report["items"]}
    return [found.get(span_id) for _, span_id in order]


def test_two_prompt_sets_on_stored_traces_side_by_side(
        judge_server: ScriptedJudge, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script(judge_server)
    traces = tmp_path / "tracescore-traces.jsonl"
    # The application scored its turns online with side A: the file holds those scores too.
    rule = tracescore.ScoringRule(scorer=create_faithfulness_scorer(
        model=make_judge(judge_server)), on="agent", threshold=0.75)
    write_traces(traces, scoring=[rule])
    online = {}
    for line in traces.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for event in span.get("events", ()):
                        attrs = {a["key"]: a["value"] for a in event["attributes"]}
                        if event["name"] == "gen_ai.evaluation.result":
                            online[span["spanId"]] = (
                                attrs["gen_ai.evaluation.score.value"]["doubleValue"],
                                attrs["tracescore.evaluator.version"]["stringValue"])
    assert len(online) == TURNS
    before = len(judge_server.requests)

    report_path, html = tmp_path / "r.json", tmp_path / "r.html"
    code = main(["rescore", str(traces), *sides(judge_server), "--report", str(report_path),
                 "--html", str(html)])
    out = capsys.readouterr().out
    assert code == 0, out
    report = json.loads(report_path.read_text())

    # The same six agent turns, each scored by both sides; retrieval spans are not turns.
    assert report["turns"] == TURNS and report["traces"]["complete"] == TURNS
    assert {i["span_name"] for i in report["items"]} == {"invoke_agent answer"}
    assert by_turn(report, traces, 0) == A_SCORES
    assert by_turn(report, traces, 1) == B_SCORES
    # What side A scores offline is what it scored online, with the same evaluator version.
    for item in report["items"]:
        score, version = online[item["span_id"]]
        assert item["outcomes"][0]["score"] == score
        assert item["outcomes"][0]["evaluator_version"] == version
    a, b = report["sides"]
    assert a["evaluator_version"] == create_faithfulness_scorer().fingerprint == version
    assert b["evaluator_version"] == create_faithfulness_scorer(
        prompt_set="tracescore-v1").fingerprint != a["evaluator_version"]
    assert a["label"] == f"faithfulness {a['evaluator_version']} openai/test-judge"
    assert b["label"] == "candidate" and b["options"] == {"prompt_set": "tracescore-v1"}
    # Each turn's judge requests carried its own trace's retrieved document, never another's.
    for body in judge_server.requests[before:]:
        text = prompt_of(body)
        if "CTX" in text:
            marker = text[text.index("ANS") + 3]
            assert f"CTX{marker} " in text and text.count("CTX") == 1
    # At 0.75 A passes turns 0, 2, 4 and B turns 0, 1, 2 (hand computation in the module).
    (c,) = report["comparisons"]
    assert c["n"] == TURNS and c["agree_share"] == pytest.approx(4 / 6)
    assert c["kappa"] == pytest.approx(1 / 3)
    assert c["confusion"] == {"pass": {"pass": 2, "fail": 1}, "fail": {"pass": 1, "fail": 2}}
    assert c["mean_absolute_shift"] == pytest.approx(2.5 / 6)
    assert c["mean_shift"] == pytest.approx(-0.25)
    assert c["label_changes"] == {"pass_to_fail": 1, "fail_to_pass": 1}
    assert c["moved_most"][0]["shift"] == -1.0 and len(c["moved_most"]) == 4
    assert c["moved_most"][0]["side"]["explanation"] == "v1 reason"
    assert "same pass/fail on 66.7%, Cohen's kappa 0.333" in out
    page = html.read_text()
    assert a["evaluator_version"] in page and b["evaluator_version"] in page
    assert page.count('class="moved-turn"') == 4


def test_an_interrupted_or_failed_run_resumes_from_the_state_file(
        judge_server: ScriptedJudge, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = tmp_path / "traces.jsonl"
    write_traces(traces)
    state = tmp_path / "state.jsonl"
    # The candidate's judge refuses turn 3 once: that trace is recorded with its error.
    script(judge_server, broken=3)
    assert main(["rescore", str(traces), *sides(judge_server), "--state", str(state)]) == 0
    first = capsys.readouterr().out
    assert "1 errors" in first
    calls = len(judge_server.requests)

    judge_server.reset()
    script(judge_server)
    report = tmp_path / "r.json"
    assert main(["rescore", str(traces), *sides(judge_server), "--state", str(state),
                 "--report", str(report)]) == 0
    data = json.loads(report.read_text())
    # Five traces came from the state file; only turn 3 was scored again, by both sides.
    assert data["traces"]["resumed"] == 5
    assert {prompt_of(b)[prompt_of(b).index("ANS") + 3] for b in judge_server.requests
            if "ANS" in prompt_of(b)} == {"3"}
    assert calls > len(judge_server.requests) > 0
    assert by_turn(data, traces, 1) == B_SCORES

    # A state file of other sides is refused, in one line.
    code = main(["rescore", str(traces), "--scorer", "completeness", "--state", str(state),
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "was written for other scorers" in err and err.count("\n") == 1


def test_heuristic_scorers_on_the_file_default_with_its_rotated_backup(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRACESCORE_EXPORT_FILE", raising=False)
    default = tmp_path / "tracescore-traces.jsonl"
    write_traces(default)
    default.rename(tmp_path / "tracescore-traces.jsonl.1")  # rotated: the older spans
    write_traces(default, first=TURNS)
    with default.open("a") as fh:
        fh.write('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 7}]}]}]}\n')
        fh.write("not json, a line cut by a crash\n")
    report = tmp_path / "r.json"
    code = main(["rescore", "--scorer", "completeness", "--scorer", "keyword-coverage:0.3",
                 "--report", str(report), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(report.read_text())
    assert data["turns"] == 2 * TURNS and data["traces"]["spans"] == 4 * TURNS
    assert data["traces"]["skipped_records"] == 2
    assert data["source"] == "tracescore-traces.jsonl.1, tracescore-traces.jsonl"
    for i, side in enumerate(data["sides"]):
        scorer = [create_completeness_scorer(), None][i]
        assert side["scored"] == 2 * TURNS and side["error"] == 0
        if scorer is not None:
            assert side["evaluator_version"] == scorer.fingerprint
            assert side["mean"] == pytest.approx(scorer.run(
                input="Q0: where is the tower?", output="ANS0 The tower is in Paris.").score)
    assert "2 unreadable records skipped" in out


def test_memory_holds_counts_not_turns_the_report_lists_the_first_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every turn is counted in the comparison and the page; only the first are kept whole."""
    traces = tmp_path / "traces.jsonl"
    write_traces(traces)
    write_traces(traces, first=TURNS)  # appended: 12 turns
    runs = []
    for extra in ([], ["--max-listed-turns", "2", "--top", "1"]):
        report, html = tmp_path / f"r{len(extra)}.json", tmp_path / f"r{len(extra)}.html"
        assert main(["rescore", str(traces), "--scorer", "completeness",
                     "--scorer", "keyword-coverage:0.3", "--no-progress", "--report",
                     str(report), "--html", str(html), *extra]) == 0
        runs.append((json.loads(report.read_text()), html.read_text()))
    (full, full_page), (capped, capped_page) = runs
    assert full["turns"] == capped["turns"] == 2 * TURNS
    assert len(full["items"]) == 2 * TURNS and "items_listed" not in full
    assert capped["items"] == full["items"][:2] and capped["items_listed"] == 2
    assert capped["sides"] == full["sides"]
    assert sum(b["count"] for b in capped["sides"][1]["histogram"]) == 2 * TURNS
    (a,), (b,) = full["comparisons"], capped["comparisons"]
    assert len(a["moved_most"]) > 1 and b["moved_most"] == a["moved_most"][:1]
    assert {**b, "moved_most": None} == {**a, "moved_most": None}
    # The page's charts count every turn, not the listed ones.
    chart = capped_page[capped_page.index('class="charts"'):capped_page.index("against")]
    assert chart == full_page[full_page.index('class="charts"'):full_page.index("against")]


def _one_document(lines: list[str]) -> dict[str, Any]:
    merged: dict[str, Any] = {"resourceSpans": []}
    for line in lines:
        merged["resourceSpans"] += json.loads(line)["resourceSpans"]
    return merged


def test_an_otlp_json_export_document_gives_the_same_turns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = tmp_path / "traces.jsonl"
    write_traces(traces)
    export = tmp_path / "export.json"
    export.write_text(json.dumps(_one_document(traces.read_text().splitlines()), indent=2))
    results = []
    for source in (traces, export):
        report = tmp_path / f"{source.name}.report.json"
        assert main(["rescore", str(source), "--scorer", "completeness", "--no-progress",
                     "--report", str(report)]) == 0
        results.append(json.loads(report.read_text())["items"])
    assert len(results[0]) == TURNS
    assert sorted(results[0], key=str) == sorted(results[1], key=str)


def test_bounded_open_traces_evict_and_count(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    traces = tmp_path / "traces.jsonl"
    write_traces(traces)
    # One span per line, two traces interleaved: child A, child B, root A, root B.
    spans = []
    for line in traces.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    spans.append({"resourceSpans": [{**rs, "scopeSpans": [
                        {**ss, "spans": [span]}]}]})
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for doc in spans:
        span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        by_trace.setdefault(span["traceId"], []).append(doc)
    a, b = list(by_trace.values())[:2]
    interleaved = tmp_path / "interleaved.jsonl"
    interleaved.write_text("".join(json.dumps(d) + "\n" for d in (a[0], b[0], a[1], b[1])))
    report = tmp_path / "r.json"
    main(["rescore", str(interleaved), "--scorer", "completeness", "--max-open-traces", "1",
          "--no-progress", "--report", str(report)])
    data = json.loads(report.read_text())["traces"]
    # B's first span pushed A out (scored without its root: no turn); A's root came late.
    assert (data["evicted"], data["late_spans"], data["complete"]) == (1, 1, 1)
    main(["rescore", str(interleaved), "--scorer", "completeness", "--no-progress",
          "--report", str(report)])
    data = json.loads(report.read_text())["traces"]
    assert (data["evicted"], data["late_spans"], data["complete"]) == (0, 0, 2)


class FakePhoenix:
    """Phoenix's span listing on loopback, from OTLP/JSON spans, in Phoenix's shapes, newest
    first (or oldest first: a root before its children), two per page."""

    def __init__(self, lines: list[str], newest_first: bool = True) -> None:
        spans = []
        for line in lines:
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    spans.extend(ss["spans"])
        self.spans = [self._phoenix(s) for s in sorted(
            spans, key=lambda s: int(s["startTimeUnixNano"]), reverse=newest_first)]
        self.queries: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                fake.queries.append(self.path)
                page = int((parse_qs(url.query).get("cursor") or ["0"])[0])
                data = fake.spans[page * 2:page * 2 + 2]
                more = (page + 1) * 2 < len(fake.spans)
                out = json.dumps({"data": data,
                                  "next_cursor": str(page + 1) if more else None}).encode()
                self.send_response(200 if url.path == "/v1/projects/bot/spans" else 404)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def _phoenix(span: dict[str, Any]) -> dict[str, Any]:
        def iso(ns: str) -> str:
            return datetime.fromtimestamp(int(ns) / 1e9, timezone.utc).isoformat()

        def value(v: dict[str, Any]) -> Any:
            (kind, raw), = v.items()
            return int(raw) if kind == "intValue" else raw

        return {"name": span["name"], "span_kind": "AGENT",
                "context": {"trace_id": span["traceId"], "span_id": span["spanId"]},
                "parent_id": span.get("parentSpanId") or None,
                "start_time": iso(span["startTimeUnixNano"]),
                "end_time": iso(span["endTimeUnixNano"]), "status_code": "OK",
                "attributes": {a["key"]: value(a["value"]) for a in span["attributes"]},
                "events": []}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("newest_first", [True, False])
def test_phoenix_spans_give_the_same_turns_as_the_file(
        judge_server: ScriptedJudge, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        newest_first: bool) -> None:
    script(judge_server)
    traces = tmp_path / "traces.jsonl"
    write_traces(traces)
    phoenix = FakePhoenix(traces.read_text().splitlines(), newest_first)
    reports = []
    try:
        for source in (["--phoenix-url", phoenix.url, "--phoenix-project", "bot"],
                       [str(traces)]):
            report = tmp_path / "r.json"
            assert main(["rescore", *source, *sides(judge_server), "--report",
                         str(report)]) == 0
            reports.append(json.loads(report.read_text()))
    finally:
        phoenix.close()
    from_phoenix, from_file = reports
    assert from_phoenix["source"].startswith("Phoenix http://127.0.0.1:")
    assert len(phoenix.queries) == TURNS  # 12 spans, two a page
    for side in (0, 1):
        assert scores(from_phoenix, side) == scores(from_file, side)
    assert from_phoenix["comparisons"][0]["kappa"] == pytest.approx(1 / 3)
    assert from_phoenix["traces"]["complete"] == TURNS


def test_one_line_errors_for_what_cannot_run(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    traces = tmp_path / "traces.jsonl"
    traces.write_text("")
    cases = [
        (["rescore", str(tmp_path / "missing.jsonl"), "--scorer", "completeness"],
         "does not exist"),
        (["rescore", str(traces), "--scorer", "completeness,prompt_set=x"],
         "has no option 'prompt_set'"),
        (["rescore", str(traces), "--scorer", "faithfulness"], "asks an LLM judge"),
        (["rescore", str(traces), "--scorer", "completeness", "--report", str(traces)],
         "is the FILE file"),
        (["rescore", str(traces), "--scorer", "completeness", "--html", str(tmp_path)],
         "is a folder"),
    ]
    # A state file with the right header and a turn of another shape (a score that is text):
    # refused in one line, not a traceback in the middle of the comparison.
    state = tmp_path / "state.jsonl"
    assert main(["rescore", str(traces), "--scorer", "completeness", "--state", str(state),
                 "--no-progress"]) == 1
    capsys.readouterr()
    outcome = {"status": "scored", "score": "high", "label": None, "error_type": None,
               "explanation": "", "evaluator_version": None}
    with state.open("a") as fh:
        fh.write(json.dumps({"trace": "ab" * 16, "items": [
            {"trace_id": "ab" * 16, "span_id": "cd" * 8, "span_name": "a",
             "outcomes": [outcome]}]}) + "\n")
    cases.append((["rescore", str(traces), "--scorer", "completeness", "--state", str(state)],
                  "line 2: not a rescore record"))
    for argv, message in cases:
        assert main([*argv, "--no-progress"]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert main(["rescore", str(traces), "--scorer", "completeness", "--no-progress"]) == 1
    assert "FAILED: no turn was scored by every side" in capsys.readouterr().out
