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
LLM_PROVIDER: Final = "llm.provider"  # OpenInference's gen_ai.provider.name
TOOL_NAME: Final = "tool.name"

OI_KIND_AGENT: Final = "AGENT"
OI_KIND_RETRIEVER: Final = "RETRIEVER"
OI_KIND_TOOL: Final = "TOOL"
OI_KIND_LLM: Final = "LLM"
OI_KIND_EVALUATOR: Final = "EVALUATOR"

# --- Spans of other instrumentations (read by tracescore._readers) --------------------------------
# OpenInference (openinference-semantic-conventions): flattened lists, "{prefix}.{i}.{suffix}".
OI_CHAIN: Final = "CHAIN"  # a step or pipeline; see _readers/openinference.py for its kind
LLM_INPUT_MESSAGES: Final = "llm.input_messages"  # llm.input_messages.{i}.message.*
LLM_OUTPUT_MESSAGES: Final = "llm.output_messages"
MESSAGE_ROLE: Final = "message.role"
MESSAGE_CONTENT: Final = "message.content"
MESSAGE_CONTENTS: Final = "message.contents"  # message.contents.{j}.message_content.*
MESSAGE_CONTENT_TEXT: Final = "message_content.text"
MESSAGE_CONTENT_TYPE: Final = "message_content.type"
OI_REDACTED: Final = "__REDACTED__"  # what OPENINFERENCE_HIDE_* leave in place of a value
EXCEPTION_EVENT: Final = "exception"
EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_MESSAGE: Final = "exception.message"

# OTel GenAI conventions, gen_ai_latest_experimental (JSON strings with typed parts).
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GEN_AI_RETRIEVAL_QUERY_TEXT: Final = "gen_ai.retrieval.query.text"
GEN_AI_SYSTEM: Final = "gen_ai.system"  # deprecated for gen_ai.provider.name; older producers
OPERATION_INVOKE_WORKFLOW: Final = "invoke_workflow"
OPERATION_TEXT_COMPLETION: Final = "text_completion"
OPERATION_GENERATE_CONTENT: Final = "generate_content"
OPERATION_EMBEDDINGS: Final = "embeddings"
OPERATION_CREATE_AGENT: Final = "create_agent"
# Older GenAI conventions: content as span events with a JSON attribute.
GEN_AI_CONTENT_PROMPT_EVENT: Final = "gen_ai.content.prompt"
GEN_AI_CONTENT_COMPLETION_EVENT: Final = "gen_ai.content.completion"
GEN_AI_PROMPT: Final = "gen_ai.prompt"  # also traceloop's gen_ai.prompt.{i}.role/content
GEN_AI_COMPLETION: Final = "gen_ai.completion"  # also gen_ai.completion.{i}.*

# OpenLLMetry (opentelemetry-semantic-conventions-ai, traceloop-sdk).
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"  # workflow | task | agent | tool | unknown
TRACELOOP_ENTITY_NAME: Final = "traceloop.entity.name"
TRACELOOP_ENTITY_INPUT: Final = "traceloop.entity.input"  # JSON {"args": [...], "kwargs": {...}}
TRACELOOP_ENTITY_OUTPUT: Final = "traceloop.entity.output"
LLM_REQUEST_TYPE: Final = "llm.request.type"  # chat | completion | rerank | embedding | unknown
DB_SYSTEM: Final = "db.system"
DB_OPERATION: Final = "db.operation"
DB_QUERY_RESULT_EVENT: Final = "db.query.result"
DB_QUERY_RESULT_DOCUMENT: Final = "db.query.result.document"
DB_SEARCH_RESULT_EVENT: Final = "db.search.result"
DB_SEARCH_RESULT_ENTITY: Final = "db.search.result.entity"

# --- tracescore's own ----------------------------------------------------------------------------
TRACESCORE_SPAN_KIND: Final = "tracescore.span.kind"  # agent | retrieval | tool | llm
TRACESCORE_JUDGE_MODEL: Final = "tracescore.judge.model"
TRACESCORE_SAMPLE_RATE: Final = "tracescore.sample_rate"
TRACESCORE_EVALUATION_CARRIER: Final = "tracescore.evaluation.carrier"
TRACESCORE_TRUNCATED: Final = "tracescore.truncated"
# True on a span the exporter had to cut to fit one export request (TRACESCORE_EXPORT_BATCH_BYTES).
TRACESCORE_EXPORT_TRUNCATED: Final = "tracescore.export.truncated"

INSTRUMENTATION_SCOPE: Final = "tracescore"
# Provenance on every score: a hash of the scorer's prompts and options (tracescore._fingerprint),
# and the scored response's id (a GenAI attribute of the gen_ai.evaluation.result event).
TRACESCORE_EVALUATOR_VERSION: Final = "tracescore.evaluator.version"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
# Scores as searchable attributes of the scored span (and of a late score's carrier span):
# prefix + scorer id with every character outside [a-z0-9_] as "_", e.g.
# tracescore.score.answer_relevancy (float), tracescore.label.answer_relevancy ("pass"/"fail"/
# "not_scorable"), tracescore.score_error.answer_relevancy (error.type).
# See docs/see-your-scores/index.md.
TRACESCORE_SCORE_PREFIX: Final = "tracescore.score."
TRACESCORE_LABEL_PREFIX: Final = "tracescore.label."
TRACESCORE_SCORE_ERROR_PREFIX: Final = "tracescore.score_error."
OPERATION_EVALUATION: Final = "evaluation"  # gen_ai.operation.name of a carrier span
TRACESCORE_SELECTED_ON_ERROR: Final = "tracescore.selected_on_error"

# --- run_evals experiments ---------------------------------------------------------------------
EXPERIMENT_SPAN_PREFIX: Final = "experiment"
ITEM_SPAN_PREFIX: Final = "eval_item"
TRACESCORE_EXPERIMENT_NAME: Final = "tracescore.experiment.name"
TRACESCORE_EXPERIMENT_ID: Final = "tracescore.experiment.id"
TRACESCORE_EXPERIMENT_ITEMS: Final = "tracescore.experiment.items"
TRACESCORE_EXPERIMENT_CONCURRENCY: Final = "tracescore.experiment.concurrency"
TRACESCORE_EXPERIMENT_VERDICT: Final = "tracescore.experiment.verdict"
TRACESCORE_EXPERIMENT_TARGET_ERRORS: Final = "tracescore.experiment.target_errors"
TRACESCORE_EXPERIMENT_SCORE_PREFIX: Final = "tracescore.experiment.score."  # + scorer id: the mean
TRACESCORE_EXPERIMENT_ITEM_INDEX: Final = "tracescore.experiment.item.index"
TRACESCORE_EXPERIMENT_ITEM_ID: Final = "tracescore.experiment.item.id"
TRACESCORE_EXPERIMENT_ITEM_GROUND_TRUTH: Final = "tracescore.experiment.item.ground_truth"
OI_KIND_CHAIN: Final = "CHAIN"
OI_METADATA: Final = "metadata"
