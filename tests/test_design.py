"""docs/DESIGN.md stays true: every module it lists exists, and every module is listed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tracescore"


def _listed() -> set[str]:
    text = (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    table = text.split("## Modules", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for row in table.splitlines():
        if not row.startswith("| `"):
            continue
        cell = row.split("|")[1]
        for name in re.findall(r"`([^`]+)`", cell):
            if name.startswith("tracescore/"):
                names.add(name)
            elif name.startswith("_") or name == "__main__.py":
                names.add(f"tracescore/{name}")  # a sibling named after the first entry
    return names


def _entries() -> set[str]:
    """Top-level modules and subpackages of tracescore (a subpackage is listed as a folder)."""
    found = set()
    for path in PACKAGE.iterdir():
        if path.is_dir() and (path / "__init__.py").exists():
            found.add(f"tracescore/{path.name}/")
        elif path.suffix == ".py":
            found.add(f"tracescore/{path.name}")
    return found


def test_every_listed_module_exists() -> None:
    missing = sorted(name for name in _listed()
                     if not (ROOT / name.rstrip("/")).exists())
    assert not missing, f"docs/DESIGN.md lists modules that do not exist: {missing}"


def test_every_module_is_listed() -> None:
    unlisted = sorted(_entries() - _listed())
    assert not unlisted, f"modules missing from docs/DESIGN.md's table: {unlisted}"
