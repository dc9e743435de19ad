"""Count test files that reach into tracescore's private modules (issue 23, point 4).

Run: ``python scripts/count_private_imports.py [TESTS_DIR]`` (default ``tests``). A file counts
when it imports a module of the package whose dotted path has a part starting with ``_`` (for
example ``tracescore._setup.config`` or ``from tracescore import _loop``), or reads such a module
as an
attribute (``tracescore._setup.config``). ``tracescore.testing`` (and its ``runtime()`` hook) is
public.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def private(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] == "tracescore" and any(p.startswith("_") and not p.startswith("__")
                                            for p in parts[1:])


def reaches_in(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(private(a.name) for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and not node.level and (
                private(node.module) or (node.module == "tracescore" and any(
                    a.name.startswith("_") and not a.name.startswith("__")
                    for a in node.names))):
            return True
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "tracescore" and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            return True
    return False


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "tests")
    files = sorted(p for p in root.rglob("test_*.py"))
    hits = [p for p in files if reaches_in(ast.parse(p.read_text(encoding="utf-8")))]
    for p in hits:
        print(p)
    print(f"\ntest files importing private modules: {len(hits)} of {len(files)} "
          f"({100 * len(hits) / max(1, len(files)):.0f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
