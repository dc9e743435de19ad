"""Import hygiene of the ``tracescore`` package.

- every module imports on its own, as in a fresh interpreter (no module relies on another
  having been imported first): one interpreter, ``tests/import_probe.py``, imports the package
  and then each module in a forked child of itself, in seconds (it used to be 130 interpreters,
  minutes on a busy machine);
- a module reaches another module by attribute (``importlib.util``) only when it imports it, or
  when that module's package imports it itself: what a fresh interpreter per module also
  caught, and the probe's shared third-party imports would hide;
- the modules import each other without cycles, counting imports inside functions too (a
  function-level import is how a cycle hides; it still ties the two modules together);
- no import runs against the data flow between rooms (``ARROWS``): the offline library does not
  import the command line, the scorers import no front, ``_core`` imports nothing above it;
- ``import tracescore`` stays light: none of ``NOT_ON_IMPORT`` (litellm, pydantic, the
  scorers, the OTLP exporters, ...); a scorer's factory imports its own module only.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
import pkgutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import tracescore
from tests.helpers import scaled

PACKAGE = "tracescore"
PACKAGE_DIR = Path(tracescore.__file__).resolve().parent
PROBE = Path(__file__).resolve().parent / "import_probe.py"
_PROBE_TIMEOUT = 60.0  # seconds on a quiet machine, scaled by the load; it takes a few


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


def _child_env(package_parent: Path = PACKAGE_DIR.parent) -> dict[str, str]:
    env = dict(os.environ)
    env["LITELLM_OFFLINE_MODE"] = "true"
    # The child must import the package under test, from wherever this process found it.
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(package_parent), env.get("PYTHONPATH", "")) if p
    )
    return env


def run_probe(
    package: str, package_dir: Path, modules: list[str], attributes: list[str]
) -> dict[str, Any]:
    """Run ``tests/import_probe.py`` on ``package`` (found in ``package_dir``): the package, then
    each of ``modules`` alone; ``attributes`` are ``PKG.SUB`` names to check that ``import
    PKG`` loads. Returns the probe's report (see the probe's docstring)."""
    timeout = scaled(_PROBE_TIMEOUT)
    with tempfile.TemporaryDirectory() as tmp:
        request, result = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request.write_text(json.dumps({
            "package": package,
            "modules": modules,
            "warm": sorted(external_imports(package_dir)),
            "timeout": timeout,
        }))
        done = subprocess.run(
            [sys.executable, str(PROBE), str(request), str(result), *attributes],
            env=_child_env(package_dir.parent),
            capture_output=True,
            text=True,
            timeout=timeout * 2,
            check=False,
        )
        assert done.returncode == 0 and result.exists(), (
            f"the import probe failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
        report: dict[str, Any] = json.loads(result.read_text())
    return report


@pytest.fixture(scope="module")
def fresh_imports() -> dict[str, Any]:
    """The probe's report on this package: its import, each module's, the attribute checks."""
    return run_probe(PACKAGE, PACKAGE_DIR, MODULES, sorted(attribute_reaches(PACKAGE_DIR)))


def import_error(report: dict[str, Any], module: str) -> str | None:
    """Why ``module`` failed to import alone in the probe, or ``None``."""
    if module in report["loaded_by_package"] or report["package_error"]:
        # Importing the package ran it (or failed first): its own import is exactly that.
        error: str | None = report["package_error"]
        return error
    error = report["modules"].get(module, "the probe did not import it")
    return error


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_alone_in_a_fresh_interpreter(
    module: str, fresh_imports: dict[str, Any]
) -> None:
    error = import_error(fresh_imports, module)
    assert error is None, f"`import {module}` failed on its own:\n{error}"


def test_the_discovery_finds_the_modules_it_should() -> None:
    # Guards the two tests around it against an empty or truncated walk.
    expected = {PACKAGE, f"{PACKAGE}._setup.config", f"{PACKAGE}._instrument.decorators"}
    assert expected <= set(MODULES)
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


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """A source file's syntax tree, parsed once per test session."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


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
        for node, where in _import_nodes(_parsed(path)):
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


