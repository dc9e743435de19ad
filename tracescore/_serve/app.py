"""Starting and stopping the service: receivers, the pipeline, signals, the drain."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from typing import Any

from .config import ServeConfig
from .service import ScoringService

logger = logging.getLogger("tracescore")


class RunningService:
    """A started service: its pipeline, its servers and their ports.

    Attributes:
        service: the ``ScoringService``.
        grpc_port: the bound gRPC port, or None.
        http_port: the bound HTTP port, or None.
    """

    def __init__(self, service: ScoringService, grpc_server: Any, grpc_port: int | None,
                 http_server: Any, http_port: int | None) -> None:
        self.service = service
        self._grpc = grpc_server
        self.grpc_port = grpc_port
        self._http = http_server
        self.http_port = http_port
        self._stopped = threading.Event()
        self.clean = False

    def stop(self, timeout: float | None = None) -> bool:
        """Drain: refuse new requests, let requests in progress finish, score and forward what
        was accepted, all within ``timeout`` seconds (default ``shutdown_timeout``).

        Returns:
            True when everything accepted went out in time.
        """
        if self._stopped.is_set():
            return self.clean
        budget = self.service.config.shutdown_timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        self.service.drain()
        if self._grpc is not None:
            # New RPCs are refused at once; those in progress get a little time.
            self._grpc.stop(grace=min(2.0, budget / 4)).wait(budget / 4)
        self.clean = self.service.shutdown(max(0.0, deadline - time.monotonic()))
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        self._stopped.set()
        return self.clean

    def wait(self) -> None:
        """Block until ``stop`` finished."""
        self._stopped.wait()


def start(config: ServeConfig, **service_options: Any) -> RunningService:
    """Build the pipeline and start the receivers the configuration names.

    Args:
        config: the validated configuration.
        **service_options: passed to ``ScoringService`` (tests).

    Raises:
        ServeConfigError: a rule cannot be built.
        OSError, RuntimeError: a receiver address cannot be bound.
    """
    from .grpc_api import start_grpc
    from .http_api import start_http

    service = ScoringService(config, **service_options)
    recv = config.receivers
    grpc_server = grpc_port = http_server = http_port = None
    if recv.grpc is not None:
        grpc_server, grpc_port = start_grpc(service, recv.grpc, workers=recv.grpc_workers,
                                            max_message=recv.max_request_bytes)
    if recv.http is not None:
        http_server, http_port = start_http(service, recv.http, max_body=recv.max_request_bytes)
    return RunningService(service, grpc_server, grpc_port, http_server, http_port)


def serve_forever(config: ServeConfig) -> int:
    """Run until SIGTERM or SIGINT, then drain within ``shutdown_timeout``.

    Returns:
        0 when everything accepted was forwarded, 1 otherwise.
    """
    running = start(config)
    print(f"tracescore serve: grpc port {running.grpc_port}, http port {running.http_port}, "
          f"forwarding to {config.downstream.endpoint} ({config.downstream.protocol}), "
          f"{len(running.service.rules)} rule(s)", file=sys.stderr, flush=True)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stop.wait(1.0):
        pass
    print("tracescore serve: draining", file=sys.stderr, flush=True)
    clean = running.stop()
    print(f"tracescore serve: stopped ({'clean' if clean else 'some data not forwarded'}): "
          f"{running.service.snapshot()}", file=sys.stderr, flush=True)
    return 0 if clean else 1
