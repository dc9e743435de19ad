"""Rules, sampling and limits: which ended spans get which scorers.

``ScoringRule`` is what users write; ``configure()`` compiles each into a ``CompiledRule``, made
ready for the hot path. It matches on plain values that every span source has (the normalised
kind, the span's name, attributes, instrumentation scope and error status); only a user's
predicate gets the span object itself. Selection is
deterministic per trace id (``_sampling.TracePicker``); rate limits and judge budgets count at
the span's end.
"""

from __future__ import annotations

import fnmatch
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from tracescore._core.errors import ConfigurationError
from tracescore._pipeline.limits import Budget, HourlyBudget, RateLimiter, TokenBucket
from tracescore._pipeline.request import KINDS
from tracescore._pipeline.scorer import as_scorer

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

logger = logging.getLogger("tracescore")

# A value extractor: (the span where there is one, else None; the call's input) -> value.
Extractor = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class CompiledRule:
    """A ``ScoringRule`` made ready for the hot path by ``configure()``.

    Attributes:
        scorer: the scorer (it satisfies ``tracescore._pipeline.scorer.Scorer``).
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
        score_wrappers: also select spans that wrap another span of their kind.
        tool_results_as_context: context scorers also judge the turn's tool results.
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
    rate_limiter: RateLimiter | None = None
    budget: Budget | None = None
    score_wrappers: bool = False
    tool_results_as_context: bool = False

    @property
    def scorer_id(self) -> str:
        """The scorer's id."""
        return str(self.scorer.id)

    def matches(self, kind: str | None, name: str, attributes: Mapping[str, Any], scope: str,
                span: Any, wrapper: bool = False) -> bool:
        """Kind (or predicate), name, scope and attribute filters; no sampling, no limits.
        ``wrapper``: the span wraps another span of its kind (``_readers._turns``), which
        a kind rule selects only with ``score_wrappers``."""
        if self.predicate is not None:
            if not self.predicate(span):
                return False
        elif kind is None or kind != self.kind or (wrapper and not self.score_wrappers):
            return False
        if self.span_name is not None and not self.span_name.fullmatch(name):
            return False
        if self.scope is not None and not self.scope.fullmatch(scope):
            return False
        if not self.attributes:
            return True
        return all(attributes.get(key) == expected for key, expected in self.attributes)

    def admit(self) -> str | None:
        """None when the rule's rate limit and budget admit one more job, else the skip
        reason (``rate_limited`` or ``budget``)."""
        if self.budget is not None and not self.budget.admits():
            return "budget"
        if self.rate_limiter is not None and not self.rate_limiter.try_take():
            return "rate_limited"
        return None

    def after_fork_in_child(self) -> None:
        """A thread of the parent may have held a limiter's lock at ``fork()``: the child
        takes new ones (else its first span to reach this rule would block for good)."""
        for limiter in (self.rate_limiter, self.budget):
            if limiter is not None and hasattr(limiter, "_lock"):
                limiter._lock = threading.Lock()

    def spend(self, result: Any) -> None:
        """Charge a finished job's judge tokens and cost to the rule's budget."""
        if self.budget is None or result is None:
            return
        self.budget.spend(
            (getattr(result, "input_tokens", 0) or 0) + (getattr(result, "output_tokens", 0) or 0),
            getattr(result, "cost", None),
        )


class Selected(NamedTuple):
    """A rule that picked a span, and whether it did so only because the span failed."""

    rule: CompiledRule
    on_error: bool


def select(rules: Sequence[CompiledRule], sampled: Sequence[bool], *, kind: str | None,
           name: str, attributes: Mapping[str, Any], scope: str, failed: bool,
           span: Any, wrapper: bool = False) -> list[Selected]:
    """The rules that match a span and whose trace-id sample picks its trace (``sampled``,
    one decision per rule: ``_sampling.TracePicker.decide``), or that score every failed span.
    A rule neither sampled nor scoring this failure is not matched at all (its predicate is not
    run). ``wrapper``: the span wraps another of its kind (``_readers._turns``). Limits are not
    applied here: see ``CompiledRule.admit``."""
    selected: list[Selected] = []
    for rule, picked in zip(rules, sampled, strict=True):
        if not (picked or (rule.score_errors and failed)):
            continue
        if rule.matches(kind, name, attributes, scope, span, wrapper):
            selected.append(Selected(rule, not picked))
    return selected


