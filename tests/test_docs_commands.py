"""The shell commands the documentation marks as runnable run as written, offline, and print what
the page shows.

A ```bash block preceded by ``<!-- snippet: shell (reason) -->`` is run line by line (a line
ending in a backslash continues on the next) from a scratch folder in which ``examples/`` is the
repository's, with ``tracescore`` meaning this checkout's command line and ``python`` this
interpreter (for ``python examples/...``). When a ```text block follows it, every line of that
block except the ``cost:`` line (wall-clock times) must appear in what the first ``tracescore``
command printed.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
_BLOCK = re.compile(
    r"<!-- snippet: shell \((?P<why>[^)]+)\) -->\n```bash\n(?P<code>.*?)```"
    r"(?:\n+```text\n(?P<shown>.*?)```)?", re.S)


def _blocks() -> list[tuple[str, str, str | None]]:
    found = []
    for page in PAGES:
        rel = str(page.relative_to(ROOT))
        for i, m in enumerate(_BLOCK.finditer(page.read_text(encoding="utf-8"))):
            found.append((f"{rel}[{i}]", m["code"], m["shown"]))
    return found


BLOCKS = _blocks()


def test_the_calibration_page_has_a_runnable_block() -> None:
    assert any(name.startswith("docs/evals.md") for name, _, _ in BLOCKS)


@pytest.mark.parametrize(("name", "code", "shown"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_documented_commands_run_as_written(name: str, code: str, shown: str | None,
                                            tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI", "OTEL_", "TRACESCORE_", "PYTEST"))}
    env.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(ROOT))
    printed = []
    for command in code.replace("\\\n", " ").splitlines():
        argv = shlex.split(command)
        if not argv:
            continue
        if argv[0] == "python":  # an example of the repository
            assert argv[1].startswith("examples/"), f"{name}: {command}"
            run = [sys.executable, *argv[1:]]
        else:
            assert argv[0] == "tracescore", f"{name}: only tracescore commands run here"
            run = [sys.executable, "-m", "tracescore", *argv[1:]]
        result = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=300)
        assert result.returncode in (0, 1), f"{name}: {command}\n{result.stderr}"
        assert "Traceback" not in result.stderr, result.stderr
        printed.append(result.stdout)
    if shown is not None:
        out = next(p for p in printed if p.startswith("tracescore "))
        missing = [line for line in shown.splitlines()
                   if line.strip() and not line.startswith("cost:") and line not in out]
        assert not missing, f"{name}: the page shows lines the command did not print:\n" \
            + "\n".join(missing) + f"\n--- printed ---\n{out}"


def test_install_lines_work_from_the_built_wheel() -> None:
    # tracescore is not on a package index: an extra is installed through the built wheel
    # (``'dist/tracescore-<version>-py3-none-any.whl[serve]'``) or a checkout (``'.[serve]'``),
    # and the wheel named is the one ``python -m build`` makes of this version.
    from tracescore import __version__

    pages = [ROOT / "README.md", *PAGES, *sorted((ROOT / "integrations").glob("*/README.md")),
             *sorted((ROOT / "tracescore").rglob("*.py"))]
    from_index = re.compile(r"""pip install [^\n]*?(?<![\w./-])['"]?tracescore\[""")
    wheel = re.compile(r"dist/tracescore(?:_\w+)?-([^-\s]+)-py3-none-any\.whl")
    problems = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        rel = page.relative_to(ROOT)
        problems += [f"{rel}: {m[0]!r} installs from an index" for m in from_index.finditer(text)]
        problems += [f"{rel}: {m[0]} is not version {__version__}" for m in wheel.finditer(text)
                     if m[1] != __version__]
    assert problems == []
