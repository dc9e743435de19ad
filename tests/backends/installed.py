"""Whether a backend is installed, for the backend tests (each starts a real backend on
loopback and feeds it the HaluEval demo).

The backend tests run only when ``TRACESCORE_BACKENDS=1`` asks for them (CI sets it after
``scripts/backends.sh``), and then a missing backend fails them; otherwise they skip with the
reason, whether the backends are installed or not.
"""

from __future__ import annotations

import os

import pytest

from tests.backends.servers import find_binary


def require_binary(name: str) -> str:
    """The path of backend ``name``'s executable, when ``TRACESCORE_BACKENDS=1`` asks for the
    backend tests (a missing backend then fails them); skipped otherwise, installed or not:
    starting real backends takes minutes, which ``python -m pytest`` does not spend unasked."""
    if os.environ.get("TRACESCORE_BACKENDS") != "1":
        pytest.skip(f"needs the real {name} (scripts/backends.sh): set TRACESCORE_BACKENDS=1 "
                    "to run it")
    path = find_binary(name)
    if path:
        return path
    pytest.fail(f"{name} is not installed: scripts/backends.sh installs it "
                "(TRACESCORE_BACKENDS=1 requires every backend)")
