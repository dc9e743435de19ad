"""Tool call accuracy, code variant: expected tool / expected order, strict or not, no judge."""

from __future__ import annotations

from typing import Any

import pytest

from tracescore import ConfigurationError, run_evals, scorers
from tracescore._cli import scorers as _cli_scorers
from tracescore.scorers import (
    create_tool_call_accuracy_scorer_code,
    create_tool_call_accuracy_scorer_llm,
)
from tracescore.scorers.tool_call_accuracy_code import tool_order_respected
from tracescore.testing import runtime


def calls(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "arguments": {"i": i}} for i, n in enumerate(names)]


@pytest.mark.parametrize(
    ("called", "strict", "expected"),
    [
        (["get_weather"], False, 1.0),
        (["search", "get_weather", "search"], False, 1.0),  # among the calls
        (["search"], False, 0.0),
        ([], False, 0.0),  # no tool called
        (["get_weather"], True, 1.0),  # the only call
        (["get_weather", "get_weather"], True, 0.0),  # called twice: not the only call
        (["search", "get_weather"], True, 0.0),
        ([], True, 0.0),
        (["Get_Weather"], False, 0.0),  # names compare exactly: case counts
    ],
)
def test_expected_tool(called: list[str], strict: bool, expected: float) -> None:
    scorer = create_tool_call_accuracy_scorer_code(expected_tool="get_weather", strict_mode=strict)
    result = scorer.run(tool_calls=calls(*called))
    assert result.score == expected
    assert result.not_scorable is False


@pytest.mark.parametrize(
    ("called", "strict", "expected"),
    [
        # First occurrences: search 0, book 1: increasing.
        (["search", "book"], False, 1.0),
        # Other calls in between, before and after are allowed.
        (["log", "search", "log", "book", "log"], False, 1.0),
        # First "book" (0) comes before first "search" (1), even though a later "book" (2)
        # follows: only first occurrences count.
        (["book", "search", "book"], False, 0.0),
        (["book", "search"], False, 0.0),
        (["search"], False, 0.0),  # "book" never called
        ([], False, 0.0),
        # Strict: exactly the list.
        (["search", "book"], True, 1.0),
        (["search", "log", "book"], True, 0.0),
        (["search", "book", "book"], True, 0.0),
        (["search"], True, 0.0),
    ],
)
def test_expected_order(called: list[str], strict: bool, expected: float) -> None:
    scorer = create_tool_call_accuracy_scorer_code(
        expected_tool_order=["search", "book"], strict_mode=strict
    )
    assert scorer.run(tool_calls=calls(*called)).score == expected


def test_strict_order_may_repeat_a_tool() -> None:
    scorer = create_tool_call_accuracy_scorer_code(
        expected_tool_order=["search", "search", "book"], strict_mode=True
    )
    assert scorer.run(tool_calls=calls("search", "search", "book")).score == 1.0
    assert scorer.run(tool_calls=calls("search", "book")).score == 0.0


def test_tool_order_respected() -> None:
    assert tool_order_respected(["a", "x", "b"], ["a", "b"], strict=False) is True
    assert tool_order_respected(["b", "a"], ["a", "b"], strict=False) is False
    assert tool_order_respected(("a", "b"), ["a", "b"], strict=True) is True
    assert tool_order_respected([], ["a"], strict=False) is False


def test_step_result_and_reasons() -> None:
    order = create_tool_call_accuracy_scorer_code(expected_tool_order=["search", "book"])
    result = order.run(tool_calls=calls("search", "book"))
    assert result.preprocess_step_result == {
        "called_tools": ["search", "book"],
        "expected_tool": None,
        "expected_tool_order": ["search", "book"],
        "strict_mode": False,
    }
    assert (
        result.reason == "Called search, book; expected in this order: search -> book: as expected."
    )
    assert result.analyze_step_result is None
    assert (result.judge_calls, result.judge_model, result.cost) == (0, None, 0.0)

    strict = create_tool_call_accuracy_scorer_code(expected_tool="get_weather", strict_mode=True)
    assert strict.run(tool_calls=[]).reason == (
        "Called no tool; expected get_weather as the only call: not as expected."
    )
    loose = create_tool_call_accuracy_scorer_code(expected_tool="get_weather")
    assert loose.run(tool_calls=calls("get_weather")).reason == (
        "Called get_weather; expected get_weather: as expected."
    )
    exact = create_tool_call_accuracy_scorer_code(expected_tool_order=["a", "b"], strict_mode=True)
    assert exact.run(tool_calls=calls("b", "a")).reason == (
        "Called b, a; expected exactly: a -> b: not as expected."
    )


