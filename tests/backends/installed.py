"""Whether a backend is installed, for the backend tests (each starts a real backend on
loopback and feeds it the HaluEval demo).

A backend that is not installed skips its tests with the reason, unless ``TRACESCORE_BACKENDS=1``
(set by CI after ``scripts/backends.sh``): then a missing backend fails them.
"""

from __future__ import annotations

import os

import pytest

from tests.backends.servers import find_binary


def require_binary(name: str) -> str:
    """The path of backend ``name``'s executable; skip (or fail under CI) when it is absent."""
    path = find_binary(name)
    if path:
        return path
    message = f"{name} is not installed: scripts/backends.sh installs it"
    if os.environ.get("TRACESCORE_BACKENDS") == "1":
        pytest.fail(f"{message} (TRACESCORE_BACKENDS=1 requires every backend)")
    pytest.skip(f"{message}; set TRACESCORE_BACKENDS=1 to make its absence a failure")
