"""The pytest plugin: ``capscore``, ``scripted_judge`` and ``tracescore_evals`` fixtures.

Installed with tracescore under the ``pytest11`` entry point ``tracescore``, so pytest loads it
in every project that has tracescore installed (``-p no:tracescore`` turns it off). It imports
neither litellm nor pydantic: loading it costs a pytest run next to nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._capture import CaptureScores
from ._eval_helpers import EvalRunner
from ._judge_server import ScriptedJudge

__all__ = ["capscore", "scripted_judge", "tracescore_evals"]


@pytest.fixture(scope="session")
def _tracescore_judge_session() -> Iterator[ScriptedJudge]:
    # One server, so one port, for the session: litellm keeps an HTTP client per api_base.
    with ScriptedJudge() as judge:
        yield judge


@pytest.fixture
def scripted_judge(_tracescore_judge_session: ScriptedJudge) -> Iterator[ScriptedJudge]:
    """A running ``ScriptedJudge`` with no routes and no recorded requests.

    Examples:
        >>> def test_judge_prompt(scripted_judge):
        ...     scripted_judge.route("answer_relevancy_statements", {"statements": []})
        ...     scorer = create_answer_relevancy_scorer(model=scripted_judge.as_judge())
    """
    _tracescore_judge_session.reset()
    yield _tracescore_judge_session
    _tracescore_judge_session.reset()


@pytest.fixture
def capscore(scripted_judge: ScriptedJudge) -> Iterator[CaptureScores]:
    """tracescore configured for this test, as a ``CaptureScores``; shut down afterwards.

    Spans go to an in-memory exporter (``capscore.exporter``), with sequential ids; the
    default judge is ``capscore.judge``, a scripted judge. Add scoring rules with
    ``capscore.configure(scoring=[...])``.

    Examples:
        >>> def test_scored(capscore):
        ...     capscore.judge.route("answer_relevancy_statements", {"statements": ["Paris."]})
        ...     capscore.configure(scoring=[tracescore.ScoringRule(scorer=scorer)])
        ...     answer("What is the capital of France?")
        ...     assert capscore.scores() == {"answer-relevancy": [1.0]}
    """
    capture = CaptureScores(scripted_judge)
    try:
        yield capture
    finally:
        capture.close()


@pytest.fixture
def tracescore_evals(request: pytest.FixtureRequest) -> Iterator[EvalRunner]:
    """An ``EvalRunner``: ``tracescore_evals.run(data=..., scorers=..., target=...)`` with the
    progress bar off; each run's verdict and means go to the test's ``user_properties``
    (written by ``--junitxml``)."""
    yield EvalRunner(request.node)
