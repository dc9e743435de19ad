"""Run the HaluEval demo twice in one process, its metrics served for Prometheus to scrape.

Usage: ``python metrics_runner.py PORT OUT_DIR [demo options...]``

tracescore's metrics go to the global ``MeterProvider``, which this script sets to one with
``opentelemetry-exporter-prometheus``'s reader, served on ``127.0.0.1:PORT/metrics``. The demo
(``--json``) runs twice with the same options; its summaries land in ``OUT_DIR/run-<n>.json``.

Why twice: ``rate()`` and ``increase()`` see only what grows between two scrapes, and a series
first scraped at its final value has not grown. The test waits until Prometheus has scraped the
first run's totals, then lets the second run go, so the second run is exactly the increase
between two known samples. Protocol on stdio: after each run the script prints ``ran <n>`` and
reads a line from stdin before going on; after the second run it keeps serving until stdin
closes.
"""

from __future__ import annotations

import contextlib
import io
import runpy
import sys
from pathlib import Path

from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import start_http_server

DEMO = Path(__file__).resolve().parents[2] / "examples" / "halueval_rag.py"


def main(argv: list[str]) -> int:
    port, out_dir, demo_args = int(argv[1]), Path(argv[2]), argv[3:]
    start_http_server(port, addr="127.0.0.1")
    metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))
    demo_main = runpy.run_path(str(DEMO), run_name="halueval_rag")["main"]
    for n in (1, 2):
        summary = io.StringIO()
        with contextlib.redirect_stdout(summary):
            code = demo_main(["--json", *demo_args])
        (out_dir / f"run-{n}.json").write_text(summary.getvalue(), encoding="utf-8")
        print(f"ran {n} exit {code}", flush=True)
        if code != 0:
            return code
        sys.stdin.readline()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
