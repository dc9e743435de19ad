"""Every span, event and resource attribute name tracescore writes, in one place.

Names follow the OpenTelemetry GenAI semantic conventions (``gen_ai.*``) and, so that Arize
Phoenix renders the spans, OpenInference (``openinference.span.kind``, ``input.value``, ...).
This module imports nothing of tracescore's.
"""

from __future__ import annotations

from typing import Final

# --- OTel GenAI semantic conventions -------------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_RETRIEVAL_DOCUMENTS: Final = "gen_ai.retrieval.documents"
GEN_AI_DATA_SOURCE_ID: Final = "gen_ai.data_source.id"

OPERATION_INVOKE_AGENT: Final = "invoke_agent"
OPERATION_RETRIEVAL: Final = "retrieval"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"
OPERATION_CHAT: Final = "chat"

# Evaluation results (span event and its attributes).
GEN_AI_EVALUATION_RESULT_EVENT: Final = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
ERROR_TYPE: Final = "error.type"

LABEL_PASS: Final = "pass"
LABEL_FAIL: Final = "fail"
LABEL_NOT_SCORABLE: Final = "not_scorable"

# --- OpenInference -------------------------------------------------------------------------------
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME_TYPE: Final = "output.mime_type"
MIME_JSON: Final = "application/json"
MIME_TEXT: Final = "text/plain"
RETRIEVAL_DOCUMENTS_PREFIX: Final = "retrieval.documents"  # retrieval.documents.{i}.document.*
DOCUMENT_ID: Final = "document.id"
DOCUMENT_SCORE: Final = "document.score"
DOCUMENT_CONTENT: Final = "document.content"
LLM_MODEL_NAME: Final = "llm.model_name"
TOOL_NAME: Final = "tool.name"

OI_KIND_AGENT: Final = "AGENT"
OI_KIND_RETRIEVER: Final = "RETRIEVER"
OI_KIND_TOOL: Final = "TOOL"
OI_KIND_LLM: Final = "LLM"
OI_KIND_EVALUATOR: Final = "EVALUATOR"

# --- tracescore's own ----------------------------------------------------------------------------
TRACESCORE_SPAN_KIND: Final = "tracescore.span.kind"  # agent | retrieval | tool | llm
TRACESCORE_JUDGE_MODEL: Final = "tracescore.judge.model"
TRACESCORE_SAMPLE_RATE: Final = "tracescore.sample_rate"
TRACESCORE_EVALUATION_CARRIER: Final = "tracescore.evaluation.carrier"
TRACESCORE_TRUNCATED: Final = "tracescore.truncated"

INSTRUMENTATION_SCOPE: Final = "tracescore"
TRACESCORE_SELECTED_ON_ERROR: Final = "tracescore.selected_on_error"
