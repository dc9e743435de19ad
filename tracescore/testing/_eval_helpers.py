"""Evaluation helpers for tests: ``assert_passed`` and ``EvalRunner`` (the ``tracescore_evals``
fixture's object). They work without pytest."""

from __future__ import annotations

from typing import Any

from tracescore._offline.evals import EvalResult, arun_evals, run_evals

__all__ = ["EvalRunner", "assert_passed", "failure_message"]


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


def assert_passed(
    result: EvalResult, *, allow_warned: bool = False, allow_scored: bool | None = None
) -> None:
    """Assert that an evaluation passed, with the per-scorer table as the failure message.

    Args:
        result: what ``run_evals`` returned.
        allow_warned: also accept the verdict ``warned`` (thresholds missed or errors, but
            every gate met). Default False.
        allow_scored: the earlier name of ``allow_warned`` (the verdict was called
            ``scored``); still accepted, ``allow_warned`` wins when both are given.

    Raises:
        AssertionError: the verdict is ``failed`` (or ``warned`` unless ``allow_warned``).

    Examples:
        >>> assert_passed(tracescore.run_evals(data=data, scorers=[scorer], target=agent))
    """
    allow = allow_warned or bool(allow_scored)
    if result.verdict == "passed" or (allow and result.verdict == "warned"):
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
    def assert_passed(
        result: EvalResult, *, allow_warned: bool = False, allow_scored: bool | None = None
    ) -> None:
        """See ``tracescore.testing.assert_passed``."""
        assert_passed(result, allow_warned=allow_warned, allow_scored=allow_scored)

