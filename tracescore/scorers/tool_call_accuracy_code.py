"""Tool call accuracy, code variant: did the agent call the expected tool(s)? No judge.

Semantics follow the Mastra evals' code-based tool-call-accuracy scorer; code is
tracescore's own. The LLM variant (is each call appropriate for the request?) lives in
``tool_call_accuracy`` and keeps the id ``tool-call-accuracy``; this one reports as
``tool-call-accuracy-code``.

Why its own id: the id is ``gen_ai.evaluation.name``, the key of ``run_evals`` results and the
series of the score metrics. Mastra names both variants ``tool-call-accuracy`` (they differ only
by import path), so a backend could not tell a 0/1 name check from a judged 0..1 score, and
``run_evals`` refused the two together. The suffix names the variant as the factory does
(``create_tool_call_accuracy_scorer_code``). ``legacy_id=True`` keeps the old id for one release.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

from tracescore._core.errors import ConfigurationError
from tracescore.scorers._base import Scorer, ScorerRun

__all__ = [
    "LEGACY_SCORER_ID",
    "SCORER_ID",
    "create_tool_call_accuracy_scorer_code",
    "tool_order_respected",
]

SCORER_ID = "tool-call-accuracy-code"
# The id this scorer shared with the LLM variant before it got its own; kept behind
# legacy_id=True for one release so that dashboards and result keys can move over.
LEGACY_SCORER_ID = "tool-call-accuracy"


def tool_order_respected(called: Sequence[str], expected: Sequence[str], *, strict: bool) -> bool:
    """Whether the tools were called in the expected order.

    Rule (from the Mastra evals): strict, the calls are exactly ``expected`` (same
    names, same order, nothing else); otherwise each expected tool was called and the first
    calls of the expected tools come in the expected order (other calls may come before, in
    between or after).

    Args:
        called: the names of the tools called, in call order.
        expected: the expected names, in order.
        strict: require the exact list.

    Examples:
        >>> tool_order_respected(["search", "log", "book"], ["search", "book"], strict=False)
        True
        >>> tool_order_respected(["book", "search", "book"], ["search", "book"], strict=False)
        False
    """
    if strict:
        return list(called) == list(expected)
    positions = []
    for name in expected:
        if name not in called:
            return False
        positions.append(list(called).index(name))
    return all(earlier < later for earlier, later in pairwise(positions))


def _check_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{what} must be a non-empty tool name, got {value!r}")
    return value


def _check_choice(expected_tool: object, expected_tool_order: object, strict_mode: object,
                  legacy_id: object) -> None:
    """Exactly one expectation, and bool flags.

    Raises:
        ConfigurationError: they are not.
    """
    if (expected_tool is None) == (expected_tool_order is None):
        raise ConfigurationError(
            "pass exactly one of expected_tool='tool_name' (a tool that must be called) or "
            "expected_tool_order=['first', 'second'] (tools that must be called in order)"
        )
    if not isinstance(strict_mode, bool):
        raise ConfigurationError(f"strict_mode must be True or False, got {strict_mode!r}")
    if not isinstance(legacy_id, bool):
        raise ConfigurationError(f"legacy_id must be True or False, got {legacy_id!r}")


def _checked_order(expected_tool: str | None, expected_tool_order: Sequence[str] | None,
                   strict_mode: bool) -> list[str] | None:
    """The expected order as a list (``None`` when ``expected_tool`` is the expectation).

    Raises:
        ConfigurationError: an empty name, an empty order, or a repeated name without
            ``strict_mode``.
    """
    order: list[str] | None = None
    if expected_tool is not None:
        _check_name(expected_tool, "expected_tool")
    else:
        if isinstance(expected_tool_order, (str, bytes)) or not isinstance(
            expected_tool_order, Sequence
        ):
            raise ConfigurationError(
                "expected_tool_order must be a list of tool names, "
                f"got {type(expected_tool_order).__name__}"
            )
        order = [_check_name(n, "each name in expected_tool_order") for n in expected_tool_order]
        if not order:
            raise ConfigurationError("expected_tool_order must name at least one tool")
        if not strict_mode and len(set(order)) != len(order):
            # Only first calls are compared, so a repeated name could never be satisfied.
            raise ConfigurationError(
                f"expected_tool_order {order!r} repeats a tool: without strict_mode only the "
                "first call of each tool is compared; pass strict_mode=True to require the "
                "exact sequence of calls"
            )
    return order


def _steps(expected_tool: str | None, order: list[str] | None, strict_mode: bool) -> tuple[
    Callable[[ScorerRun], dict[str, Any]], Callable[[ScorerRun], float], Callable[[ScorerRun], str]
]:
    """The steps of one expectation: the called tools, the score and the reason."""

    def preprocess(run: ScorerRun) -> dict[str, Any]:
        assert run.tool_calls is not None  # requires=("tool_calls",)
        return {
            "called_tools": [call["name"] for call in run.tool_calls],
            "expected_tool": expected_tool,
            "expected_tool_order": order,
            "strict_mode": strict_mode,
        }

    def score(run: ScorerRun) -> float:
        assert run.preprocess_result is not None
        called: list[str] = run.preprocess_result["called_tools"]
        if order is not None:
            return 1.0 if tool_order_respected(called, order, strict=strict_mode) else 0.0
        if strict_mode:
            return 1.0 if called == [expected_tool] else 0.0
        return 1.0 if expected_tool in called else 0.0

    def reason(run: ScorerRun) -> str:
        assert run.preprocess_result is not None
        called: list[str] = run.preprocess_result["called_tools"]
        calls = ", ".join(called) if called else "no tool"
        verdict = "as expected" if run.score == 1 else "not as expected"
        if order is not None:
            wanted = " -> ".join(order)
            rule = "exactly" if strict_mode else "in this order"
            return f"Called {calls}; expected {rule}: {wanted}: {verdict}."
        rule = "as the only call" if strict_mode else ""
        return f"Called {calls}; expected {expected_tool}{' ' + rule if rule else ''}: {verdict}."

    return preprocess, score, reason


def create_tool_call_accuracy_scorer_code(
    *,
    expected_tool: str | None = None,
    expected_tool_order: Sequence[str] | None = None,
    strict_mode: bool = False,
    legacy_id: bool = False,
) -> Scorer:
    """Score 1 when the agent called the expected tool (or tools in order), else 0.

    Give exactly one of:

    - ``expected_tool``: 1 when a call of that tool is among the calls (``strict_mode``: it is
      the only call);
    - ``expected_tool_order``: 1 when ``tool_order_respected`` (``strict_mode``: the calls are
      exactly that list; otherwise the first call of each expected tool comes in that order).

    Tool calls come from ``run(tool_calls=[...])`` (dicts or objects with a ``name``, or
    OpenAI-style ``{"function": {"name": ...}}``) or from the ``tool_calls`` of assistant
    messages in an output message list. An empty list means no tool was called: score 0.
    Names are compared exactly (case counts). Not rounded; no judge.

    Formula: from the Mastra evals' ``createToolCallAccuracyScorerCode``.

    ``preprocess_step_result``: ``{"called_tools": [...], "expected_tool",
    "expected_tool_order", "strict_mode"}``.

    Not scorable: no tool calls were given at all (no ``tool_calls=`` and no message list).

    Args:
        expected_tool: the tool that should have been called.
        expected_tool_order: the tools that should have been called, in order. Without
            ``strict_mode`` a name may appear only once (only first calls are compared).
        strict_mode: require the exact calls (see above). Default ``False``.
        legacy_id: deprecated; ``True`` reports under the old id ``tool-call-accuracy``, which
            the LLM variant also uses, with a ``DeprecationWarning``. It goes away in the next
            release: move dashboards and ``run_evals`` result keys to
            ``tool-call-accuracy-code``. Default ``False``.

    Returns:
        A ``Scorer`` with id ``tool-call-accuracy-code`` (``tool-call-accuracy`` with
        ``legacy_id=True``).

    Raises:
        ConfigurationError: neither or both of ``expected_tool`` and ``expected_tool_order``
            are given, a name is empty, ``expected_tool_order`` is empty or repeats a name
            without ``strict_mode``, or ``strict_mode`` or ``legacy_id`` is not a bool.

    Examples:
        >>> scorer = create_tool_call_accuracy_scorer_code(expected_tool="get_weather")
        >>> scorer.run(tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]).score
        1.0
    """
    _check_choice(expected_tool, expected_tool_order, strict_mode, legacy_id)
    scorer_id = SCORER_ID
    if legacy_id:
        warnings.warn(
            f"create_tool_call_accuracy_scorer_code(legacy_id=True) reports under "
            f"{LEGACY_SCORER_ID!r}, the id of the LLM tool-call-accuracy scorer too; the code "
            f"variant's id is {SCORER_ID!r} and legacy_id goes away in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        scorer_id = LEGACY_SCORER_ID
    order = _checked_order(expected_tool, expected_tool_order, strict_mode)
    preprocess, score, reason = _steps(expected_tool, order, strict_mode)
    return Scorer(
        id=scorer_id,
        description="Whether the agent called the expected tool, or tools in the expected order.",
        requires=("tool_calls",),
        preprocess=preprocess,
        generate_score=score,
        generate_reason=reason,
        round_score=False,
        options={"expected_tool": expected_tool, "expected_tool_order": order,
                 "strict_mode": strict_mode},
    )