# --- arrows between rooms: what may not import what ----------------------------------------


@dataclass(frozen=True)
class Forbidden:
    """No module under ``importer`` imports a module under ``imported`` (package prefixes;
    a module is under itself), at module level, in a function or for types only."""

    importer: str
    imported: str
    why: str


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


ARROWS = [
    Forbidden("tracescore._offline", "tracescore._cli",
              "the offline library (evals, calibrate, feedback) is what the command line runs; "
              "it reads the scorer registry in tracescore.scorers, not the command line's"),
    *(Forbidden("tracescore.scorers", front,
                "scorers are pure; the fronts read them through tracescore.scorers.registry()")
      for front in ("tracescore._cli", "tracescore.cli", "tracescore._serve", "tracescore.serve",
                    "tracescore._offline")),
]
# The bottom room: it imports only itself and leaves (modules that import nothing of
# tracescore, such as _setup.env), so that every room may use it.
CORE = "tracescore._core"


def arrows_against(sites: dict[str, list[ImportSite]], arrows: list[Forbidden],
                   bottom: str | None = None) -> list[str]:
    """Every import site that runs against ``arrows``, or out of ``bottom`` to a module that is
    neither under it nor a leaf; one line each, with the reason."""
    found = []
    for name in sorted(sites):
        for site in sites[name]:
            for arrow in arrows:
                if _under(site.source, arrow.importer) and _under(site.target, arrow.imported):
                    found.append(f"{site}: {arrow.why}")
            if (bottom is not None and _under(site.source, bottom)
                    and not _under(site.target, bottom) and sites.get(site.target)):
                found.append(f"{site}: {bottom} imports only itself and modules that import "
                             "nothing of the package")
    return found


def test_the_arrow_check_names_each_import_against_the_flow() -> None:
    here = PACKAGE_DIR / "x.py"
    sites = {
        "p._offline.calibrate": [ImportSite("p._offline.calibrate", "p._cli.scorers", here, 7,
                                            IN_FUNCTION),
                                 ImportSite("p._offline.calibrate", "p.scorers", here, 8,
                                            MODULE_LEVEL)],
        "p._cli.main": [ImportSite("p._cli.main", "p._offline", here, 9, MODULE_LEVEL)],
        "p._core.redact": [ImportSite("p._core.redact", "p._setup.env", here, 10, MODULE_LEVEL),
                           ImportSite("p._core.redact", "p._setup.config", here, 11,
                                      TYPE_ONLY)],
        "p._setup.env": [],
        "p._setup.config": [ImportSite("p._setup.config", "p._core.redact", here, 12,
                                       MODULE_LEVEL)],
        "p.scorers": [],
    }
    found = arrows_against(sites, [Forbidden("p._offline", "p._cli", "offline below cli")],
                           bottom="p._core")
    assert found == [
        "p._core.redact -> p._setup.config  (tracescore/x.py:11, type-only, under if "
        "TYPE_CHECKING): p._core imports only itself and modules that import nothing of the "
        "package",
        "p._offline.calibrate -> p._cli.scorers  (tracescore/x.py:7, inside a function): "
        "offline below cli",
    ]


def test_no_import_runs_against_the_data_flow() -> None:
    graph = import_graph()
    assert any(_under(m, CORE) for m in graph) and any(_under(m, "tracescore._offline")
                                                       for m in graph)
    against = arrows_against(graph, ARROWS, bottom=CORE)
    assert not against, "imports against the data flow:\n  " + "\n  ".join(against)


# --- what the probe loads once, and what a module may reach by attribute ---------------------


def _outside(name: str, package: str) -> bool:
    return name.split(".")[0] != package


