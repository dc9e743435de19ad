"""Rules, sampling and limits: which ended spans get which scorers.

A ``CompiledRule`` is a ``ScoringRule`` made ready for the hot path. It matches on plain values
that every span source has (the normalised kind, the span's name, attributes, instrumentation
scope and error status); only a user's predicate gets the span object itself. Selection is
deterministic per trace id (``_sampling.trace_sampled``); rate limits and judge budgets count at
the span's end.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._limits import HourlyBudget, TokenBucket
from ._sampling import trace_sampled

# A value extractor: (the span where there is one, else None; the call's input) -> value.
Extractor = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class CompiledRule:
    """A ``ScoringRule`` made ready for the hot path by ``configure()``.

    Attributes:
        scorer: the scorer (it satisfies ``tracescore._scorer.Scorer``).
        kind: the normalised kind the rule selects, or None with a predicate.
        predicate: ``(span) -> bool`` given by the user, or None.
        sample_rate: fraction of traces scored.
        salt: mixed into the sampling hash (the rule's name).
        threshold: pass/fail threshold, or None.
        extractors: further scorer inputs by ``run()`` argument name.
        span_name: compiled glob on the span's name, or None.
        attributes: attribute filters (all must be equal).
        scope: compiled glob on the instrumentation scope's name, or None.
        score_errors: also score failed spans that the sample did not pick.
        rate_limiter: the rule's ``max_per_minute`` token bucket, or None.
        budget: the rule's hourly judge budget, or None.
    """

    scorer: Any
    kind: str | None
    predicate: Callable[[Any], bool] | None
    sample_rate: float
    salt: str
    threshold: float | None
    extractors: Mapping[str, Extractor]
    span_name: re.Pattern[str] | None = None
    attributes: tuple[tuple[str, Any], ...] = ()
    scope: re.Pattern[str] | None = None
    score_errors: bool = False
    rate_limiter: TokenBucket | None = None
    budget: HourlyBudget | None = None

    @property
    def scorer_id(self) -> str:
        """The scorer's id."""
        return str(self.scorer.id)

    def matches(self, kind: str | None, name: str, attributes: Mapping[str, Any], scope: str,
                span: Any) -> bool:
        """Kind (or predicate), name, scope and attribute filters; no sampling, no limits."""
        if self.predicate is not None:
            if not self.predicate(span):
                return False
        elif kind is None or kind != self.kind:
            return False
        if self.span_name is not None and not self.span_name.fullmatch(name):
            return False
        if self.scope is not None and not self.scope.fullmatch(scope):
            return False
        return all(attributes.get(key) == expected for key, expected in self.attributes)

    def admit(self) -> str | None:
        """None when the rule's rate limit and budget admit one more job, else the skip
        reason (``rate_limited`` or ``budget``)."""
        if self.budget is not None and not self.budget.admits():
            return "budget"
        if self.rate_limiter is not None and not self.rate_limiter.try_take():
            return "rate_limited"
        return None

    def spend(self, result: Any) -> None:
        """Charge a finished job's judge tokens and cost to the rule's budget."""
        if self.budget is None or result is None:
            return
        self.budget.spend(
            (getattr(result, "input_tokens", 0) or 0) + (getattr(result, "output_tokens", 0) or 0),
            getattr(result, "cost", None),
        )


@dataclass(frozen=True)
class Selected:
    """A rule that picked a span, and whether it did so only because the span failed."""

    rule: CompiledRule
    on_error: bool


def select(rules: Sequence[CompiledRule], *, trace_id: int, kind: str | None, name: str,
           attributes: Mapping[str, Any], scope: str, failed: bool, span: Any) -> list[Selected]:
    """The rules that match a span and whose trace-id sample picks its trace (or that score
    every failed span). Limits are not applied here: see ``CompiledRule.admit``."""
    selected: list[Selected] = []
    for rule in rules:
        if not rule.matches(kind, name, attributes, scope, span):
            continue
        if trace_sampled(trace_id, rule.sample_rate, rule.salt):
            selected.append(Selected(rule, False))
        elif rule.score_errors and failed:
            selected.append(Selected(rule, True))
    return selected
