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
        admin_port: the admin endpoints' own port, or None (then they are on ``http_port``).
    """

    def __init__(self, service: ScoringService, grpc_server: Any, grpc_port: int | None,
                 http_server: Any, http_port: int | None, admin_server: Any = None,
                 admin_port: int | None = None) -> None:
        self.service = service
        self._grpc = grpc_server
        self.grpc_port = grpc_port
        self._http = http_server
        self.http_port = http_port
        self._admin = admin_server
        self.admin_port = admin_port
        self._stopped = threading.Event()
        self.clean = False

    def stop(self, timeout: float | None = None) -> bool:
        """Drain, within ``timeout`` seconds (default ``limits.flush_timeout``): turn unready while
        still taking requests until the traces with spans waiting are complete (half the
        budget at most: their late spans still arrive, so they are scored with them), then
        refuse new requests, let requests in progress finish, score and forward what was
        accepted.

        Returns:
            True when everything accepted went out in time.
        """
        if self._stopped.is_set():
            return self.clean
        budget = self.service.config.shutdown_timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        if not self.service.finish_traces(budget / 2):
            logger.warning("tracescore serve: draining before every waiting trace completed "
                           "(half of the %gs shutdown budget passed); their spans are scored "
                           "with what arrived", budget)
        self.service.drain()
        if self._grpc is not None:
            # New RPCs are refused at once; those in progress get a little time.
            self._grpc.stop(grace=min(2.0, budget / 4)).wait(budget / 4)
        self.clean = self.service.shutdown(max(0.0, deadline - time.monotonic()))
        for server in (self._http, self._admin):
            if server is not None:
                server.stop()
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
        ServeConfigError: a rule cannot be built, or a TLS or token file cannot be read.
        OSError, RuntimeError: a receiver address cannot be bound.
    """
    from .grpc_api import start_grpc
    from .http_api import HttpServer
    from .security import TokenCheck, grpc_credentials, ssl_context

    recv = config.receivers
    token_check = TokenCheck(recv.auth) if recv.auth is not None else None
    tls = ssl_context(recv.tls) if recv.tls is not None and recv.http is not None else None
    credentials = grpc_credentials(recv.tls) if recv.tls is not None and recv.grpc else None
    service = ScoringService(config, **service_options)
    intake = service.intake
    grpc_server = grpc_port = http_server = http_port = admin_server = admin_port = None
    limits = {"max_request_bytes": recv.max_request_bytes,
              "header_timeout": recv.header_timeout, "body_timeout": recv.body_timeout,
              "idle_timeout": recv.idle_timeout, "backlog": recv.backlog}
    try:
        if recv.grpc is not None:
            grpc_server, grpc_port = start_grpc(intake, recv, credentials=credentials,
                                                token_check=token_check)
        if recv.http is not None:
            http_server = HttpServer(intake, service, recv.http, ssl_context=tls,
                                     token_check=token_check, admin=recv.admin is None,
                                     workers=recv.grpc_workers, **limits)
            http_port = http_server.start()
        if recv.admin is not None:
            admin_server = HttpServer(None, service, recv.admin, name="tracescore-serve-admin",
                                      workers=1, **limits)
            admin_port = admin_server.start()
    except BaseException:
        if grpc_server is not None:
            grpc_server.stop(0)
        if http_server is not None:
            http_server.stop()
        service.shutdown(0.0)
        raise
    return RunningService(service, grpc_server, grpc_port, http_server, http_port,
                          admin_server, admin_port)


def serve_forever(config: ServeConfig) -> int:
    """Run until SIGTERM or SIGINT, then drain within ``limits.flush_timeout``.

    Returns:
        0 when everything accepted was forwarded, 1 otherwise.
    """
    running = start(config)
    print(f"tracescore serve: grpc port {running.grpc_port}, http port {running.http_port}, "
          f"admin port {running.admin_port}, mode {config.mode}, "
          f"forwarding to {config.exporter.endpoint} ({config.exporter.protocol}), "
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
