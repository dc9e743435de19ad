"""Fixtures every framework's conformance tests share (run from this folder: ``.ci/run``).

* ``model``: the app's model (``model_server.ModelServer``), playing a one-tool agent that
  answers the test module's ``ANSWER`` once it has the result of the tool it was offered.
* ``capture``: tracescore configured for the test (``tracescore.testing.CaptureScores``: spans
  and scores in memory) with a scripted judge that finds ``ANSWER`` relevant and backed by the
  first document. Rules are added per test with ``capture.configure(scoring=[...])``.
* ``echo``: a code scorer (no judge) that records the exact texts a rule handed it, per span
  name, so a test asserts *what* was judged, not only that something was.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from checks import Echo
from model_server import ModelServer, one_tool_agent

from tracescore.testing import CaptureScores, ScriptedJudge

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")


@pytest.fixture
def model(request: pytest.FixtureRequest) -> Iterator[ModelServer]:
    arguments = getattr(request.module, "TOOL_ARGUMENTS", {})
    with ModelServer(one_tool_agent(request.module.ANSWER, arguments)) as server:
        yield server


@pytest.fixture
def capture(request: pytest.FixtureRequest) -> Iterator[CaptureScores]:
    answer = request.module.ANSWER
    with ScriptedJudge() as judge:
        judge.route("answer_relevancy_statements", {"statements": [answer]})
        judge.route("answer_relevancy_verdicts",
                    {"results": [{"result": "yes", "reason": "answers it"}]})
        judge.route("answer_relevancy_reason", {"reason": "Direct answer."})
        judge.route("output_claims", {"claims": [answer]})
        judge.route("faithfulness_verdicts", {"verdicts": [
            {"claim_index": 0, "verdict": "yes", "reason": "the first document says so"}]})
        judge.route("faithfulness_reason", {"reason": "Backed by the documents."})
        with CaptureScores(judge, flush_timeout_millis=30_000) as cap:
            yield cap


@pytest.fixture
def echo() -> Echo:
    return Echo()
