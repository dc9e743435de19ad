"""The largest classes and functions of the package, by lines (issue 23's measure).

Run: ``python scripts/largest_defs.py [PACKAGE_DIR] [N]`` (default ``tracescore``, 5). Lines
are ``end_lineno - lineno + 1`` of each ``class``/``def`` node, docstrings included; methods
count as functions.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "tracescore")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    classes: list[tuple[int, str]] = []
    functions: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not hasattr(node, "lineno"):
                continue
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            where = f"{path.relative_to(root.parent)}:{getattr(node, 'name', '')}"
            if isinstance(node, ast.ClassDef):
                classes.append((size, where))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((size, where))
    for title, rows in (("classes", classes), ("functions", functions)):
        print(f"largest {title}:")
        for size, where in sorted(rows, reverse=True)[:n]:
            print(f"  {size:5d}  {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
