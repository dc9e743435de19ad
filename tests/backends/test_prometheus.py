"""Prometheus 2.42, scraping a real run of the HaluEval demo: the alert rules and the dashboard's
queries evaluated by Prometheus itself.

The demo runs (with the loopback scripted judge, so every panel has data: three scorers, judge
latency and tokens) in ``metrics_runner.py``, which serves tracescore's metrics through
``opentelemetry-exporter-prometheus``; Prometheus scrapes it every second and evaluates
``examples/grafana/tracescore-alerts.yaml`` every second. The runner runs the demo twice and
the second run happens between two known scrapes, so a query over exactly that window must give
what the demo printed for its second run (see the runner's docstring).

``promtool check rules`` checks the rules file; ``promtool test rules`` runs
``tracescore-alerts.test.yaml``, which drives each alert with synthetic series through its
``for:`` period (a live alert stays pending for 15 to 30 minutes).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.backends import servers
from tests.backends.installed import require_binary
from tests.test_examples import data_rows, script_judge
from tracescore.testing import ScriptedJudge

pytest.importorskip("opentelemetry.exporter.prometheus")

pytestmark = pytest.mark.timeout(600)

HERE = Path(__file__).resolve().parent
RULES = servers.REPO / "examples" / "grafana" / "tracescore-alerts.yaml"
DASHBOARD = servers.REPO / "examples" / "grafana" / "tracescore-dashboard.json"
RULE_TESTS = HERE / "tracescore-alerts.test.yaml"
RUNNER = HERE / "metrics_runner.py"
LIMIT = 60  # questions per demo run
SCORERS = ("content-similarity", "answer-relevancy", "context-precision")
AGENT = "halueval-rag"
JUDGE_CALLS_PER_ITEM = 5  # answer relevancy 3, context precision 2 (tests/test_examples.py)
RAISED_FLOOR = 0.99  # above every scorer's mean in this run


@dataclasses.dataclass
class PrometheusRun:
    base: str
    summary: dict[str, Any]  # the demo's --json summary of the second run
    first: float  # timestamp of a scrape holding exactly the first run's totals
    second: float  # timestamp of a scrape holding both runs' totals
    judge_requests: int

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query at the second scrape; the result vector."""
        body = servers.http_json(
            f"{self.base}/api/v1/query?"
            + urllib.parse.urlencode({"query": expr, "time": f"{self.second:.3f}"})
        )
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    @property
    def window(self) -> str:
        """A range that holds the two scrapes and nothing before the first: the second run."""
        return f"{round((self.second - self.first) * 1000) + 500}ms"


def _sample(base: str, expr: str) -> tuple[float, float] | None:
    """(timestamp, value) of a one-element instant query now, or None when it is empty."""
    body = servers.http_json(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    result = body["data"]["result"]
    if not result:
        return None
    ts, value = result[0]["value"]
    return float(ts), float(value)


def _scraped(base: str, expected: float) -> float | None:
    """The timestamp of the latest scrape once it holds ``expected`` scores in total."""
    sample = _sample(base, "sum(tracescore_evaluation_score_count)")
    return sample[0] if sample and sample[1] == expected else None


def _raised_floor_rules(path: Path) -> None:
    """A copy of the score-below-floor alert with a floor above every mean, labelled so."""
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    rules = [r for g in groups for r in g["rules"]]
    (rule,) = [r for r in rules if r.get("alert") == "TracescoreScoreBelowFloor"]
    expr, n = re.subn(r"\) < 0\.5\b", f") < {RAISED_FLOOR}", rule["expr"])
    assert n == 1, rule["expr"]
    raised = {**rule, "expr": expr, "labels": {**rule["labels"], "floor": str(RAISED_FLOOR)}}
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "tracescore-raised-floor", "rules": [raised]}]}),
        encoding="utf-8",
    )


