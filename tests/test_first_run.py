"""What a first run shows when spans go to the local file: one line at ``configure()`` saying
where spans and scores go, and a summary at exit (spans written, scores per scorer, how to look
at them). Each case is a fresh interpreter: the line is once per process and the summary comes
from the exit hook."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tracescore

REPO = Path(__file__).resolve().parents[1]

# Three questions scored by the heuristic content-similarity scorer, against expected answers
# chosen so that one fails the 0.5 threshold.
SCRIPT = textwrap.dedent('''
    import sys
    import tracescore
    from tracescore.scorers import create_content_similarity_scorer

    EXPECTED = {"refunds?": "Refunds take 14 days.", "shipping?": "Shipping takes 3 days.",
                "support?": "Nothing alike at all here"}

    @tracescore.retrieval(name="faq-search")
    def search(query):
        return ["Refunds take 14 days.", "Shipping takes 3 days."]

    @tracescore.agent(name="faq-bot")
    def answer(question):
        return search(question)[0 if question == "refunds?" else 1]

    def configure(**kwargs):
        return tracescore.configure(service_name="first-run", scoring=[tracescore.ScoringRule(
            scorer=create_content_similarity_scorer(), on="agent", sample_rate=1.0,
            threshold=0.5, ground_truth=lambda span, question: EXPECTED[question])], **kwargs)

    MODE = sys.argv[1]
    if MODE == "twice":      # a notebook habit: configure again, then again
        configure()
        answer("refunds?")
        configure()
        answer("shipping?")
        configure()
        answer("support?")
    elif MODE == "shutdown":   # the user shuts down before exit: the summary still comes
        configure()
        for q in EXPECTED:
            answer(q)
        tracescore.shutdown()
    elif MODE == "quiet-argument":
        configure(output=tracescore.OutputOptions(console=False))
        for q in EXPECTED:
            answer(q)
    elif MODE == "two-files":  # the file changes between configurations
        import os
        configure()
        answer("refunds?")
        os.environ["TRACESCORE_EXPORT_FILE"] = "second.jsonl"
        configure()
        answer("shipping?")
        answer("support?")
    elif MODE == "exporter-false":
        configure(exporter=False)
        answer("refunds?")
    elif MODE == "no-rules":
        tracescore.configure(service_name="first-run")
        answer("refunds?")
    else:
        configure()
        for q in EXPECTED:
            answer(q)
    print("done")
''')


def run(tmp_path: Path, mode: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "app.py"
    script.write_text(SCRIPT)
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("TRACESCORE_", "OTEL_", "OPENAI_", "PYTEST"))}
    clean.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(REPO), **env)
    proc = subprocess.run([sys.executable, str(script), mode], cwd=tmp_path, env=clean,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done\n"
    return proc


def tracescore_lines(stderr: str) -> list[str]:
    """stderr's lines from tracescore's console (the summary's lines are indented under its
    first one); log records of the ``tracescore`` logger are not among them."""
    lines, inside = [], False
    for line in stderr.splitlines():
        inside = (line.startswith(("tracescore: no OTLP endpoint set", "tracescore: wrote "))
                  or (inside and line.startswith("  ")))
        if inside:
            lines.append(line)
    return lines


def spans_in(path: Path) -> list[dict[str, object]]:
    return [span for line in path.read_text().splitlines()
            for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
            for span in ss["spans"]]


def test_a_first_run_says_where_spans_go_and_sums_up_at_exit(tmp_path: Path) -> None:
    proc = run(tmp_path, "once")
    spans = spans_in(tmp_path / "tracescore-traces.jsonl")
    assert len(spans) == 6  # three agent spans, three retrieval spans
    assert tracescore_lines(proc.stderr) == [
        "tracescore: no OTLP endpoint set: spans and scores go to tracescore-traces.jsonl "
        "(see them: tracescore view tracescore-traces.jsonl; quiet: TRACESCORE_CONSOLE=false)",
        "tracescore: wrote 6 spans to tracescore-traces.jsonl with 3 evaluation results",
        # Every score of the run, as the spans in the file carry them.
        f"  content-similarity  3 scored (mean {_mean(spans):.3g}, 2 pass, 1 fail)",
        "  see them: tracescore view tracescore-traces.jsonl  (an HTML page of the traces and "
        "their scores)",
    ]


def _mean(spans: list[dict[str, object]]) -> float:
    values = [a["value"]["doubleValue"] for s in spans for e in s.get("events", [])  # type: ignore[attr-defined]
              for a in e["attributes"] if a["key"] == "gen_ai.evaluation.score.value"]
    assert len(values) == 3
    return sum(values) / 3


def test_configure_again_says_it_once_and_the_summary_counts_every_configuration(
        tmp_path: Path) -> None:
    proc = run(tmp_path, "twice")
    lines = tracescore_lines(proc.stderr)
    assert sum("no OTLP endpoint set" in line for line in lines) == 1
    assert "tracescore: wrote 6 spans to tracescore-traces.jsonl with 3 evaluation results" \
        in lines
    assert len(spans_in(tmp_path / "tracescore-traces.jsonl")) == 6


def test_each_file_written_is_counted_and_the_last_one_is_named(tmp_path: Path) -> None:
    lines = tracescore_lines(run(tmp_path, "two-files").stderr)
    assert lines[1:4] == [
        "tracescore: wrote 6 spans to 2 files with 3 evaluation results",
        "  2 spans to tracescore-traces.jsonl",
        "  4 spans to second.jsonl",
    ]
    assert lines[-1].startswith("  see them: tracescore view second.jsonl  (")
    assert len(spans_in(tmp_path / "second.jsonl")) == 4


def test_the_summary_comes_after_an_explicit_shutdown_too(tmp_path: Path) -> None:
    lines = tracescore_lines(run(tmp_path, "shutdown").stderr)
    assert "tracescore: wrote 6 spans to tracescore-traces.jsonl with 3 evaluation results" \
        in lines


def test_a_path_from_the_environment_is_the_one_named(tmp_path: Path) -> None:
    target = tmp_path / "out dir" / "spans.jsonl"
    lines = tracescore_lines(run(tmp_path, "once", TRACESCORE_EXPORT_FILE=str(target)).stderr)
    assert lines[0].startswith(f"tracescore: no OTLP endpoint set: spans and scores go to "
                               f"{target} (see them: tracescore view '{target}';")
    assert lines[1] == f"tracescore: wrote 6 spans to {target} with 3 evaluation results"


@pytest.mark.parametrize(("mode", "env"), [
    ("once", {"TRACESCORE_CONSOLE": "false"}),
    ("quiet-argument", {}),
    ("exporter-false", {}),
    # spans go to a backend (nothing listens there: the run must not care)
    ("once", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "TRACESCORE_FLUSH_TIMEOUT":
              "1", "TRACESCORE_EXPORT_RETRY": "false",
              "TRACESCORE_LOG_RECORDS": "false", "TRACESCORE_METRICS": "false"}),
])
def test_silent_when_turned_off_or_not_the_local_file(
        tmp_path: Path, mode: str, env: dict[str, str]) -> None:
    proc = run(tmp_path, mode, **env)
    assert tracescore_lines(proc.stderr) == []


def test_without_scoring_rules_the_summary_says_how_to_add_them(tmp_path: Path) -> None:
    lines = tracescore_lines(run(tmp_path, "no-rules").stderr)
    assert lines[1] == ("tracescore: wrote 2 spans to tracescore-traces.jsonl (no scores: "
                        "configure(scoring=[tracescore.ScoringRule(...)]) adds them)")


def test_failed_scoring_shows_its_first_error_without_the_key(tmp_path: Path) -> None:
    # The judge answers 401 and echoes the key, as providers do in their message.
    script = tmp_path / "judged.py"
    script.write_text(textwrap.dedent('''
        import tracescore
        from tracescore.scorers import create_answer_relevancy_scorer
        from tracescore.testing import ScriptedJudge

        KEY = "sk-live-abcdef1234567890XYZabcdef"
        server = ScriptedJudge()
        server.route("answer_relevancy_statements", ScriptedJudge.Reply(
            status=401, body={"error": {"message": f"Incorrect API key provided: {KEY}.",
                                        "type": "invalid_request_error"}}))
        tracescore.configure(
            judge=server.as_judge(api_key=KEY),
            scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent",
                                            sample_rate=1.0)])

        @tracescore.agent
        def answer(question):
            return "Paris."

        answer("What is the capital of France?")
        tracescore.force_flush()
        assert len(server.requests) >= 1
    '''))
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("TRACESCORE_", "OTEL_", "OPENAI_", "PYTEST"))}
    clean.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(REPO), TRACESCORE_FLUSH_TIMEOUT="60")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=clean,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = tracescore_lines(proc.stderr)
    assert lines[1] == ("tracescore: wrote 1 span to tracescore-traces.jsonl with 1 evaluation "
                        "result")
    assert lines[2].startswith("  answer-relevancy  1 failed (")
    assert lines[3].startswith("                    first error: ")
    assert "Incorrect API key provided" in lines[3]
    assert "abcdef1234567890XYZ" not in proc.stderr


def test_console_takes_a_bool() -> None:
    with pytest.raises(tracescore.ConfigurationError, match="console"):
        tracescore.configure(output=tracescore.OutputOptions(console="no"))  # type: ignore[arg-type]
