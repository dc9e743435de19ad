"""Issue 22, point 5: hostile data files for ``tracescore eval`` and ``tracescore calibrate``.

Each malformed input ends the command with exit code 2 and one line on stderr naming the file,
the line and the problem (no traceback); a JSON-lines file is read as the run takes its rows
(the first items are scored before a bad row further down is even read); progress shows as
plain lines off a terminal.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import tracescore
from tracescore._offline import progress as _progress
from tracescore._offline.evals.data import stream_items

ROOT = Path(__file__).resolve().parent.parent
NESTED = "[" * 100_000 + "]" * 100_000


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracescore", *args], cwd=str(ROOT),
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**_env(), "PYTHONPATH": str(ROOT)})


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "LITELLM_OFFLINE_MODE": "true"}


def _one_line_error(done: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for part in parts:
        assert part in lines[0], lines[0]


def _eval(path: Path) -> subprocess.CompletedProcess[str]:
    return _run("eval", str(path), "--target", "tests.test_hostile_files:echo",
                "--scorer", "content-similarity", "--no-trace")


def echo(value: str) -> str:
    """The eval target: returns its input."""
    return str(value)


@pytest.mark.parametrize(("name", "content", "parts"), [
    ("nested.jsonl", b'{"input": "a", "ground_truth": "a"}\n' + NESTED.encode() + b"\n",
     ["nested.jsonl line 2", "nested too deeply"]),
    ("bytes.jsonl", b'{"input": "a", "ground_truth": "a"}\n{"input": "b"}\n'
     b'{"input": "\xff\xfe"}\n', ["bytes.jsonl line 3", "not UTF-8"]),
    ("long.csv", b"input,ground_truth\nshort,short\n" + b"x" * 200_000 + b",y\n",
     ["long.csv row 2", "longer than 131072 characters"]),
    ("bytes.csv", b"input,ground_truth\na,a\n\xff\xfe,b\n", ["bytes.csv line", "not UTF-8"]),
    ("nested.json", NESTED.encode(), ["nested.json", "nested too deeply"]),
])
def test_eval_answers_a_hostile_file_with_one_line_and_exit_2(
        tmp_path: Path, name: str, content: bytes, parts: list[str]) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    _one_line_error(_eval(path), *parts)


def test_calibrate_answers_hostile_data_and_state_files_with_one_line(tmp_path: Path) -> None:
    data = tmp_path / "labels.jsonl"
    data.write_bytes(b'{"output": "a", "label": "pass"}\n' + NESTED.encode() + b"\n")
    _one_line_error(_run("calibrate", str(data), "--scorer", "content-similarity"),
                    "labels.jsonl line 2", "nested too deeply")

    good = tmp_path / "good.jsonl"
    good.write_text('{"output": "a", "ground_truth": "a", "label": "pass"}\n', encoding="utf-8")
    for state_bytes, problem in [(b"\x00\xff\xfe garbage\n", "not UTF-8"),
                                 (b"42\n", "not a calibration record"),
                                 (b'{"id": 1, "status": 7}\n', "not a calibration record")]:
        state = tmp_path / "state.jsonl"
        state.write_bytes(state_bytes)
        _one_line_error(_run("calibrate", str(good), "--scorer", "content-similarity",
                             "--state", str(state)), "state.jsonl line 1", problem)


def test_a_jsonl_file_is_read_as_the_run_takes_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    rows = [json.dumps({"input": f"q{i}", "ground_truth": f"q{i}"}) for i in range(1_500)]
    rows[1_400] = '{"input": "q1400", broken'
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    stream = stream_items(path)
    assert not isinstance(stream.items, (list, tuple))  # nothing read yet
    assert stream.total == 1_500
    done: list[str] = []
    scorer = tracescore.scorers.create_content_similarity_scorer()
    with pytest.raises(tracescore.ConfigurationError, match=r"big.jsonl line 1401: not valid"):
        tracescore.run_evals(data=str(path), scorers=[scorer], target=echo,
                             on_item_complete=lambda item, output, scores: done.append(output),
                             progress=False)
    # The rows before the broken one were run before it was read.
    assert done == [f"q{i}" for i in range(1_400)]


def test_progress_off_a_terminal_is_a_line_every_few_seconds() -> None:
    out = io.StringIO()
    progress = _progress.LineProgress(total=10, desc="nightly", interval=0.0, stream=out)
    for _ in range(3):
        progress.update(1)
    progress.set_postfix(errors=1)
    progress.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and "\r" not in out.getvalue()
    assert lines[0].startswith("nightly:") and "1/10" in lines[0]
    assert "3/10" in lines[-1] and "errors=1" in lines[-1]
    quiet = io.StringIO()
    short = _progress.LineProgress(total=10, desc="short", stream=quiet)  # 5 s interval
    short.update(10)
    short.close()
    assert quiet.getvalue() == ""  # a short run prints nothing
    # Off a terminal (pytest captures stderr), the default is the line form.
    assert isinstance(_progress.progress_bar(None, 10, "x"), _progress.LineProgress)


def test_a_long_run_keeps_bounded_results_and_counts_every_item(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore._offline.evals import run as _evals_run

    monkeypatch.setattr(_evals_run, "KEPT_RESULTS", 50)
    path = tmp_path / "long.jsonl"
    rows = [{"input": f"answer {i}", "ground_truth": "answer 1" if i % 2 else f"answer {i}"}
            for i in range(120)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")

    def target(value: str) -> str:
        if value == "answer 100":
            raise RuntimeError("boom")
        return value

    scorer = tracescore.scorers.create_content_similarity_scorer()
    result = tracescore.run_evals(data=str(path), scorers=[scorer], target=target,
                                  progress=False, concurrency=4)
    # Full results for the first 50 items only; every item counted in the summary.
    assert [r.item.index for r in result.items] == list(range(50))
    assert result.summary["total_items"] == 120
    assert result.summary["items_listed"] == 50
    expected = [scorer.run(input=r["input"], output=r["input"],
                           ground_truth=r["ground_truth"]).score
                for i, r in enumerate(rows) if i != 100]
    summary = result.scorers[scorer.id]
    assert summary.scored == 119 and summary.skipped == 1
    assert summary.mean == pytest.approx(sum(expected) / len(expected), abs=1e-12)
    assert any("the target raised on 1 of 120 item(s)" in r for r in result.reasons)


def test_calibrate_reads_its_data_as_it_scores(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    rows = [json.dumps({"id": f"r{i}", "output": "a b c", "ground_truth": "a b c",
                        "label": "pass"}) for i in range(1_500)]
    rows[1_400] = '{"id": "r1400", broken'
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    state = tmp_path / "state.jsonl"
    with pytest.raises(tracescore.ConfigurationError, match=r"labels.jsonl line 1401"):
        tracescore.calibrate(str(path), "content-similarity", state_file=str(state),
                             progress=False)
    # The rows before the broken one were scored (and recorded) before it was read.
    recorded = [json.loads(line) for line in state.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["id"] for r in recorded if "id" in r) == sorted(
        f"r{i}" for i in range(1_400))
