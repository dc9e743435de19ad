"""One scorer registry: ``tracescore.scorers.registry()``, read by the command line, serve,
calibration and feedback alike."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest

import tracescore
import tracescore.cli
import tracescore.serve
from tracescore import scorers

# The ids docs/CONTRACT promise (section 4), as a user would type them.
CONTRACT_IDS = [
    "answer-relevancy", "answer-similarity", "context-precision", "context-relevance",
    "context-recall", "faithfulness", "hallucination", "bias", "toxicity", "prompt-alignment",
    "tool-call-accuracy", "tool-call-accuracy-code", "noise-sensitivity", "summarization",
    "completeness", "content-similarity", "keyword-coverage", "textual-difference",
    "tone-consistency",
]
# Options a factory needs that have no default.
REQUIRED: dict[str, dict[str, Any]] = {
    "tool-call-accuracy": {"available_tools": [{"name": "book", "description": "Book a room"}]},
    "tool-call-accuracy-code": {"expected_tool": "book"},
}


def _build(scorer_id: str) -> Any:
    """The scorer with its required options (and a judge that is never called)."""
    factory = scorers.get(scorer_id)
    options = dict(REQUIRED.get(scorer_id, {}))
    if "model" in inspect.signature(factory).parameters:
        options["model"] = "openai/never-called"
    return factory(**options)


def _exported_factories() -> set[str]:
    return {name for name in scorers.__all__
            if name.startswith("create_") and name != "create_scorer"}


def test_the_registry_covers_every_exported_scorer_factory() -> None:
    registered = scorers.registry()
    assert {f.__name__ for f in registered.values()} == _exported_factories()
    assert list(registered) == sorted(registered) and scorers.ids() == tuple(registered)
    assert set(CONTRACT_IDS) <= set(registered)
    for scorer_id, factory in registered.items():
        assert scorers.get(scorer_id) is factory
        # The id comes from the factory's own module, and the scorer it builds carries it.
        module = importlib.import_module(factory.__module__)
        assert scorer_id == module.SCORER_ID
        assert _build(scorer_id).id == scorer_id


def test_every_public_scorer_module_is_registered() -> None:
    # A scorer module whose factory the package forgot to export would be a scorer nobody can
    # name: not on the command line, not in a serve file.
    modules = [info.name for info in pkgutil.iter_modules(scorers.__path__)
               if not info.name.startswith("_")]
    assert len(modules) >= len(CONTRACT_IDS)
    registered = set(scorers.ids())
    for name in modules:
        module = importlib.import_module(f"tracescore.scorers.{name}")
        assert isinstance(getattr(module, "SCORER_ID", None), str), name
        assert module.SCORER_ID in registered, name
        assert scorers.get(module.SCORER_ID).__module__ == module.__name__


def test_get_names_the_known_ids_for_an_unknown_one() -> None:
    with pytest.raises(tracescore.ConfigurationError,
                       match=r"unknown scorer 'nope'; known: answer-relevancy, ") as info:
        scorers.get("nope")
    assert "tool-call-accuracy-code" in str(info.value)
    with pytest.raises(TypeError):
        scorers.registry()["nope"] = scorers.create_bias_scorer  # type: ignore[index]


# -- the command line and serve accept the same ids ----------------------------------------


AGENT = "def answer(question):\n    return 'Paris'\n"


def _eval(tmp_path: Path, scorer_id: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = tracescore.cli.main(["eval", str(tmp_path / "data.jsonl"),
                                "--target", f"{tmp_path / 'agent.py'}:answer",
                                "--scorer", scorer_id, "--no-trace", "--no-progress"])
    return code, capsys.readouterr().err


def _serve_check(tmp_path: Path, scorer_id: str, options: dict[str, Any],
                 capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    # YAML, with the options as JSON (which YAML reads). What a rule must say of where the
    # scorer's ground truth and inputs come from, it says (the scorer tells).
    rule: dict[str, Any] = {"scorer": scorer_id, "on": "agent", "options": options}
    if scorer_id in scorers.registry():
        built = _build(scorer_id)
        if getattr(built, "requires_ground_truth", False):
            rule["ground_truth"] = "app.expected"
        if getattr(built, "run_inputs", ()):
            rule["inputs"] = {name: f"app.{name}" for name in built.run_inputs}
    text = ('exporter: {endpoint: "http://127.0.0.1:1"}\n'
            "judge: {model: openai/never-called}\n"
            f"rules:\n  - {json.dumps(rule)}\n")
    assert tracescore.serve.parse(text, toml=False).rules[0].scorer == scorer_id
    path = tmp_path / "serve.yaml"
    path.write_text(text)
    code = tracescore.cli.main(["serve", "--config", str(path), "--check"])
    return code, capsys.readouterr().err


def test_serve_accepts_every_scorer_id_the_command_line_accepts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TRACESCORE_JUDGE_MODEL", raising=False)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))  # eval adds the target's dir
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "data.jsonl").write_text(
        '{"input": "capital of France?", "ground_truth": "Paris", "context": ["Paris."]}\n')

    assert tracescore.cli.main(["scorers"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == list(scorers.ids())

    candidates = sorted({*CONTRACT_IDS, *listed, "no-such-scorer"})
    accepted = []
    for scorer_id in candidates:
        code, err = _eval(tmp_path, scorer_id, capsys)
        if f"unknown scorer {scorer_id!r}" in err:
            assert code == 2
            continue
        accepted.append(scorer_id)
        # Whatever eval made of it next (a run, a missing judge or input, options the command
        # line cannot give), serve's file builds it, with the options it needs.
        code, err = _serve_check(tmp_path, scorer_id, REQUIRED.get(scorer_id, {}), capsys)
        assert code == 0, (scorer_id, err)
    # The command's list is what eval accepts; the id that exists nowhere is refused by both.
    assert accepted == listed
    code, err = _serve_check(tmp_path, "no-such-scorer", {}, capsys)
    assert code == 2 and "rules[0].scorer: unknown scorer 'no-such-scorer'; known: " in err
    assert re.search(r"known: .*tool-call-accuracy, tool-call-accuracy-code", err), err
