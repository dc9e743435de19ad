"""``tracescore view``: the local file default rendered as one self-contained HTML page.

The page shows traces as trees (each span's kind, duration and place on the trace's timeline),
each span's GenAI attributes, and the scores with their reasons on the spans they judge: the
``gen_ai.evaluation.result`` events of the scored span, and those of the carrier spans
``evaluation {scorer id}`` that brought a late score (folded into the span they judge, marked
late). Filters by scorer, outcome and score range are plain JavaScript in the page; nothing is
fetched (a Content-Security-Policy says so to the browser).

Bounded memory, whatever the file's size: the files (``tracescore-traces.jsonl`` preceded by
its rotated backups ``.N`` ... ``.1``, oldest first) are read one line at a time; each span is
turned at once into a small record (text values cut to ``MAX_VALUE_CHARS``, at most
``MAX_ATTRIBUTES`` attributes); at most ``max_traces`` traces and ``max_spans`` spans are kept,
the newest ones: when a bound is passed, the oldest trace is let go and counted, and later spans
of a trace let go are counted too (a bounded memory of the ids let go). The per-scorer summary
counts every score read, kept or not. The page says what was left out.

Every value from the file is untrusted text: the template is rendered by Jinja2 with
autoescaping, nothing is marked safe, and the script reads values only from ``data-``
attributes and ``textContent``.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tracescore._core import semconv as sc
from tracescore._core.errors import ConfigurationError

from .traces import default_files

__all__ = ["DEFAULT_MAX_SPANS", "DEFAULT_MAX_TRACES", "ViewData", "read_view", "render_view",
           "write_view"]

DEFAULT_MAX_TRACES = 500  # newest traces kept on the page
DEFAULT_MAX_SPANS = 5_000  # spans kept on the page, over all kept traces
MAX_VALUE_CHARS = 2_000  # characters of an attribute value or reason shown
MAX_ATTRIBUTES = 64  # attributes shown per span; the rest are counted
MAX_NAME_CHARS = 300  # characters of a name, id, key, scorer id or label kept
MAX_SCORES = 200  # scores shown per span; the rest are counted (the summary counts all)
_MAX_NS = (1 << 63) - 1  # OTLP times are fixed64 nanoseconds; anything else reads as unknown
MAX_LINE_BYTES = 64 << 20  # a longer line is skipped (an export request is ~3 MiB at most)
_FORGOTTEN_MEMORY = 100_000  # ids of traces let go, remembered to count their later spans

_EVENT = sc.GEN_AI_EVALUATION_RESULT_EVENT
_CARRIER = sc.TRACESCORE_EVALUATION_CARRIER
# Attributes shown first, as "GenAI attributes": the GenAI conventions' and the content ones.
_GENAI_PREFIXES = ("gen_ai.", "input.", "output.", "llm.", "retrieval.", "tool.", "session.",
                   "user.", "error.")
# Repeated elsewhere on the page (the scores themselves): left out of the attribute lists.
_HIDDEN_PREFIXES = (sc.TRACESCORE_SCORE_PREFIX, sc.TRACESCORE_LABEL_PREFIX,
                    sc.TRACESCORE_SCORE_ERROR_PREFIX)
_KINDS = {"invoke_agent": "agent", "retrieval": "retrieval", "execute_tool": "tool",
          "chat": "llm", "text_completion": "llm", "embeddings": "embedding",
          "evaluation": "evaluation"}


@dataclass
class ScorerSummary:
    """Counts of one scorer over every score read (kept on the page or not)."""

    scores: int = 0
    total: float = 0.0
    numeric: int = 0
    passed: int = 0
    failed: int = 0
    not_scorable: int = 0
    errors: int = 0
    late: int = 0

    @property
    def mean(self) -> float | None:
        """The mean of the numeric scores, or None (none, or past a float's range)."""
        mean = self.total / self.numeric if self.numeric else None
        return mean if mean is not None and math.isfinite(mean) else None


@dataclass
class ViewData:
    """What was read: the kept traces (newest first) and what was left out.

    Attributes:
        files: the files read, oldest first.
        traces: the kept traces, newest first, each a dict ready for the template.
        spans_read: spans read from the files.
        traces_read: traces seen (kept, let go).
        traces_left_out: traces let go to stay within the bounds.
        spans_left_out: spans of those traces (and later spans of them).
        skipped_lines: lines that were not OTLP/JSON trace requests.
        first_problem: the first skipped line's problem.
        scorers: per scorer id, counts over every score read.
        max_traces, max_spans: the bounds used.
    """

    files: list[str] = field(default_factory=list)
    traces: list[dict[str, Any]] = field(default_factory=list)
    spans_read: int = 0
    traces_read: int = 0
    traces_left_out: int = 0
    spans_left_out: int = 0
    skipped_lines: int = 0
    first_problem: str | None = None
    scorers: dict[str, ScorerSummary] = field(default_factory=dict)
    max_traces: int = DEFAULT_MAX_TRACES
    max_spans: int = DEFAULT_MAX_SPANS
    cut_values: int = 0

    def skip(self, problem: str) -> None:
        self.skipped_lines += 1
        if self.first_problem is None:
            self.first_problem = problem


# -- reading --------------------------------------------------------------------------------------


def _values(inner: Any) -> list[Any]:
    """The ``values`` list of an ``arrayValue``/``kvlistValue`` (empty when it has another
    shape: every value of the file is untrusted)."""
    values = inner.get("values") if isinstance(inner, dict) else None
    return values if isinstance(values, list) else []


def _any_value(value: Any) -> Any:
    """An OTLP/JSON ``AnyValue`` as a Python value."""
    if not isinstance(value, dict) or not value:
        return None
    (kind, inner), *_ = value.items()
    if kind == "arrayValue":
        return [_any_value(v) for v in _values(inner)]
    if kind == "kvlistValue":
        return {_cut(kv.get("key")): _any_value(kv.get("value")) for kv in _values(inner)
                if isinstance(kv, dict)}
    if kind == "intValue":
        try:
            return int(inner)
        except (TypeError, ValueError):
            return inner
    if kind == "doubleValue":
        try:
            return float(inner)
        except (TypeError, ValueError):
            return inner
    return inner


def _cut(value: Any, limit: int = MAX_NAME_CHARS) -> str:
    """``value`` as text of at most ``limit`` characters (names, ids, keys, labels)."""
    text = value if isinstance(value, str) else "" if value is None else str(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _attributes(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in _list(items):
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[_cut(kv["key"])] = _any_value(kv.get("value"))
    return out


def _ns(value: Any) -> int:
    """Nanoseconds of an OTLP time; 0 (unknown) for anything that is not one."""
    try:
        ns = int(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return ns if 0 <= ns <= _MAX_NS else 0


def _spans_of_line(doc: Any) -> Iterator[tuple[dict[str, Any], str]]:
    """(span, service name) of one OTLP/JSON ``ExportTraceServiceRequest``; parts of another
    shape are passed over."""
    for rs in _list(doc.get("resourceSpans")):
        if not isinstance(rs, dict):
            continue
        resource = _attributes(_dict(rs.get("resource")).get("attributes"))
        service = _cut(resource.get(sc.SERVICE_NAME) or "")
        for ss in _list(rs.get("scopeSpans")):
            if not isinstance(ss, dict):
                continue
            for span in _list(ss.get("spans")):
                if isinstance(span, dict):
                    yield span, service


def _lines(paths: Iterable[Path], data: ViewData) -> Iterator[tuple[Any, str]]:
    """Each line's JSON document, one line at a time; bad lines are counted and skipped."""
    for path in paths:
        try:
            fh = path.open("rb")
        except OSError as exc:
            raise ConfigurationError(f"cannot read {path}: {exc}") from None
        with fh:
            number = 0
            while True:
                line = fh.readline(MAX_LINE_BYTES + 1)
                if not line:
                    break
                number += 1
                where = f"{path} line {number}"
                if len(line) > MAX_LINE_BYTES:
                    data.skip(f"{where}: longer than {MAX_LINE_BYTES >> 20} MiB")
                    while line and not line.endswith(b"\n"):
                        line = fh.readline(MAX_LINE_BYTES + 1)
                    continue
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line.decode("utf-8-sig"))
                except (UnicodeDecodeError, ValueError, RecursionError):
                    data.skip(f"{where}: not JSON")
                    continue
                if not isinstance(doc, dict) or "resourceSpans" not in doc:
                    data.skip(f"{where}: not an OTLP/JSON trace request (no resourceSpans)")
                    continue
                yield doc, where


def _text(value: Any, data: ViewData) -> dict[str, Any]:
    """A value for display: text (JSON for structures), cut to ``MAX_VALUE_CHARS``."""
    if isinstance(value, str):
        text = value
        # Content attributes hold JSON strings: shown indented when they are objects or lists.
        if text[:1] in "[{" and len(text) <= 4 * MAX_VALUE_CHARS:
            with contextlib.suppress(ValueError, RecursionError):
                text = json.dumps(json.loads(text), ensure_ascii=False, indent=1)
    elif isinstance(value, float):
        text = f"{value:.6g}"
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    cut = max(0, len(text) - MAX_VALUE_CHARS)
    if cut:
        data.cut_values += 1
    return {"text": text[:MAX_VALUE_CHARS] if cut else text, "cut": cut}


def _score(attributes: dict[str, Any], time_ns: int, late: bool,
           data: ViewData) -> dict[str, Any]:
    value = attributes.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
    score = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        with contextlib.suppress(OverflowError):  # an int past a float's range: no score
            score = float(value) if math.isfinite(float(value)) else None
    error = attributes.get(sc.ERROR_TYPE)
    label = attributes.get(sc.GEN_AI_EVALUATION_SCORE_LABEL)
    outcome = ("error" if error else str(label) if label in ("pass", "fail", "not_scorable")
               else "scored" if score is not None else "none")
    judge = attributes.get(sc.TRACESCORE_JUDGE_MODEL)
    return {
        "scorer": _cut(attributes.get(sc.GEN_AI_EVALUATION_NAME) or "?"),
        "score": score,
        "label": _cut(label) if label else None,
        "error": _cut(error) if error else None,
        "outcome": outcome,
        "reason": _text(attributes.get(sc.GEN_AI_EVALUATION_EXPLANATION) or "", data),
        "judge": _cut(judge) if judge else None,
        "late": late,
        "time": time_ns,
    }


def _count(data: ViewData, score: dict[str, Any]) -> None:
    summary = data.scorers.setdefault(score["scorer"], ScorerSummary())
    summary.scores += 1
    if score["score"] is not None:
        summary.total += score["score"]
        summary.numeric += 1
    if score["late"]:
        summary.late += 1
    outcome = score["outcome"]
    if outcome == "pass":
        summary.passed += 1
    elif outcome == "fail":
        summary.failed += 1
    elif outcome == "not_scorable":
        summary.not_scorable += 1
    elif outcome == "error":
        summary.errors += 1


def _record(span: dict[str, Any], service: str, data: ViewData) -> dict[str, Any] | None:
    """The small record kept for one span (None: no usable ids)."""
    trace_id, span_id = span.get("traceId"), span.get("spanId")
    if not isinstance(trace_id, str) or not trace_id or not isinstance(span_id, str) \
            or not span_id:
        return None
    trace_id, span_id = _cut(trace_id, 64), _cut(span_id, 64)  # hex ids are 32 and 16
    attributes = _attributes(span.get("attributes"))
    carrier = attributes.get(_CARRIER) is True
    scores, events = [], []
    hidden_scores = 0
    for event in _list(span.get("events")):
        if not isinstance(event, dict):
            continue
        event_attributes = _attributes(event.get("attributes"))
        if event.get("name") == _EVENT:
            score = _score(event_attributes, _ns(event.get("timeUnixNano")), carrier, data)
            _count(data, score)
            if len(scores) < MAX_SCORES:
                scores.append(score)
            else:
                hidden_scores += 1
        elif len(events) < MAX_ATTRIBUTES:
            events.append({"name": _cut(event.get("name") or ""),
                           "attributes": [(k, _text(v, data)) for k, v in
                                          list(event_attributes.items())[:MAX_ATTRIBUTES]]})
    genai, other = [], []
    shown = 0
    for key, value in attributes.items():
        if key.startswith(_HIDDEN_PREFIXES) or (carrier and key != sc.GEN_AI_OPERATION_NAME):
            continue
        if shown >= MAX_ATTRIBUTES:
            break
        shown += 1
        (genai if key.startswith(_GENAI_PREFIXES) else other).append((key, _text(value, data)))
    hidden = max(0, sum(not k.startswith(_HIDDEN_PREFIXES) for k in attributes) - shown) \
        if not carrier else 0
    status = _dict(span.get("status"))
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
    kind = (attributes.get(sc.TRACESCORE_SPAN_KIND) or _KINDS.get(_cut(operation or ""))
            or _cut(attributes.get(sc.OPENINFERENCE_SPAN_KIND) or "").lower() or "span")
    parent = span.get("parentSpanId")
    return {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_id": _cut(parent, 64) if isinstance(parent, str) and parent else None,
        "name": _cut(span.get("name") or ""),
        "service": service,
        "kind": _cut(kind, 40),
        "start": _ns(span.get("startTimeUnixNano")),
        "end": _ns(span.get("endTimeUnixNano")),
        "error": status.get("code") == 2,
        "status_message": _cut(status.get("message") or "", MAX_VALUE_CHARS),
        "carrier": carrier,
        "genai": genai,
        "other": other,
        "hidden_attributes": hidden,
        "events": events,
        "scores": scores,
        "hidden_scores": hidden_scores,
    }


def read_view(path: str | Path, *, max_traces: int = DEFAULT_MAX_TRACES,
              max_spans: int = DEFAULT_MAX_SPANS, rotated: bool = True) -> ViewData:
    """Read a span file (and, with ``rotated``, its rotated backups before it) into what the
    page shows, within the bounds.

    Args:
        path: the OTLP/JSON lines file, e.g. ``tracescore-traces.jsonl``.
        max_traces: traces kept (the newest); default 500.
        max_spans: spans kept over all kept traces; default 5,000.
        rotated: read ``path.N`` ... ``path.1`` first (oldest first), as the file exporter
            rotates them.

    Returns:
        The ``ViewData``.

    Raises:
        ConfigurationError: the file does not exist or cannot be read, or a bound is below 1.
    """
    if max_traces < 1 or max_spans < 1:
        raise ConfigurationError("--max-traces and --max-spans take an integer >= 1")
    path = Path(path)
    if not path.is_file():
        raise ConfigurationError(
            f"no span file {str(path)!r}: run your application with tracescore.configure() and "
            "no OTLP endpoint set (spans then go to tracescore-traces.jsonl), or name the file")
    paths = default_files(path) if rotated else [path]
    data = ViewData(files=[str(p) for p in paths], max_traces=max_traces, max_spans=max_spans)
    kept: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
    forgotten: OrderedDict[str, None] = OrderedDict()
    held = 0
    for doc, _where in _lines(paths, data):
        for span, service in _spans_of_line(doc):
            record = _record(span, service, data)
            if record is None:
                data.skip(f"{_where}: a span without a trace or span id")
                continue
            data.spans_read += 1
            trace_id = record["trace_id"]
            if trace_id in forgotten:
                data.spans_left_out += 1
                continue
            spans = kept.get(trace_id)
            if spans is None:
                spans = kept[trace_id] = []
                data.traces_read += 1
            spans.append(record)
            held += 1
            while len(kept) > max_traces or (held > max_spans and len(kept) > 1):
                old_id, old = kept.popitem(last=False)
                held -= len(old)
                data.traces_left_out += 1
                data.spans_left_out += len(old)
                forgotten[old_id] = None
                if len(forgotten) > _FORGOTTEN_MEMORY:
                    forgotten.popitem(last=False)
            if held > max_spans:  # one trace alone over the bound: its newest spans stay
                spans.pop(0)
                held -= 1
                data.spans_left_out += 1
    data.traces = sorted((_tree(trace_id, spans) for trace_id, spans in kept.items()),
                         key=lambda t: t["start"], reverse=True)
    return data


# -- trees ----------------------------------------------------------------------------------------


def _duration(ns: int) -> str:
    if ns <= 0:
        return "0 ms"
    ms = ns / 1e6
    if ms < 1:
        return f"{ns / 1e3:.0f} µs"
    if ms < 1000:
        return f"{ms:.3g} ms"
    return f"{ms / 1000:.3g} s"


def _when(ns: int) -> str:
    if ns <= 0:
        return ""
    try:
        return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError):  # past the platform's dates
        return ""


def _tree(trace_id: str, spans: list[dict[str, Any]]) -> dict[str, Any]:
    """One trace for the template: its spans in tree order (depth-first, children by start
    time), each with its depth and place on the trace's timeline; carrier spans folded into
    the span they judge when it is here."""
    by_id = {s["span_id"]: s for s in spans}
    shown = []
    for span in spans:
        target = by_id.get(span["parent_id"] or "") if span["carrier"] else None
        if target is not None:
            room = max(0, MAX_SCORES - len(target["scores"]))
            target["scores"].extend(span["scores"][:room])
            target["hidden_scores"] += span["hidden_scores"] + max(
                0, len(span["scores"]) - room)
        else:
            shown.append(span)
    ids = {s["span_id"] for s in shown}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in shown:
        parent = span["parent_id"] if span["parent_id"] in ids else None
        children.setdefault(parent, []).append(span)
    for siblings in children.values():
        siblings.sort(key=lambda s: (s["start"], s["end"]))
    start = min((s["start"] for s in shown if s["start"]), default=0)
    end = max((s["end"] for s in shown), default=0)
    total = max(1, end - start)
    ordered: list[dict[str, Any]] = []
    seen: set[int] = set()
    # Spans whose parent chain never reaches a root (a cycle in hostile input, a span its own
    # parent) start trees of their own after the real roots: every span is shown once.
    starts = [*children.get(None, []), *sorted(
        (s for s in shown if s["parent_id"] in ids), key=lambda s: (s["start"], s["end"]))]
    stack: list[tuple[dict[str, Any], int]] = []
    next_start = 0
    while next_start < len(starts) or stack:
        if not stack:
            stack.append((starts[next_start], 0))
            next_start += 1
        span, depth = stack.pop()
        if id(span) in seen:  # shown once
            continue
        seen.add(id(span))
        length = max(0, span["end"] - span["start"])
        span.update(depth=min(depth, 40), duration=_duration(length),
                    offset=round(max(0.0, (span["start"] - start) / total) * 100, 2),
                    width=round(max(0.4, length / total * 100), 2))
        span["scores"].sort(key=lambda s: (s["scorer"], s["time"]))
        ordered.append(span)
        stack.extend((child, depth + 1) for child in reversed(children.get(span["span_id"], [])))
    roots = children.get(None, [])
    root = next((s for s in roots if s["parent_id"] is None), roots[0] if roots else None)
    scores = [score for span in ordered for score in span["scores"]]
    return {
        "trace_id": trace_id,
        "name": root["name"] if root else "",
        "service": root["service"] if root else "",
        "start": start,
        "when": _when(start),
        "duration": _duration(end - start),
        "spans": ordered,
        "scores": scores,
        "incomplete": not any(s["parent_id"] is None for s in shown),
    }


# -- the page -------------------------------------------------------------------------------------


def render_view(data: ViewData) -> str:
    """The HTML page of ``data``: a complete, self-contained document."""
    from tracescore._offline.reports.html import _environment

    scorers = [{"id": k, "summary": v} for k, v in sorted(data.scorers.items())]
    kept_spans = sum(len(t["spans"]) for t in data.traces)
    return _environment().get_template("view.html.j2").render(
        data=data, scorers=scorers, kept_spans=kept_spans, title="tracescore view",
        shown_scores=sum(len(t["scores"]) for t in data.traces),
        max_value_chars=MAX_VALUE_CHARS,
    )


def write_view(path: str | Path, data: ViewData) -> Path:
    """Render ``data`` and write the page to ``path`` (UTF-8); returns the path written."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_view(data), encoding="utf-8")
    return out
