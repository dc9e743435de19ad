"""The files ``tracescore eval`` and ``tracescore calibrate`` write, attacked: item ids and
exception messages holding characters XML forbids (ANSI escapes, NUL, lone surrogates) still
give JUnit XML that parses; an output path that names an input, another output or something
that cannot be written is refused before the run, in one line, exit 2, the input untouched.

Every command runs as CI runs it: ``python -m tracescore`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.test_cli import tracescore_cli
from tracescore.testing import ScriptedJudge

HOSTILE = ["\x1b[31mred\x1b[0m", "nul\x00byte", "bell\x07\x0b\x0c", "lone\udc80surrogate",
           "not\ufffechar"]

AGENT = '''
def answer(question):
    if question.startswith("boom"):
        raise RuntimeError("\\x1b[1;31mexploded\\x1b[0m at byte \\x00 then \\x08\\x1f")
    return "Paris"
'''


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "agent.py").write_text(AGENT, encoding="utf-8")
    rows = [{"id": f"{text}-{n}", "input": "boom" if n % 2 else "q", "ground_truth": "Paris"}
            for n, text in enumerate(HOSTILE)]
    rows.append({"id": "plain", "input": "q", "ground_truth": "London"})
    # json.dumps writes the lone surrogate as the escape \udc80, as a JSON file may hold it.
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                         encoding="utf-8")
    return tmp_path


def _failure_text(junit: Path, case_name: str) -> str:
    root = ET.parse(junit).getroot()  # raises on a document that does not parse
    (suite,) = root.findall("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    failure = cases[case_name].find("failure")
    assert failure is not None
    return (failure.get("message") or "") + "\n" + (failure.text or "")


def test_eval_junit_with_hostile_ids_and_messages_parses(workdir: Path) -> None:
    proc = tracescore_cli("eval", "data.jsonl", "--target", "agent:answer",
                          "--scorer", "content-similarity:0.9", "--junit", "junit.xml",
                          "--report", "report.json", "--html", "report.html", cwd=workdir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    target = _failure_text(workdir / "junit.xml", "target")
    # The characters are there, escaped and readable; none of them raw.
    assert "item nul\\x00byte-1: RuntimeError: \\x1b[1;31mexploded\\x1b[0m at byte \\x00" \
        in target
    assert "item lone\\udc80surrogate-3" in target
    scorer = _failure_text(workdir / "junit.xml", "content-similarity")
    assert "item plain: score" in scorer and "item \\x1b[31mred\\x1b[0m-0" not in scorer
    raw = (workdir / "junit.xml").read_bytes()
    assert b"\x00" not in raw and b"\x1b" not in raw
    # The JSON report keeps the ids exactly (JSON escapes them).
    report = json.loads((workdir / "report.json").read_text(encoding="utf-8"))
    assert [i["id"] for i in report["items"]][:5] == [f"{t}-{n}" for n, t in enumerate(HOSTILE)]
    assert "exploded" in (workdir / "report.html").read_text(encoding="utf-8")


def _calibrate_data(path: Path) -> Path:
    rows = [{"id": text, "input": "?", "context": ["c"], "output": "REFUSED", "label": "fail"}
            for text in HOSTILE]
    rows.append({"id": "ok", "input": "?", "context": ["c"], "output": "ANSWER", "label": "pass"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_calibrate_junit_with_hostile_ids_and_judge_errors_parses(
        judge_server: ScriptedJudge, tmp_path: Path) -> None:
    judge_server.route_prompt("REFUSED", ScriptedJudge.Reply(
        status=400, body={"error": {"message": "bad \x1b[31mrequest\x00"}}),
        schema_name="output_claims")
    judge_server.route_prompt("ANSWER", {"claims": ["c"]}, schema_name="output_claims")
    judge_server.route("faithfulness_verdicts", {"verdicts": [
        {"claim_index": 0, "verdict": "yes", "reason": "r"}]})
    judge_server.route("faithfulness_reason", {"reason": "scripted"})
    data = _calibrate_data(tmp_path / "labelled.jsonl")
    proc = tracescore_cli("calibrate", str(data), "--scorer", "faithfulness",
                          "--judge", "test-judge", "--judge-api-base", judge_server.api_base,
                          "--no-progress", "--junit", "cal.xml", "--report", "cal.json",
                          cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    text = _failure_text(tmp_path / "cal.xml", "judge")
    assert "item \\x1b[31mred\\x1b[0m:" in text and "item nul\\x00byte:" in text
    assert "item lone\\udc80surrogate:" in text and "item not\\ufffechar" in text
    assert b"\x00" not in (tmp_path / "cal.xml").read_bytes()


# -- output paths ---------------------------------------------------------------------------


def _eval(workdir: Path, *options: str) -> tuple[int, str, str]:
    proc = tracescore_cli("eval", "data.jsonl", "--target", "agent:answer",
                          "--scorer", "content-similarity", *options, cwd=workdir)
    return proc.returncode, proc.stdout, proc.stderr


def _one_line_error(stderr: str, *words: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("tracescore ") and ": error: " in lines[0], stderr
    assert "Traceback" not in stderr
    for word in words:
        assert word in lines[0], stderr


@pytest.mark.parametrize("option", ["--report", "--junit", "--html"])
@pytest.mark.parametrize("spelling", ["data.jsonl", "./sub/../data.jsonl", "{abs}",
                                      "link.jsonl", "hard.jsonl"])
def test_eval_refuses_an_output_that_is_the_data_file(
        workdir: Path, option: str, spelling: str) -> None:
    (workdir / "sub").mkdir()
    (workdir / "link.jsonl").symlink_to(workdir / "data.jsonl")
    os.link(workdir / "data.jsonl", workdir / "hard.jsonl")
    before = (workdir / "data.jsonl").read_bytes()
    code, out, err = _eval(workdir, option,
                           spelling.format(abs=workdir / "data.jsonl"))
    assert code == 2, out + err
    _one_line_error(err, option, "DATA")
    assert out == ""  # refused before the run: no table
    assert (workdir / "data.jsonl").read_bytes() == before


def test_eval_refuses_an_output_that_is_the_target_file_or_another_output(
        workdir: Path) -> None:
    source = (workdir / "agent.py").read_bytes()
    proc = tracescore_cli("eval", "data.jsonl", "--target", "agent.py:answer",
                          "--scorer", "content-similarity", "--html", "agent.py", cwd=workdir)
    assert proc.returncode == 2
    _one_line_error(proc.stderr, "--html", "--target")
    assert (workdir / "agent.py").read_bytes() == source
    code, out, err = _eval(workdir, "--report", "out.txt", "--junit", "./out.txt")
    assert code == 2 and out == ""
    _one_line_error(err, "--junit", "--report")
    assert not (workdir / "out.txt").exists()


@pytest.mark.parametrize("case", ["folder", "parent is a file", "no permission",
                                  "pipe nobody reads"])
def test_eval_refuses_an_unwritable_output_before_scoring(workdir: Path, case: str) -> None:
    (workdir / "reports").mkdir()
    (workdir / "afile").write_text("x", encoding="utf-8")
    locked = workdir / "locked"
    locked.mkdir(mode=0o500)
    if case == "no permission" and os.geteuid() == 0:
        # Permissions do not stop root: sysfs refuses to create files, even to root.
        if not os.path.isdir("/sys/kernel"):
            pytest.skip("needs a sysfs at /sys as root (or run the tests as another user)")
        locked = Path("/sys")
    os.mkfifo(workdir / "fifo")
    target = {"folder": "reports", "parent is a file": "afile/report.html",
              "no permission": str(locked / "report.html"), "pipe nobody reads": "fifo"}[case]
    code, out, err = _eval(workdir, "--html", target)
    assert code == 2, out + err
    _one_line_error(err, "--html", target)
    assert out == ""


def test_eval_a_writable_new_output_is_not_left_behind_by_the_check(workdir: Path) -> None:
    # The check creates and removes a file that did not exist; a run that fails later (here:
    # a scorer that does not exist) leaves nothing, through a dangling symbolic link either.
    (workdir / "dangling.html").symlink_to(workdir / "elsewhere.html")
    proc = tracescore_cli("eval", "data.jsonl", "--target", "agent:answer",
                          "--scorer", "no-such-scorer", "--html", "new/page.html",
                          "--report", "dangling.html", cwd=workdir)
    assert proc.returncode == 2
    assert not (workdir / "new" / "page.html").exists()
    assert not (workdir / "elsewhere.html").exists()
    assert (workdir / "dangling.html").is_symlink()


@pytest.mark.parametrize("options,words", [
    (("--report", "{data}"), ("--report", "DATA")),
    (("--state", "{data}"), ("--state", "DATA")),
    (("--junit", "state.jsonl", "--state", "state.jsonl"), ("--junit", "--state")),
    (("--html", "."), ("--html", "folder")),
])
def test_calibrate_refuses_clashing_or_unwritable_outputs_before_the_run(
        judge_server: ScriptedJudge, tmp_path: Path, options: tuple[str, ...],
        words: tuple[str, ...]) -> None:
    data = _calibrate_data(tmp_path / "labelled.jsonl")
    before = data.read_bytes()
    proc = tracescore_cli("calibrate", str(data), "--scorer", "faithfulness",
                          "--judge", "test-judge", "--judge-api-base", judge_server.api_base,
                          "--no-progress", *(o.format(data=data) for o in options),
                          cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    _one_line_error(proc.stderr, *words)
    assert data.read_bytes() == before
    assert judge_server.requests == []  # nothing was scored


def test_calibrate_refuses_an_output_that_is_a_feedback_file(tmp_path: Path) -> None:
    feedback = tmp_path / "logs.jsonl"
    feedback.write_text("", encoding="utf-8")
    proc = tracescore_cli("calibrate", "--feedback", str(feedback), "--scorer", "faithfulness",
                          "--report", str(feedback), cwd=tmp_path)
    assert proc.returncode == 2
    _one_line_error(proc.stderr, "--report", "--feedback")


@pytest.mark.parametrize("options,words", [
    (("--report", "hard.jsonl"), ("--report", "FILE")),
    (("--state", "link.jsonl"), ("--state", "FILE")),
    (("--report", "out.json", "--html", "./out.json"), ("--html", "--report")),
    (("--html", "fifo"), ("--html", "cannot write")),
])
def test_rescore_refuses_clashing_or_unwritable_outputs_before_the_run(
        tmp_path: Path, options: tuple[str, ...], words: tuple[str, ...]) -> None:
    traces = tmp_path / "traces.jsonl"
    traces.write_text("", encoding="utf-8")
    os.link(traces, tmp_path / "hard.jsonl")
    (tmp_path / "link.jsonl").symlink_to(traces)
    os.mkfifo(tmp_path / "fifo")
    proc = tracescore_cli("rescore", "traces.jsonl", "--scorer", "completeness",
                          "--no-progress", *options, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    _one_line_error(proc.stderr, *words)
    assert traces.read_text(encoding="utf-8") == ""