def external_imports(package_dir: Path) -> set[str]:
    """What the package's modules import from outside it at module level: the probe loads these
    once before its children import the package's modules. ``from a import b`` lists ``a`` and
    ``a.b`` (``b`` may be a submodule; the probe skips what does not import)."""
    package = package_dir.name
    found: set[str] = set()
    for path in sorted(package_dir.rglob("*.py")):
        for node, where in _import_nodes(_parsed(path)):
            if where != MODULE_LEVEL:
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if _outside(a.name, package))
            elif node.level == 0 and node.module and _outside(node.module, package):
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names if a.name != "*")
    found.discard("__future__")
    return found


@functools.cache
def _is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, AttributeError, ValueError):  # a parent that is no package, ...
        return False


def _attribute_chain(node: ast.Attribute) -> list[str] | None:
    parts: list[str] = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    if not isinstance(current, ast.Name):
        return None
    parts.append(current.id)
    return parts[::-1]


def attribute_reaches_in(
    source: str | ast.Module, is_module: Any = _is_module
) -> dict[str, list[int]]:
    """Submodules ``source`` (text or tree) reaches by attribute from a module it imports
    (``import os`` ... ``os.path.join``) without importing them itself: ``{"os.path": [lines]}``.
    ``is_module(dotted)`` says whether a dotted name is a module."""
    tree = ast.parse(source) if isinstance(source, str) else source
    bound: dict[str, str] = {}  # a local name -> the module it names
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                imported.update(".".join(parts[: i + 1]) for i in range(len(parts)))
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound[parts[0]] = parts[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module)
            imported.update(f"{node.module}.{a.name}" for a in node.names)
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    found: dict[str, list[int]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue  # only whole chains, from their outermost attribute
        chain = _attribute_chain(node)
        if chain is None or chain[0] not in bound:
            continue
        dotted = bound[chain[0]]
        for part in chain[1:-1]:  # the last part is what is used: a function, a class, ...
            dotted = f"{dotted}.{part}"
            if dotted not in imported and is_module(dotted):
                found.setdefault(dotted, []).append(node.lineno)
    return found


def attribute_reaches(package_dir: Path) -> dict[str, list[str]]:
    """``attribute_reaches_in`` over every module of the package: ``{"os.path": ["file:line"]}``."""
    found: dict[str, list[str]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir.parent)
        for dotted, lines in attribute_reaches_in(_parsed(path)).items():
            found.setdefault(dotted, []).extend(f"{rel}:{line}" for line in lines)
    return found


def test_the_attribute_scan_reads_every_form() -> None:
    modules = {"os", "os.path", "xml", "xml.dom", "xml.dom.minidom", "email", "email.mime"}
    source = (
        "import os\n"
        "import xml\n"
        "import email.mime as mime\n"
        "from email import mime as also\n"
        "def f():\n"
        "    os.path.join('a')\n"        # os.path: reached by attribute, not imported
        "    os.getenv('X')\n"           # a function: no submodule on the way
        "    xml.dom.minidom.parse\n"    # xml.dom and xml.dom.minidom
        "    mime.text\n"                # the last part is what is used, module or not
        "    email.mime.base\n"          # email is not bound here: import email.mime binds mime
    )
    assert attribute_reaches_in(source, is_module=modules.__contains__) == {
        "os.path": [6],
        "xml.dom": [8],
        "xml.dom.minidom": [8],
    }


def test_submodules_reached_by_attribute_are_imported(fresh_imports: dict[str, Any]) -> None:
    reaches = attribute_reaches(PACKAGE_DIR)
    unloaded = {
        dotted: places
        for dotted, places in reaches.items()
        if not fresh_imports["attributes"].get(dotted)
    }
    assert not unloaded, (
        "modules reach these submodules by attribute, but neither import them nor get them "
        "from importing their package (add `import <submodule>`):\n"
        + "\n".join(f"  {dotted}: {', '.join(places)}" for dotted, places in unloaded.items())
    )


def test_the_probe_reports_what_a_fresh_interpreter_would(tmp_path: Path) -> None:
    # The probe stands in for an interpreter per module: it must fail where one would.
    pkg = tmp_path / "probepkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import _base\n")
    (pkg / "_base.py").write_text("VALUE = 1\n")
    (pkg / "_helper.py").write_text("HELP = 2\n")
    (pkg / "good.py").write_text("import json\nfrom . import _helper\nX = _helper.HELP\n")
    # Works only after someone imported _helper (good does; the package does not).
    (pkg / "leans.py").write_text("import probepkg\nY = probepkg._helper.HELP\n")
    (pkg / "broken.py").write_text("raise RuntimeError('broken on import')\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "deep.py").write_text("from probepkg import _base\nZ = _base.VALUE\n")
    modules = ["probepkg", "probepkg._base", "probepkg._helper", "probepkg.broken",
               "probepkg.good", "probepkg.leans", "probepkg.sub", "probepkg.sub.deep"]
    report = run_probe("probepkg", pkg, modules, ["os.path", "xml.dom"])
    errors = {m: import_error(report, m) for m in modules}
    assert "broken on import" in str(errors.pop("probepkg.broken"))
    assert "_helper" in str(errors.pop("probepkg.leans"))
    assert errors == dict.fromkeys(errors)  # every other one imports
    assert report["attributes"] == {"os.path": True, "xml.dom": False}
    assert "probepkg._base" in report["loaded_by_package"]
    assert "probepkg._helper" not in report["loaded_by_package"]


# --- what ``import tracescore`` pulls in -------------------------------------------------------


# What ``import tracescore`` must not import: the judge's and the offline tools' libraries, the
# OTLP exporters (imported when an endpoint is configured), the heuristic scorers' libraries,
# the SDKs whose responses tracescore reads by duck typing, and its own modules that only the
# command line, ``serve``, the evals and the scorers use. Measured cost of the first few
# (docs/development.md, "Install and import weight"): litellm ~2.5 s, pydantic ~50 ms,
# aiohttp ~60 ms, the OTLP gRPC exporter ~150 ms.
NOT_ON_IMPORT = (
    "litellm", "pydantic", "aiohttp", "tenacity", "json_repair", "jinja2", "tqdm", "simplemma",
    "openai", "anthropic", "httpx", "grpc", "google.protobuf", "opentelemetry.exporter", "yaml",
    "redis", "numpy",
    f"{PACKAGE}.scorers", f"{PACKAGE}._offline", f"{PACKAGE}._serve", f"{PACKAGE}._cli",
    f"{PACKAGE}.testing", f"{PACKAGE}._judge.process",
)


def test_import_tracescore_imports_none_of_the_heavy_or_offline_modules(
    fresh_imports: dict[str, Any],
) -> None:
    assert fresh_imports["package_error"] is None, fresh_imports["package_error"]
    loaded = fresh_imports["loaded_by_package"]
    assert f"{PACKAGE}._setup.config" in loaded  # the probe saw tracescore's own modules
    assert "opentelemetry.sdk.trace" in loaded  # and the third-party ones
    heavy = sorted(
        m for m in loaded if any(m == p or m.startswith(f"{p}.") for p in NOT_ON_IMPORT)
    )
    assert heavy == [], f"`import tracescore` imported heavy modules: {heavy}"


def test_a_scorer_imports_its_own_module_only() -> None:
    # tracescore.scorers imports a prebuilt scorer's module when its factory is looked up.
    code = (
        "import sys\n"
        "from tracescore.scorers import create_content_similarity_scorer\n"
        "create_content_similarity_scorer()\n"
        "print(sorted(m for m in sys.modules if m.startswith('tracescore.scorers.')\n"
        "             and not m.split('.')[-1].startswith('_')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=_child_env(), capture_output=True,
                          text=True, timeout=scaled(_PROBE_TIMEOUT), check=True)
    assert done.stdout.strip() == "['tracescore.scorers.content_similarity']"
