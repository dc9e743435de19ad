"""Scorers: pure functions of (input, output, ground truth, context) to a ``ScoreResult``.

Prebuilt scorers follow the semantics of the Mastra evals (see SCORERS.md); ``create_scorer``
builds custom ones from the same four steps. Importing this package does not import litellm.

Example:
    >>> from tracescore.scorers import create_content_similarity_scorer
    >>> create_content_similarity_scorer().run(output="Paris", ground_truth="paris").score
    1.0
"""

from __future__ import annotations

from tracescore.scorers._base import (
    JudgePrompt,
    NotScorable,
    Scorer,
    ScoreResult,
    ScorerRun,
    create_scorer,
)
from tracescore.scorers._prompt import data_block, data_blocks
from tracescore.scorers.answer_relevancy import create_answer_relevancy_scorer
from tracescore.scorers.content_similarity import create_content_similarity_scorer
from tracescore.scorers.context_precision import create_context_precision_scorer

__all__ = [
    "JudgePrompt",
    "NotScorable",
    "ScoreResult",
    "Scorer",
    "ScorerRun",
    "create_answer_relevancy_scorer",
    "create_content_similarity_scorer",
    "create_context_precision_scorer",
    "create_scorer",
    "data_block",
    "data_blocks",
]
