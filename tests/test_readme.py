"""The README's Python snippets stay valid Python, and its quickstart runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_has_snippets() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_snippet_compiles(index: int) -> None:
    compile(BLOCKS[index], f"README.md python block {index}", "exec")


def test_quickstart_snippet_runs_without_a_key(tmp_path: Path) -> None:
    (quickstart,) = [b for b in BLOCKS if "support-bot" in b and "def answer" in b]
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "OTEL_"))}
    env.update(LITELLM_OFFLINE_MODE="true", TRACESCORE_EXPORT_FILE=str(tmp_path / "t.jsonl"),
               TRACESCORE_FLUSH_TIMEOUT="20", PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, str(script)], check=True, env=env, cwd=tmp_path,
                   timeout=120)
    assert (tmp_path / "t.jsonl").exists()
