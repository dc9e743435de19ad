"""Shared fixtures. The environment is fixed before anything imports litellm."""

from __future__ import annotations

import os

# Before any import of litellm: no model-cost-map download, no tokenizer fetches.
os.environ["LITELLM_OFFLINE_MODE"] = "true"
# Tests choose their judge and keys explicitly.
for _name in ("TRACESCORE_JUDGE_MODEL", "OPENAI_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL"):
    os.environ.pop(_name, None)

import pytest  # noqa: E402

from tracescore import Judge  # noqa: E402
from tracescore.testing import ScriptedJudge, make_judge  # noqa: E402

# The kit's pytest plugin (entry point ``tracescore``, loaded because tracescore is installed)
# provides ``scripted_judge``: one server for the session, reset around each test.


@pytest.fixture
def judge_server(scripted_judge: ScriptedJudge) -> ScriptedJudge:
    """The loopback scripted judge, with no routes and no recorded requests."""
    return scripted_judge


@pytest.fixture
def judge(judge_server: ScriptedJudge) -> Judge:
    """A ``Judge`` for ``judge_server`` (2 retries, 10 ms backoff, 5 s timeout)."""
    return make_judge(judge_server)
