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

What must stay process-wide is listed once, here, in ``PROCESS_WIDE`` with the reason (docs/
DESIGN.md, "What stays process-wide", says the rule and points here). Run on this checkout's
package (no argument; ``--check DIR`` for another copy), the script exits 1 naming every
mutable global that is not listed, and every listed one that is gone; ``tests/test_design.py``
runs it. Configuration
and counters belong on the runtime (``tracescore._pipeline.runtime.Runtime``) or in ``Stats``,
never here. Given another package directory (an older checkout), it only counts.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

# module -> {global: why it is process-wide}. Kinds: the one loop and CPU pool, the judge
# child, signal handlers, fork hooks (registries of live objects to reset in a child), exit
# hooks, what OpenTelemetry itself keeps per process (the global providers), and caches that
# are pure functions of their inputs or warn-once memories of the process's log.
PROCESS_WIDE: dict[str, dict[str, str]] = {
    "tracescore._core.cpu": {
        "_pool": "the CPU pool of synchronous scorer steps (afresh after fork)",
        "_lock": "guards the pool's creation (afresh after fork)",
    },
    "tracescore._core.loop": {
        "_loop": "the one background event loop (litellm binds its clients to it)",
        "_thread": "the loop's thread",
        "_lock": "guards the loop's start (afresh after fork)",
    },
    "tracescore._core.redact": {
        "_KNOWN": "credentials the process holds (judges' keys, the environment's provider "
                  "keys): every runtime's redactor redacts them",
        "_FOLDED": "cache: folded forms of characters (a pure function)",
        "_own_message": "thread-local re-entrancy guard while a callback failure is logged",
    },
    "tracescore._core.suppress": {
        "_check": "cache: the suppression check of the installed OpenTelemetry, resolved once",
    },
    "tracescore._export.processor": {
        "_instances": "fork hook: the export processors to reset in a child",
    },
    "tracescore._export.spool": {
        "_REFUSED_LOGGED": "warn-once memory: spool folders of other processes reported",
    },
    "tracescore._instrument.usage": {
        "_tables": "cache: price tables by file (a pure function of the file)",
        "_warned": "warn-once memory: price files that could not be read",
        "_counted": "model calls in flight whose usage was counted beneath a span, by span id "
                    "(spans of every runtime; bounded)",
        "_wrappers": "model-call spans in flight found wrapping a counted one, by span id "
                     "(bounded)",
        "_priced": "model-call spans in flight priced as they were counted, by span id, for "
                   "their export (bounded)",
    },
    "tracescore._judge.direct": {
        "_PRICES": "cache: litellm's price table, read once",
        "_sessions": "HTTP sessions of the direct judge transport, one per event loop",
    },
    "tracescore._judge.metrics": {
        "_UNPRICED": "cache: models litellm has no price for",
    },
    "tracescore._judge.process": {
        "_shared": "the judge child process",
        "_shared_pid": "the process that started it (a forked child starts its own)",
    },
    "tracescore._judge.resolve": {
        "_judges_by_model": "cache: one Judge per model string, so a provider's structured-"
                            "output fallback is learnt once",
    },
    "tracescore._pipeline.engine": {
        "_engines": "fork hook: the engines to reset in a child",
    },
    "tracescore._pipeline.held": {
        "_FLAGS": "cache: interned TraceFlags",
    },
    "tracescore._pipeline.processor": {
        "_processors": "fork hook: the scoring processors to reset in a child",
    },
    "tracescore._readers._log_stash": {
        "STASH": "message content from the global LoggerProvider's records (OpenTelemetry's "
                 "global provider is the process's), for every runtime's GenAI reader",
    },
    "tracescore._readers._values": {
        "_limit_cache": "cache: the span attribute length limit of the environment",
    },
    "tracescore._setup.config": {
        "_atexit_registered": "exit hooks, registered once per process",
        "_config_lock": "serialises configure() and shutdown() (afresh after fork)",
        "_owned_provider": "the TracerProvider tracescore set as OpenTelemetry's global one",
        "_switches": "the scoring processor switch added once to each TracerProvider",
        "_preloaded": "judge preload (litellm import, judge child warm-up): done once",
        "_preload_done": "judge preload: finished",
        "_flush_waiting_for_preload": "judge preload: a flush is waiting for it",
    },
    "tracescore._setup.env": {
        "_warned": "warn-once memory: bad environment values",
    },
    "tracescore._setup.signals": {
        "_stop": "the SIGTERM handler's shutdown callback",
        "_timeout": "the SIGTERM handler's deadline",
    },
}

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


def check(counted: dict[str, list[str]]) -> list[str]:
    """Problems: counted globals not in ``PROCESS_WIDE``, listed ones that are gone."""
    problems = [f"{m}.{n}: a mutable module global not listed in PROCESS_WIDE (configuration "
                "and counters belong on the Runtime or in Stats; what must be process-wide is "
                "listed with its reason)"
                for m, names in sorted(counted.items()) for n in names
                if n not in PROCESS_WIDE.get(m, {})]
    problems += [f"{m}.{n}: listed in PROCESS_WIDE but no longer a mutable global: remove it"
                 for m, names in sorted(PROCESS_WIDE.items()) for n in sorted(names)
                 if n not in counted.get(m, [])]
    return problems


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--check"]
    here = Path(__file__).resolve().parent.parent / "tracescore"
    root = Path(args[0] if args else here).resolve()
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
    if root != here and "--check" not in sys.argv:
        return 0
    problems = check(counted) + [f"{w} writes {t}" for w, t in sorted(writes)]
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
