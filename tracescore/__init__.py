"""tracescore: sampled quality scores for LLM agents, on their OpenTelemetry spans.

Decorate agents, retrievals, tools and model calls; pick a fraction of traces with
``ScoringRule``s; scorers judge them in the background and each score lands on the span it
judges as a ``gen_ai.evaluation.result`` event, exported over OTLP.

Examples:
    >>> import tracescore
    >>> from tracescore.scorers import create_answer_relevancy_scorer
    >>> tracescore.configure(
    ...     service_name="support-bot",
    ...     judge="openai/gpt-4o-mini",
    ...     scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(),
    ...                                     on="agent", sample_rate=0.1)],
    ... )
    >>> @tracescore.agent
    ... def answer(question: str) -> str: ...
"""

from typing import TYPE_CHECKING, Any

from tracescore._core.errors import (
    ConfigurationError,
    InvalidJudgeOutputError,
    JudgeError,
    JudgeRateLimitedError,
    JudgeTimeoutError,
    JudgeUnavailableError,
    NoJudgeConfiguredError,
    ScorerError,
    ScoringError,
    TracescoreError,
)
from tracescore._core.stats import Stats
from tracescore._export.exporters import FileSpanExporter
from tracescore._instrument.blocks import SpanBlock, span
from tracescore._instrument.context import bind_context
from tracescore._instrument.conversation import conversation
from tracescore._instrument.decorators import agent, llm, retrieval, tool
from tracescore._pipeline.rules import ScoringRule
from tracescore._setup.config import Tracescore, configure, force_flush, shutdown, stats
from tracescore._setup.options import (
    ContentOptions,
    ExportOptions,
    LimitsOptions,
    OutputOptions,
    RedactionOptions,
)

from ._judge import Judge
from ._version import __version__
from ._writers.callback import ScoreEvent

if TYPE_CHECKING:
    from tracescore._offline.calibrate import CalibrationResult, calibrate
    from tracescore._offline.evals import (
        EvalItem,
        EvalItemResult,
        EvalResult,
        ItemScore,
        ScorerSummary,
        TargetError,
        arun_evals,
        run_evals,
    )
    from tracescore._offline.feedback import calibrate_feedback, record_feedback

    from . import scorers

_LAZY_EVALS = frozenset({
    "EvalItem", "EvalItemResult", "EvalResult", "ItemScore", "ScorerSummary", "TargetError",
    "arun_evals", "run_evals",
})


def __getattr__(name: str) -> Any:
    # ``tracescore.scorers`` is imported on first use: it pulls in pydantic, which the
    # decorators' hot path never needs.
    import importlib

    if name == "scorers":
        return importlib.import_module(".scorers", __name__)
    if name in _LAZY_EVALS:  # run_evals and its result types: CI-time code, not the hot path
        value = getattr(importlib.import_module("._offline.evals", __name__), name)
        globals()[name] = value
        return value
    if name in ("calibrate", "CalibrationResult"):  # judge calibration: offline tooling too
        value = getattr(importlib.import_module("._offline.calibrate", __name__), name)
        globals()[name] = value
        return value
    if name in ("record_feedback", "calibrate_feedback"):  # human verdicts after the fact
        value = getattr(importlib.import_module("._offline.feedback", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tracescore' has no attribute {name!r}")


__all__ = [
    "CalibrationResult",
    "ConfigurationError",
    "ContentOptions",
    "EvalItem",
    "EvalItemResult",
    "EvalResult",
    "ExportOptions",
    "FileSpanExporter",
    "InvalidJudgeOutputError",
    "ItemScore",
    "Judge",
    "JudgeError",
    "JudgeRateLimitedError",
    "JudgeTimeoutError",
    "JudgeUnavailableError",
    "LimitsOptions",
    "NoJudgeConfiguredError",
    "OutputOptions",
    "RedactionOptions",
    "ScoreEvent",
    "ScorerError",
    "ScorerSummary",
    "ScoringError",
    "ScoringRule",
    "SpanBlock",
    "Stats",
    "TargetError",
    "Tracescore",
    "TracescoreError",
    "__version__",
    "agent",
    "arun_evals",
    "bind_context",
    "calibrate",
    "calibrate_feedback",
    "configure",
    "conversation",
    "force_flush",
    "llm",
    "record_feedback",
    "retrieval",
    "run_evals",
    "scorers",
    "shutdown",
    "span",
    "stats",
    "tool",
]
