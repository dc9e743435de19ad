"""Scorers: pure functions of (input, output, ground truth, context) to a ``ScoreResult``.

Prebuilt scorers follow the semantics of the Mastra evals (docs/scorers.md); ``create_scorer``
builds custom ones from the same four steps. ``registry()``, ``ids()`` and ``get(id)`` find the
prebuilt scorers by id (the id each scorer module declares, e.g. ``answer-relevancy``); the
command line, ``tracescore serve``, calibration and feedback read them. Importing this package
does not import litellm.

Examples:
    >>> from tracescore.scorers import create_content_similarity_scorer
    >>> create_content_similarity_scorer().run(output="Paris", ground_truth="paris").score
    1.0
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tracescore.scorers._base import (
    JudgePrompt,
    NotScorable,
    Scorer,
    ScoreResult,
    ScorerRun,
    SkipJudge,
    create_scorer,
)
from tracescore.scorers._prompt import data_block, data_blocks
from tracescore.scorers._registry import get, ids, registry

if TYPE_CHECKING:
    from tracescore.scorers.answer_relevancy import create_answer_relevancy_scorer
    from tracescore.scorers.answer_similarity import create_answer_similarity_scorer
    from tracescore.scorers.bias import create_bias_scorer
    from tracescore.scorers.completeness import create_completeness_scorer
    from tracescore.scorers.content_similarity import create_content_similarity_scorer
    from tracescore.scorers.context_precision import create_context_precision_scorer
    from tracescore.scorers.context_recall import create_context_recall_scorer
    from tracescore.scorers.context_relevance import create_context_relevance_scorer
    from tracescore.scorers.faithfulness import create_faithfulness_scorer
    from tracescore.scorers.faithfulness_cascade import create_faithfulness_cascade_scorer
    from tracescore.scorers.hallucination import create_hallucination_scorer
    from tracescore.scorers.keyword_coverage import create_keyword_coverage_scorer
    from tracescore.scorers.noise_sensitivity import create_noise_sensitivity_scorer
    from tracescore.scorers.prompt_alignment import create_prompt_alignment_scorer
    from tracescore.scorers.summarization import create_summarization_scorer
    from tracescore.scorers.support_check import create_support_check_scorer
    from tracescore.scorers.textual_difference import create_textual_difference_scorer
    from tracescore.scorers.tone_consistency import create_tone_consistency_scorer
    from tracescore.scorers.tool_call_accuracy import create_tool_call_accuracy_scorer_llm
    from tracescore.scorers.tool_call_accuracy_code import create_tool_call_accuracy_scorer_code
    from tracescore.scorers.toxicity import create_toxicity_scorer

__all__ = [
    "JudgePrompt",
    "NotScorable",
    "ScoreResult",
    "Scorer",
    "ScorerRun",
    "SkipJudge",
    "create_answer_relevancy_scorer",
    "create_answer_similarity_scorer",
    "create_bias_scorer",
    "create_completeness_scorer",
    "create_content_similarity_scorer",
    "create_context_precision_scorer",
    "create_context_recall_scorer",
    "create_context_relevance_scorer",
    "create_faithfulness_cascade_scorer",
    "create_faithfulness_scorer",
    "create_hallucination_scorer",
    "create_keyword_coverage_scorer",
    "create_noise_sensitivity_scorer",
    "create_prompt_alignment_scorer",
    "create_scorer",
    "create_summarization_scorer",
    "create_support_check_scorer",
    "create_textual_difference_scorer",
    "create_tone_consistency_scorer",
    "create_tool_call_accuracy_scorer_code",
    "create_tool_call_accuracy_scorer_llm",
    "create_toxicity_scorer",
    "data_block",
    "data_blocks",
    "get",
    "ids",
    "registry",
]

# Each prebuilt scorer's module is imported when its factory is first looked up: a program
# that uses one scorer does not pay for the other twenty's modules and pydantic models.
_FACTORIES = {
    "create_answer_relevancy_scorer": "answer_relevancy",
    "create_answer_similarity_scorer": "answer_similarity",
    "create_bias_scorer": "bias",
    "create_completeness_scorer": "completeness",
    "create_content_similarity_scorer": "content_similarity",
    "create_context_precision_scorer": "context_precision",
    "create_context_recall_scorer": "context_recall",
    "create_context_relevance_scorer": "context_relevance",
    "create_faithfulness_scorer": "faithfulness",
    "create_faithfulness_cascade_scorer": "faithfulness_cascade",
    "create_hallucination_scorer": "hallucination",
    "create_keyword_coverage_scorer": "keyword_coverage",
    "create_noise_sensitivity_scorer": "noise_sensitivity",
    "create_prompt_alignment_scorer": "prompt_alignment",
    "create_summarization_scorer": "summarization",
    "create_support_check_scorer": "support_check",
    "create_textual_difference_scorer": "textual_difference",
    "create_tone_consistency_scorer": "tone_consistency",
    "create_tool_call_accuracy_scorer_llm": "tool_call_accuracy",
    "create_tool_call_accuracy_scorer_code": "tool_call_accuracy_code",
    "create_toxicity_scorer": "toxicity",
}


def __getattr__(name: str) -> Any:
    module = _FACTORIES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
