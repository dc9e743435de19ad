"""The evaluator version (``Scorer.fingerprint``, ``tracescore.evaluator.version`` on every
score) follows what decides a score, not where or how its code is written: a step nested in a
factory and its module-level twin give the same version; comments, docstrings, line breaks and
indentation do not count; a change to the scoring logic, to a prompt, or to a tracescore
helper a step calls does; and the value is the same in another process.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tracescore.scorers import JudgePrompt, Scorer, ScorerRun, create_scorer, registry

REPO = Path(__file__).resolve().parents[1]
QUESTION = "Is this answer polite?"

# A tiny scorer in a module of its own; the variants below change it cosmetically or in what
# it computes. ``{indent}`` lets a variant indent differently.
MODULE = '''
from pydantic import BaseModel

from tracescore.scorers import JudgePrompt, create_scorer

INSTRUCTIONS = "You judge whether an answer is polite."
QUESTION = "Is this answer polite?"


class Verdict(BaseModel):
    polite: float


def verdict_prompt(run):
    return f"{QUESTION}\\n\\n{run.output_text}"


def score(run):
    return 1.0 if run.analyze_result["polite"] >= 0.5 else 0.0


def make():
    return create_scorer(
        id="polite",
        analyze=JudgePrompt(instructions=INSTRUCTIONS, prompt=verdict_prompt,
                            output_schema=Verdict),
        generate_score=score,
    )
'''

# The same scorer: a module docstring, comments, docstrings, other line breaks, two-space
# indentation, the steps nested in the factory, the constants in another order.
COSMETIC = '''
"""The politeness scorer, written differently."""

from pydantic import BaseModel
from tracescore.scorers import JudgePrompt, create_scorer

QUESTION = "Is this answer polite?"  # what the judge is asked
INSTRUCTIONS = "You judge whether an answer is polite."


class Verdict(BaseModel):
    polite: float


def make():
  """Build it."""

  def verdict_prompt(run):
    """The user prompt."""
    # the question first, then the answer
    return f"{QUESTION}\\n\\n{run.output_text}"

  def score(run):
    return (1.0
            if run.analyze_result["polite"] >= 0.5
            else 0.0)

  return create_scorer(id="polite",
                       analyze=JudgePrompt(instructions=INSTRUCTIONS, prompt=verdict_prompt,
                                           output_schema=Verdict),
                       generate_score=score)
'''

# The same module with a helper the score calls; imported under a tracescore module name, so
# the helper is followed as tracescore's own helpers are.
WITH_HELPER = '''
from tracescore.scorers import create_scorer


def share(run):
    return run.analyze_result["polite"] * run.scale


def scale(run):  # called by no step: run.scale is an attribute, not this function
    return 1.0


def score(run):
    return share(run)


def make():
    return create_scorer(id="polite", generate_score=score)
'''


def _load(path: Path, text: str, name: str) -> Any:
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _version(tmp_path: Path, text: str, name: str = "polite_scorer") -> str:
    directory = tmp_path / f"v{len(list(tmp_path.iterdir()))}"
    directory.mkdir()
    scorer: Scorer = _load(directory / "polite.py", text, name).make()
    return scorer.fingerprint


class Verdict(BaseModel):
    polite: float


def polite_prompt(run: ScorerRun) -> str:
    return f"{QUESTION}\n\n{run.output_text}"


def long_enough_step(minimum: int) -> Any:
    def long_enough(run: ScorerRun) -> float:
        return 1.0 if len(run.output_text.split()) >= minimum else 0.0

    return long_enough


def _polite(prompt: Any, score: Any) -> Scorer:
    step = JudgePrompt(instructions="Judge politeness.", prompt=prompt, output_schema=Verdict)
    return create_scorer(id="polite", analyze=step, generate_score=score)


def test_a_nested_step_and_its_module_level_twin_give_the_same_version() -> None:
    def polite_prompt(run: ScorerRun) -> str:
        return f"{QUESTION}\n\n{run.output_text}"

    def nested_length_scorer(minimum: int) -> Scorer:
        def long_enough(run: ScorerRun) -> float:
            return 1.0 if len(run.output_text.split()) >= minimum else 0.0

        return create_scorer(id="length", generate_score=long_enough)

    def twin_length_scorer(minimum: int) -> Scorer:
        return create_scorer(id="length", generate_score=long_enough_step(minimum))

    score = long_enough_step(3)
    assert _polite(polite_prompt, score).fingerprint == _polite(
        globals()["polite_prompt"], score).fingerprint
    nested, twin = nested_length_scorer(3), twin_length_scorer(3)
    assert nested.fingerprint == twin.fingerprint
    # What the closure holds still counts, and the twins score alike.
    assert nested_length_scorer(4).fingerprint != nested.fingerprint
    assert twin_length_scorer(4).fingerprint == nested_length_scorer(4).fingerprint
    for output in ("one two", "one two three"):
        assert nested.run(output=output).score == twin.run(output=output).score


def test_comments_docstrings_and_layout_do_not_count(tmp_path: Path) -> None:
    assert _version(tmp_path, MODULE) == _version(tmp_path, COSMETIC)
    assert _version(tmp_path, MODULE) == _version(tmp_path, MODULE, name="elsewhere.polite")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param('>= 0.5 else', '> 0.5 else', id="the score's comparison"),
        pytest.param('1.0 if', '0.9 if', id="the score's value"),
        pytest.param('QUESTION = "Is this answer polite?"', 'QUESTION = "Is it polite?"',
                     id="a prompt text the step reads from a module constant"),
        pytest.param('{QUESTION}\\n\\n{run', '{QUESTION}\\n{run',
                     id="the prompt the step builds"),
        pytest.param('"You judge whether an answer is polite."', '"You judge politeness."',
                     id="the judge's instructions"),
    ],
)
def test_a_change_to_the_logic_or_a_prompt_gives_another_version(
    tmp_path: Path, old: str, new: str
) -> None:
    changed = MODULE.replace(old, new)
    assert changed != MODULE
    assert _version(tmp_path, changed) != _version(tmp_path, MODULE)


def test_a_tracescore_helper_a_step_calls_counts_by_its_logic_and_no_other_does(
    tmp_path: Path,
) -> None:
    name = "tracescore._evaluator_version_probe"
    base = _version(tmp_path, WITH_HELPER, name)
    commented = WITH_HELPER.replace("def share(run):\n", "def share(run):\n    # scaled\n")
    assert _version(tmp_path, commented, name) == base
    changed = WITH_HELPER.replace("* run.scale", "* run.scale / 2")
    assert _version(tmp_path, changed, name) != base
    uncalled = WITH_HELPER.replace("return 1.0", "return 2.0")
    assert uncalled != WITH_HELPER
    assert _version(tmp_path, uncalled, name) == base


def _registered() -> dict[str, str]:
    return {scorer_id: factory(**NEEDED.get(scorer_id, {})).fingerprint
            for scorer_id, factory in registry().items()}


def test_the_versions_are_the_same_in_another_process(tmp_path: Path) -> None:
    module = tmp_path / "polite.py"
    module.write_text(COSMETIC, encoding="utf-8")
    here = {"registered": _registered(), "module": _version(tmp_path, COSMETIC)}
    code = (
        "import importlib.util, json, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from tests.test_scorer_evaluator_version import _registered\n"
        "spec = importlib.util.spec_from_file_location('polite', sys.argv[2])\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(json.dumps({'registered': _registered(), 'module': module.make().fingerprint}))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "4321", "LITELLM_OFFLINE_MODE": "true"}
    other = subprocess.run([sys.executable, "-c", code, str(REPO), str(module)],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
                           check=True)
    assert json.loads(other.stdout) == here
    assert len(set(here["registered"].values())) == len(here["registered"])


def pieces_of(input: Any, output: Any) -> list[str]:  # noqa: A002 - the extractor's signature
    return ["Paris is the capital of France."]


# For each registered scorer, one other value per option (beyond ``model``, which is recorded
# on its own): each must give another evaluator version, whichever code of the factory, its
# closures or its options carries the value to the steps.
_CONTEXT = {"context": {"context": ["a piece"]}, "context_extractor": {
    "context_extractor": pieces_of}, "scale": {"scale": 10}}
OTHER_VALUES: dict[str, dict[str, dict[str, Any]]] = {
    "answer-relevancy": {"uncertainty_weight": {"uncertainty_weight": 0.5},
                         "scale": {"scale": 10}, "reason": {"reason": "inline"}},
    "answer-similarity": {"require_ground_truth": {"require_ground_truth": False},
                          "semantic_threshold": {"semantic_threshold": 0.7},
                          "exact_match_bonus": {"exact_match_bonus": 0.1},
                          "missing_penalty": {"missing_penalty": 0.2},
                          "contradiction_penalty": {"contradiction_penalty": 0.5},
                          "extra_info_penalty": {"extra_info_penalty": 0.1},
                          "scale": {"scale": 10}},
    "bias": {"scale": {"scale": 10}},
    "completeness": {"language": {"language": "de"}},
    "content-similarity": {"ignore_case": {"ignore_case": False},
                           "ignore_whitespace": {"ignore_whitespace": False}},
    "context-precision": {**_CONTEXT, "reason": {"reason": "inline"}},
    "context-recall": _CONTEXT,
    "context-relevance": {**_CONTEXT, "penalties": {"penalties": {
        "missing_context_per_item": 0.2}}},
    "faithfulness": {**_CONTEXT, "prompt_set": {"prompt_set": "tracescore-v1"}},
    "faithfulness-cascade": {**_CONTEXT, "band": {"band": (0.2, 0.8)}},
    "hallucination": {**_CONTEXT, "prompt_set": {"prompt_set": "mastra"}},
    "keyword-coverage": {},
    "noise-sensitivity": {"baseline_response": {"baseline_response": "Paris."},
                          "noisy_query": {"noisy_query": "Capital of France? Lyon?"},
                          "noise_type": {"noise_type": "misinformation"},
                          "impact_weights": {"impact_weights": {"moderate": 0.5}},
                          "major_issue_per_item": {"major_issue_per_item": 0.2},
                          "max_major_issue_penalty": {"max_major_issue_penalty": 0.4},
                          "discrepancy_threshold": {"discrepancy_threshold": 0.3},
                          "scale": {"scale": 10}},
    "prompt-alignment": {"evaluation_mode": {"evaluation_mode": "user"},
                         "system_prompt": {"system_prompt": "Answer in one sentence."},
                         "scale": {"scale": 10}},
    "summarization": {"source": {"source": "The report."}, "max_questions": {
        "max_questions": 3}, "scale": {"scale": 10}},
    "support-check": {"context": _CONTEXT["context"],
                      "context_extractor": _CONTEXT["context_extractor"]},
    "textual-difference": {},
    "tone-consistency": {"reference_tone": {"reference_tone": "Calm and kind."}},
    "tool-call-accuracy": {"available_tools": {"available_tools": [
        {"name": "lookup", "description": "Find"}, {"name": "cancel", "description": "Stop"}]},
        "scale": {"scale": 10}},
    "tool-call-accuracy-code": {"expected_tool": {"expected_tool": "cancel"},
                                "expected_tool_order": {"expected_tool": None,
                                                        "expected_tool_order": ["lookup", "x"]},
                                "strict_mode": {"strict_mode": True},
                                "legacy_id": {"legacy_id": True}},
    "toxicity": {"scale": {"scale": 10}},
}
NEEDED: dict[str, dict[str, Any]] = {
    "tool-call-accuracy": {"available_tools": [{"name": "lookup", "description": "Find"}]},
    "tool-call-accuracy-code": {"expected_tool": "lookup"},
}


def test_every_option_of_every_scorer_counts_in_its_version() -> None:
    factories = registry()
    assert set(OTHER_VALUES) == set(factories)
    for scorer_id, factory in factories.items():
        options = set(inspect.signature(factory).parameters) - {"model"}
        assert set(OTHER_VALUES[scorer_id]) == options, scorer_id
        base = factory(**NEEDED.get(scorer_id, {})).fingerprint
        assert factory(**NEEDED.get(scorer_id, {})).fingerprint == base
        for option, changed in OTHER_VALUES[scorer_id].items():
            with pytest.warns(DeprecationWarning) if option == "legacy_id" else (
                    contextlib.nullcontext()):
                other = factory(**{**NEEDED.get(scorer_id, {}), **changed})
            assert other.fingerprint != base, (scorer_id, option)
