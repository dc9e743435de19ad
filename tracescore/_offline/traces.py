"""Stored traces read back as SDK ``ReadableSpan``s, and grouped into whole traces with bounded
memory, for ``tracescore rescore``.

Sources:

* OTLP/JSON files: the local file default (``tracescore-traces.jsonl``, one
  ``ExportTraceServiceRequest`` per line, with its rotated backups ``.N`` ... ``.1`` read first,
  oldest first), any JSON-lines file of the same shape, or one OTLP/JSON export document (an
  ``ExportTraceServiceRequest`` as JSON, e.g. an OpenTelemetry Collector's ``file`` exporter
  output or a backend's JSON download). Lines are read one at a time; a line that is not such a
  request (a line cut by a crash, another file's text) is counted and skipped. A single JSON
  document (a file whose first line is not a whole request) is read whole.
* Phoenix: a project's spans through its REST API (``tracescore._offline.phoenix``), converted
  from Phoenix's span objects (flat or nested attributes, ISO times, hex ids).

OTLP/JSON is turned into the protobuf request (hex ids into bytes) and decoded by the same code
``tracescore serve`` uses for what it receives (``tracescore._serve.decode``), so a stored span
reaches the readers exactly as a received one does.

``TraceAssembler`` groups spans into traces in the order they come: a trace is complete when its
local root (a span without a parent, or whose parent is remote) arrives, which is when
tracescore's exporter writes it (a trace's spans are exported as they end, the root last); for a
source in another order (Phoenix's listing), at the end of the input or when pushed out. At
most ``max_open_traces`` traces and ``max_spans`` spans wait; past either, the oldest open trace
is handed on as it is (counted as evicted). Spans of a trace that completed already are counted
as late and dropped (a bounded memory of completed trace ids). At the end of the input, the
traces still open are handed on as incomplete.
"""

from __future__ import annotations

import base64
import json
import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from tracescore._core.errors import ConfigurationError

__all__ = ["SourceCounts", "TraceAssembler", "default_files", "file_spans", "phoenix_spans"]

_ID_KEYS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}
_MAX_LINE = 256 << 20  # bytes of one JSON line, as for data files
_MAX_DOCUMENT = 512 << 20  # bytes of a file read as one JSON document
_COMPLETED_MEMORY = 100_000  # completed trace ids remembered to recognise late spans


@dataclass
class SourceCounts:
    """What reading the source came to.

    Attributes:
        spans: spans read.
        skipped_records: lines (or Phoenix spans) that were not spans of the expected shape.
        first_problem: the first such record's problem, for the report.
    """

    spans: int = 0
    skipped_records: int = 0
    first_problem: str | None = None

    def skip(self, problem: str) -> None:
        self.skipped_records += 1
        if self.first_problem is None:
            self.first_problem = problem


def default_files(path: str | Path) -> list[Path]:
    """``path`` preceded by its rotated backups (``path.N`` ... ``path.1``), oldest first: the
    order their spans were written in."""
    path = Path(path)
    backups = []
    n = 1
    while Path(f"{path}.{n}").is_file():
        backups.append(Path(f"{path}.{n}"))
        n += 1
    return [*reversed(backups), path]


def file_spans(paths: Iterable[str | Path], counts: SourceCounts) -> Iterator[ReadableSpan]:
    """The spans of OTLP/JSON files, in file order.

    Raises:
        ConfigurationError: a file cannot be read, or a whole-document file is not an OTLP/JSON
            export.
    """
    for path in paths:
        yield from _one_file(Path(path), counts)