@pytest.fixture(scope="module")
def prometheus_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusRun]:
    require_binary("prometheus")
    workdir = tmp_path_factory.mktemp("prometheus")
    raised = workdir / "raised-floor.yaml"
    _raised_floor_rules(raised)
    port = servers.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    with ScriptedJudge() as judge:
        script_judge(judge, {row["right_answer"] for row in data_rows()})
        env.update(
            LITELLM_OFFLINE_MODE="true",
            OPENAI_API_BASE=judge.api_base,
            OPENAI_API_KEY="test-key",
            TRACESCORE_EXPORT_FILE=str(workdir / "traces.jsonl"),
            PYTHONPATH=os.pathsep.join([str(servers.REPO), *filter(None, [env.get("PYTHONPATH")])]),
        )
        with servers.prometheus(
            workdir, scrape_target=f"127.0.0.1:{port}", rule_files=[RULES, raised]
        ) as backend:
            base = backend.urls["base"]
            argv = [sys.executable, str(RUNNER), str(port), str(workdir),
                    "--judge", "openai/test-judge", "--limit", str(LIMIT)]
            runner = subprocess.Popen(argv, cwd=workdir, env=env, text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert runner.stdin is not None and runner.stdout is not None
            try:
                per_run = LIMIT * len(SCORERS)
                assert runner.stdout.readline().strip() == "ran 1 exit 0"
                first = servers.wait_for(lambda: _scraped(base, per_run), timeout=60,
                                         what="the first run's scores scraped")
                runner.stdin.write("go\n")
                runner.stdin.flush()
                assert runner.stdout.readline().strip() == "ran 2 exit 0"
                second = servers.wait_for(lambda: _scraped(base, 2 * per_run), timeout=60,
                                          what="both runs' scores scraped")
                summary = json.loads((workdir / "run-2.json").read_text(encoding="utf-8"))
                yield PrometheusRun(base, summary, first, second, len(judge.requests))
            finally:
                runner.stdin.close()
                runner.wait(timeout=60)
                runner.stdout.close()


def _by(result: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], float]:
    return {tuple(r["metric"].get(k, "") for k in labels): float(r["value"][1]) for r in result}


