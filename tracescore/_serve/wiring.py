"""From a validated ``ServeConfig`` to the parts the service runs: compiled rules (with the
fleet-wide limiters when a store is configured), the downstream exporters of spans, metrics and
log records."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
from typing import Any

from tracescore._core.errors import ConfigurationError
from tracescore._pipeline.rules import CompiledRule
from tracescore._setup import env as _env

from .config import Downstream, Fleet, Rule, ServeConfig, ServeConfigError

logger = logging.getLogger("tracescore")


def build_judge(config: ServeConfig) -> Any:
    """The configured ``tracescore.Judge``, or None."""
    if config.judge is None:
        return None
    from .._judge import Judge

    extra = dict(config.judge.model_extra or {})
    return Judge(config.judge.model, **extra)


def _scorer(rule: Rule, judge: Any, where: str) -> Any:
    options = dict(rule.options)
    if rule.factory is None:
        # A scorer id: tracescore.scorers' registry, the one the command line reads.
        from tracescore.scorers import registry
        from tracescore.scorers._registry import build

        assert rule.scorer is not None
        if rule.scorer not in registry():
            raise ServeConfigError(f"{where}.scorer: unknown scorer {rule.scorer!r}; "
                                   f"known: {', '.join(registry())}")
        try:
            return build(rule.scorer, judge, options)
        except ConfigurationError as exc:
            raise ServeConfigError(f"{where}.options: {exc}") from None
    module_name, _, attr = rule.factory.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ServeConfigError(f"{where}.factory: cannot import {rule.factory}: {exc}") from None
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    if judge is not None and "model" in params and "model" not in options:
        options["model"] = judge
    try:
        return factory(**options)
    except (TypeError, ConfigurationError) as exc:
        raise ServeConfigError(f"{where}.options: {exc}") from None


def build_rules(config: ServeConfig, judge: Any) -> list[CompiledRule]:
    """Compile the file's rules (each a ``ScoringRule``, as the in-process API takes them).

    Raises:
        ServeConfigError: a scorer cannot be built, a rule is invalid, or an LLM-judged
            scorer has no judge (no ``judge`` section, no ``model`` option, no
            ``TRACESCORE_JUDGE_MODEL``); every problem of every rule, one per line, named by
            the rule's index.
    """
    compiled = []
    problems: list[str] = []
    for index, rule in enumerate(config.rules):
        where = f"rules[{index}]"
        try:
            scorer = _scorer(rule, judge, where)
        except ServeConfigError as exc:
            problems.append(str(exc))
            continue
        if getattr(scorer, "uses_judge", False) and getattr(scorer, "model", None) is None \
                and judge is None and not _env.judge_model():
            problems.append(f"{where}.scorer: {getattr(scorer, 'id', rule.scorer)!r} is judged "
                            "by an LLM and no judge is configured: add a judge section "
                            "(judge: {model: ...}), options.model, or set "
                            "TRACESCORE_JUDGE_MODEL")
            continue
        try:
            compiled.append(rule.to_rule(scorer).compile())
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
    if problems:
        raise ServeConfigError(f"{len(problems)} invalid rule(s):\n  " + "\n  ".join(problems))
    return compiled


def fleet_limits(rules: list[CompiledRule], config: ServeConfig) -> tuple[list[CompiledRule], Any]:
    """Swap each rule's per-process rate limit and budget for the Redis-backed ones when
    ``fleet.redis_url`` is set. Returns the rules and the store (None without one)."""
    limits: Fleet = config.fleet
    if limits.redis_url is None:
        return rules, None
    from tracescore._pipeline.limits_redis import RedisHourlyBudget, RedisStore, RedisTokenBucket

    store = RedisStore(limits.redis_url, refresh_interval=limits.refresh_interval)
    out = []
    for index, (rule, rule_spec) in enumerate(zip(rules, config.rules, strict=True)):
        spec = rule_spec.fields
        per_minute = spec.get("max_per_minute")
        tokens, cost = spec.get("max_tokens_per_hour"), spec.get("max_cost_per_hour")
        key = f"{limits.key_prefix}:{spec.get('name') or f'rule{index}'}:{rule.scorer_id}"
        bucket = (RedisTokenBucket(store, key, per_minute, lease_seconds=limits.lease_seconds)
                  if per_minute is not None else None)
        budget = (RedisHourlyBudget(store, key, tokens, cost)
                  if tokens is not None or cost is not None else None)
        out.append(dataclasses.replace(rule, rate_limiter=bucket or rule.rate_limiter,
                                       budget=budget or rule.budget))
    store.start()
    return out, store


def _grpc_target(endpoint: str) -> str:
    return endpoint.split("://", 1)[-1]


def span_exporter(down: Downstream) -> Any:
    """The OTLP span exporter towards the downstream."""
    if down.protocol == "grpc":
        from grpc import Compression  # type: ignore[import-untyped, unused-ignore]
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(
            endpoint=down.endpoint, insecure=down.endpoint.startswith("http://"),
            headers=dict(down.headers) or None, timeout=down.timeout,
            compression=Compression.Gzip if down.compression == "gzip" else None)
    from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    return HttpSpanExporter(
        endpoint=down.endpoint + "/v1/traces", headers=dict(down.headers) or None,
        timeout=down.timeout,
        compression=(HttpCompression.Gzip if down.compression == "gzip"
                     else HttpCompression.NoCompression))


def metric_exporter(down: Downstream) -> Any:
    """The OTLP metric exporter towards the downstream."""
    if down.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter(endpoint=down.endpoint,
                                  insecure=down.endpoint.startswith("http://"),
                                  headers=dict(down.headers) or None, timeout=down.timeout)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpMetricExporter,
    )

    return HttpMetricExporter(endpoint=down.endpoint + "/v1/metrics",
                              headers=dict(down.headers) or None, timeout=down.timeout)


def log_exporter(down: Downstream) -> Any:
    """The OTLP log exporter (score log records) towards the downstream."""
    if down.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter

        return OTLPLogExporter(endpoint=down.endpoint,
                               insecure=down.endpoint.startswith("http://"),
                               headers=dict(down.headers) or None, timeout=down.timeout)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import (
        OTLPLogExporter as HttpLogExporter,
    )

    return HttpLogExporter(endpoint=down.endpoint + "/v1/logs",
                           headers=dict(down.headers) or None, timeout=down.timeout)
