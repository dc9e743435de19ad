"""Every span, event, resource and metric attribute name tracescore writes, and every metric
instrument it creates (the ``METRICS`` table at the end), in one place.

Names follow the OpenTelemetry GenAI semantic conventions (``gen_ai.*``) and, so that Arize
Phoenix renders the spans, OpenInference (``openinference.span.kind``, ``input.value``, ...).
This module imports nothing of tracescore's.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

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
# Who and which conversation a span belongs to (issue 24): the GenAI conventions' conversation
# id, and the general session and user attributes (OpenInference writes the same two names).
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
SESSION_ID: Final = "session.id"
USER_ID: Final = "user.id"
CONVERSATION_ATTRIBUTES: Final = (GEN_AI_CONVERSATION_ID, SESSION_ID, USER_ID)
# What a model call reported (tracescore._instrument.usage): token usage, the answering model,
# the response's id and finish reasons. input_tokens counts cached input tokens too, as the
# conventions ask; the cached part is also given apart.
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
# The call's cost in USD from tracescore's price table. The GenAI conventions define no cost
# attribute yet; this is the name Langfuse reads as a generation's total cost from OTel spans.
GEN_AI_USAGE_COST: Final = "gen_ai.usage.cost"

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
# Token counts and cost in OpenInference's names (what Phoenix shows on an LLM span).
LLM_TOKEN_COUNT_PROMPT: Final = "llm.token_count.prompt"
LLM_TOKEN_COUNT_COMPLETION: Final = "llm.token_count.completion"
LLM_TOKEN_COUNT_TOTAL: Final = "llm.token_count.total"
LLM_TOKEN_COUNT_CACHE_READ: Final = "llm.token_count.prompt_details.cache_read"
LLM_TOKEN_COUNT_CACHE_WRITE: Final = "llm.token_count.prompt_details.cache_write"
LLM_COST_PROMPT: Final = "llm.cost.prompt"
LLM_COST_COMPLETION: Final = "llm.cost.completion"
LLM_COST_TOTAL: Final = "llm.cost.total"

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
EXCEPTION_STACKTRACE: Final = "exception.stacktrace"
EXCEPTION_ESCAPED: Final = "exception.escaped"

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
# GenAI event conventions (v1.28-v1.36): one span event per message, the body's fields as
# attributes ("content", "role", "message", "finish_reason"); and the latest conventions'
# details event, carrying gen_ai.input.messages / gen_ai.output.messages as attributes.
GEN_AI_SYSTEM_MESSAGE_EVENT: Final = "gen_ai.system.message"
GEN_AI_USER_MESSAGE_EVENT: Final = "gen_ai.user.message"
GEN_AI_ASSISTANT_MESSAGE_EVENT: Final = "gen_ai.assistant.message"
GEN_AI_TOOL_MESSAGE_EVENT: Final = "gen_ai.tool.message"
GEN_AI_CHOICE_EVENT: Final = "gen_ai.choice"
GEN_AI_OPERATION_DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"

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
# The OpenTelemetry context key (not an attribute) holding the running agent span's name.
CONTEXT_AGENT: Final = "tracescore.agent"
# Provenance on every score: a hash of the scorer's prompts and options
# (tracescore._pipeline.fingerprint),
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

# --- Resource attributes -------------------------------------------------------------------------
SERVICE_NAME: Final = "service.name"
SERVICE_INSTANCE_ID: Final = "service.instance.id"
OPENINFERENCE_PROJECT_NAME: Final = "openinference.project.name"  # Phoenix's project

# --- Human feedback (tracescore._offline.feedback) -------------------------------------------
# Who gave an evaluation, in Phoenix's terms: HUMAN for feedback, LLM or CODE for scorers; and an
# optional, low-cardinality name of the human source (end_user, reviewer).
TRACESCORE_EVALUATION_ANNOTATOR_KIND: Final = "tracescore.evaluation.annotator_kind"
TRACESCORE_EVALUATION_ANNOTATOR: Final = "tracescore.evaluation.annotator"


# --- Metrics -------------------------------------------------------------------------------------
# Attributes of tracescore's own metrics (besides gen_ai.* and error.type above).
TRACESCORE_OUTCOME: Final = "tracescore.outcome"
TRACESCORE_SKIP_REASON: Final = "tracescore.skip.reason"
TRACESCORE_DROP_REASON: Final = "tracescore.drop.reason"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
TRACESCORE_JUDGE_TRANSPORT: Final = "tracescore.judge.transport"
TRACESCORE_SERVE_SIGNAL: Final = "tracescore.serve.signal"
TRACESCORE_SERVE_REASON: Final = "tracescore.serve.reason"
SERVE_INSTRUMENTATION_SCOPE: Final = "tracescore.serve"


class Instrument(NamedTuple):
    """One metric instrument: what ``tracescore._writers.instruments.create_instrument`` makes of
    it."""

    name: str
    kind: Literal["counter", "histogram", "gauge", "observable_counter"]
    unit: str
    description: str
    buckets: tuple[float, ...] | None = None  # a histogram's advisory bucket boundaries


# Score values live in 0..scale, usually 0..1: buckets fine enough for percentiles and alerts.
_SCORE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0, 2.0, 5.0, 10.0)
_DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
# The advisory boundaries the GenAI semantic conventions give for their client metrics.
_CLIENT_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24,
                            20.48, 40.96, 81.92)
_CLIENT_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                         16777216, 67108864)
_SERVE_DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)

# Every metric tracescore records, by the attribute of its owner that holds it:
# ``tracescore._writers.instruments.Telemetry`` (scope ``tracescore``) and, under ``serve_``,
# ``tracescore._serve.metrics.ServiceMetrics`` (scope ``tracescore.serve``).
METRICS: Final[dict[str, Instrument]] = {
    "score": Instrument(
        "tracescore.evaluation.score", "histogram", "1",
        "Score values attached to spans, per scorer id.", _SCORE_BUCKETS),
    "jobs": Instrument(
        "tracescore.scoring.jobs", "counter", "{job}",
        "Scoring jobs by outcome (scored, not_scorable, error, skipped, dropped)."),
    "duration": Instrument(
        "tracescore.scoring.duration", "histogram", "s",
        "Wall time of one scoring job, judge calls included.", _DURATION_BUCKETS),
    "tokens": Instrument(
        "tracescore.judge.token.usage", "counter", "{token}",
        "Tokens the judge consumed, by gen_ai.token.type."),
    "cost": Instrument(
        "tracescore.judge.cost", "counter", "USD",
        "Judge cost where litellm knows the model's price."),
    "spans_exported": Instrument(
        "tracescore.spans.exported", "counter", "{span}", "Spans the exporter accepted."),
    "spans_dropped": Instrument(
        "tracescore.spans.dropped", "counter", "{span}",
        "Spans that will never reach the backend, by tracescore.drop.reason."),
    "client_duration": Instrument(
        "gen_ai.client.operation.duration", "histogram", "s",
        "Duration of each judge call (GenAI client operation).", _CLIENT_DURATION_BUCKETS),
    "client_tokens": Instrument(
        "gen_ai.client.token.usage", "histogram", "{token}",
        "Tokens of each model call, by gen_ai.token.type: the judge's, and the application's "
        "(those carry gen_ai.agent.name).", _CLIENT_TOKEN_BUCKETS),
    "llm_cost": Instrument(
        "tracescore.llm.cost", "counter", "USD",
        "Cost of the application's model calls from tracescore's price table, by "
        "gen_ai.agent.name and model."),
    "llm_unpriced": Instrument(
        "tracescore.llm.unpriced", "counter", "{call}",
        "Model calls that reported token usage but could not be priced (model not in the price "
        "table, long-context or non-standard tier), by gen_ai.agent.name and model."),
    "queue_size": Instrument(
        "tracescore.scoring.queue.size", "gauge", "{job}",
        "Scoring jobs accepted and not finished."),
    "held": Instrument(
        "tracescore.spans.held", "gauge", "{span}", "Spans held until their scores are attached."),
    "annotations": Instrument(
        "tracescore.phoenix.annotations", "counter", "{annotation}",
        "Scores sent to Phoenix as span annotations, by outcome (sent, failed, dropped)."),
    # tracescore serve
    "serve_received": Instrument(
        "tracescore.serve.spans.received", "counter", "{span}", "Spans received."),
    "serve_passed": Instrument(
        "tracescore.serve.spans.passed_through", "counter", "{span}",
        "Spans no rule picked, forwarded at once."),
    "serve_records": Instrument(
        "tracescore.serve.log_records.received", "counter", "{record}",
        "Log records received (forwarded unchanged)."),
    "serve_rejected": Instrument(
        "tracescore.serve.requests.rejected", "counter", "{request}",
        "Requests refused with backpressure, by reason."),
    "serve_duration": Instrument(
        "tracescore.serve.request.duration", "histogram", "s",
        "Time to take one export request.", _SERVE_DURATION_BUCKETS),
    "serve_scored": Instrument(
        "tracescore.serve.spans.scored", "observable_counter", "{span}",
        "Spans held for their scores since start."),
    "serve_held": Instrument(
        "tracescore.serve.spans.held", "gauge", "{span}", "Spans held for their scores now."),
    "serve_deferred": Instrument(
        "tracescore.serve.spans.deferred", "gauge", "{span}",
        "Scored spans waiting for their trace to complete now."),
    "serve_queued": Instrument(
        "tracescore.serve.export.queued", "gauge", "{span}",
        "Spans waiting in memory to be forwarded now."),
    "serve_spooled": Instrument(
        "tracescore.serve.export.spooled", "gauge", "{batch}",
        "Batches waiting in the retry spool now."),
    "serve_at_risk": Instrument(
        "tracescore.serve.spans.at_risk", "gauge", "{span}",
        "Spans accepted and not yet handed downstream now (a crash loses them)."),
    "serve_invalid": Instrument(
        "tracescore.serve.requests.invalid", "counter", "{request}",
        "Requests refused before admission (malformed, too large, unauthenticated, timeouts), "
        "by reason."),
}