def _dashboard_queries(window: str) -> dict[str, list[str]]:
    """Each panel's PromQL, with Grafana's variables as the dashboard's "All" sets them."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    panels: dict[str, list[str]] = {}
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$__rate_interval", window)
            expr = expr.replace("$scorer", ".*").replace("$agent", ".*")
            assert "$" not in expr, expr
            panels.setdefault(panel["title"], []).append(expr)
    return panels


def test_promtool_checks_the_rules() -> None:
    promtool = require_binary("promtool")
    proc = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 4 rules found" in proc.stdout


def test_promtool_alert_unit_tests() -> None:
    promtool = require_binary("promtool")
    proc = subprocess.run([promtool, "test", "rules", str(RULE_TESTS)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_score_series_exist_per_scorer(prometheus_run: PrometheusRun) -> None:
    counts = _by(prometheus_run.query("sum by (gen_ai_evaluation_name, gen_ai_agent_name) "
                                      "(tracescore_evaluation_score_count)"),
                 "gen_ai_evaluation_name", "gen_ai_agent_name")
    assert counts == {(s, AGENT): 2 * LIMIT for s in SCORERS}
    for label in ("gen_ai_evaluation_name", "gen_ai_agent_name"):
        values = servers.http_json(
            f"{prometheus_run.base}/api/v1/label/{label}/values?"
            + urllib.parse.urlencode({"match[]": "tracescore_evaluation_score_count"})
        )["data"]
        assert set(values) == (set(SCORERS) if label == "gen_ai_evaluation_name" else {AGENT})


def test_dashboard_queries_give_what_the_demo_printed(prometheus_run: PrometheusRun) -> None:
    run = prometheus_run
    panels = _dashboard_queries(run.window)
    scorers = run.summary["scorers"]
    key = ("gen_ai_evaluation_name", "gen_ai_agent_name")

    (mean_expr,) = panels["Mean score per scorer and agent"]
    means = _by(run.query(mean_expr), *key)
    for scorer, cell in scorers.items():
        expected = (cell["right"]["mean"] * cell["right"]["n"]
                    + cell["hallucinated"]["mean"] * cell["hallucinated"]["n"]) / cell["scored"]
        assert means[(scorer, AGENT)] == pytest.approx(expected, abs=1e-3), scorer
    assert set(means) == {(s, AGENT) for s in SCORERS}

    (pass_expr,) = panels["Pass rate per scorer and agent"]
    rates = _by(run.query(pass_expr), *key)
    assert rates == pytest.approx({(s, AGENT): scorers[s]["pass_rate"] for s in SCORERS},
                                  abs=1e-3)

    (low_expr,) = panels["Low scores (10th percentile), with exemplars linking to traces"]
    lows = _by(run.query(low_expr), *key)
    for scorer in SCORERS:
        assert 0.0 <= lows[(scorer, AGENT)] <= means[(scorer, AGENT)]

    (jobs_expr,) = panels["Scoring jobs by outcome"]
    jobs = _by(run.query(jobs_expr), "gen_ai_evaluation_name", "tracescore_outcome")
    assert set(jobs) == {(s, "scored") for s in SCORERS}
    assert all(v > 0 for v in jobs.values())
    for title in ("Judge errors by type", "Skipped and dropped scoring jobs",
                  "Phoenix annotations by outcome"):
        for expr in panels[title]:
            assert run.query(expr) == [], title  # none happened: empty, not an error

    p50, p95 = (_by(run.query(e), "gen_ai_request_model") for e in panels[
        "Judge call latency (p50, p95)"])
    assert set(p50) == set(p95) == {("openai/test-judge",)}
    assert 0 < p50[("openai/test-judge",)] <= p95[("openai/test-judge",)]
    (calls,) = run.query("sum(gen_ai_client_operation_duration_seconds_count)")
    # One observation per judge call the scripted judge served (the judge's cache answers
    # repeated prompts without a call, so a little under JUDGE_CALLS_PER_ITEM per question).
    assert float(calls["value"][1]) == run.judge_requests
    assert run.judge_requests > 0.9 * 2 * JUDGE_CALLS_PER_ITEM * LIMIT

    (tokens_expr,) = panels["Judge tokens"]
    tokens = _by(run.query(tokens_expr), "tracescore_judge_model", "gen_ai_token_type")
    assert set(tokens) == {("openai/test-judge", "input"), ("openai/test-judge", "output")}
    assert all(v > 0 for v in tokens.values())
    (cost_expr,) = panels["Judge cost per hour"]
    run.query(cost_expr)  # evaluates (litellm knows no price for the scripted model)

    for expr in panels["Scoring queue and held spans"]:
        (gauge,) = run.query(expr)
        assert float(gauge["value"][1]) == 0  # everything flushed


def test_alert_rules_evaluate_and_a_raised_floor_fires(prometheus_run: PrometheusRun) -> None:
    base = prometheus_run.base

    def pending() -> set[str] | None:
        alerts = servers.http_json(f"{base}/api/v1/alerts")["data"]["alerts"]
        raised = {a["labels"]["gen_ai_evaluation_name"] for a in alerts
                  if a["labels"].get("floor") == str(RAISED_FLOOR) and a["state"] == "pending"}
        return raised if raised == set(SCORERS) else None

    # Every scorer's mean is under the raised floor: its alert goes pending (firing comes after
    # its `for: 15m`; promtool's unit tests cover that part).
    assert servers.wait_for(pending, timeout=60, what="raised-floor alerts pending") == set(SCORERS)
    groups = servers.http_json(f"{base}/api/v1/rules")["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) == 5  # the four shipped rules and the raised copy
    for rule in rules:
        assert rule["health"] == "ok" and not rule.get("lastError"), rule
    alerts = servers.http_json(f"{base}/api/v1/alerts")["data"]["alerts"]
    names = {a["labels"]["alertname"] for a in alerts if "floor" not in a["labels"]}
    # No judge errors and no skipped jobs in this run; the pass-rate rule needs a day's history.
    assert not names & {"TracescoreJudgeErrorRate", "TracescoreScoringJobsSkipped",
                        "TracescorePassRateDrop"}

