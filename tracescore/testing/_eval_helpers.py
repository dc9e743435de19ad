"""pytest helpers for evaluations: ``assert_passed`` and the ``tracescore_evals`` fixture.

A test reads::

    from tracescore.testing import assert_passed

    def test_answers_are_good():
        result = tracescore.run_evals(data="evals/faq.jsonl", scorers=[...], target=answer)
        assert_passed(result)      # on failure: the per-scorer table and the reasons

or, with the fixture (which also turns the progress bar off and records each run's verdict
and means as ``user_properties`` of the test, which pytest's ``--junitxml`` writes out)::

    from tracescore.testing import tracescore_evals  # noqa: F401  (makes the fixture visible)

    def test_answers_are_good(tracescore_evals):
        result = tracescore_evals.run(data=..., scorers=[...], target=answer)
        tracescore_evals.assert_passed(result)

The fixture becomes visible to every test of a project with ``pytest_plugins =
["tracescore.testing"]`` in the root ``conftest.py``, or to one module by importing it as above.
Importing this module does not import litellm; the fixture needs pytest (the helpers do not).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ._evals import EvalResult, arun_evals, run_evals

if TYPE_CHECKING:
    import pytest

__all__ = ["EvalRunner", "assert_passed", "failure_message", "tracescore_evals"]


def failure_message(result: EvalResult) -> str:
    """Why ``result`` did not pass: the verdict, its reasons, the per-scorer table and the
    first failing items, as an assertion message."""
    lines = [
        f"evaluation {result.experiment_name!r} did not pass: verdict {result.verdict!r}",
        "",
        result.table(),
    ]
    shown = 0
    for item_result in result.items:
        problems = []
        if item_result.error is not None:
            problems.append(f"target raised {item_result.error.type}: {item_result.error.message}")
        for score in item_result.scores.values():
            if score.status == "error":
                problems.append(f"{score.scorer_id}: {score.error_type}: {score.reason}")
            elif score.label == "fail":
                problems.append(f"{score.scorer_id}: {score.score:g} ({score.reason})")
        if not problems:
            continue
        if shown == 0:
            lines += ["", "items:"]
        shown += 1
        if shown > 10:
            lines.append("  ...")
            break
        lines.append(f"  {item_result.item.label}: input={_short(item_result.input)}")
        lines.extend(f"      {p}" for p in problems)
    return "\n".join(lines)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def assert_passed(result: EvalResult, *, allow_scored: bool = False) -> None:
    """Assert that an evaluation passed, with the per-scorer table as the failure message.

    Args:
        result: what ``run_evals`` returned.
        allow_scored: also accept the verdict ``scored`` (thresholds missed or errors, but
            every gate met). Default False.

    Raises:
        AssertionError: the verdict is ``failed`` (or ``scored`` unless ``allow_scored``).

    Example:
        >>> assert_passed(tracescore.run_evals(data=data, scorers=[scorer], target=agent))
    """
    if result.verdict == "passed" or (allow_scored and result.verdict == "scored"):
        return
    raise AssertionError(failure_message(result))


class EvalRunner:
    """What the ``tracescore_evals`` fixture gives a test: ``run_evals`` with test-friendly
    defaults, and a record of each run on the test's report.

    Attributes:
        results: every ``EvalResult`` this runner produced, in order.
    """

    def __init__(self, node: Any = None) -> None:
        self._node = node
        self.results: list[EvalResult] = []

    def _record(self, result: EvalResult) -> EvalResult:
        self.results.append(result)
        if self._node is not None:
            prefix = f"tracescore.{result.experiment_name}"
            props = self._node.user_properties
            props.append((f"{prefix}.verdict", result.verdict))
            for scorer_id, mean in result.scores.items():
                props.append((f"{prefix}.{scorer_id}", "" if mean is None else f"{mean:.6g}"))
        return result

    def run(self, **kwargs: Any) -> EvalResult:
        """``tracescore.run_evals(**kwargs)``; the progress bar is off unless asked for."""
        kwargs.setdefault("progress", False)
        return self._record(run_evals(**kwargs))

    async def arun(self, **kwargs: Any) -> EvalResult:
        """``await tracescore.arun_evals(**kwargs)``; the progress bar is off unless asked for."""
        kwargs.setdefault("progress", False)
        return self._record(await arun_evals(**kwargs))

    @staticmethod
    def assert_passed(result: EvalResult, *, allow_scored: bool = False) -> None:
        """See ``tracescore.testing.assert_passed``."""
        assert_passed(result, allow_scored=allow_scored)


try:
    import pytest as _pytest
except ImportError:  # the helpers above work without pytest
    pass
else:

    @_pytest.fixture
    def tracescore_evals(request: pytest.FixtureRequest) -> Iterator[EvalRunner]:
        """An ``EvalRunner``: ``tracescore_evals.run(data=..., scorers=..., target=...)``."""
        yield EvalRunner(request.node)