def _one_file(path: Path, counts: SourceCounts) -> Iterator[ReadableSpan]:
    if not path.is_file():
        raise ConfigurationError(f"trace file {str(path)!r} does not exist (or is not a file)")
    try:
        with path.open("rb") as fh:
            first = fh.readline(_MAX_LINE + 1)
            doc = _json_or_none(first)
            if doc is None and first.strip():
                if path.stat().st_size > _MAX_DOCUMENT:
                    raise ConfigurationError(
                        f"{path}: the first line is not an OTLP/JSON request and the file is "
                        f"larger than {_MAX_DOCUMENT >> 20} MiB to read as one JSON document")
                fh.seek(0)
                whole = _json_or_none(fh.read())
                if not isinstance(whole, dict) or "resourceSpans" not in whole:
                    raise ConfigurationError(
                        f"{path}: neither OTLP/JSON lines nor one OTLP/JSON export (an "
                        "ExportTraceServiceRequest with resourceSpans)")
                yield from _request_spans(whole, f"{path}", counts)
                return
            line_no = 1
            line = first
            while line:
                if line.strip():
                    where = f"{path} line {line_no}"
                    if len(line) > _MAX_LINE:
                        counts.skip(f"{where}: longer than {_MAX_LINE} bytes")
                        while line and not line.endswith(b"\n"):
                            line = fh.readline(_MAX_LINE + 1)
                    else:
                        parsed = doc if line_no == 1 else _json_or_none(line)
                        if isinstance(parsed, dict):
                            yield from _request_spans(parsed, where, counts)
                        else:
                            counts.skip(f"{where}: not an OTLP/JSON request")
                line = fh.readline(_MAX_LINE + 1)
                line_no += 1
    except OSError as exc:
        raise ConfigurationError(f"cannot read trace file {path}: {exc}") from None


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def _request_spans(doc: dict[str, Any], where: str,
                   counts: SourceCounts) -> Iterator[ReadableSpan]:
    from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from .._serve.decode import spans_of

    if "resourceSpans" not in doc:
        counts.skip(f"{where}: no resourceSpans (not a trace export)")
        return
    try:
        request = ParseDict(_ids_to_base64(doc), ExportTraceServiceRequest(),
                            ignore_unknown_fields=True)
        spans = spans_of(request)
    except Exception as exc:  # a malformed request: one record skipped, not the run
        counts.skip(f"{where}: not an OTLP/JSON request ({type(exc).__name__}: "
                    f"{' '.join(str(exc).split())[:200]})")
        return
    for span in spans:
        context = span.context
        if context is None or not context.trace_id or not context.span_id:
            counts.skip(f"{where}: a span without a trace or span id")
            continue
        counts.spans += 1
        yield span


