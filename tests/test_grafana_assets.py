"""``examples/grafana/``: the dashboard and the alerting rules name only what tracescore
exports, as Prometheus sees it through the OpenTelemetry Prometheus exporter (run for real here,
in a child process so its global registry stays there). Evaluating the queries against a real
Prometheus that scraped a real run comes with the backends in CI (issue 12, point 6).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")
pytest.importorskip("opentelemetry.exporter.prometheus")

REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / "examples" / "grafana"

# Every instrument tracescore has, each recorded once with every label it can carry.
EXPOSE = r'''
import json
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client import generate_latest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from tracescore._writers.instruments import Telemetry
from tracescore._writers.callback import ScoreEvent

reader = PrometheusMetricReader()
t = Telemetry(meter_provider=MeterProvider(metric_readers=[reader]),
              queue_size=lambda: 1, held_spans=lambda: 1)


class Result:
    judge_model = "openai/judge"
    input_tokens = 10
    output_tokens = 5
    cost = 0.01


def event(score, label, error_type):
    return ScoreEvent(scorer_id="answer-relevancy", score=score, label=label, explanation="",
                      error_type=error_type, trace_id=1, span_id=2, span_name="invoke_agent a",
                      attributes={}, result=Result())


t.record_score(event(0.7, "pass", None), 1.0, agent="bot", operation="invoke_agent")
t.record_score(event(None, None, "timeout"), 1.0, agent="bot", operation="invoke_agent")
t.record_skip("answer-relevancy", "queue_full")
t.record_dropped("answer-relevancy", 1)
t.record_judge_call({"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                     "gen_ai.request.model": "judge", "gen_ai.response.model": "judge",
                     "error.type": "timeout"}, 0.5, 10, 5)
t.record_annotations("sent", 1)


class Usage:
    input_tokens = 100
    output_tokens = 20
    model = "gpt-4o-mini-2024-07-18"


if hasattr(t, "record_llm_call"):
    t.record_llm_call(Usage(), (0.001, 0.002), agent="bot", request_model="gpt-4o-mini",
                      provider="openai")
    t.record_llm_call(Usage(), None, agent="bot")
if hasattr(t, "record_export"):
    t.record_export("exported", 1)
    t.record_export("queue_full", 1)
names, labels = set(), set()
for family in text_string_to_metric_families(generate_latest(REGISTRY).decode()):
    for sample in family.samples:
        names.add(sample.name)
        labels.update(sample.labels)
print(json.dumps({"names": sorted(names), "labels": sorted(labels)}))
'''

# Prometheus adds these at scrape time; PromQL has these words.
SCRAPE_LABELS = {"job", "instance", "le"}
PROMQL_WORDS = {
    "sum", "avg", "min", "max", "count", "rate", "increase", "irate", "histogram_quantile",
    "by", "without", "and", "or", "unless", "on", "ignoring", "group_left", "group_right",
    "bool", "offset", "label_values", "clamp_min", "clamp_max", "abs", "topk", "bottomk",
}


@cache
def exported() -> dict[str, set[str]]:
    env = {**os.environ, "LITELLM_OFFLINE_MODE": "true", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", EXPOSE], capture_output=True, text=True,
                         env=env, check=True, timeout=120).stdout
    doc = json.loads(out.splitlines()[-1])
    return {"names": set(doc["names"]), "labels": set(doc["labels"]) | SCRAPE_LABELS}


def names_in(expr: str) -> tuple[set[str], set[str]]:
    """The metric names and the label names a PromQL expression (or a Grafana query) uses."""
    expr = re.sub(r"\$__\w+|\$\{?\w+\}?", "X", expr)  # Grafana variables
    labels: set[str] = set()
    for inside in re.findall(r"\{([^}]*)\}", expr):
        labels.update(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", inside))
    for inside in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        labels.update(x.strip() for x in inside.split(",") if x.strip())
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\b(?:by|without)\s*\([^)]*\)|\"[^\"]*\"", " ", expr)
    words = set(re.findall(r"[A-Za-z_:][\w:]*", bare))
    metrics = {w for w in words if w not in PROMQL_WORDS and not re.fullmatch(r"X|e|Inf|NaN", w)}
    return metrics, labels


def dashboard_queries() -> list[str]:
    doc = json.loads((ASSETS / "tracescore-dashboard.json").read_text(encoding="utf-8"))
    queries = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    for var in doc["templating"]["list"]:
        if var.get("type") == "query":
            queries.append(re.sub(r"^label_values\((\w+),\s*(\w+)\)$", r"\1{\2=\"x\"}",
                                  var["definition"]))
    return queries


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((ASSETS / "tracescore-alerts.yaml").read_text(encoding="utf-8"))
    return [r for g in doc["groups"] for r in g["rules"]]


def test_the_exporter_names_are_what_the_assets_expect() -> None:
    # Pins the translation the assets rely on: unitless histogram, _seconds, _total, _USD.
    names = exported()["names"]
    for name in ("tracescore_evaluation_score_bucket", "tracescore_evaluation_score_count",
                 "tracescore_scoring_jobs_total", "tracescore_judge_cost_USD_total",
                 "gen_ai_client_operation_duration_seconds_bucket",
                 "tracescore_phoenix_annotations_total", "tracescore_llm_cost_USD_total",
                 "tracescore_llm_unpriced_total", "gen_ai_client_token_usage_sum"):
        assert name in names


def test_dashboard_loads_and_names_only_exported_metrics() -> None:
    doc = json.loads((ASSETS / "tracescore-dashboard.json").read_text(encoding="utf-8"))
    titles = " | ".join(p["title"] for p in doc["panels"]).lower()
    for topic in ("score", "pass rate", "judge errors", "latency", "cost", "skipped",
                  "score and cost per agent", "tokens per agent"):
        assert topic in titles
    known = exported()
    for query in dashboard_queries():
        metrics, labels = names_in(query)
        assert metrics, query
        assert metrics <= known["names"], (query, metrics - known["names"])
        assert labels <= known["labels"], (query, labels - known["labels"])
    # Exemplars (links to traces) are asked for on the score histogram.
    assert any(t.get("exemplar") for p in doc["panels"] for t in p["targets"])


def test_alert_rules_are_valid_yaml_with_the_expected_alerts() -> None:
    doc = yaml.safe_load((ASSETS / "tracescore-alerts.yaml").read_text(encoding="utf-8"))
    assert [g["name"] for g in doc["groups"]] == ["tracescore-scores", "tracescore-judge"]
    alerts = {r["alert"]: r for r in rules()}
    assert {"TracescoreScoreBelowFloor", "TracescorePassRateDrop",
            "TracescoreJudgeErrorRate"} <= set(alerts)
    known = exported()
    for rule in rules():
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}
        metrics, labels = names_in(rule["expr"])
        assert metrics <= known["names"], (rule["alert"], metrics - known["names"])
        assert labels <= known["labels"], (rule["alert"], labels - known["labels"])
        assert re.fullmatch(r"\d+[smhd]", rule["for"])


def test_the_checker_catches_a_name_tracescore_does_not_export() -> None:
    metrics, labels = names_in('sum by (agent) (rate(tracescore_score_total{scorer="x"}[5m]))')
    assert metrics == {"tracescore_score_total"} and labels == {"agent", "scorer"}
    assert not metrics <= exported()["names"]
