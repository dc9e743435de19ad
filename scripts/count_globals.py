"""Count the package's mutable module-level globals, and writes into other modules' globals.

Run: ``python scripts/count_globals.py [PACKAGE_DIR]`` (default ``tracescore``), e.g. on an older
checkout to compare (issue 23). Read from the source with ``ast``, nothing is imported.

A module-level name counts as a mutable global when either

- a function of its module rebinds it (``global NAME``), or
- it is bound at module level to a container or object that the code then mutates in place:
  ``NAME[...] = ...``, ``del NAME[...]``, ``NAME.attr = ...`` or a call of a mutating method
  (``append``, ``add``, ``update``, ``pop``, ``clear``, ``insert``, ``extend``, ``remove``,
  ``discard``, ``setdefault``, ``popitem``, ``appendleft``, ``popleft``) on ``NAME`` or
  ``module.NAME``, anywhere in the package.

Constant tables that nothing mutates are not counted. A write into another module's global is
an assignment ``module.NAME = ...`` (or ``setattr(module, "NAME", ...)``) where ``module`` is a
package module imported by name; each distinct (writer, module.NAME) pair is listed.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

MUTATORS = {"append", "add", "update", "pop", "clear", "insert", "extend", "remove", "discard",
            "setdefault", "popitem", "appendleft", "popleft", "extendleft"}


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.Module, name: str, package: str) -> dict[str, str]:
    """Local name -> package module, for ``from . import x`` / ``import tracescore._x as y``."""
    out: dict[str, str] = {}
    base = name.rsplit(".", 1)[0] if "." in name else name
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = name.split(".")
                prefix = ".".join(anchor[: max(1, len(anchor) - node.level)])
                mod = f"{prefix}.{node.module}" if node.module else prefix
            else:
                mod = node.module or ""
            for alias in node.names:
                if mod.startswith(package):
                    out[alias.asname or alias.name] = f"{mod}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(package):
                    out[alias.asname or alias.name.split(".")[0]] = alias.name
    del base
    return out


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "tracescore").resolve()
    package = root.name
    modules: dict[str, ast.Module] = {}
    for path in sorted(root.rglob("*.py")):
        modules[module_name(root, path)] = ast.parse(path.read_text(encoding="utf-8"))
    top: dict[str, set[str]] = {}
    for name, tree in modules.items():
        names: set[str] = set()
        for node in tree.body:
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) and node.value
                       else [])
            for target in targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
        top[name] = names
    mutable: dict[str, set[str]] = defaultdict(set)
    writes: set[tuple[str, str]] = set()
    for name, tree in modules.items():
        mods = imported_modules(tree, name, package)
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                for g in node.names:
                    mutable[name].add(g)
            target_nodes: list[ast.expr] = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                target_nodes = node.targets if isinstance(node, ast.Assign) else [node.target]
            elif isinstance(node, ast.Delete):
                target_nodes = node.targets
            for t in target_nodes:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) \
                        and t.value.id in top[name]:
                    mutable[name].add(t.value.id)
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                    if t.value.id in top[name] and not isinstance(node, ast.Delete):
                        mutable[name].add(t.value.id)
                    target_mod = mods.get(t.value.id)
                    if target_mod in modules:
                        writes.add((name, f"{target_mod}.{t.attr}"))
                        mutable[target_mod].add(t.attr)
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) \
                        and isinstance(t.value.value, ast.Name):
                    target_mod = mods.get(t.value.value.id)
                    if target_mod in modules and t.value.attr in top.get(target_mod, ()):
                        mutable[target_mod].add(t.value.attr)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in MUTATORS:
                owner = node.func.value
                if isinstance(owner, ast.Name) and owner.id in top[name]:
                    mutable[name].add(owner.id)
                elif isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name):
                    target_mod = mods.get(owner.value.id)
                    if target_mod in modules and owner.attr in top.get(target_mod, ()):
                        mutable[target_mod].add(owner.attr)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "setattr" and len(node.args) >= 2 \
                    and isinstance(node.args[0], ast.Name) \
                    and isinstance(node.args[1], ast.Constant):
                target_mod = mods.get(node.args[0].id)
                if target_mod in modules:
                    writes.add((name, f"{target_mod}.{node.args[1].value}"))
                    mutable[target_mod].add(str(node.args[1].value))
    # Only names that exist at module level of their module.
    counted = {m: sorted(n for n in names if n in top.get(m, ())) for m, names in mutable.items()}
    counted = {m: n for m, n in counted.items() if n}
    total = sum(len(n) for n in counted.values())
    for m in sorted(counted):
        print(f"{m}: {', '.join(counted[m])}")
    print(f"\nmutable module-level globals: {total} in {len(counted)} modules")
    writers: dict[str, set[str]] = defaultdict(set)
    for writer, target in sorted(writes):
        writers[writer].add(target)
    for writer in sorted(writers):
        print(f"{writer} writes {', '.join(sorted(writers[writer]))}")
    print(f"writes into other modules' globals: {len(writes)} "
          f"(from {len(writers)} modules into {len({t.rsplit('.', 1)[0] for _, t in writes})})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
