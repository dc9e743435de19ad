"""Process-wide state shared by the decorators, the judge and the configuration.

It imports nothing of tracescore's beyond the standard library so that every module may read it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

# The default judge set by ``configure(judge=...)``: a ``tracescore.Judge`` or ``None``.
default_judge: Any = None

lock = threading.RLock()


def env_judge_model() -> str | None:
    """Return ``TRACESCORE_JUDGE_MODEL`` stripped, or ``None`` when unset or blank."""
    value = os.environ.get("TRACESCORE_JUDGE_MODEL", "").strip()
    return value or None

# Set by ``configure()``; read by the decorators on every call (plain attribute reads).
tracer: Any = None  # the tracer decorators use; None -> the global provider's
capture_content: bool = os.environ.get(
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"
).strip().lower() not in ("false", "0", "no", "off")
max_content_length: int = 16_384
payload_sink: Any = None  # object with put_payload(span, payload), or None
telemetry: Any = None  # the configured instance's Telemetry (judge call metrics), or None
disabled: bool = os.environ.get("TRACESCORE_DISABLED", "").strip().lower() in (
    "1", "true", "yes", "on"
)
raise_internal_errors: bool = False  # tests flip this to see internal failures
