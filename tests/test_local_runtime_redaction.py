"""``local_runtime(redaction=...)``: a local runtime redacts with its own patterns (and
callback), as ``configure(redaction=...)`` does for the process; neither runtime applies the
other's. Checked on what each runtime exports: a captured input, an exception's message (both
redacted as the call records them), an attribute user code sets (redacted on the export path)
and a score's explanation (redacted by the scoring job)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace

import tracescore
from tracescore.scorers import create_scorer
from tracescore.testing import CaptureScores, local_runtime

GLOBAL_SECRET = "GLOBAL-48151623"
FIRST_SECRET = "FIRST-27182818"
SECOND_SECRET = "SECOND-31415926"
SECRETS = (GLOBAL_SECRET, FIRST_SECRET, SECOND_SECRET)
TEXT = " ".join(SECRETS)


@tracescore.agent
def echo(text: str) -> str:
    trace.get_current_span().set_attribute("app.note", text)
    if text == "raise":
        raise ValueError(f"failed with {TEXT}")
    return text


def _echo_rule() -> tracescore.ScoringRule:
    scorer = create_scorer(id="echo", generate_score=lambda run: 1.0,
                           generate_reason=lambda run: f"the output was {run.output}")
    return tracescore.ScoringRule(scorer=scorer, on="agent")


def _patterns(secret: str) -> tracescore.RedactionOptions:
    return tracescore.RedactionOptions(patterns=[secret.split("-")[0] + r"-\d+"])


def _texts(spans: list[Any]) -> dict[str, list[str]]:
    """The texts holding a planted secret (or what is left of one) that a runtime exported,
    by where they were: each kind must be there."""
    texts: dict[str, list[str]] = {}

    def add(kind: str, text: Any) -> None:
        if isinstance(text, str) and ("[REDACTED]" in text or any(s in text for s in SECRETS)):
            texts.setdefault(kind, []).append(text)

    for span in spans:
        for key in ("input.value", "output.value", "app.note"):
            add(key, span.attributes.get(key))
        for event in span.events:
            add("exception.message", event.attributes.get("exception.message"))
            add("explanation", event.attributes.get("gen_ai.evaluation.explanation"))
    return texts


def _check(texts: dict[str, list[str]], own: str) -> None:
    """Every text has the runtime's own secret redacted and the others' kept."""
    assert sorted(texts) == ["app.note", "exception.message", "explanation", "input.value",
                             "output.value"], texts
    for text in (t for kind in texts.values() for t in kind):
        assert own not in text, text
        assert "[REDACTED]" in text, text
        for other in SECRETS:
            if other != own:
                assert other in text, (other, text)


def test_each_runtime_redacts_with_its_own_patterns_only(capscore: CaptureScores) -> None:
    capscore.configure(scoring=[_echo_rule()], redaction=_patterns(GLOBAL_SECRET))
    first = local_runtime(scoring=[_echo_rule()], redaction=_patterns(FIRST_SECRET))
    second = local_runtime(scoring=[_echo_rule()], redaction=_patterns(SECOND_SECRET))
    try:
        for runtime in (first, second):
            with runtime.activate():
                echo(TEXT)
                with pytest.raises(ValueError, match=FIRST_SECRET):  # the user's own, untouched
                    echo("raise")
        echo(TEXT)
        with pytest.raises(ValueError):
            echo("raise")
        _check(_texts(first.spans()), FIRST_SECRET)
        _check(_texts(second.spans()), SECOND_SECRET)
        _check(_texts(capscore.spans()), GLOBAL_SECRET)
    finally:
        first.shutdown()
        second.shutdown()


def test_the_environment_patterns_and_a_callback_apply_as_in_configure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_REDACT_PATTERNS", r"SECOND-\d+")
    seen: list[str] = []

    def callback(text: str) -> str:
        seen.append(text)
        return text.replace("GLOBAL", "G*")

    redaction = tracescore.RedactionOptions(patterns=[r"FIRST-\d+"], callback=callback)
    with local_runtime(redaction=redaction) as local:
        echo(TEXT)
    (span,) = local.spans()
    assert span.attributes["app.note"] == "G*-48151623 [REDACTED] [REDACTED]"
    assert seen
    with local_runtime() as plain:  # the environment's patterns, with no option given
        echo(TEXT)
    (span,) = plain.spans()
    assert span.attributes["app.note"] == f"{GLOBAL_SECRET} {FIRST_SECRET} [REDACTED]"


def test_a_bad_redaction_option_fails_early() -> None:
    with pytest.raises(tracescore.ConfigurationError, match="RedactionOptions"):
        local_runtime(redaction={"patterns": ["x"]})  # type: ignore[arg-type]
