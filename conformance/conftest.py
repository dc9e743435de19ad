"""Fixtures every framework's conformance tests share (run from this folder: ``.ci/run``).

* ``model``: the app's model (``model_server.ModelServer``), playing a one-tool agent that
  answers the test module's ``ANSWER`` once it has the result of the tool it was offered.
* ``capture``: tracescore configured for the test (``tracescore.testing.CaptureScores``: spans
  and scores in memory) with a scripted judge that finds ``ANSWER`` relevant and backed by the
  first document. Rules are added per test with ``capture.configure(scoring=[...])``.
* ``CONFORMANCE_STATS=<file>``: each test appends one JSON line to the file: the framework,
  the test, whether it passed, and the spans it saw, scored, and scored ``not_scorable``
  (the figures of the framework table in ``docs/frameworks.md``).
* ``echo``: a code scorer (no judge) that records the exact texts a rule handed it, per span
  name, so a test asserts *what* was judged, not only that something was.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from checks import Echo, record, scripted_judge
from model_server import ModelServer, one_tool_agent

from tracescore.testing import CaptureScores

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")


@pytest.fixture
def model(request: pytest.FixtureRequest) -> Iterator[ModelServer]:
    arguments = getattr(request.module, "TOOL_ARGUMENTS", {})
    with ModelServer(one_tool_agent(request.module.ANSWER, arguments)) as server:
        yield server


@pytest.fixture
def capture(request: pytest.FixtureRequest) -> Iterator[CaptureScores]:
    with scripted_judge(request.module.ANSWER) as judge, CaptureScores(
            judge, flush_timeout_millis=30_000) as cap:
        yield cap
        record(request, cap)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]


@pytest.fixture
def echo() -> Echo:
    return Echo()
