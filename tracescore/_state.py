"""Process-wide state shared by the decorators, the judge and the configuration.

It imports nothing of tracescore's but ``_env`` (itself standard library only) so that every
module may read it. Until ``configure()`` runs, the settings hold their environment defaults,
so decorators used without ``configure()`` honour the environment too.
"""

from __future__ import annotations

from typing import Any

from . import _env

# The default judge set by ``configure(judge=...)``: a ``tracescore.Judge`` or ``None``.
default_judge: Any = None


def env_judge_model() -> str | None:
    """Return ``TRACESCORE_JUDGE_MODEL`` stripped, or ``None`` when unset or blank."""
    return _env.judge_model()


# Set by ``configure()``; read by the decorators on every call (plain attribute reads).
tracer: Any = None  # the tracer decorators use; None -> the global provider's
capture_content: bool = _env.capture_content()
max_content_length: int = _env.max_content_length()
telemetry: Any = None  # the configured instance's Telemetry (judge call metrics), or None
disabled: bool = _env.disabled()
# A debugging switch: nothing in tracescore or its test suite sets it. Set it to True by hand
# (e.g. in a test) to have the decorators re-raise their own internal failures instead of
# logging them; the user's exceptions pass through either way.
raise_internal_errors: bool = False
