"""The support check: a lexical model shipped as data, scored in plain Python, no judge."""

from __future__ import annotations

import json
import math
from importlib import resources
from typing import Any

import pytest

from tracescore import ConfigurationError
from tracescore.scorers import create_support_check_scorer
from tracescore.testing import ScriptedJudge as JudgeServer

CONTEXT = ["The Oberoi family is famous for The Oberoi Group, a hotel company.",
           "The Oberoi Group is a hotel company with its head office in Delhi."]
QUESTION = "The Oberoi family is part of a hotel company that has a head office in what city?"


def shipped() -> dict[str, Any]:
    raw = resources.files("tracescore.scorers").joinpath("support_check.json").read_text()
    return dict(json.loads(raw))


def test_an_answer_from_the_context_passes_and_an_invented_one_fails(
    judge_server: JudgeServer
) -> None:
    scorer = create_support_check_scorer(context=CONTEXT)

    right = scorer.run(input=QUESTION, output="Delhi")
    wrong = scorer.run(input=QUESTION, output="Mumbai, the financial capital of India.")

    assert right.score is not None and wrong.score is not None
    assert right.score > 0.5 > wrong.score
    assert right.reason.startswith(f"Lexical support check: {right.score:.2f} (supported)")
    assert "(not supported)" in wrong.reason
    assert (right.judge_calls, right.input_tokens, right.judge_model) == (0, 0, None)
    assert judge_server.requests == []  # no judge, not even configured
    assert scorer.uses_judge is False and scorer.uses_context is True


def test_the_score_is_the_shipped_regression_over_the_reported_features() -> None:
    model = shipped()
    result = create_support_check_scorer(context=CONTEXT).run(
        input=QUESTION, output="Its head office is in Delhi, India.")

    values = (result.preprocess_step_result or {})["features"]
    assert list(values) == model["features"]
    z = model["intercept"] + sum(
        c * (values[name] - m) / s
        for name, c, m, s in zip(model["features"], model["coef"], model["mean"],
                                 model["scale"], strict=True))
    assert result.score == pytest.approx(1 / (1 + math.exp(-z)), abs=1e-12)
    # not rounded (a heuristic scorer): a probability
    assert result.score != round(result.score, 2)


def test_words_the_question_gave_are_not_support() -> None:
    scorer = create_support_check_scorer(context=CONTEXT)
    # Every word of this answer is in the context, but all of them come from the question.
    echo = scorer.run(input=QUESTION, output="A hotel company with a head office.")
    fresh = scorer.run(input="Where is it?", output="A hotel company with a head office.")

    assert echo.score is not None and fresh.score is not None
    assert echo.score < fresh.score


@pytest.mark.parametrize(("output", "context"), [("  ", CONTEXT), ("Delhi", []), ("Delhi", [" "])])
def test_empty_output_or_context_is_not_scorable(output: str, context: list[str]) -> None:
    result = create_support_check_scorer().run(input=QUESTION, output=output, context=context)
    assert (result.score, result.not_scorable) == (None, True)


def test_context_from_extractor_wins_and_options_name_the_weights() -> None:
    scorer = create_support_check_scorer(context_extractor=lambda i, o: ["Delhi is a city."])
    assert scorer.run(output="Delhi", context=["Paris"]).score == pytest.approx(
        create_support_check_scorer().run(output="Delhi", context=["Delhi is a city."]).score)
    options = create_support_check_scorer().options
    assert options["model"].startswith("support-check-v1-")
    assert (options["context"], options["context_extractor"]) == (None, None)


@pytest.mark.parametrize("kwargs", [{"context": "text"}, {"context_extractor": 1}])
def test_invalid_options_fail_early(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        create_support_check_scorer(**kwargs)
