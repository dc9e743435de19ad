"""Every attribute, event and metric name tracescore writes is a constant of
``tracescore._core.semconv`` (and every metric instrument an entry of its ``METRICS`` table): a
string literal of such a name anywhere else in the package fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tracescore
from tracescore._core import semconv as sc

PACKAGE_DIR = Path(tracescore.__file__).resolve().parent
# The namespaces of the names tracescore writes or reads on spans, events, resources, metrics.
NAME = re.compile(
    r"^(gen_ai|tracescore|openinference|llm|input|output|retrieval|exception|service|session"
    r"|user|error|db|traceloop|message|message_content|document|tool)\.[a-z0-9_.]+$"
)
# Literals in those namespaces that are not telemetry names: module paths, the prefixes of JUnit
# class names in the eval and calibration reports, and other instrumentations' scope names
# (packages such as openinference.instrumentation.crewai, which the readers recognise).
NOT_TELEMETRY = re.compile(
    r"^(tracescore\.(_[a-z_.]+|scorers\.|calibrate\.|eval\.)"
    r"|openinference\.instrumentation\.[a-z_]+)$"
)


def literals_outside_semconv() -> list[str]:
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if path.relative_to(PACKAGE_DIR).as_posix() == "_core/semconv.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docstrings and NAME.match(node.value)
                    and not NOT_TELEMETRY.match(node.value)):
                found.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{node.lineno}: "
                             f"{node.value!r}")
    return found


def test_telemetry_names_live_in_semconv() -> None:
    found = literals_outside_semconv()
    assert not found, "names to move into tracescore/_core/semconv.py:\n" + "\n".join(found)


def test_the_metrics_table_is_consistent() -> None:
    names = [spec.name for spec in sc.METRICS.values()]
    assert len(names) == len(set(names))
    for key, spec in sc.METRICS.items():
        assert spec.kind in ("counter", "histogram", "gauge", "observable_counter"), key
        assert (spec.buckets is not None) == (spec.kind == "histogram"), key
        assert spec.description.endswith("."), key