def test_tool_calls_from_output_messages() -> None:
    scorer = create_tool_call_accuracy_scorer_code(expected_tool_order=["search", "book"])
    output = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "3 flights"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c2", "function": {"name": "book", "arguments": '{"n": 1}'}}],
        },
        {"role": "assistant", "content": "Booked."},
    ]
    assert scorer.run(input="Book a flight", output=output).score == 1.0
    # Messages without any tool call: tools known to be absent, score 0.
    assert scorer.run(output=[{"role": "assistant", "content": "Done."}]).score == 0.0


@pytest.mark.parametrize("kwargs", [{}, {"output": "I booked it."}, {"output": ""}])
def test_no_tool_calls_given_is_not_scorable(kwargs: dict[str, Any]) -> None:
    scorer = create_tool_call_accuracy_scorer_code(expected_tool="book")
    result = scorer.run(**kwargs)
    assert result.score is None and result.not_scorable is True
    assert "no tool calls were given" in result.reason


def test_options_and_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime(), "judge", None)
    scorer = create_tool_call_accuracy_scorer_code(expected_tool="book")
    assert scorer.options == {
        "expected_tool": "book",
        "expected_tool_order": None,
        "strict_mode": False,
    }
    assert create_tool_call_accuracy_scorer_code(
        expected_tool_order=("a", "b"), strict_mode=True
    ).options == {"expected_tool": None, "expected_tool_order": ["a", "b"], "strict_mode": True}
    assert (scorer.id, scorer.uses_judge, scorer.uses_tool_calls) == (
        "tool-call-accuracy-code",
        False,
        True,
    )


def test_own_id_apart_from_the_llm_variant() -> None:
    # The id is gen_ai.evaluation.name and the run_evals result key: the 0/1 name check must
    # not share a series with the judged LLM scorer.
    code = create_tool_call_accuracy_scorer_code(expected_tool="book")
    llm = create_tool_call_accuracy_scorer_llm(available_tools=[{"name": "book"}])
    assert (code.id, llm.id) == ("tool-call-accuracy-code", "tool-call-accuracy")
    assert code.run(tool_calls=[{"name": "book"}]).scorer_id == "tool-call-accuracy-code"


def test_run_evals_keys_results_by_the_new_id() -> None:
    result = run_evals(
        data=[{"input": "Book it", "scorer_inputs": {"tool_calls": [{"name": "book"}]}}],
        scorers=[create_tool_call_accuracy_scorer_code(expected_tool="book")],
        target=lambda question: "Booked.",
    )
    assert result.scores == {"tool-call-accuracy-code": 1.0}


def test_legacy_id_keeps_the_old_id_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match="legacy_id goes away in the next release"):
        scorer = create_tool_call_accuracy_scorer_code(expected_tool="book", legacy_id=True)

    assert scorer.id == "tool-call-accuracy"
    result = scorer.run(tool_calls=[{"name": "book"}])
    assert (result.scorer_id, result.score) == ("tool-call-accuracy", 1.0)


def test_cli_resolves_both_ids_and_explains_what_it_cannot_build() -> None:
    assert scorers.get("tool-call-accuracy-code") is create_tool_call_accuracy_scorer_code
    assert scorers.get("tool-call-accuracy") is create_tool_call_accuracy_scorer_llm
    with pytest.raises(_cli_scorers.UsageError,
                       match="cannot be built from the command line") as info:
        _cli_scorers.build_scorer("tool-call-accuracy-code", None)
    assert "expected_tool" in str(info.value) and "run_evals" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "exactly one of"),
        ({"expected_tool": "a", "expected_tool_order": ["a"]}, "exactly one of"),
        ({"expected_tool": ""}, "expected_tool"),
        ({"expected_tool": 3}, "expected_tool"),
        ({"expected_tool_order": []}, "at least one"),
        ({"expected_tool_order": "search"}, "list of tool names"),
        ({"expected_tool_order": ["a", ""]}, "expected_tool_order"),
        ({"expected_tool_order": ["a", "b", "a"]}, "repeats a tool"),
        ({"expected_tool": "a", "strict_mode": "yes"}, "strict_mode"),
        ({"expected_tool": "a", "legacy_id": "yes"}, "legacy_id"),
    ],
)
def test_invalid_options_fail_early(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        create_tool_call_accuracy_scorer_code(**kwargs)
