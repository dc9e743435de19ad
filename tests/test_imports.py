"""Import hygiene of the ``tracescore`` package.

- every module imports on its own, in a fresh interpreter (no module relies on another having
  been imported first);
- the modules import each other without cycles, counting imports inside functions too (a
  function-level import is how a cycle hides; it still ties the two modules together);
- ``import tracescore`` stays light: no litellm, no pydantic, no scorer module.
"""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

import tracescore

PACKAGE = "tracescore"
PACKAGE_DIR = Path(tracescore.__file__).resolve().parent
_CHILD_TIMEOUT = 120  # seconds; generous, a fresh import takes well under one


def _discover() -> list[str]:
    names = [PACKAGE]
    # walk_packages imports each subpackage to look inside it; that is fine in this process.
    for info in pkgutil.walk_packages(tracescore.__path__, prefix=PACKAGE + "."):
        names.append(info.name)
    # Both entry points (``tracescore.__main__``, and ``tracescore._judge_process``, the judge
    # child's) keep their work behind ``if __name__ == "__main__"``, so importing them is safe
    # and is checked like any other module: the parent process imports ``_judge_process`` too.
    return sorted(names)


MODULES = _discover()


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["LITELLM_OFFLINE_MODE"] = "true"
    # The child must import the tracescore under test, from wherever this process found it.
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PACKAGE_DIR.parent), env.get("PYTHONPATH", "")) if p
    )
    return env


def _import_alone(module: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=_CHILD_TIMEOUT,
        check=False,
    )


