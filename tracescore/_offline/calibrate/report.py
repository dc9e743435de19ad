"""Files a CI job reads from a ``CalibrationResult``, in the style of ``tracescore eval``'s
(``tracescore._offline.evals.report``): the JSON report, JUnit XML and the HTML page
(``tracescore._offline.reports.html``, rendered from the JSON report's dict).

JUnit: one ``<testsuite>`` per run, with a ``<testcase>`` named ``agreement`` (a ``<failure>``
when ``--min-accuracy``/``--min-kappa`` is missed or nothing was scored) and one named
``judge`` (a ``<failure>`` listing the items whose scoring failed). Characters XML 1.0 forbids
(in item ids, judge errors) are written as visible escapes (``_evals_report.junit_text``).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from tracescore._offline.calibrate import CalibrationResult
from tracescore._offline.evals.report import junit_text

__all__ = ["to_junit_xml", "write_html", "write_junit", "write_report"]

_MAX_LISTED_ITEMS = 50


def write_report(result: CalibrationResult, path: str | Path) -> None:
    """Write ``result.to_dict()`` as indented UTF-8 JSON to ``path`` (a lone surrogate as its
    JSON escape, see ``_evals_report.write_report``)."""
    text = json.dumps(result.to_dict(), ensure_ascii=False, indent=2)
    Path(path).write_text(text + "\n", encoding="utf-8", errors="backslashreplace")


def write_html(result: CalibrationResult, path: str | Path) -> None:
    """Write the self-contained HTML report of ``result`` to ``path`` (UTF-8): the confusion
    matrices, the judge's score distribution per human label with the threshold and the best
    one, the disagreements; from the same dict as the JSON report."""
    from tracescore._offline.reports.html import calibration_html
    from tracescore._offline.reports.html import write_html as write_page

    write_page(calibration_html(result.to_dict()), path)


def to_junit_xml(result: CalibrationResult) -> str:
    """The run as a JUnit XML document (a string with an XML declaration)."""
    summary = result.to_dict()
    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", name=f"tracescore calibrate {result.scorer_id}")
    props = ET.SubElement(suite, "properties")
    at = summary["at_threshold"]
    for key, value in (("judge_model", result.judge_model or ""),
                       ("threshold", repr(result.threshold)),
                       ("accuracy", repr(at["accuracy"])), ("kappa", repr(at["kappa"])),
                       ("items", str(len(result.items)))):
        ET.SubElement(props, "property", name=key, value=value)
    classname = f"tracescore.calibrate.{result.scorer_id}"
    seconds = f"{result.seconds:.3f}"
    failures = 0

    case = ET.SubElement(suite, "testcase", classname=classname, name="agreement", time=seconds)
    if result.problems:
        failures += 1
        ET.SubElement(case, "failure", message="; ".join(result.problems), type="agreement")
    out = ET.SubElement(case, "system-out")
    out.text = result.table()

    case = ET.SubElement(suite, "testcase", classname=classname, name="judge", time="0")
    errors = [i for i in result.items if i.status == "error"]
    if errors:
        failures += 1
        failure = ET.SubElement(case, "failure", type="judge_error",
                                message=f"scoring failed on {len(errors)} of "
                                        f"{len(result.items)} item(s)")
        lines = [f"item {i.id}: {i.error_type}: {' '.join(i.explanation.split())[:300]}"
                 for i in errors[:_MAX_LISTED_ITEMS]]
        if len(errors) > _MAX_LISTED_ITEMS:
            lines.append("... (more items; see the JSON report)")
        failure.text = "\n".join(lines)
    for element in (suite, suites):
        element.set("tests", "2")
        element.set("failures", str(failures))
        element.set("errors", "0")
        element.set("time", seconds)
    return junit_text(suites)


def write_junit(result: CalibrationResult, path: str | Path) -> None:
    """Write ``to_junit_xml(result)`` to ``path`` (UTF-8)."""
    Path(path).write_text(to_junit_xml(result), encoding="utf-8")
