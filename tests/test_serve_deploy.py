"""deploy/: the files a reader copies are valid and agree with each other."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tracescore._serve import parse

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
K8S = DEPLOY / "kubernetes"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_SERVE_TOKEN", "deploy-test-token")


def test_the_example_serve_config_is_valid_and_is_the_one_kubernetes_mounts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACESCORE_REDIS_URL", raising=False)
    text = (DEPLOY / "tracescore-serve.yaml").read_text()
    config = parse(text, toml=False)
    assert [r.scorer for r in config.rules] == ["answer-relevancy", "faithfulness"]
    assert config.fleet.redis_url is None  # unset: per-replica limits
    mounted = _one(_docs("tracescore-serve.yaml"), "ConfigMap")["data"]["serve.yaml"]
    assert mounted == text


def test_kubernetes_objects_fit_together() -> None:
    serve = _docs("tracescore-serve.yaml")
    collector = _docs("collector.yaml")
    namespace = _one(_docs("namespace.yaml"), "Namespace")["metadata"]["name"]
    for doc in serve + collector + _docs("redis.yaml"):
        assert doc["metadata"]["namespace"] == namespace
    headless = _one(serve, "Service")
    assert headless["spec"]["clusterIP"] == "None"
    deployment = _one(serve, "Deployment")
    assert headless["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    serve_config = parse(_one(serve, "ConfigMap")["data"]["serve.yaml"], toml=False)
    # Probes on the admin port (no token), the token from the Secret the Collector reads too.
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert serve_config.receivers.admin is not None
    assert ports[container["readinessProbe"]["httpGet"]["port"]] == \
        serve_config.receivers.admin.port
    assert serve_config.receivers.auth is not None
    token_secret = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"]
                    if "valueFrom" in e}["TRACESCORE_SERVE_TOKEN"]
    collector_env = _one(collector, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in collector_env["env"]}[
        "TRACESCORE_SERVE_TOKEN"] == token_secret
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > \
        serve_config.limits.flush_timeout
    otelcol = yaml.safe_load(_one(collector, "ConfigMap")["data"]["config.yaml"])
    dns = otelcol["exporters"]["loadbalancing"]["resolver"]["dns"]
    name = headless["metadata"]["name"]
    assert dns["hostname"] == f"{name}.{namespace}.svc.cluster.local"
    assert int(dns["port"]) == headless["spec"]["ports"][0]["port"] == serve_config.receivers \
        .grpc.port
    assert _one(collector, "ConfigMap")["data"]["config.yaml"] == \
        (DEPLOY / "collector" / "otelcol-dns.yaml").read_text()


@pytest.mark.skipif(os.environ.get("TRACESCORE_SKIP_COLLECTOR", "").lower() in ("1", "true"),
                    reason="TRACESCORE_SKIP_COLLECTOR is set")
@pytest.mark.skipif(not os.environ.get("TRACESCORE_OTELCOL")
                    and os.environ.get("TRACESCORE_REQUIRE_COLLECTOR", "") not in ("1", "true")
                    and os.environ.get("TRACESCORE_BACKENDS", "") not in ("1", "true"),
                    reason="needs the OpenTelemetry Collector, built with Go in minutes: set "
                    "TRACESCORE_OTELCOL to a built binary, or TRACESCORE_REQUIRE_COLLECTOR=1")
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("name", ["otelcol-static.yaml", "otelcol-dns.yaml"])
def test_collector_configs_validate_with_the_built_collector(name: str) -> None:
    from test_serve_collector import collector_binary

    result = subprocess.run([collector_binary(), "validate", "--config",
                             str(DEPLOY / "collector" / name)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_completeness_windows_outlast_the_collectors_retry_gap() -> None:
    """A span the Collector re-sends (a replica restarted, or refused it) comes back at most
    max_interval x (1 + randomization_factor) after the last try: the default windows and the
    example's stay above that, so its trace is still open (docs/serve.md)."""
    defaults = parse('exporter: {endpoint: "http://127.0.0.1:1"}', toml=False).trace
    example = parse((DEPLOY / "tracescore-serve.yaml").read_text(), toml=False).trace
    for name in ("otelcol-static.yaml", "otelcol-dns.yaml"):
        otelcol = yaml.safe_load((DEPLOY / "collector" / name).read_text())
        retry = otelcol["exporters"]["loadbalancing"]["protocol"]["otlp"]["retry_on_failure"]
        gap = float(retry["max_interval"].rstrip("s")) * (1 + retry["randomization_factor"])
        for trace in (defaults, example):
            assert trace.settle_after_root > gap and trace.idle > gap, (name, gap, trace)


def test_the_check_command_of_the_serve_page_runs_as_printed(tmp_path: Path) -> None:
    # docs/serve.md's first commands, from the repository root in a shell with no token set:
    # every line but the install and the long-running serve (so: the token, then --check).
    page = (DEPLOY.parent / "docs" / "serve.md").read_text(encoding="utf-8")
    block = page.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines()
             if line.strip() and not line.startswith(("#", "pip "))
             and (not line.startswith("tracescore serve") or "--check" in line)]
    assert any("--check" in line for line in lines) and len(lines) >= 2
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    env.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(DEPLOY.parent))
    script = "set -e\ntracescore() { \"$PYTHON\" -m tracescore \"$@\"; }\n" + "\n".join(lines)
    env["PYTHON"] = sys.executable
    proc = subprocess.run(["bash", "-c", script], cwd=DEPLOY.parent, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
