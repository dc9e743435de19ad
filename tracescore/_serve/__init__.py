"""``tracescore serve``: scoring as a service behind the OpenTelemetry Collector.

Modules: ``config`` (the file, validated), ``wiring`` (rules, judge, downstream exporters),
``decode`` (OTLP to ``ReadableSpan``), ``settle`` (trace completeness), ``admission``
(backpressure), ``service`` (the pipeline), ``logs`` (log records forwarded), ``metrics``
(self-metrics), ``grpc_api`` and ``http_api`` (the receivers), ``app`` (start, signals, drain).
"""

from __future__ import annotations

from .app import RunningService, serve_forever, start
from .config import ServeConfig, ServeConfigError, load, parse

__all__ = ["RunningService", "ServeConfig", "ServeConfigError", "load", "parse",
           "serve_forever", "start"]
