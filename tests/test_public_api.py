"""Pins the public names: none appears or disappears by accident."""

from __future__ import annotations

import tracescore
import tracescore.scorers

PUBLIC = [
    "CalibrationResult", "ConfigurationError", "EvalItem", "EvalItemResult", "EvalResult",
    "FileSpanExporter", "ContentOptions", "LimitsOptions", "ExportOptions", "RedactionOptions",
    "InvalidJudgeOutputError", "ItemScore", "Judge", "JudgeError", "JudgeRateLimitedError",
    "JudgeTimeoutError", "JudgeUnavailableError", "NoJudgeConfiguredError", "ScoreEvent",
    "ScorerError", "ScorerSummary", "ScoringError", "ScoringRule", "Stats", "TargetError",
    "Tracescore", "TracescoreError", "__version__", "agent", "arun_evals", "bind_context",
    "calibrate", "calibrate_feedback", "configure", "force_flush", "llm", "record_feedback",
    "retrieval", "run_evals", "scorers",
    "shutdown", "stats",
    "tool",
    # issue 24: conversations and users, spans for code that is not a function call
    "conversation", "span", "SpanBlock",
    # issue 32: the fifth option group (configure() with 12 parameters)
    "OutputOptions",
]

SCORERS = [
    "JudgePrompt", "NotScorable", "ScoreResult", "Scorer", "ScorerRun", "SkipJudge",
    "create_answer_relevancy_scorer", "create_answer_similarity_scorer", "create_bias_scorer",
    "create_completeness_scorer", "create_content_similarity_scorer",
    "create_context_precision_scorer", "create_context_recall_scorer",
    "create_context_relevance_scorer", "create_faithfulness_cascade_scorer",
    "create_faithfulness_scorer",
    "create_hallucination_scorer", "create_keyword_coverage_scorer",
    "create_noise_sensitivity_scorer", "create_prompt_alignment_scorer", "create_scorer",
    "create_summarization_scorer", "create_support_check_scorer",
    "create_textual_difference_scorer",
    "create_tone_consistency_scorer", "create_tool_call_accuracy_scorer_code",
    "create_tool_call_accuracy_scorer_llm", "create_toxicity_scorer", "data_block",
    "data_blocks",
    # issue 32: the one scorer registry
    "get", "ids", "registry",
]


def test_all_is_pinned() -> None:
    assert sorted(tracescore.__all__) == sorted(PUBLIC)
    assert sorted(tracescore.scorers.__all__) == sorted(SCORERS)


def test_every_public_name_resolves_and_is_documented() -> None:
    for name in PUBLIC:
        obj = getattr(tracescore, name)
        if callable(obj):
            assert (obj.__doc__ or "").strip(), name
    for name in SCORERS:
        assert (getattr(tracescore.scorers, name).__doc__ or "").strip(), name

