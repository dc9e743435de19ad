"""The reader of DSPy, traced through OpenInference (``openinference-instrumentation-dspy``).

Spans per call of a program: the module's ``forward`` as a ``CHAIN`` (``RAG.forward``: the
trace's root and the agent's turn; its input fields as JSON in ``input.value``, the
``Prediction``'s fields in ``output.value``), the predictors beneath it (``ChainOfThought.forward``,
``Predict.forward``, the adapter's ``ChatAdapter.__call__``: ``CHAIN`` spans) and the model call
``LM.__call__`` (``LLM``: the messages the adapter built, the completion in DSPy's field
format ``[[ ## field ## ]]``).

A ``Prediction`` is read as the text a user reads: without ``reasoning`` (the chain of thought
``ChainOfThought`` adds), a single remaining field is its text; several stay as an object of
those fields. The same goes for an ``LM.__call__`` completion in the ``[[ ## field ## ]]`` or
JSON format. DSPy's retrievers (``dspy.retrievers.Embeddings``, which the DSPy docs use) make
no span: a context scorer finds no documents and says how to pass them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tracescore._core import semconv as sc

from ._base import Content, attributes_of, scope_name
from .openinference import OpenInferenceReader

SCOPE = "openinference.instrumentation.dspy"
_THOUGHTS = ("reasoning", "rationale")
_FIELD = re.compile(r"^\[\[ ## (\w+) ## \]\]\s*$", re.MULTILINE)


class DSPyReader(OpenInferenceReader):
    """Reads OpenInference spans of DSPy."""

    name = "dspy"
    scope = SCOPE
    documents_hint = ("DSPy's retrievers (dspy.retrievers.Embeddings, the one the DSPy docs "
                      "use) make no span under OpenInference's DSPy instrumentation: decorate "
                      "the function that searches with @tracescore.retrieval")

    def accepts(self, span: Any) -> bool:
        return (sc.OPENINFERENCE_SPAN_KIND in attributes_of(span)
                and scope_name(span) == SCOPE)

    def read(self, span: Any, kind: str | None) -> Content:
        content = super().read(span, kind)
        if content.output is None:
            return content
        raw = attributes_of(span).get(sc.OUTPUT_VALUE)
        output = answer_fields(raw if kind != "llm" and isinstance(raw, str) else content.output)
        if isinstance(output, Mapping) and output and set(output) <= {*_THOUGHTS, "completed"}:
            return Content(error=content.error, missing=(
                f"not scorable: span {getattr(span, 'name', '')!r} (instrumentation {SCOPE!r}) "
                f"carries only the chain of thought ({', '.join(sorted(output))}) in "
                f"{sc.OUTPUT_VALUE} or the completion, no output field of the signature: "
                "there is no answer to judge"))
        return content._replace(output=output)


def answer_fields(value: Any) -> Any:
    """A DSPy prediction or completion without its chain of thought: the text of its one
    remaining field, or an object of the remaining fields."""
    if isinstance(value, str):
        fields = _fields(value)
        if fields is None:
            try:
                decoded = json.loads(value)
            except ValueError:
                return value
            if not isinstance(decoded, Mapping):
                return value
            fields = dict(decoded)
        value = fields
    if isinstance(value, list) and len(value) == 1:
        return answer_fields(value[0])
    if not isinstance(value, Mapping):
        return value
    kept = {k: v for k, v in value.items() if k not in _THOUGHTS and k != "completed"}
    if len(kept) == 1:
        (only,) = kept.values()
        if isinstance(only, str):
            return only
    return kept if kept else value  # only thoughts: the caller says there is no answer


def _fields(text: str) -> dict[str, str] | None:
    """DSPy's chat format ``[[ ## name ## ]]\\nvalue`` as ``{name: value}``; None when the text
    is not in it."""
    marks = list(_FIELD.finditer(text))
    if not marks:
        return None
    fields = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        fields[mark.group(1)] = text[mark.end():end].strip()
    return fields
