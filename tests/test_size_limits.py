"""Size bounds of the package (issue 32): no class over 350 lines, no function over 80, as
``scripts/largest_defs.py`` counts them (docstrings included).

The functions still over their bound are named below; the list only shrinks: the script fails
on one that is not named, and on a named one that is no longer over (remove it then).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_CLASS = 350
MAX_FUNCTION = 80

# Still over MAX_FUNCTION, to be split: none left (the scorer factories, the offline library's
# entry points and the command line's parser were the last); a new one fails the test.
STILL_OVER: tuple[str, ...] = ()


def _check(root: Path, *allowed: str, max_class: int = MAX_CLASS,
           max_function: int = MAX_FUNCTION) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, str(ROOT / "scripts" / "largest_defs.py"), str(root), "0",
            "--max-class", str(max_class), "--max-function", str(max_function)]
    for name in allowed:
        args += ["--allow", name]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def test_no_class_over_350_lines_and_no_new_function_over_80() -> None:
    result = _check(ROOT / "tracescore", *STILL_OVER)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_fails_on_a_long_definition_and_on_a_stale_allowance(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(5))
    (package / "mod.py").write_text(f"class Big:\n{body}\n\n\ndef long():\n{body}\n",
                                    encoding="utf-8")
    over = _check(package, max_class=5, max_function=5)
    assert over.returncode == 1
    assert "OVER: class pkg/mod.py:Big has 6 lines" in over.stdout
    assert "OVER: function pkg/mod.py:long has 6 lines" in over.stdout
    assert _check(package, "pkg/mod.py:Big", "pkg/mod.py:long", max_class=5,
                  max_function=5).returncode == 0
    stale = _check(package, "pkg/mod.py:Big", "pkg/mod.py:long")
    assert stale.returncode == 1
    assert "STALE: pkg/mod.py:long" in stale.stdout