@dataclass(frozen=True, kw_only=True)
class ScoringRule:
    """Which spans a scorer judges, and how often. Keyword arguments only.

    Args:
        scorer: a scorer from ``tracescore.scorers`` (or ``create_scorer``).
        on: the span kind, ``"agent"`` | ``"retrieval"`` | ``"tool"`` | ``"llm"``, or a
            predicate ``(span: ReadableSpan) -> bool`` evaluated on every ended span (it must
            be cheap and must not raise; an exception skips the span). Default ``"agent"``.
        sample_rate: fraction of traces to score, 0.0..1.0, decided deterministically from the
            trace id (the same trace is picked in every process). Default 1.0. Stamped on each
            event as ``tracescore.sample_rate`` so aggregates can be re-weighted.
        threshold: with a threshold the event carries ``gen_ai.evaluation.score.label``
            ``pass``/``fail`` (``score >= threshold``, or ``<=`` for scorers where lower is
            better such as hallucination). Default None: no label.
        ground_truth: where scorers that compare with a reference get it: a span attribute
            name, or a callable ``(span: ReadableSpan, call_input) -> Any`` where
            ``call_input`` is the decorated function's single argument (or a dict of its
            arguments by name). Required when the scorer requires a ground truth. Callables
            always get the ended span in process; ``span`` is None for a request that was not
            read from a span.
        inputs: further per-span values a scorer needs (its ``run_inputs``, e.g.
            ``baseline_response`` and ``noisy_query`` of noise sensitivity), by ``run()``
            argument name, each a span attribute name or a callable
            ``(span, call_input) -> value``.
        span_name: only spans whose name matches this glob pattern (``fnmatch`` syntax, whole
            name, case-sensitive), e.g. ``"invoke_agent support-*"``.
        attributes: only spans whose attributes equal all of these values, e.g.
            ``{"deployment.environment": "prod"}``.
        scope: only spans made by an instrumentation scope whose name matches this glob
            pattern, e.g. ``"openinference.instrumentation.*"`` (tracescore's own decorators
            use the scope ``tracescore``).
        score_errors: also score every matching span that ended with status ERROR, whatever
            the sample rate (such events carry ``tracescore.selected_on_error=true`` so
            aggregates can leave them out of re-weighting). Default False.
        max_per_minute: a token-bucket rate limit on this rule's scoring jobs (sustained jobs
            per minute, bursts of one second's worth); past it jobs are skipped and counted.
        max_tokens_per_hour: a judge budget: once this rule's scores used this many judge
            tokens (input + output) in the past hour, its jobs are skipped and counted.
        max_cost_per_hour: the same in USD, where litellm knows the judge's price.
        clock: monotonic seconds for the rate limit and budget; default ``time.monotonic``
            (tests pass a fake clock).
        score_wrappers: also judge a span that wraps another span of its kind in the same
            trace. Default False: one score per model call and per agent turn, on the
            innermost span of a nest (a framework's LLM span around the client library's,
            LlamaIndex ``predict`` around ``chat``, litellm or LangChain around OpenAI: the
            inner one, which carries the messages sent and the text received; a workflow's
            agent span around the agent's: the agent's). Spans of tracescore's own decorators
            are always judged. With True, narrow the rule with ``scope=`` to pick one layer.
        tool_results_as_context: scorers that judge against context (faithfulness,
            hallucination, the context scorers) also take the results of the tool calls
            made under the scored span (after the retrieved documents), for agents whose
            retrieval is a tool; on an LLM span, the tool results among its input messages.
            Default False.
        name: a name for the rule, mixed into its sampling hash. Default: none, so that rules
            at equal rates pick the same traces and a lower rate's traces are a subset of a
            higher rate's (a trace sampled at 0.1 also gets the scores of 0.5 rules); give
            rules distinct names to pick independent subsets.

    Raises:
        ConfigurationError: an argument is out of range or of the wrong type.
        TypeError: an argument was passed by position (14 fields make positions unreadable
            and fragile when a field is added).

    Examples:
        >>> tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent",
        ...                        sample_rate=0.1, threshold=0.7)
    """

    scorer: Any
    on: str | Callable[[ReadableSpan], bool] = "agent"
    sample_rate: float = 1.0
    threshold: float | None = None
    ground_truth: str | Callable[[ReadableSpan, Any], Any] | None = None
    name: str | None = None
    inputs: Mapping[str, str | Callable[[ReadableSpan, Any], Any]] | None = None
    span_name: str | None = None
    attributes: Mapping[str, Any] | None = None
    scope: str | None = None
    score_errors: bool = False
    max_per_minute: float | None = None
    max_tokens_per_hour: float | None = None
    max_cost_per_hour: float | None = None
    clock: Callable[[], float] | None = None
    score_wrappers: bool = False
    tool_results_as_context: bool = False

    def __post_init__(self) -> None:
        self._check_limits()
        if not callable(getattr(self.scorer, "arun", None)) or not getattr(self.scorer, "id", None):
            raise ConfigurationError(
                "ScoringRule(scorer=...) needs a scorer from tracescore.scorers (an object with "
                f"an id and arun()), got {type(self.scorer).__name__}"
            )
        if isinstance(self.on, str):
            if self.on not in KINDS:
                raise ConfigurationError(
                    f"ScoringRule(on={self.on!r}): use one of {', '.join(KINDS)} or a predicate"
                )
        elif not callable(self.on):
            raise ConfigurationError("ScoringRule(on=...) takes a span kind or a predicate")
        if isinstance(self.sample_rate, bool) or not isinstance(self.sample_rate, (int, float)):
            raise ConfigurationError("ScoringRule(sample_rate=...) takes a number in 0..1")
        if not 0.0 <= float(self.sample_rate) <= 1.0:
            raise ConfigurationError(
                f"ScoringRule(sample_rate={self.sample_rate}) must lie in 0..1"
            )
        if self.threshold is not None and (
            isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float))
        ):
            raise ConfigurationError("ScoringRule(threshold=...) takes a number or None")
        sources = self._sources()
        for key, source in sources.items():
            if not (isinstance(source, str) or callable(source)):
                raise ConfigurationError(
                    f"ScoringRule: {key} takes a span attribute name or a callable "
                    "(span, call_input) -> value"
                )
        if "ground_truth" not in sources and getattr(self.scorer, "requires_ground_truth", False):
            raise ConfigurationError(
                f"scorer {self.scorer.id!r} compares with a ground truth: pass "
                "ScoringRule(ground_truth='<span attribute>') or ground_truth=callable"
            )
        missing = [n for n in getattr(self.scorer, "run_inputs", ()) if n not in sources]
        if missing:
            example = ", ".join(f"{n!r}: '<span attribute>'" for n in missing)
            raise ConfigurationError(
                f"scorer {self.scorer.id!r} needs {', '.join(missing)} for each span: pass "
                f"ScoringRule(inputs={{{example}}}) (an attribute name or a callable "
                "(span, call_input) -> value), or give the value to the scorer factory"
            )

    def _check_limits(self) -> None:
        for field_name in ("max_per_minute", "max_tokens_per_hour", "max_cost_per_hour"):
            value = getattr(self, field_name)
            if value is None:
                continue
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value) or value <= 0):
                raise ConfigurationError(
                    f"ScoringRule({field_name}={value!r}) takes a positive number or None"
                )
        if self.span_name is not None and not isinstance(self.span_name, str):
            raise ConfigurationError("ScoringRule(span_name=...) takes a glob pattern string")
        if self.scope is not None and not isinstance(self.scope, str):
            raise ConfigurationError("ScoringRule(scope=...) takes a glob pattern string")
        if self.attributes is not None and not isinstance(self.attributes, Mapping):
            raise ConfigurationError(
                "ScoringRule(attributes=...) takes a mapping of attribute name to value"
            )
        for flag in ("score_errors", "score_wrappers", "tool_results_as_context"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigurationError(f"ScoringRule({flag}=...) takes True or False")
        if self.clock is not None and not callable(self.clock):
            raise ConfigurationError("ScoringRule(clock=...) takes a callable returning seconds")

    def _sources(self) -> dict[str, Any]:
        if self.inputs is not None and not isinstance(self.inputs, Mapping):
            raise ConfigurationError(
                "ScoringRule(inputs=...) takes a mapping of run() argument name to a span "
                "attribute name or a callable (span, call_input) -> value"
            )
        sources: dict[str, Any] = dict(self.inputs or {})
        for reserved in ("input", "output", "context"):
            if reserved in sources:
                raise ConfigurationError(
                    f"ScoringRule(inputs=...) cannot set {reserved!r}: it comes from the span"
                )
        if self.ground_truth is not None:
            sources["ground_truth"] = self.ground_truth
        return sources

    def compile(self) -> CompiledRule:
        """The form the span processor runs on."""
        extractors = {name: _extractor(source) for name, source in self._sources().items()}
        clock = self.clock or time.monotonic
        predicate = None
        if callable(self.on):
            user_predicate = self.on

            def predicate(span: ReadableSpan) -> bool:
                try:
                    return bool(user_predicate(span))
                except Exception:
                    logger.debug("tracescore rule predicate raised; span skipped", exc_info=True)
                    return False

        return CompiledRule(
            scorer=as_scorer(self.scorer),
            kind=self.on if isinstance(self.on, str) else None,
            predicate=predicate,
            sample_rate=float(self.sample_rate),
            salt=self.name or "",
            threshold=None if self.threshold is None else float(self.threshold),
            extractors=extractors,
            span_name=(re.compile(fnmatch.translate(self.span_name))
                       if self.span_name is not None else None),
            scope=re.compile(fnmatch.translate(self.scope)) if self.scope is not None else None,
            attributes=tuple((self.attributes or {}).items()),
            score_errors=self.score_errors,
            score_wrappers=self.score_wrappers,
            tool_results_as_context=self.tool_results_as_context,
            rate_limiter=(TokenBucket(self.max_per_minute, clock=clock)
                          if self.max_per_minute is not None else None),
            budget=(HourlyBudget(self.max_tokens_per_hour, self.max_cost_per_hour, clock=clock)
                    if self.max_tokens_per_hour is not None or self.max_cost_per_hour is not None
                    else None),
        )


def _extractor(source: Any) -> Extractor:
    """A rule's value source as an extractor ``(span or None, call_input) -> value``."""
    if isinstance(source, str):
        key = source

        def from_attribute(span: Any, call_input: Any) -> Any:
            return (getattr(span, "attributes", None) or {}).get(key)

        return from_attribute
    func = source

    def from_callable(span: Any, call_input: Any) -> Any:
        return func(span, call_input)

    return from_callable
