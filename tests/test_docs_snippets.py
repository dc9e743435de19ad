"""Every Python snippet of the README and of the documentation site (docs/) runs as written.

Each ```python block runs in a fresh interpreter from the repository root (so data paths such as
``examples/data/...`` resolve), offline, with spans written to a temporary file. A block marked
with an HTML comment on the line before its fence is treated otherwise, and the mark says why:

* ``<!-- snippet: compile-only (reason) -->``: compiled only (it needs a provider key, binds a
  fixed port, or is an excerpt);
* ``<!-- snippet: pytest (reason) -->``: a test file, run by pytest as a user would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_BLOCK = re.compile(
    r"(?:<!-- snippet: (?P<mode>[a-z-]+) \((?P<why>[^)]+)\) -->\n)?```python\n(?P<code>.*?)```",
    re.S,
)


@dataclass(frozen=True)
class Snippet:
    page: str
    index: int
    mode: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.page}[{self.index}]"


def _snippets() -> list[Snippet]:
    found = []
    for page in PAGES:
        rel = str(page.relative_to(ROOT))
        for i, m in enumerate(_BLOCK.finditer(page.read_text(encoding="utf-8"))):
            found.append(Snippet(rel, i, m["mode"] or "run", m["code"]))
    return found


SNIPPETS = _snippets()


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI", "OTEL_", "TRACESCORE_", "PYTEST"))}
    env.update(LITELLM_OFFLINE_MODE="true", TRACESCORE_EXPORT_FILE=str(tmp_path / "t.jsonl"),
               TRACESCORE_FLUSH_TIMEOUT="20", PYTHONPATH=str(ROOT))
    return env


def test_the_docs_have_snippets_and_marks_are_known() -> None:
    assert len(SNIPPETS) >= 10
    assert {s.mode for s in SNIPPETS} <= {"run", "compile-only", "pytest"}
    # Most snippets run; a compile-only one is the exception, with its reason beside it.
    compile_only = sum(s.mode == "compile-only" for s in SNIPPETS)
    assert compile_only * 2 < len(SNIPPETS) - compile_only


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.name)
def test_snippet_compiles(snippet: Snippet) -> None:
    compile(snippet.code, snippet.name, "exec")


RUNNABLE = [s for s in SNIPPETS if s.mode != "compile-only"]


@pytest.mark.parametrize("snippet", RUNNABLE, ids=lambda s: s.name)
def test_snippet_runs(snippet: Snippet, tmp_path: Path) -> None:
    if snippet.mode == "pytest":
        script = tmp_path / "test_snippet.py"
        script.write_text(snippet.code)
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(script)]
        cwd = tmp_path
    else:
        script = tmp_path / "snippet.py"
        script.write_text(snippet.code)
        argv, cwd = [sys.executable, str(script)], ROOT
    result = subprocess.run(argv, env=_env(tmp_path), cwd=cwd, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, f"{snippet.name}:\n{result.stdout}\n{result.stderr}"
    if snippet.mode == "run" and re.search(r"^\s*@tracescore\.", snippet.code, re.M):
        # A decorated function records nothing before configure(): a snippet that forgets it
        # runs, exits 0 and shows the reader nothing.
        spans = tmp_path / "t.jsonl"
        assert spans.exists() and spans.stat().st_size, (
            f"{snippet.name} decorates functions but exported no span: call "
            f"tracescore.configure() before the first decorated call")


def test_quickstart_snippet_exports_its_spans_without_a_key(tmp_path: Path) -> None:
    (quickstart,) = {s.code for s in SNIPPETS
                     if s.page in ("README.md", "docs/quickstart.md") and "def answer" in s.code}
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart)
    run = subprocess.run([sys.executable, str(script)], check=True, env=_env(tmp_path),
                         cwd=tmp_path, timeout=120, capture_output=True, text=True)
    assert (tmp_path / "t.jsonl").exists()
    # The first run says where its spans and scores went, and how to look at them.
    spans = tmp_path / "t.jsonl"
    lines = run.stderr.splitlines()
    assert f"tracescore: no OTLP endpoint set: spans and scores go to {spans} (see them: " \
           f"tracescore view {spans}; quiet: TRACESCORE_CONSOLE=false)" in lines, run.stderr
    assert f"tracescore: wrote 2 spans to {spans} with 2 evaluation results" in lines
    # No key: each rule's score is an error, and the summary says which and why.
    assert "  answer-relevancy   1 failed (judge_error)" in lines
    assert "  context-precision  1 failed (judge_error)" in lines
    assert any("first error: " in line and "OPENAI_API_KEY" in line for line in lines)
    assert f"  see them: tracescore view {spans}  (an HTML page of the traces and their " \
           "scores)" in lines


def test_the_readme_quickstart_is_the_docs_quickstart() -> None:
    def block(page: str) -> str:
        return next(s.code for s in SNIPPETS if s.page == page and "support-bot" in s.code)

    assert block("README.md") == block("docs/quickstart.md")
