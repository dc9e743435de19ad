"""Issue 22, point 1 in ``tracescore serve``: received spans are redacted before they are
forwarded (or spooled); ``redaction: {foreign_spans: false}`` forwards them as received."""

from __future__ import annotations

from typing import Any

import pytest
from test_serve import _config, _send, _span
from test_serve_support import GATE, FullReceiver

from tracescore._serve import start

PASSWORD = "Sv7Pw2Rd9Xq4Lm1Kz6Bn"


@pytest.mark.parametrize("redact", [True, False])
def test_received_spans_are_redacted_before_they_are_forwarded(redact: bool) -> None:
    with FullReceiver() as receiver:
        extra = "" if redact else "redaction: {foreign_spans: false}"
        running = start(_config(receiver.endpoint, extra=extra), telemetry_enabled=False)
        try:
            span = _span(f"login with token {PASSWORD}", 0xABC, 0x1, attributes={
                "db.password": PASSWORD, "http.url": f"https://u:{PASSWORD}@h/x"})
            assert _send(running.grpc_port, [span]) is None
            assert receiver.received.wait_for(lambda s: len(s) == 1)
        finally:
            GATE.set()
            running.stop(10)
            GATE.clear()
        (got,) = receiver.received.spans
        raw: Any = receiver.received.raw_bytes()
        if redact:
            assert got.name == "login with token [REDACTED]"
            assert got.attributes == {"db.password": "[REDACTED]",
                                      "http.url": "https://u:[REDACTED]@h/x"}
            assert PASSWORD.encode() not in raw
        else:
            assert got.attributes["db.password"] == PASSWORD
