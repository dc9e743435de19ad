"""Checks of a parsed OTLP request before any of it is taken.

What OTLP (opentelemetry-proto, ``trace.proto``/``logs.proto``) requires and what the service
relies on to forward a span once and encode it again: a trace id of 16 bytes and a span id of 8,
neither all zero; a parent span id empty or 8 bytes; a link's ids of the same lengths; a span
kind and a status code the protocol defines; no two spans of one trace with the same span id
(the second would replace the first where spans are held, and a backend keeps one). A log record
may carry no trace context, but when it does the ids have those lengths.

One problem refuses the whole request (HTTP 400, gRPC ``INVALID_ARGUMENT``) before any span of
it is kept, so a bad span never costs good ones a rejected export batch later. The message names
the first few bad spans by position, name and ids.
"""

from __future__ import annotations

from typing import Any

# Named in an error message at most; the count of the rest follows.
_NAMED = 3
_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
_MAX_KIND = 5  # SPAN_KIND_CONSUMER
_MAX_STATUS = 2  # STATUS_CODE_ERROR


def _ids(trace_id: bytes, span_id: bytes) -> str:
    return f"trace {trace_id.hex() or '-'} span {span_id.hex() or '-'}"


def _span_problem(span: Any) -> str | None:
    trace_id, span_id = span.trace_id, span.span_id
    if len(trace_id) != 16:
        return f"trace_id has {len(trace_id)} bytes, expected 16"
    if trace_id == _ZERO_TRACE:
        return "trace_id is all zeros"
    if len(span_id) != 8:
        return f"span_id has {len(span_id)} bytes, expected 8"
    if span_id == _ZERO_SPAN:
        return "span_id is all zeros"
    parent = span.parent_span_id
    if parent and (len(parent) != 8 or parent == _ZERO_SPAN):
        return f"parent_span_id has {len(parent)} bytes, expected 8 (or none)" \
            if len(parent) != 8 else "parent_span_id is all zeros"
    if not 0 <= span.kind <= _MAX_KIND:
        return f"kind {span.kind} is not a SpanKind"
    if not 0 <= span.status.code <= _MAX_STATUS:
        return f"status code {span.status.code} is not a StatusCode"
    for index, link in enumerate(span.links):
        if len(link.trace_id) != 16 or len(link.span_id) != 8:
            return (f"links[{index}] has ids of {len(link.trace_id)} and {len(link.span_id)} "
                    "bytes, expected 16 and 8")
    return None


def traces_problem(request: Any) -> str | None:
    """Why an ``ExportTraceServiceRequest`` cannot be taken, or None when it can.

    Args:
        request: the parsed message.

    Returns:
        One line naming up to three bad spans (``resource_spans[0].scope_spans[1].spans[4]
        'name' (trace ... span ...): span_id has 20 bytes, expected 8``) and how many more.
    """
    problems: list[str] = []
    count = 0
    seen: set[tuple[bytes, bytes]] = set()
    for r, resource_spans in enumerate(request.resource_spans):
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            for i, span in enumerate(scope_spans.spans):
                problem = _span_problem(span)
                if problem is None:
                    key = (span.trace_id, span.span_id)
                    if key in seen:
                        problem = "another span of this trace in the request has the same span_id"
                    else:
                        seen.add(key)
                if problem is None:
                    continue
                count += 1
                if len(problems) < _NAMED:
                    where = f"resource_spans[{r}].scope_spans[{s}].spans[{i}]"
                    name = span.name if len(span.name) <= 80 else span.name[:77] + "..."
                    problems.append(f"{where} {name!r} ({_ids(span.trace_id, span.span_id)}):"
                                    f" {problem}")
    if not count:
        return None
    more = f"; and {count - len(problems)} more" if count > len(problems) else ""
    return "; ".join(problems) + more


def logs_problem(request: Any) -> str | None:
    """Why an ``ExportLogsServiceRequest`` cannot be taken (a log record's trace or span id of
    the wrong length), or None when it can."""
    problems: list[str] = []
    count = 0
    for r, resource_logs in enumerate(request.resource_logs):
        for s, scope_logs in enumerate(resource_logs.scope_logs):
            for i, record in enumerate(scope_logs.log_records):
                trace_id, span_id = record.trace_id, record.span_id
                if trace_id and len(trace_id) != 16:
                    problem = f"trace_id has {len(trace_id)} bytes, expected 16 (or none)"
                elif span_id and len(span_id) != 8:
                    problem = f"span_id has {len(span_id)} bytes, expected 8 (or none)"
                else:
                    continue
                count += 1
                if len(problems) < _NAMED:
                    problems.append(f"resource_logs[{r}].scope_logs[{s}].log_records[{i}] "
                                    f"({_ids(trace_id, span_id)}): {problem}")
    if not count:
        return None
    more = f"; and {count - len(problems)} more" if count > len(problems) else ""
    return "; ".join(problems) + more
