"""``tracescore eval`` as CI runs it: a subprocess, its exit code, its JSON and JUnit files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.otlp_receiver import HttpOtlpReceiver
from tests.test_evals import LLM_ANSWERS, scripted_judge_rules
from tracescore.testing import ScriptedJudge as JudgeServer

REPO = Path(__file__).resolve().parents[1]

AGENT_MODULE = """
ANSWERS = {
    "capital of France?": "Paris",
    "capital of Spain?": "Madrid",
    "capital of Italy?": "Rome",
}
LLM_ANSWERS = {llm_answers!r}


def answer(question):
    return ANSWERS[question]


def sometimes_broken(question):
    if "Italy" in question:
        raise RuntimeError("the agent fell over")
    return ANSWERS[question]


def llm_answer(question):
    return LLM_ANSWERS[question]


class Bot:
    @staticmethod
    def reply(question):
        return ANSWERS[question]
"""

ROWS = [
    {"input": "capital of France?", "ground_truth": "Paris"},
    {"input": "capital of Spain?", "ground_truth": "Madrid"},
    {"input": "capital of Italy?", "ground_truth": "Roma", "id": "italy"},
]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    module = AGENT_MODULE.replace("{llm_answers!r}", repr(LLM_ANSWERS))
    (tmp_path / "agent_mod.py").write_text(module, encoding="utf-8")
    with (tmp_path / "data.jsonl").open("w", encoding="utf-8") as fh:
        for row in ROWS:
            fh.write(json.dumps(row) + "\n")
    return tmp_path


def tracescore_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_", "OPENAI_"))
    }
    clean["LITELLM_OFFLINE_MODE"] = "true"
    clean["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [clean.get("PYTHONPATH")])])
    clean.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "tracescore", *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def junit_cases(path: Path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    return {case.get("name", ""): case for case in suite.findall("testcase")}


def test_passed_run_exits_0_and_writes_reports(workdir: Path) -> None:
    proc = tracescore_cli(
        "eval",
        "data.jsonl",
        "--target",
        "agent_mod:answer",
        "--scorer",
        "content-similarity:0.8",
        "--report",
        "out/report.json",
        "--junit",
        "junit.xml",
        "--name",
        "capitals",
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: passed" in proc.stdout
    assert "content-similarity" in proc.stdout
    report = json.loads((workdir / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["verdict"] == "passed"
    assert report["experiment"]["name"] == "capitals"
    assert report["experiment"]["source"] == "data.jsonl"
    assert report["summary"]["total_items"] == 3
    assert [i["output"] for i in report["items"]] == ["Paris", "Madrid", "Rome"]
    assert report["items"][2]["id"] == "italy"
    mean = report["scores"]["content-similarity"]
    assert 0.8 < mean < 1.0
    cases = junit_cases(workdir / "junit.xml")
    assert set(cases) == {"content-similarity", "target"}
    assert all(case.find("failure") is None for case in cases.values())
    assert cases["content-similarity"].get("classname") == "tracescore.eval.capitals"


def test_missed_threshold_is_scored_and_fails_only_on_request(workdir: Path) -> None:
    args = (
        "eval",
        "data.jsonl",
        "--target",
        "agent_mod:answer",
        "--scorer",
        "content-similarity:0.99",
        "--junit",
        "junit.xml",
    )
    proc = tracescore_cli(*args, cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "verdict: warned" in proc.stdout
    assert "is below the threshold 0.99" in proc.stdout
    cases = junit_cases(workdir / "junit.xml")
    failure = cases["content-similarity"].find("failure")
    assert failure is not None
    assert failure.get("type") == "threshold"
    message = failure.get("message", "")
    assert message.startswith("content-similarity: mean 0.") and "threshold 0.99" in message
    # The item that pulled the mean down is named.
    assert "item italy: score 0.6667: " in (failure.text or "")
    proc = tracescore_cli(*args, "--fail-on-warned", cwd=workdir)
    assert proc.returncode == 1
    # the flag's name when the verdict was called 'scored' is still accepted
    assert tracescore_cli(*args, "--fail-on-scored", cwd=workdir).returncode == 1


def test_failed_gate_exits_1_and_junit_names_it(workdir: Path) -> None:
    proc = tracescore_cli(
        "eval",
        "data.jsonl",
        "--target",
        "agent_mod:answer",
        "--scorer",
        "content-similarity:0.5",
        "--gate",
        "content-similarity",
        "--junit",
        "junit.xml",
        cwd=workdir,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "verdict: failed" in proc.stdout
    cases = junit_cases(workdir / "junit.xml")
    assert set(cases) == {"gate content-similarity", "target"}
    failure = cases["gate content-similarity"].find("failure")
    assert failure is not None and failure.get("type") == "gate"
    assert "instead of 1" in failure.get("message", "")
    root = ET.parse(workdir / "junit.xml").getroot()
    assert root.get("failures") == "1" and root.get("tests") == "2"


def test_target_errors_are_reported_in_junit(workdir: Path) -> None:
    proc = tracescore_cli(
        "eval",
        "data.jsonl",
        "--target",
        "agent_mod:sometimes_broken",
        "--scorer",
        "content-similarity",
        "--junit",
        "junit.xml",
        "--report",
        "report.json",
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stderr  # scored, not failed: no gate
    assert "verdict: warned" in proc.stdout
    failure = junit_cases(workdir / "junit.xml")["target"].find("failure")
    assert failure is not None and failure.get("type") == "target_error"
    assert "item italy: RuntimeError: the agent fell over" in (failure.text or "")
    report = json.loads((workdir / "report.json").read_text(encoding="utf-8"))
    assert report["items"][2]["error"]["type"] == "RuntimeError"
    assert report["summary"]["scorers"]["content-similarity"]["skipped"] == 1


def test_target_given_as_file_path_and_dotted_attribute(workdir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = tracescore_cli(
        "eval",
        str(workdir / "data.jsonl"),
        "--target",
        f"{workdir / 'agent_mod.py'}:Bot.reply",
        "--scorer",
        "content-similarity",
        cwd=elsewhere,
    )
    assert proc.returncode == 0, proc.stderr
    assert "verdict: passed" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--scorer", "no-such-scorer"), "unknown scorer 'no-such-scorer'; available: "),
        (("--scorer", "content-similarity:high"), "the threshold 'high' is not a number"),
        (("--scorer", "Content"), "is not a scorer id"),
        ((), "name at least one --scorer or --gate"),
        (("--scorer", "content-similarity", "--concurrency", "0"), "--concurrency"),
        (("--scorer", "answer-relevancy"), "pass --judge MODEL"),
    ],
)
def test_usage_errors_exit_2(workdir: Path, args: tuple[str, ...], message: str) -> None:
    proc = tracescore_cli("eval", "data.jsonl", "--target", "agent_mod:answer", *args, cwd=workdir)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("agent_mod:missing", "'agent_mod' has no 'missing'"),
        ("agent_mod:ANSWERS", "is not callable"),
        ("no_such_module:answer", "ModuleNotFoundError"),
        ("answer", "write module:function"),
        ("nowhere/agent.py:answer", "no file 'nowhere/agent.py'"),
    ],
)
def test_bad_targets_exit_2(workdir: Path, target: str, message: str) -> None:
    proc = tracescore_cli(
        "eval", "data.jsonl", "--target", target, "--scorer", "content-similarity", cwd=workdir
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr


def test_bad_data_exits_2_naming_the_row(workdir: Path) -> None:
    (workdir / "bad.csv").write_text("input,ground_truth\na,b\nc,d,e\n", encoding="utf-8")
    proc = tracescore_cli(
        "eval",
        "bad.csv",
        "--target",
        "agent_mod:answer",
        "--scorer",
        "content-similarity",
        cwd=workdir,
    )
    assert proc.returncode == 2
    assert "bad.csv row 2 (line 3): more cells than the header has columns" in proc.stderr
    proc = tracescore_cli(
        "eval",
        "missing.jsonl",
        "--target",
        "agent_mod:answer",
        "--scorer",
        "content-similarity",
        cwd=workdir,
    )
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_argparse_usage_errors_exit_2(workdir: Path) -> None:
    proc = tracescore_cli("eval", "data.jsonl", "--scorer", "content-similarity", cwd=workdir)
    assert proc.returncode == 2
    assert "--target" in proc.stderr
    assert tracescore_cli(cwd=workdir).returncode == 2


def test_scorers_command_lists_ids(workdir: Path) -> None:
    proc = tracescore_cli("scorers", cwd=workdir)
    assert proc.returncode == 0
    ids = proc.stdout.split()
    assert {"answer-relevancy", "content-similarity", "context-precision"} <= set(ids)
    assert ids == sorted(ids)


def test_version_flag_prints_the_package_version(workdir: Path) -> None:
    import tracescore

    proc = tracescore_cli("--version", cwd=workdir)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"tracescore {tracescore.__version__}"
    # one place: the version the installed metadata (pyproject's dynamic version) reports
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject
    assert tracescore.__version__.count(".") == 2


def test_llm_scorer_with_judge_flag(workdir: Path, judge_server: JudgeServer) -> None:
    scripted_judge_rules(judge_server)
    with (workdir / "llm.jsonl").open("w", encoding="utf-8") as fh:
        for question in ("q-one", "q-half"):
            fh.write(json.dumps({"input": question}) + "\n")
    proc = tracescore_cli(
        "eval",
        "llm.jsonl",
        "--target",
        "agent_mod:llm_answer",
        "--scorer",
        "answer-relevancy:0.7",
        "--judge",
        "openai/test-judge",
        "--concurrency",
        "2",
        "--report",
        "report.json",
        cwd=workdir,
        env={"OPENAI_API_BASE": judge_server.api_base, "OPENAI_API_KEY": "test-key"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((workdir / "report.json").read_text(encoding="utf-8"))
    assert report["scores"] == {"answer-relevancy": 0.75}
    assert report["verdict"] == "passed"
    first = report["items"][0]["scores"]["answer-relevancy"]
    assert first["result"]["judge_model"] == "openai/test-judge"
    assert judge_server.count("answer_relevancy_statements") == 2


def test_traced_run_exports_over_otlp(workdir: Path) -> None:
    with HttpOtlpReceiver() as receiver:
        proc = tracescore_cli(
            "eval",
            "data.jsonl",
            "--target",
            "agent_mod:answer",
            "--scorer",
            "content-similarity",
            "--name",
            "otlp-run",
            cwd=workdir,
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                "OTEL_EXPORTER_OTLP_TIMEOUT": "5",
                "OTEL_SERVICE_NAME": "ci-evals",
            },
        )
        spans = list(receiver.received.spans)
    assert proc.returncode == 0, proc.stderr
    (root,) = [s for s in spans if s.name == "experiment otlp-run"]
    items = [s for s in spans if s.name == "eval_item otlp-run"]
    assert len(items) == 3
    assert all(s.parent_span_id == root.span_id for s in items)
    assert root.resource["service.name"] == "ci-evals"
    assert root.attributes["tracescore.experiment.verdict"] == "passed"
    events = [
        attrs for s in items for name, attrs in s.events if name == "gen_ai.evaluation.result"
    ]
    assert len(events) == 3
    assert {e["gen_ai.evaluation.name"] for e in events} == {"content-similarity"}


def test_no_trace_flag_and_default_without_endpoint(workdir: Path) -> None:
    proc = tracescore_cli(
        "eval",
        "data.jsonl",
        "--target",
        "agent_mod:answer",
        "--scorer",
        "content-similarity",
        "--report",
        "r.json",
        cwd=workdir,
    )
    assert proc.returncode == 0
    assert json.loads((workdir / "r.json").read_text())["experiment"]["trace_id"] is None
    assert not (workdir / "tracescore-traces.jsonl").exists()
    proc = tracescore_cli(
        "eval",
        "data.jsonl",
        "--target",
        "agent_mod:answer",
        "--scorer",
        "content-similarity",
        "--trace",
        "--report",
        "r.json",
        cwd=workdir,
    )
    assert proc.returncode == 0
    assert json.loads((workdir / "r.json").read_text())["experiment"]["trace_id"]
    lines = (workdir / "tracescore-traces.jsonl").read_text().splitlines()
    names = {
        span["name"]
        for line in lines
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    }
    assert names == {"experiment answer", "eval_item answer"}


def test_module_that_configures_tracescore_is_traced(workdir: Path) -> None:
    (workdir / "configured_mod.py").write_text(
        textwrap.dedent("""
        import tracescore
        tracescore.configure(service_name="configured", exporter=tracescore.FileSpanExporter(
            "spans.jsonl"))

        @tracescore.agent(name="bot")
        def answer(question):
            return "Paris"
    """),
        encoding="utf-8",
    )
    proc = tracescore_cli(
        "eval",
        "data.jsonl",
        "--target",
        "configured_mod:answer",
        "--scorer",
        "content-similarity",
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stderr
    lines = (workdir / "spans.jsonl").read_text().splitlines()
    names = [
        span["name"]
        for line in lines
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    assert sorted(set(names)) == ["eval_item answer", "experiment answer", "invoke_agent bot"]
    assert len(names) == 7


def test_python_dash_m_and_main_agree(
    workdir: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracescore._cli.main import main

    monkeypatch.chdir(workdir)
    monkeypatch.syspath_prepend(str(workdir))
    code = main(
        [
            "eval",
            "data.jsonl",
            "--target",
            "agent_mod:answer",
            "--scorer",
            "content-similarity:0.99",
            "--fail-on-warned",
            "--no-progress",
            "--no-trace",
        ]
    )
    assert code == 1
    assert "verdict: warned" in capsys.readouterr().out
