"""Start real backends on loopback for the backend tests and the screenshot script.

Each backend runs as a child process on free loopback ports, with its data in a directory of its
own, and is stopped (terminate, then kill) when its ``with`` block ends. Where a binary lives:

* Phoenix: ``$TRACESCORE_BACKENDS_DIR/venv-phoenix/bin/phoenix`` (what ``scripts/backends.sh``
  installs), else ``phoenix`` on ``PATH``;
* Jaeger: ``$TRACESCORE_BACKENDS_DIR/bin/jaeger``, else ``jaeger`` on ``PATH``;
* Prometheus and promtool: on ``PATH`` (the Debian package);
* Chromium: ``chromium`` on ``PATH``.

``TRACESCORE_BACKENDS_DIR`` defaults to ``~/.cache/tracescore-backends`` (``XDG_CACHE_HOME``
if set). Stdlib only, so that
``scripts/screenshots.py`` can import it from any virtualenv.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")

# Phoenix offline: no telemetry, no CDN assets, no assistant, no MCP server, no sandboxes.
PHOENIX_OFFLINE_ENV = {
    "PHOENIX_TELEMETRY_ENABLED": "false",
    "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
    "PHOENIX_ENABLE_MCP_SERVER": "false",
    "PHOENIX_ALLOWED_SANDBOX_PROVIDERS": "NONE",
}

# Jaeger v2 is an OpenTelemetry Collector distribution: an OTLP/HTTP receiver feeding the
# in-memory trace store, and the query extension (HTTP API and UI) reading it. Internal metrics
# off: by default they listen on :8888, which another collector on the machine may hold.
JAEGER_CONFIG = """\
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{query_port}
    grpc:
      endpoint: 127.0.0.1:{query_grpc_port}
{ui}receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp_port}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"""


def backends_dir() -> Path:
    """Where ``scripts/backends.sh`` installs: ``TRACESCORE_BACKENDS_DIR``, else
    ``$XDG_CACHE_HOME/tracescore-backends`` (``~/.cache`` without it): outside the work tree,
    so that a fresh clone (CI's) reuses it."""
    explicit = os.environ.get("TRACESCORE_BACKENDS_DIR")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "tracescore-backends"


def find_binary(name: str) -> str | None:
    """The path of a backend's executable, or None when it is not installed."""
    candidates = {
        "phoenix": backends_dir() / "venv-phoenix" / "bin" / "phoenix",
        "jaeger": backends_dir() / "bin" / "jaeger",
    }
    candidate = candidates.get(name)
    if candidate is not None and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which(name)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(
    probe: Callable[[], T | None], *, timeout: float, what: str, process: Any = None
) -> T:
    """Poll ``probe`` until it returns something other than None; return that.

    Backends ingest asynchronously and expose no completion event, so their observable state
    (an HTTP answer) is polled, every 0.2 s, up to ``timeout`` seconds.

    Raises:
        TimeoutError: ``probe`` still returned None at the deadline (the message says ``what``
            was awaited), or ``process`` exited first.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result is not None:
            return result
        if process is not None and process.poll() is not None:
            raise TimeoutError(f"{what}: the process exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not seen within {timeout:g} s")
        time.sleep(0.2)


def http_json(url: str, *, timeout: float = 10.0) -> Any:
    """GET ``url`` and decode its JSON answer."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def http_ok(url: str) -> bool | None:
    """True when ``url`` answers 2xx, None otherwise (for ``wait_for``)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return True if 200 <= response.status < 300 else None
    except (OSError, urllib.error.URLError):
        return None


class Backend:
    """A running backend: its child process, URLs and log file."""

    def __init__(self, name: str, process: subprocess.Popen[bytes], log: Path,
                 urls: dict[str, str]) -> None:
        self.name = name
        self.process = process
        self.log = log
        self.urls = urls

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the backend's output, for failure messages."""
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


@contextlib.contextmanager
def _running(name: str, argv: list[str], workdir: Path, env: dict[str, str] | None,
             urls: dict[str, str], ready_url: str, timeout: float) -> Iterator[Backend]:
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})}, start_new_session=True,
        )
    backend = Backend(name, process, log, urls)
    try:
        try:
            wait_for(lambda: http_ok(ready_url), timeout=timeout, what=f"{name} ready",
                     process=process)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{name} log:\n{backend.log_tail()}") from None
        yield backend
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


@contextlib.contextmanager
def phoenix(workdir: Path, binary: str | None = None) -> Iterator[Backend]:
    """Arize Phoenix on free loopback ports, offline, its SQLite database under ``workdir``.

    ``urls``: ``base`` (UI and REST API), ``otlp`` (the base: OTLP/HTTP is ``/v1/traces``).
    """
    binary = binary or find_binary("phoenix")
    assert binary, "phoenix is not installed (scripts/backends.sh)"
    port, grpc_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **PHOENIX_OFFLINE_ENV,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(workdir / "phoenix-home"),
    }
    with _running("phoenix", [binary, "serve"], workdir, env, {"base": base, "otlp": base},
                  f"{base}/healthz", timeout=120) as backend:
        yield backend


@contextlib.contextmanager
def jaeger(workdir: Path, binary: str | None = None,
           ui_assets: Path | None = None) -> Iterator[Backend]:
    """Jaeger v2 with in-memory storage on free loopback ports.

    ``urls``: ``base`` (query API, ``/api/traces``, and the UI when ``ui_assets`` names a
    directory of built Jaeger UI files), ``otlp`` (OTLP/HTTP base URL).
    """
    binary = binary or find_binary("jaeger")
    assert binary, "jaeger is not installed (scripts/backends.sh)"
    ports = {"query_port": free_port(), "query_grpc_port": free_port(), "otlp_port": free_port()}
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "jaeger.yaml"
    ui = f"    ui:\n      assets_path: {ui_assets}\n" if ui_assets else ""
    config.write_text(JAEGER_CONFIG.format(ui=ui, **ports), encoding="utf-8")
    base = f"http://127.0.0.1:{ports['query_port']}"
    urls = {"base": base, "otlp": f"http://127.0.0.1:{ports['otlp_port']}"}
    with _running("jaeger", [binary, "--config", f"file:{config}"], workdir, None, urls,
                  f"{base}/api/services", timeout=60) as backend:
        yield backend


@contextlib.contextmanager
def prometheus(workdir: Path, *, scrape_target: str, rule_files: list[Path]) -> Iterator[Backend]:
    """Prometheus scraping ``scrape_target`` (``host:port``) every second, evaluating
    ``rule_files`` every second, its TSDB under ``workdir``.

    ``urls``: ``base`` (``/api/v1/query``, ``/api/v1/rules``, ``/api/v1/alerts``).
    """
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed (scripts/backends.sh)"
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(
        json.dumps(  # JSON is YAML: no YAML writer needed
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(p) for p in rule_files],
                "scrape_configs": [
                    {"job_name": "tracescore", "static_configs": [{"targets": [scrape_target]}]}
                ],
            }
        ),
        encoding="utf-8",
    )
    base = f"http://127.0.0.1:{port}"
    argv = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={workdir / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with _running("prometheus", argv, workdir, None, {"base": base}, f"{base}/-/ready",
                  timeout=60) as backend:
        yield backend
