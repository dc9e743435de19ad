"""The fixtures every integration package's tests share: three servers on loopback.

* ``receiver``: the project's OTLP receiver (``tests/otlp_receiver.py`` at the repository root,
  the one the core's tests use), with tracescore exporting to it.
* ``model``: the app's model, an OpenAI-protocol server answering every call with ``ANSWER``.
* ``judge``: the judge, scripted so that answer relevancy and faithfulness pass for ``ANSWER``.

``ANSWER`` is the requesting test module's own constant (``request.module.ANSWER``), so each
test file keeps its question and answer next to its assertions.

Each package's ``tests/conftest.py`` runs this file with ``runpy.run_path`` and takes the
fixtures from it: the packages' tests run from their own folders (``.ci/run``), where pytest
neither collects a ``conftest.py`` above the package nor can import this folder as a package,
and they always run inside the repository checkout. ``run_path`` compiles the file without
writing ``integrations/__pycache__``, which ``.ci/run`` would take for a package folder.
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
from tracescore.testing import ScriptedJudge

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")


def _load_receiver() -> Any:
    name = "tracescore_repo_otlp_receiver"
    if name not in sys.modules:
        # this file is run by path, so __file__ is its own path in the checkout
        path = Path(__file__).resolve().parents[1] / "tests" / "otlp_receiver.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None, path
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the file runs
        spec.loader.exec_module(module)
    return sys.modules[name]


otlp_receiver = _load_receiver()


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """OTLP http/protobuf on loopback; tracescore exports there (log records and metrics off: the
    receiver takes traces only). Yields the receiver's ``Received`` (decoded spans, raw
    requests)."""
    with otlp_receiver.HttpOtlpReceiver() as rec:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rec.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
        monkeypatch.setenv("TRACESCORE_LOG_RECORDS", "false")
        monkeypatch.setenv("TRACESCORE_METRICS", "false")
        yield rec.received
        tracescore.shutdown(5000)


@pytest.fixture
def model(request: pytest.FixtureRequest) -> Iterator[ScriptedJudge]:
    """The app's model: a ``ScriptedJudge`` answering every request with the test module's
    ``ANSWER`` (the app's calls ask for no response schema, so the ``"*"`` route takes them)."""
    with ScriptedJudge() as server:
        server.route("*", request.module.ANSWER)
        yield server


@pytest.fixture
def judge(request: pytest.FixtureRequest) -> Iterator[ScriptedJudge]:
    """The judge: a ``ScriptedJudge`` whose answer relevancy finds the test module's ``ANSWER``
    relevant and whose faithfulness finds it backed by the first document (routes a test's
    scorers do not ask for are never used)."""
    answer = request.module.ANSWER
    with ScriptedJudge() as server:
        server.route("answer_relevancy_statements", {"statements": [answer]})
        server.route("answer_relevancy_verdicts",
                     {"results": [{"result": "yes", "reason": "answers it"}]})
        server.route("answer_relevancy_reason", {"reason": "Direct answer."})
        server.route("output_claims", {"claims": [answer]})
        server.route("faithfulness_verdicts", {"verdicts": [
            {"claim_index": 0, "verdict": "yes", "reason": "the first document says so"}]})
        server.route("faithfulness_reason", {"reason": "Backed by the documents."})
        yield server
