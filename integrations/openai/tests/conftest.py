"""Fixtures: the loopback model and judge servers, and the project's OTLP receiver.

The receiver is the one the core's tests use (``tests/otlp_receiver.py`` at the repository
root), loaded by path: this package's tests run from its own folder, always inside the
repository checkout, and one receiver is maintained in one place.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tracescore

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")


def _load_receiver() -> Any:
    name = "tracescore_repo_otlp_receiver"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[3] / "tests" / "otlp_receiver.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None, path
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the file runs
        spec.loader.exec_module(module)
    return sys.modules[name]


otlp_receiver = _load_receiver()


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """OTLP http/protobuf on loopback; tracescore exports there (log records off: the receiver
    takes traces only)."""
    with otlp_receiver.HttpOtlpReceiver() as rec:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rec.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
        monkeypatch.setenv("TRACESCORE_LOG_RECORDS", "false")
        yield rec.received
        tracescore.shutdown(5000)
