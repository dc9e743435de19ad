"""The surfaces of the last round, attacked: ``tracescore view`` and ``rescore`` given hostile
files, the first-run console given terminal escapes, usage and cost given hostile responses and
price files, calibrate given hostile labels.

Each case failed before its fix (docs/security.md lists them, with what held). The commands run
in process through ``tracescore.cli.main``; instrumentation runs through the public decorators
with an in-memory exporter or a real OTLP receiver on loopback.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tracescore.cli import main

ROOT = Path(__file__).resolve().parent.parent
TRACE = "0af7651916cd43dd8448eb211c80319c"
KEY = "sk-proj-AAAAAb3Cd5Ef7Gh9Jk2Lm4"


def _kv(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": value}


def _span(span_id: str = "b7ad6b7169203331", name: str = "invoke_agent a",
          **fields: Any) -> dict[str, Any]:
    span = {"traceId": TRACE, "spanId": span_id, "name": name,
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000001000000000", "attributes": [], "events": []}
    span.update(fields)
    return span


def _line(*spans: dict[str, Any]) -> str:
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                          "scopeSpans": [{"spans": list(spans)}]}]})


def _score_event(**values: dict[str, Any]) -> dict[str, Any]:
    attrs = [_kv("gen_ai.evaluation.name", {"stringValue": "relevancy"})]
    attrs += [_kv(k, v) for k, v in values.items()]
    return {"name": "gen_ai.evaluation.result", "timeUnixNano": "1", "attributes": attrs}


def _view(tmp_path: Path, capsys: pytest.CaptureFixture[str], *lines: str) -> tuple[int, str,
                                                                                        str]:
    src = tmp_path / "spans.jsonl"
    src.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    out = tmp_path / "view.html"
    code = main(["view", str(src), "-o", str(out)])
    captured = capsys.readouterr()
    page = out.read_text(encoding="utf-8") if out.exists() else ""
    return code, captured.out + captured.err, page


# -- tracescore view ------------------------------------------------------------------------------

HOSTILE_SHAPES = {
    "a time past the platform's range": _line(_span(startTimeUnixNano="9" * 30,
                                                    endTimeUnixNano="9" * 31)),
    "a time too large for a float": _line(_span(startTimeUnixNano="1" + "0" * 400,
                                                endTimeUnixNano="1" + "0" * 401)),
    "a score too large for a float": _line(_span(events=[_score_event(**{
        "gen_ai.evaluation.score.value": {"intValue": "1" + "0" * 400}})])),
    "a kvlist key that is a list": _line(_span(attributes=[_kv("a", {"kvlistValue": {
        "values": [{"key": [1], "value": {"stringValue": "x"}}]}})])),
    "an arrayValue that is a list": _line(_span(attributes=[_kv("a", {"arrayValue": [1, 2]})])),
    "a kvlistValue that is a string": _line(_span(attributes=[_kv("a", {"kvlistValue": "z"})])),
    "a resource that is a list": json.dumps({"resourceSpans": [{"resource": [1]}]}),
    "resourceSpans a number": json.dumps({"resourceSpans": 5}),
    "scopeSpans a number": json.dumps({"resourceSpans": [{"scopeSpans": 5}]}),
    "spans a number": json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": 5}]}]}),
    "events a number": _line(_span(events=5)),
}


@pytest.mark.parametrize("case", HOSTILE_SHAPES)
def test_view_reads_hostile_shapes_without_a_traceback(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: OverflowError, TypeError or AttributeError tracebacks (exit 1), no page.
    code, said, page = _view(tmp_path, capsys, HOSTILE_SHAPES[case],
                             _line(_span("c7ad6b7169203331", "invoke_agent good",
                                        traceId="1af7651916cd43dd8448eb211c80319c")))
    assert code == 0, said
    assert "Traceback" not in said
    assert "invoke_agent good" in page


def test_view_shows_spans_whose_parents_form_a_cycle(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: "1 traces, 0 spans": spans whose parent chain never reaches a root vanished.
    code, said, page = _view(tmp_path, capsys, _line(
        _span("1111111111111111", "invoke_agent first", parentSpanId="2222222222222222"),
        _span("2222222222222222", "invoke_agent second", parentSpanId="1111111111111111"),
        _span("3333333333333333", "invoke_agent itself", parentSpanId="3333333333333333")))
    assert code == 0, said
    assert "3 spans" in said
    for name in ("invoke_agent first", "invoke_agent second", "invoke_agent itself"):
        assert f'data-name="{name}"' in page


def test_view_bounds_every_text_it_keeps(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    # Before: span names, status messages, attribute and event names, scorer ids and labels
    # were kept whole (a 1 MB name twice on the page), and every score of a span was kept.
    big = "N" * 1_000_000
    events = [_score_event(**{"gen_ai.evaluation.score.value": {"doubleValue": 0.5}})
              for _ in range(5_000)]
    events.append({"name": big, "attributes": [_kv(big, {"stringValue": "v"})]})
    code, said, page = _view(tmp_path, capsys, _line(_span(
        name=big, status={"code": 2, "message": big},
        attributes=[_kv(big, {"stringValue": "v"}), _kv("tracescore.span.kind",
                                                        {"stringValue": big})],
        events=events)))
    assert code == 0, said
    assert len(page) < 2_000_000
    assert big[:5_000] not in page
    assert page.count('class="score ') <= 1_000
    assert "5000 results" in page or ">5000<" in page  # every score is still counted


def test_view_mean_of_huge_scores_is_not_infinite(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    event = _score_event(**{"gen_ai.evaluation.score.value": {"doubleValue": 1.7e308}})
    code, said, page = _view(tmp_path, capsys, _line(_span(events=[event, event])))
    assert code == 0, said
    mean = re.search(r'data-field="mean">([^<]*)<', page)
    assert mean is not None and "inf" not in mean.group(1).lower()