@pytest.fixture(scope="module")
def fresh_imports() -> dict[str, subprocess.CompletedProcess[str]]:
    """Each module imported in its own fresh interpreter, a few at a time."""
    env = _child_env()
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        results = pool.map(lambda m: _import_alone(m, env), MODULES)
        return dict(zip(MODULES, results, strict=True))


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_alone_in_a_fresh_interpreter(
    module: str, fresh_imports: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    done = fresh_imports[module]
    assert done.returncode == 0, f"`import {module}` failed on its own:\n{done.stderr}"


def test_the_discovery_finds_the_modules_it_should() -> None:
    # Guards the two tests around it against an empty or truncated walk.
    assert {PACKAGE, f"{PACKAGE}._config", f"{PACKAGE}._decorators"} <= set(MODULES)
    assert any(m.startswith(f"{PACKAGE}.scorers.") for m in MODULES)


# --- the import graph, read from the source --------------------------------------------------


MODULE_LEVEL = "at module level"
IN_FUNCTION = "inside a function"
TYPE_ONLY = "type-only, under if TYPE_CHECKING"


@dataclass(frozen=True)
class ImportSite:
    """One import statement of one package module of another."""

    source: str  # the importing module
    target: str  # the imported module
    path: Path
    line: int
    where: str  # MODULE_LEVEL, IN_FUNCTION or TYPE_ONLY

    def __str__(self) -> str:
        rel = self.path.relative_to(PACKAGE_DIR.parent)
        return f"{self.source} -> {self.target}  ({rel}:{self.line}, {self.where})"


def _source_files() -> Iterator[tuple[str, Path, bool]]:
    """(module name, file, is a package ``__init__``) for every module under the package."""
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        yield ".".join(parts), path, is_package


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement, with where it sits: MODULE_LEVEL, IN_FUNCTION or TYPE_ONLY.

    Imports under ``if TYPE_CHECKING:`` count too. They never run, so they cannot fail an
    import, but they still make the importing module know the imported one: a type-only import
    back upstream is the same layering loop, and it is how the ``_evals_results`` /
    ``_evals_report`` cycle looked (a type-only import one way, a function-level one back).
    """

    def visit(node: ast.AST, where: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, where
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for statement in node.body:
                yield from visit(statement, TYPE_ONLY)
            for statement in node.orelse:
                yield from visit(statement, where)
            return
        functions = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
        inner = IN_FUNCTION if where == MODULE_LEVEL and isinstance(node, functions) else where
        for child in ast.iter_child_nodes(node):
            yield from visit(child, inner)

    yield from visit(tree, MODULE_LEVEL)


def _resolve_base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    # Relative to the importing module's package: a package's __init__ is its own package.
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(
    module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: set[str]
) -> set[str]:
    """The package modules one import statement executes (their parent packages aside)."""
    found: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in known:
                found.add(alias.name)
        return found
    base = _resolve_base(module, is_package, node)
    if base not in known:
        return found
    for alias in node.names:
        # ``from . import _state`` imports the submodule; ``from . import configure`` runs
        # the package's ``__init__``.
        submodule = f"{base}.{alias.name}"
        found.add(submodule if submodule in known else base)
    return found


def import_graph() -> dict[str, list[ImportSite]]:
    """Package module -> the import sites through which it imports other package modules.

    Parent packages that an import initialises implicitly (``tracescore`` for
    ``from tracescore._x import y``) are not edges: by the time a submodule runs, its parent is
    already in ``sys.modules``. Self-imports are dropped (``_judge_process`` re-imports itself
    under its real name when run as ``__main__``).
    """
    files = list(_source_files())
    known = {name for name, _, _ in files}
    graph: dict[str, list[ImportSite]] = {name: [] for name in known}
    for name, path, is_package in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, where in _import_nodes(tree):
            for target in sorted(_targets(name, is_package, node, known)):
                if target != name:
                    graph[name].append(ImportSite(name, target, path, node.lineno, where))
    return graph


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (Tarjan 1972, "Depth-first search and linear graph
    algorithms")."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def _one_cycle(start: str, members: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through ``start`` inside one strongly connected component."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is in a component but on no cycle")  # pragma: no cover


def find_cycles(sites: dict[str, list[ImportSite]]) -> list[str]:
    """One paragraph per group of modules that import each other, naming a cycle and the
    import statements that make up every edge inside the group."""
    graph = {name: {s.target for s in found} for name, found in sites.items()}
    reports = []
    for component in _strongly_connected(graph):
        if len(component) < 2:
            continue
        members = set(component)
        cycle = _one_cycle(component[0], members, graph)
        edges = [
            f"    {site}" for name in component for site in sites[name] if site.target in members
        ]
        reports.append(
            f"cycle: {' -> '.join(cycle)}\n"
            f"  modules in this group: {', '.join(component)}\n"
            f"  imports inside the group:\n" + "\n".join(edges)
        )
    return reports


def test_the_import_graph_reads_every_kind_of_import() -> None:
    # The cycle test below is only as good as the graph; pin each form it must see.
    known = {
        "tracescore",
        "tracescore._a",
        "tracescore._b",
        "tracescore._c",
        "tracescore._d",
        "tracescore.sub",
        "tracescore.sub._e",
        "tracescore._f",
        "tracescore._g",
    }

    def targets(module: str, is_package: bool, source: str) -> list[tuple[set[str], str]]:
        nodes = _import_nodes(ast.parse(source))
        return [(_targets(module, is_package, n, known), where) for n, where in nodes]

    plain = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import tracescore._a\n"
        "import tracescore\n"
        "from . import _b\n"
        "from ._c import thing\n"
        "from tracescore._d import other\n"
        "from .sub import _e\n"
        "from . import configure\n"
        "if TYPE_CHECKING:\n"
        "    from ._f import OnlyAType\n"
        "else:\n"
        "    from . import _a\n"
        "def later():\n"
        "    from ._g import lazy\n"
        "class Later:\n"
        "    async def method(self):\n"
        "        import tracescore.sub._e\n"
    )
    assert targets("tracescore._m", False, plain) == [
        (set(), MODULE_LEVEL),  # __future__
        (set(), MODULE_LEVEL),  # typing
        ({"tracescore._a"}, MODULE_LEVEL),
        ({"tracescore"}, MODULE_LEVEL),
        ({"tracescore._b"}, MODULE_LEVEL),
        ({"tracescore._c"}, MODULE_LEVEL),
        ({"tracescore._d"}, MODULE_LEVEL),
        ({"tracescore.sub._e"}, MODULE_LEVEL),
        ({"tracescore"}, MODULE_LEVEL),  # a name from the package's __init__
        ({"tracescore._f"}, TYPE_ONLY),
        ({"tracescore._a"}, MODULE_LEVEL),  # the else branch of TYPE_CHECKING runs
        ({"tracescore._g"}, IN_FUNCTION),
        ({"tracescore.sub._e"}, IN_FUNCTION),
    ]
    # In a package's __init__, "." is the package itself; in its modules, their package.
    package_init = "from . import _e\nfrom .. import configure\n"
    assert targets("tracescore.sub", True, package_init) == [
        ({"tracescore.sub._e"}, MODULE_LEVEL),
        ({"tracescore"}, MODULE_LEVEL),
    ]
    assert targets("tracescore.sub.mod", False, package_init) == [
        ({"tracescore.sub._e"}, MODULE_LEVEL),
        ({"tracescore"}, MODULE_LEVEL),
    ]


def test_cycle_finder_names_a_cycle() -> None:
    here = PACKAGE_DIR / "x.py"
    sites = {
        "a": [ImportSite("a", "b", here, 1, MODULE_LEVEL)],
        "b": [ImportSite("b", "c", here, 2, IN_FUNCTION)],
        "c": [ImportSite("c", "a", here, 3, TYPE_ONLY)],
        "d": [ImportSite("d", "a", here, 4, MODULE_LEVEL)],
    }
    (report,) = find_cycles(sites)
    assert report.startswith("cycle: a -> b -> c -> a\n")
    assert report.split("\n")[1] == "  modules in this group: a, b, c"  # not d: no way back
    assert "b -> c  (tracescore/x.py:2, inside a function)" in report


def test_no_import_cycles_between_package_modules() -> None:
    cycles = find_cycles(import_graph())
    assert not cycles, f"{len(cycles)} import cycle(s) in {PACKAGE}:\n\n" + "\n\n".join(cycles)


# --- what ``import tracescore`` pulls in -------------------------------------------------------


def test_import_tracescore_imports_no_litellm_pydantic_or_scorers() -> None:
    probe = (
        "import json, sys, tracescore; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('litellm', 'pydantic', 'tracescore'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=_child_env(),
        capture_output=True,
        text=True,
        timeout=_CHILD_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert f"{PACKAGE}._config" in loaded  # the probe saw tracescore's own modules
    heavy = [
        m
        for m in loaded
        if m.split(".")[0] in ("litellm", "pydantic") or m.startswith(f"{PACKAGE}.scorers")
    ]
    assert heavy == [], f"`import tracescore` imported heavy modules: {heavy}"
