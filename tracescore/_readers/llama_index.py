"""The reader of LlamaIndex, traced through OpenInference (``openinference-instrumentation-
llama-index``, LlamaIndex's instrumentation dispatcher: one span per instrumented method).

What LlamaIndex's spans mean, beyond their OpenInference kinds:

- Building an index (``VectorStoreIndex.from_documents``) or running an ingestion pipeline
  makes traces of their own, rooted at a node parser's ``CHAIN`` span
  (``SentenceSplitter.__call__``) and an ``EMBEDDING`` batch: framework work, never an agent's
  turn, whatever it calls.
- ``LLM.predict`` (a prompt template in, text out) wraps ``LLM.chat``: one model call, judged on
  ``chat`` (its messages are the ones sent). ``_prepare_chat_with_tools`` is an ``LLM`` span
  that calls no model (it builds the request): not a model call.
- ``retrieve`` wraps ``_retrieve``; only ``retrieve`` carries the documents
  (``retrieval.documents.N.document.content``): ``_retrieve`` is not a retrieval of its own.
- A query engine's root (``RetrieverQueryEngine.query``) carries the question and the answer
  as text; an agent workflow's root (``FunctionAgent.run``, ``AgentWorkflow.run``) carries its
  start state and a cut repr of its ``StopEvent``: the general turn model reads its turn from
  the model calls beneath it (``_turns.finish``), nothing here.
"""

from __future__ import annotations

from typing import Any

from tracescore._core import semconv as sc
from tracescore._pipeline.trace_buffer import Beneath

from ._base import attributes_of, scope_name
from .openinference import OpenInferenceReader

SCOPE = "openinference.instrumentation.llama_index"

# Methods whose root spans are the framework's own work: building or updating an index,
# ingesting, embedding in batches.
_INTERNAL_ROOTS = frozenset({
    "from_documents", "build_index_from_nodes", "insert", "insert_nodes", "ainsert_nodes",
    "refresh_ref_docs", "arefresh_ref_docs", "run", "arun", "__call__", "acall",
    "get_text_embedding_batch", "aget_text_embedding_batch",
})
_INTERNAL_OWNERS = ("Index", "IngestionPipeline", "Splitter", "Parser", "Extractor",
                    "Embedding", "DocumentStore", "Reader")
_NOT_MODEL_CALLS = frozenset({"_prepare_chat_with_tools"})
_NOT_RETRIEVALS = frozenset({"_retrieve", "_aretrieve"})


class LlamaIndexReader(OpenInferenceReader):
    """Reads OpenInference spans of LlamaIndex."""

    name = "llama-index"
    scope = SCOPE

    def accepts(self, span: Any) -> bool:
        return (sc.OPENINFERENCE_SPAN_KIND in attributes_of(span)
                and scope_name(span) == SCOPE)

    def kind(self, span: Any) -> str | None:
        kind = super().kind(span)
        method = str(getattr(span, "name", "")).rsplit(".", 1)[-1]
        if kind == "llm" and method in _NOT_MODEL_CALLS:
            return None
        if kind == "retrieval" and method in _NOT_RETRIEVALS:
            return None
        return kind

    def refine(self, span: Any, kind: str | None, beneath: Beneath) -> str | None:
        kind = super().refine(span, kind, beneath)
        if kind == "agent" and (span.parent is None or span.parent.is_remote):
            owner, _, method = str(getattr(span, "name", "")).rpartition(".")
            if method in _INTERNAL_ROOTS and owner.endswith(_INTERNAL_OWNERS):
                return None
        return kind
