"""The lean per-call path (issue 15, point 4) under odd input, reconfiguration and concurrency.

Each test here failed before the fix it names: the cheaper hot path must give the same results
as the plain one it replaced.
"""

from __future__ import annotations

from typing import Any

import pytest

import tracescore
from tracescore import _redact
from tracescore._serialize import to_json
from tracescore.scorers import create_scorer


@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    _redact.configure(None, None)
    tracescore.shutdown(2000)


# -- scorer steps on the loop or in the worker pool -------------------------------------------


def test_a_step_without_a_module_name_is_scored() -> None:
    # A function made by eval/exec in fresh globals has __module__ None (generated steps,
    # steps from a config file): it is a user's step, so it goes to the worker pool, and the
    # check must not fail on it.
    step = eval("lambda run: 0.5", {})  # noqa: S307 - the point of the test
    assert step.__module__ is None
    result = create_scorer(id="generated", generate_score=step).run(output="an answer")
    assert result.score == 0.5


# -- redact_name's memory ---------------------------------------------------------------------


def test_a_name_redacted_under_old_rules_is_not_remembered_under_new_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # configure() on one thread while another redacts a name: the name's redaction under the
    # old rules must not be kept in the memory of the new rules.
    _redact.configure(None, None)
    name = "customer_12345678"
    assert to_json({name: "x"}) == '{"customer_12345678": "x"}'  # not yet a secret
    _redact.configure(None, None)  # fresh rules: the name is not remembered yet
    real = _redact.redact_text
    swapped = False

    def redact_text(text: str) -> str:
        nonlocal swapped
        result = real(text)  # computed under the rules in force (no customer pattern)
        if text == name and not swapped:
            swapped = True
            # Meanwhile, on other threads: configure() adds a pattern, and a call redacts a
            # name under the new rules (which starts their memory).
            _redact.configure([r"customer_\d+"], None)
            assert _redact.redact_name("question") == "question"
        return result

    monkeypatch.setattr(_redact, "redact_text", redact_text)
    _redact.redact_name(name)
    monkeypatch.setattr(_redact, "redact_text", real)
    assert swapped
    assert _redact.redact_name(name) == _redact.REDACTED
    assert to_json({name: "x"}) == '{"[REDACTED]": "x"}'
