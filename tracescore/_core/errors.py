"""Exception classes raised by tracescore.

Instrumentation never raises into user code; these reach users only from explicit calls
(``configure()`` with bad arguments, ``Scorer.run()``, ``run_evals()``).
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "InvalidJudgeOutputError",
    "JudgeError",
    "JudgeRateLimitedError",
    "JudgeTimeoutError",
    "JudgeUnavailableError",
    "NoJudgeConfiguredError",
    "ScorerError",
    "ScoringError",
    "TracescoreError",
]


class TracescoreError(Exception):
    """Base class of every exception tracescore raises on purpose."""


class ConfigurationError(TracescoreError, ValueError):
    """An explicit argument to ``configure()``, a ``ScoringRule`` or a scorer factory is invalid.

    The message says which argument and what to pass instead.
    """


class ScoringError(TracescoreError):
    """Scoring could not produce a result.

    Attributes:
        error_type: low-cardinality reason, recorded as ``error.type`` on the
            ``gen_ai.evaluation.result`` event: ``timeout``, ``rate_limited``,
            ``invalid_judge_output``, ``judge_unavailable``, ``judge_error``, ``no_judge`` or
            ``scorer_error``.
    """

    error_type: str = "scorer_error"

    def __init__(self, message: str, *, error_type: str | None = None) -> None:
        super().__init__(message)
        if error_type is not None:
            self.error_type = error_type


class ScorerError(ScoringError):
    """The scorer's own code failed (a bug or an invalid input it cannot handle)."""

    error_type = "scorer_error"


class NoJudgeConfiguredError(ScoringError):
    """An LLM-judged scorer ran without a judge model.

    Pass ``model=`` to the scorer factory, ``judge=`` to ``configure()``, or set
    ``TRACESCORE_JUDGE_MODEL``.
    """

    error_type = "no_judge"


class JudgeError(ScoringError):
    """The judge call failed for a reason not covered by a narrower class (4xx, auth, ...)."""

    error_type = "judge_error"


class JudgeTimeoutError(JudgeError):
    """The judge did not answer within its timeout, retries included."""

    error_type = "timeout"


class JudgeRateLimitedError(JudgeError):
    """The judge kept answering HTTP 429 after every retry."""

    error_type = "rate_limited"


class JudgeUnavailableError(JudgeError):
    """The judge kept failing with HTTP 5xx or connection errors after every retry."""

    error_type = "judge_unavailable"


class InvalidJudgeOutputError(JudgeError):
    """The judge's answer did not fit the requested schema, even after one repair retry."""

    error_type = "invalid_judge_output"
