"""The Scorer protocol: every built-in scorer satisfies it; as_scorer fills the documented
defaults into a partial custom object, and refuses an object without arun."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest

import tracescore.scorers
from tests.helpers import ProbeScorer
from tracescore._pipeline.scorer import SCORER_DEFAULTS, Scorer, as_scorer

# Options a factory cannot do without; every other factory is built with none.
REQUIRED_OPTIONS: dict[str, dict[str, Any]] = {
    "create_tool_call_accuracy_scorer_code": {"expected_tool": "lookup_order"},
    "create_tool_call_accuracy_scorer_llm": {
        "available_tools": [{"name": "lookup_order", "description": "Find an order by id."}]
    },
}
FACTORIES = sorted(
    name
    for name in tracescore.scorers.__all__
    if name.startswith("create_") and name != "create_scorer"
)


def test_every_factory_is_listed() -> None:
    # A guard on the parametrisation below: it must not silently shrink.
    assert len(FACTORIES) == 21


@pytest.mark.parametrize("factory", FACTORIES)
def test_every_built_in_scorer_satisfies_the_protocol(factory: str) -> None:
    scorer = getattr(tracescore.scorers, factory)(**REQUIRED_OPTIONS.get(factory, {}))

    assert isinstance(scorer, Scorer)
    assert as_scorer(scorer) is scorer
    assert isinstance(scorer.id, str) and scorer.id
    for flag in (
        "uses_judge",
        "uses_context",
        "uses_tool_calls",
        "requires_ground_truth",
        "higher_is_better",
    ):
        assert isinstance(getattr(scorer, flag), bool), flag
    assert isinstance(scorer.scale, float) and scorer.scale > 0


def test_create_scorer_satisfies_the_protocol() -> None:
    scorer = tracescore.scorers.create_scorer(id="length", generate_score=lambda run: 1.0)
    assert isinstance(scorer, Scorer) and as_scorer(scorer) is scorer


def test_flags_of_built_in_scorers() -> None:
    s = tracescore.scorers
    tools = s.create_tool_call_accuracy_scorer_llm(
        **REQUIRED_OPTIONS["create_tool_call_accuracy_scorer_llm"]
    )
    assert (tools.uses_judge, tools.uses_tool_calls, tools.uses_context) == (True, True, False)
    code = s.create_tool_call_accuracy_scorer_code(expected_tool="x")
    assert (code.uses_judge, code.uses_tool_calls) == (False, True)
    assert s.create_context_precision_scorer(scale=2).scale == 2.0
    assert s.create_hallucination_scorer().higher_is_better is False
    assert s.create_answer_similarity_scorer().requires_ground_truth is True


def test_partial_object_gets_the_documented_defaults() -> None:
    probe = ProbeScorer(id="probe")
    assert not isinstance(probe, Scorer)  # no uses_judge, uses_tool_calls, scale

    scorer = as_scorer(probe)

    assert isinstance(scorer, Scorer)
    assert scorer is not probe
    assert (scorer.id, scorer.uses_judge, scorer.uses_tool_calls, scorer.scale) == (
        "probe",
        False,
        False,
        1.0,
    )
    # What the object has is kept, not overwritten by a default.
    assert (
        as_scorer(ProbeScorer(higher_is_better=False, uses_context=True)).higher_is_better is False
    )
    assert as_scorer(ProbeScorer(uses_context=True)).uses_context is True
    # Calls reach the object, and its other attributes read through.
    result = asyncio.run(scorer.arun(output="x" * 30))
    assert (result.score, result.reason) == (0.3, "length 30")
    assert scorer.calls == [{"output": "x" * 30}] == probe.calls


def test_bare_object_gets_every_default() -> None:
    class Bare:
        async def arun(self, **kwargs: Any) -> Any:
            return None

    scorer = as_scorer(Bare())

    assert {name: getattr(scorer, name) for name in SCORER_DEFAULTS} == {
        "id": "custom",
        "uses_judge": False,
        "uses_context": False,
        "uses_tool_calls": False,
        "requires_ground_truth": False,
        "higher_is_better": True,
        "scale": 1.0,
    }
    with pytest.raises(AttributeError):
        _ = scorer.not_an_attribute  # type: ignore[attr-defined]


def test_complete_custom_object_is_returned_unchanged() -> None:
    class Complete:
        id = "complete"
        uses_judge = True
        uses_context = False
        uses_tool_calls = False
        requires_ground_truth = False
        higher_is_better = True
        scale = 5

        async def arun(self, **kwargs: Any) -> Any:
            return None

    scorer = Complete()
    assert isinstance(scorer, Scorer)
    assert as_scorer(scorer) is scorer


@pytest.mark.parametrize(
    "obj",
    [object(), "answer-relevancy", type("NoRun", (), {"arun": "not callable"})()],
    ids=["object", "str", "arun-not-callable"],
)
def test_no_callable_arun_is_a_type_error(obj: Any) -> None:
    with pytest.raises(TypeError, match="needs an async arun"):
        as_scorer(obj)


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"id": ""}, "id must be a non-empty string"),
        ({"id": 3}, "id must be a non-empty string"),
        ({"uses_judge": "yes"}, "uses_judge must be a bool"),
        ({"scale": 0}, "scale must be a finite number > 0"),
        ({"scale": float("nan")}, "scale must be a finite number > 0"),
        ({"scale": True}, "scale must be a finite number > 0"),
    ],
)
def test_member_of_the_wrong_type_is_a_type_error(attrs: dict[str, Any], message: str) -> None:
    async def arun(self: Any, **kwargs: Any) -> Any:
        return None

    obj = type("Custom", (), {"arun": arun, **attrs})()
    with pytest.raises(TypeError, match=message):
        as_scorer(obj)


def test_protocol_module_stays_light() -> None:
    code = (
        "import sys, tracescore._pipeline.scorer; "
        "print([m for m in ('litellm', 'pydantic') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"
