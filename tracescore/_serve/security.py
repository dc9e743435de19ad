"""TLS and bearer-token authentication of the receivers (``receivers.tls``, ``receivers.auth``).

The token is checked as the Collector's ``bearertokenauth`` extension sends it: an
``authorization: Bearer <token>`` header (gRPC metadata or HTTP), compared in constant time
(``hmac.compare_digest``), so the time a refusal takes says nothing about the token. The token
never appears in a log line or an error message.

A request carries exactly one credential or it is refused: two ``Authorization`` headers on
HTTP, or two ``authorization`` metadata entries on gRPC, are refused the same way on both
protocols (401 / ``UNAUTHENTICATED``) whatever their order and whether either is right, so no
proxy or client library that keeps the first or the last of them can decide what is checked.
"""

from __future__ import annotations

import hmac
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .config import Auth, ServeConfigError, Tls

MISSING_OR_WRONG = "missing or wrong bearer token"
REPEATED = "more than one authorization credential: send exactly one bearer token"


class TokenCheck:
    """Whether a request's ``authorization`` value carries the configured bearer token.

    Args:
        auth: the ``receivers.auth`` section.

    Raises:
        ServeConfigError: the token file cannot be read or is empty.
    """

    def __init__(self, auth: Auth) -> None:
        if auth.token_file is not None:
            try:
                token = Path(auth.token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ServeConfigError(f"receivers.auth.token_file: cannot read "
                                       f"{auth.token_file}: {exc.strerror or exc}") from None
            if not token:
                raise ServeConfigError(f"receivers.auth.token_file: {auth.token_file} is empty")
        else:
            assert auth.token is not None
            token = auth.token.strip()
        self._expected = token.encode("utf-8")

    def __call__(self, value: str | None) -> bool:
        """True when ``value`` (the ``authorization`` header or metadata) is ``Bearer`` and the
        token."""
        if not value:
            return False
        scheme, _, given = value.strip().partition(" ")
        # Compared whatever the scheme, so a wrong scheme takes as long as a wrong token.
        same = hmac.compare_digest(given.strip().encode("utf-8", "replace"), self._expected)
        return same and scheme.lower() == "bearer"

    def refusal(self, values: Sequence[str]) -> str | None:
        """Why a request whose ``authorization`` headers (HTTP) or metadata entries (gRPC) are
        ``values``, in the order received, is refused; None when it is let in: exactly one
        value, ``Bearer`` and the token. Every value is compared, so a refusal takes as long
        whichever of several values is right."""
        results = [self(value) for value in values]
        if len(values) > 1:
            return REPEATED
        return None if results == [True] else MISSING_OR_WRONG


def _read(path: str, field: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ServeConfigError(f"receivers.tls.{field}: cannot read {path}: "
                               f"{exc.strerror or exc}") from None


def ssl_context(tls: Tls) -> ssl.SSLContext:
    """The HTTP receiver's server-side TLS context (TLS 1.2 at least; with ``client_ca_file``
    a client certificate signed by that CA is required).

    Raises:
        ServeConfigError: a file cannot be read or does not hold what it should.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ServeConfigError(f"receivers.tls: cannot load {tls.cert_file} / {tls.key_file}: "
                               f"{exc}") from None
    if tls.client_ca_file is not None:
        try:
            context.load_verify_locations(cafile=tls.client_ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ServeConfigError(f"receivers.tls.client_ca_file: cannot load "
                                   f"{tls.client_ca_file}: {exc}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def grpc_credentials(tls: Tls) -> Any:
    """The gRPC receiver's server credentials (with ``client_ca_file``: client certificates
    required).

    Raises:
        ServeConfigError: a file cannot be read.
    """
    import grpc  # type: ignore[import-untyped, unused-ignore]

    key = _read(tls.key_file, "key_file")
    cert = _read(tls.cert_file, "cert_file")
    ca = _read(tls.client_ca_file, "client_ca_file") if tls.client_ca_file else None
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                       require_client_auth=ca is not None)
