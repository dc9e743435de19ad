"""``tracescore serve`` from Python: scoring as a service behind the OpenTelemetry Collector.

Example:
    >>> from tracescore import serve
    >>> config = serve.load("tracescore-serve.yaml")      # doctest: +SKIP
    >>> running = serve.start(config)                      # doctest: +SKIP
    >>> running.stop()                                     # doctest: +SKIP

``load(path)``/``parse(text, ...)`` read and validate a service file (YAML or TOML) into a
``ServeConfig`` and raise ``ServeConfigError`` (one line naming the key) when it is wrong;
``start(config)`` starts the receivers and returns a ``RunningService``; ``serve_forever(config)``
runs until SIGTERM/SIGINT and drains. The service's file and its keys: docs/serve.md. Needs the
``serve`` extra (PyYAML and the Redis client: ``pip install 'PyYAML>=6,<7' 'redis>=5,<8'``).
"""

from __future__ import annotations

from ._serve import RunningService, ServeConfig, ServeConfigError, load, parse, serve_forever, start

__all__ = ["RunningService", "ServeConfig", "ServeConfigError", "load", "parse",
           "serve_forever", "start"]
