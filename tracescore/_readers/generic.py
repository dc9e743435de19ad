"""The reader of last resort: any span, read from OpenInference's ``input.value`` and
``output.value`` attributes (which many instrumentations write).

It names no kind, so only predicate rules (``ScoringRule(on=callable)``) select such spans, and
what it reads may be truncated by the producer.
"""

from __future__ import annotations

from typing import Any

from tracescore._core import semconv as sc
from tracescore._pipeline.trace_buffer import TraceBuffer

from ._base import Content, attributes_of


class GenericReader:
    """Reads ``input.value``/``output.value`` from any span."""

    name = "generic"
    volatile = False

    def accepts(self, span: Any) -> bool:
        return True

    def kind(self, span: Any) -> str | None:
        return None

    def observe(self, span: Any, kind: str | None, buffer: TraceBuffer) -> None:
        return None

    def read(self, span: Any, kind: str | None) -> Content:
        attrs = attributes_of(span)
        value_in, value_out = attrs.get(sc.INPUT_VALUE), attrs.get(sc.OUTPUT_VALUE)
        missing = None
        if value_in is None and value_out is None:
            missing = (f"span {getattr(span, 'name', '')!r} carries no input.value or "
                       "output.value attribute to score")
        return Content(input=value_in, output=value_out, missing=missing)
