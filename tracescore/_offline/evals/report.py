"""Files a CI job reads from an ``EvalResult``: the JSON report, JUnit XML and the HTML page
(``tracescore._offline.reports.html``, rendered from the JSON report's dict).

The plain-text table and the JSON-ready dict are the result's own renderings, defined in
``_evals_results`` (``EvalResult.table()``, ``EvalResult.to_dict()``) and re-exported here.

JUnit XML follows the shape CI systems read (Jenkins, GitLab, GitHub test reporters): one
``<testsuite>`` per run, one ``<testcase>`` per scorer (``gate <id>`` for gates) plus one named
``target`` for the target's own errors, and a ``<failure>`` element on each case that did not
meet its requirement. Every text and attribute is made valid XML 1.0 first (``xml_safe``): the
characters XML forbids (control characters such as ANSI escapes and NUL, lone surrogates,
U+FFFE/U+FFFF), which an item id or an exception message may hold, are written as visible
escapes (``\x1b``, ``\x00``, ``\udc80``), so the file always parses.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from tracescore._offline.evals.results import (
    EvalResult,
    ScorerSummary,
    format_table,
    number_text,
    requirement_text,
    result_to_dict,
)

__all__ = ["format_table", "junit_text", "result_to_dict", "to_junit_xml", "write_html",
           "write_junit", "write_report", "xml_safe"]

# Failure texts list at most this many items, so one broken run cannot write megabytes of XML.
_MAX_LISTED_ITEMS = 50
_MAX_MESSAGE_CHARS = 300


# What XML 1.0 allows (its ``Char`` production), negated.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def xml_safe(text: str) -> str:
    """``text`` with every character XML 1.0 forbids written as a visible escape (``\x1b``,
    ``\x00``, ``\udc80``); anything else unchanged."""
    return _NOT_XML.sub(_escape, text)


def junit_text(root: ET.Element) -> str:
    """``root`` as an indented XML document (a string with an XML declaration), every text,
    tail, attribute name and value passed through ``xml_safe`` first."""
    for element in root.iter():
        if element.text:
            element.text = xml_safe(element.text)
        if element.tail:
            element.tail = xml_safe(element.tail)
        for key, value in list(element.attrib.items()):
            element.attrib[key] = xml_safe(value)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_report(result: EvalResult, path: str | Path) -> None:
    """Write ``result_to_dict(result)`` as indented UTF-8 JSON to ``path``. A lone surrogate
    (a text that was not valid Unicode, e.g. an id given as ``"\\udc80"`` in a JSON file) is
    written as its JSON escape, so it reads back unchanged."""
    text = json.dumps(result_to_dict(result), ensure_ascii=False, indent=2)
    Path(path).write_text(text + "\n", encoding="utf-8", errors="backslashreplace")


def write_html(result: EvalResult, path: str | Path) -> None:
    """Write the self-contained HTML report of ``result`` to ``path`` (UTF-8): score
    distributions per scorer and the failing items, from the same dict as the JSON report."""
    from tracescore._offline.reports.html import eval_html
    from tracescore._offline.reports.html import write_html as write_page

    write_page(eval_html(result_to_dict(result)), path)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE_CHARS else text[: _MAX_MESSAGE_CHARS - 1] + "…"


def _failure_lines(result: EvalResult, s: ScorerSummary) -> list[str]:
    lines = list(s.problems)
    listed = 0
    for r in result.items:
        score = r.scores.get(s.scorer_id)
        if score is None:
            continue
        if score.status == "error":
            line = f"item {r.item.label}: {score.error_type}: {_short(score.reason)}"
        elif s.gate and score.status == "skipped":
            line = f"item {r.item.label}: {_short(score.reason)}"
        elif score.label == "fail":
            line = f"item {r.item.label}: score {score.score:.4g}: {_short(score.reason)}"
        else:
            continue
        listed += 1
        if listed > _MAX_LISTED_ITEMS:
            lines.append("... (more items; see the JSON report)")
            break
        lines.append(line)
    return lines


def to_junit_xml(result: EvalResult) -> str:
    """The run as a JUnit XML document (a string with an XML declaration)."""
    suites = ET.Element("testsuites")
    name = f"tracescore eval {result.experiment_name}"
    suite = ET.SubElement(suites, "testsuite", name=name)
    props = ET.SubElement(suite, "properties")
    for key, value in (
        ("experiment.id", result.experiment_id),
        ("verdict", result.verdict),
        ("total_items", str(result.summary["total_items"])),
        ("trace_id", result.trace_id or ""),
    ):
        ET.SubElement(props, "property", name=key, value=value)
    classname = f"tracescore.eval.{result.experiment_name}"
    failures = 0
    tests = 0
    for s in result.scorers.values():
        tests += 1
        case_name = f"gate {s.scorer_id}" if s.gate else s.scorer_id
        case = ET.SubElement(suite, "testcase", classname=classname, name=case_name, time="0")
        if not s.passed:
            failures += 1
            message = "; ".join(s.problems)
            failure = ET.SubElement(
                case, "failure", message=message, type="gate" if s.gate else "threshold"
            )
            failure.text = "\n".join(_failure_lines(result, s))
        out = ET.SubElement(case, "system-out")
        out.text = (
            f"mean={number_text(s.mean)} required={requirement_text(s)} scored={s.scored} "
            f"not_scorable={s.not_scorable} errors={s.errors} skipped={s.skipped}"
        )
    tests += 1
    target_case = ET.SubElement(suite, "testcase", classname=classname, name="target", time="0")
    crashed = [r for r in result.items if r.error is not None]
    if crashed:
        failures += 1
        failure = ET.SubElement(
            target_case,
            "failure",
            message=f"the target raised on {len(crashed)} of {len(result.items)} item(s)",
            type="target_error",
        )
        lines = [
            f"item {r.item.label}: {r.error.type}: {_short(r.error.message)}"
            for r in crashed[:_MAX_LISTED_ITEMS]
            if r.error is not None
        ]
        if len(crashed) > _MAX_LISTED_ITEMS:
            lines.append("... (more items; see the JSON report)")
        failure.text = "\n".join(lines)
    duration = f"{result.summary['duration_seconds']:.3f}"
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", "0")
    suite.set("time", duration)
    suite.set("timestamp", result.started_at.replace(tzinfo=None).isoformat(timespec="seconds"))
    suites.set("tests", str(tests))
    suites.set("failures", str(failures))
    suites.set("errors", "0")
    suites.set("time", duration)
    return junit_text(suites)


def write_junit(result: EvalResult, path: str | Path) -> None:
    """Write ``to_junit_xml(result)`` to ``path`` (UTF-8)."""
    Path(path).write_text(to_junit_xml(result), encoding="utf-8")