def _ids_to_base64(node: Any) -> Any:
    """OTLP/JSON's hex ids (``traceId``, ``spanId``, ``parentSpanId``, in spans and links) as
    the protobuf JSON mapping's base64 bytes; everything else as it is."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            size = _ID_KEYS.get(key)
            if size is not None and isinstance(value, str) and value:
                try:
                    raw = bytes.fromhex(value)
                except ValueError:
                    raw = b""
                out[key] = base64.b64encode(raw).decode("ascii") if raw else ""
            else:
                out[key] = _ids_to_base64(value)
        return out
    if isinstance(node, list):
        return [_ids_to_base64(v) for v in node]
    return node


# -- Phoenix ------------------------------------------------------------------------------------


def phoenix_spans(client: Any, project: str, limit: int | None,
                  counts: SourceCounts) -> Iterator[ReadableSpan]:
    """A Phoenix project's spans (``PhoenixClient.spans``) as ``ReadableSpan``s.

    Raises:
        PhoenixError: as ``PhoenixClient.spans``; a span whose fields have another shape.
    """
    from .phoenix import PhoenixError

    for span in client.spans(project, limit=limit):
        try:
            readable = _phoenix_span(span)
        except (TypeError, ValueError) as exc:
            raise PhoenixError(f"Phoenix at {client.where} answered a span of another shape: "
                               f"{' '.join(str(exc).split())[:200]}") from None
        counts.spans += 1
        yield readable


_STATUS = {"OK": StatusCode.OK, "ERROR": StatusCode.ERROR, "UNSET": StatusCode.UNSET}


def _phoenix_span(span: Mapping[str, Any]) -> ReadableSpan:
    context = span["context"]
    trace_id = _hex_id(context["trace_id"], 32, "context.trace_id")
    span_id = _hex_id(context["span_id"], 16, "context.span_id")
    parent_id = span.get("parent_id")
    parent = None
    if parent_id:
        parent = SpanContext(trace_id, _hex_id(parent_id, 16, "parent_id"), is_remote=False,
                             trace_flags=TraceFlags(TraceFlags.SAMPLED))
    attributes = span.get("attributes") or {}
    if not isinstance(attributes, dict):
        raise TypeError("'attributes' is not an object")
    events = []
    for i, event in enumerate(span.get("events") or ()):
        if not isinstance(event, dict):
            raise TypeError(f"events[{i}] is not an object")
        events.append(Event(str(event.get("name") or ""), _flat(event.get("attributes") or {}),
                            _iso_ns(event.get("timestamp"), f"events[{i}].timestamp")))
    status = _STATUS.get(str(span.get("status_code") or "UNSET").upper(), StatusCode.UNSET)
    message = span.get("status_message") or None
    return ReadableSpan(
        name=str(span.get("name") or ""),
        context=SpanContext(trace_id, span_id, is_remote=False,
                            trace_flags=TraceFlags(TraceFlags.SAMPLED)),
        parent=parent,
        attributes=_flat(attributes),
        events=events,
        kind=SpanKind.INTERNAL,
        status=Status(status, str(message) if message and status is StatusCode.ERROR else None),
        start_time=_iso_ns(span.get("start_time"), "start_time"),
        end_time=_iso_ns(span.get("end_time"), "end_time"),
    )


def _hex_id(value: Any, width: int, name: str) -> int:
    if not isinstance(value, str):
        raise TypeError(f"{name} is not a string")
    text = value.strip().lower().removeprefix("0x")
    try:
        number = int(text, 16)
    except ValueError:
        raise ValueError(f"{name} {value[:40]!r} is not a hex id") from None
    if not 0 < number < 16 ** width:
        raise ValueError(f"{name} {value[:40]!r} is not a valid {width * 4}-bit id")
    return number


def _iso_ns(value: Any, name: str) -> int:
    if value in (None, ""):
        return 0
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return int(value)
    if not isinstance(value, str):
        raise TypeError(f"{name} is not a time")
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
    except ValueError:
        raise ValueError(f"{name} {value[:40]!r} is not an ISO time") from None


def _flat(attributes: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Phoenix's attributes (flat dotted keys, or nested objects and lists of objects) as OTel
    attributes: dotted keys, list items of objects by index (OpenInference's flattening),
    lists of scalars as tuples."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, f"{name}."))
        elif isinstance(value, list):
            if value and all(isinstance(v, dict) for v in value):
                for i, item in enumerate(value):
                    out.update(_flat(item, f"{name}.{i}."))
            elif all(isinstance(v, (str, bool, int, float)) for v in value):
                out[name] = tuple(value)
            else:
                out[name] = json.dumps(value, ensure_ascii=False, default=str)
        elif isinstance(value, (str, bool, int, float)):
            out[name] = value
        elif value is not None:
            out[name] = str(value)
    return out


# -- whole traces ------------------------------------------------------------------------------


class TraceAssembler:
    """Groups spans into whole traces with bounded memory (module docstring).

    Args:
        max_open_traces: traces waiting for their root at once. Default 1,000.
        max_spans: spans waiting at once, over all open traces. Default 100,000.
        complete_on_root: a trace completes when its root arrives (True: spans in the order
            they ended, as files hold them); False: traces complete only at the end of the
            input or when pushed out (a listing in another order, such as Phoenix's).

    Attributes:
        complete: traces handed on once their root came.
        incomplete: traces handed on at the end of the input without a root.
        evicted: traces handed on early because a bound was reached.
        late_spans: spans of an already completed trace, dropped.
    """

    def __init__(self, max_open_traces: int = 1_000, max_spans: int = 100_000,
                 complete_on_root: bool = True) -> None:
        if max_open_traces < 1 or max_spans < 1:
            raise ConfigurationError("the open-trace bounds must be >= 1")
        self.max_open_traces = max_open_traces
        self.max_spans = max_spans
        self.complete_on_root = complete_on_root
        self._open: OrderedDict[int, list[ReadableSpan]] = OrderedDict()
        self._buffered = 0
        self._done: OrderedDict[int, None] = OrderedDict()
        self.complete = self.incomplete = self.evicted = self.late_spans = 0

    @property
    def open_traces(self) -> int:
        """Traces waiting now."""
        return len(self._open)

    def add(self, span: ReadableSpan) -> list[tuple[int, list[ReadableSpan], str]]:
        """Take one span; return the traces it completed or pushed out, each
        ``(trace id, spans in end order, "complete" | "evicted")``."""
        context = span.context
        trace_id = context.trace_id
        if trace_id in self._done:
            self.late_spans += 1
            return []
        spans = self._open.get(trace_id)
        if spans is None:
            spans = self._open[trace_id] = []
        spans.append(span)
        self._buffered += 1
        out = []
        if self.complete_on_root and (span.parent is None or span.parent.is_remote):
            out.append(self._close(trace_id, "complete"))
        while self._open and (len(self._open) > self.max_open_traces
                              or self._buffered > self.max_spans):
            out.append(self._close(next(iter(self._open)), "evicted"))
        return out

    def finish(self) -> list[tuple[int, list[ReadableSpan], str]]:
        """The traces still open at the end of the input: ``"incomplete"`` (without
        ``complete_on_root``: ``"complete"`` when their root is among their spans)."""
        out = []
        for trace_id, spans in list(self._open.items()):
            rooted = not self.complete_on_root and any(
                s.parent is None or s.parent.is_remote for s in spans)
            out.append(self._close(trace_id, "complete" if rooted else "incomplete"))
        return out

    def _close(self, trace_id: int, how: str) -> tuple[int, list[ReadableSpan], str]:
        spans = self._open.pop(trace_id)
        self._buffered -= len(spans)
        setattr(self, how, getattr(self, how) + 1)
        self._done[trace_id] = None
        if len(self._done) > _COMPLETED_MEMORY:
            self._done.popitem(last=False)
        spans.sort(key=lambda s: (s.end_time or 0))
        return trace_id, spans, how
