"""The largest classes and functions of the package, by lines (issue 23's measure), and a check
of size bounds (issue 32: no class over 350 lines, no function over 80).

Run: ``python scripts/largest_defs.py [PACKAGE_DIR] [N]`` (default ``tracescore``, 5) lists the
N largest of each. With ``--max-class LINES`` and/or ``--max-function LINES`` it also lists every
class or function over its bound and exits 1 when there is one; ``--allow PATH:NAME`` (repeated)
names one that may stay over for now (an entry that is no longer over is reported and also exits
1, so the list only shrinks). Lines are ``end_lineno - lineno + 1`` of each ``class``/``def``
node, docstrings included; methods and nested functions count as functions. Names are
``path/relative/to/the/package/parent.py:name``, e.g. ``tracescore/_setup/config.py:configure``.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path


def measure(root: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """``(classes, functions)`` under ``root``, each a list of ``(lines, "path:name")``."""
    classes: list[tuple[int, str]] = []
    functions: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not hasattr(node, "lineno"):
                continue
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            where = f"{path.relative_to(root.parent).as_posix()}:{getattr(node, 'name', '')}"
            if isinstance(node, ast.ClassDef):
                classes.append((size, where))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((size, where))
    return classes, functions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default="tracescore")
    parser.add_argument("n", nargs="?", type=int, default=5)
    parser.add_argument("--max-class", type=int, default=None)
    parser.add_argument("--max-function", type=int, default=None)
    parser.add_argument("--allow", action="append", default=[],
                        help="PATH:NAME that may stay over its bound for now (repeatable)")
    args = parser.parse_args(argv)
    classes, functions = measure(Path(args.root))
    for title, rows in (("classes", classes), ("functions", functions)):
        print(f"largest {title}:")
        for size, where in sorted(rows, reverse=True)[: args.n]:
            print(f"  {size:5d}  {where}")
    allowed = set(args.allow)
    over: list[str] = []
    for title, rows, bound in (("class", classes, args.max_class),
                               ("function", functions, args.max_function)):
        if bound is None:
            continue
        for size, where in sorted(rows, reverse=True):
            if size > bound:
                over.append(where)
                if where not in allowed:
                    print(f"OVER: {title} {where} has {size} lines (bound {bound})")
    failed = any(where not in allowed for where in over)
    for where in sorted(allowed - set(over)):
        print(f"STALE: {where} is allowed over its bound but is not over it: remove it")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
