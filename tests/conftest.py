"""Shared fixtures. The environment is fixed before anything imports litellm."""

from __future__ import annotations

import os

# Before any import of litellm: no model-cost-map download, no tokenizer fetches.
os.environ["LITELLM_OFFLINE_MODE"] = "true"
# Tests choose their judge and keys explicitly.
for _name in ("TRACESCORE_JUDGE_MODEL", "OPENAI_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL"):
    os.environ.pop(_name, None)

from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from tests.judge_server import JudgeServer, make_judge  # noqa: E402


@pytest.fixture(scope="session")
def _judge_server_session() -> Iterator[JudgeServer]:
    # One server (one port) for the session: litellm keeps one HTTP client per api_base.
    with JudgeServer() as server:
        yield server


@pytest.fixture
def judge_server(_judge_server_session: JudgeServer) -> Iterator[JudgeServer]:
    """The loopback judge server, with no routes and no recorded requests."""
    _judge_server_session.reset()
    yield _judge_server_session
    _judge_server_session.reset()


@pytest.fixture
def judge(judge_server: JudgeServer) -> Any:
    """A ``Judge`` for ``judge_server`` (2 retries, 10 ms backoff, 5 s timeout)."""
    return make_judge(judge_server)
