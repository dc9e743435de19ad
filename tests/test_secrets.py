"""No credential ever lands on a span, a log record, an error message or a judge prompt.

Each secret of issue 10 is planted in a decorated call; the test then greps every byte a real
OTLP receiver on loopback got (decoded and raw), every log line tracescore wrote (DEBUG) and
every request the scripted judge received. Two judges echo their credentials back in an error
body: the providers' key from the environment and the bare token of an ``Authorization``
header. One judge quotes its whole prompt back as its reason, so an argument named ``api_key``
sent to it would come back in the explanation.
"""

from __future__ import annotations

import collections
import functools
import json
import logging
from typing import Any

import pytest

import tracescore
from tests.otlp_receiver import HttpOtlpReceiver
from tracescore._core import redact as _redact
from tracescore._core.serialize import to_json
from tracescore.scorers import create_answer_relevancy_scorer
from tracescore.testing import ScriptedJudge
from tracescore.testing._judge_server import prompt_of

# Known formats (found by pattern) ...
OPENAI_IN_TEXT = "sk-proj-Tq3RkX8vN2mW7yL4pZ6cB1dF9hJ0gA5s"
GITHUB_IN_RETURN = "ghp_R2d2C3poBb8Yoda7Luke5Leia9Han0Solo1"
BEARER_IN_TUPLE = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFjZXNjb3JlIn0.c2lnbmF0dXJlLXNlY3JldA"
URL_PASSWORD = "Pg-Hunter2-Pass"
EXCEPTION_TOKEN = "xoxb-1234567890-QwErTyUiOpAsDf"
# ... and values with no recognisable format (found by their name, or as known values).
OPENAI_KEY_ARG = "Vq7Lm2Xp9Rt4Kw1Zs8Nb"
PARTIAL_KEY = "Hj6Pd3Qa8Mv1Yc5Tr2Ex"
NAMEDTUPLE_KEY = "Wg4Ns9Ub2Lk7Fo3Ia6Jd"
API_KEY_ARG = "Rz5Cy1Ho8Pq3Xm6Vt2Bn"
PASSWORD_ARG = "Correct-Horse-Battery-9"
TOKEN_ARG = "Tk9Sd4Fg7Hj2Kl5Zx8Cv"
EXCEPTION_KV_TOKEN = "Ex1Pq7Rt3Yu9Io5Ad2Sf"
ENV_KEY = "Nv3Ke8Yx5Lp1Wq7Zr4Ts"  # OPENAI_API_KEY, echoed by a judge
HEADER_TOKEN = "Hd7Rt2Bq9Xw4Mz6Lp1Ks"  # extra_headers={"Authorization": "Bearer <this>"}
JUDGE_KEY = "Jk2Vb8Nm4Qw6Er1Ty9Ui"  # the quoting judge's api_key

SECRETS = [
    OPENAI_IN_TEXT, GITHUB_IN_RETURN, BEARER_IN_TUPLE, URL_PASSWORD, EXCEPTION_TOKEN,
    OPENAI_KEY_ARG, PARTIAL_KEY, NAMEDTUPLE_KEY, API_KEY_ARG, PASSWORD_ARG, TOKEN_ARG,
    EXCEPTION_KV_TOKEN, ENV_KEY, HEADER_TOKEN, JUDGE_KEY,
]

Credentials = collections.namedtuple("Credentials", "user api_key")


def _connect(api_key: str) -> None:
    """A function a partial binds a key to."""


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Any:
    with HttpOtlpReceiver() as rec:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rec.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
        yield rec.received
        tracescore.shutdown(3000)


def _quoting_judge(server: ScriptedJudge) -> tracescore.Judge:
    """Answers every step; its reason quotes the whole prompt it was sent."""
    server.route("answer_relevancy_statements", {"statements": ["It answers."]})
    server.route("answer_relevancy_verdicts",
                 {"results": [{"result": "yes", "reason": "on topic"}]})
    server.route("answer_relevancy_reason",
                 lambda body: {"reason": "You sent me: " + prompt_of(body)})
    return tracescore.Judge("openai/quoting", api_base=server.api_base, api_key=JUDGE_KEY,
                            timeout=5, max_retries=0)


def _echoing_judge(server: ScriptedJudge) -> tracescore.Judge:
    """Fails every call with an error body that echoes the credentials it was sent: the
    environment's OPENAI_API_KEY (litellm's default) and the bare token of its header."""
    server.route("*", ScriptedJudge.Reply(status=401, body={"error": {
        "message": f"Incorrect API key provided: {ENV_KEY}. Header token {HEADER_TOKEN} "
                   f"is not valid either.", "type": "invalid_request_error"}}))
    return tracescore.Judge("openai/echoing", api_base=server.api_base, timeout=5,
                            max_retries=0,
                            extra_headers={"Authorization": f"Bearer {HEADER_TOKEN}"})


def _plant() -> None:
    """Every secret of issue 10, through decorated calls."""

    @tracescore.agent(name="free-text")
    def free_text(question: str) -> str:
        return f"Done. Your new token is {GITHUB_IN_RETURN}"

    @tracescore.agent(name="named")
    def named(question: str, openai_key: str, api_key: str, password: str, token: str,
              client: Any, creds: Any, headers: Any, dsn: str) -> str:
        return "The answer is 42."

    @tracescore.tool(name="deploy")
    def deploy(target: str) -> str:
        raise PermissionError(f"deploy refused: token={EXCEPTION_KV_TOKEN} revoked; "
                              f"slack said {EXCEPTION_TOKEN}")

    free_text(f"Please call the API with {OPENAI_IN_TEXT} and summarise.")
    named(
        "What is the answer?",
        openai_key=OPENAI_KEY_ARG,
        api_key=API_KEY_ARG,
        password=PASSWORD_ARG,
        token=TOKEN_ARG,
        client=functools.partial(_connect, api_key=PARTIAL_KEY),
        creds=Credentials("bob", NAMEDTUPLE_KEY),
        headers=[("Authorization", f"Bearer {BEARER_IN_TUPLE}")],
        dsn=f"postgresql://app:{URL_PASSWORD}@db.internal:5432/orders",
    )
    with pytest.raises(PermissionError):
        deploy("prod")


def _leaks(text: str | bytes) -> list[str]:
    if isinstance(text, bytes):
        return [s for s in SECRETS if s.encode() in text]
    return [s for s in SECRETS if s in text]


def test_no_planted_secret_reaches_the_backend_the_logs_or_the_judge(
    receiver: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tracescore")
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    with ScriptedJudge() as quoting_server, ScriptedJudge() as echoing_server:
        tracescore.configure(
            service_name="secrets",
            scoring=[
                tracescore.ScoringRule(
                    scorer=create_answer_relevancy_scorer(model=_quoting_judge(quoting_server)),
                    on="agent", sample_rate=1.0),
                tracescore.ScoringRule(
                    scorer=create_answer_relevancy_scorer(model=_echoing_judge(echoing_server)),
                    on="agent", sample_rate=1.0),
            ],
        )
        _plant()
        assert tracescore.force_flush(30_000)
        assert receiver.wait_for(lambda spans: len(spans) >= 3)

        # The planted values were really used: judged, echoed, quoted, recorded.
        agent_events = [attrs for span in receiver.spans for name, attrs in span.events
                        if name == "gen_ai.evaluation.result"]
        explanations = [a.get("gen_ai.evaluation.explanation", "") for a in agent_events]
        assert len(agent_events) == 4, explanations
        assert sum(e.startswith("You sent me:") for e in explanations) == 2
        assert sum("Incorrect API key provided: [REDACTED]" in e for e in explanations) == 2
        assert echoing_server.headers and all(
            h.get("authorization") == f"Bearer {HEADER_TOKEN}" for h in echoing_server.headers)
        assert all(h.get("authorization") == f"Bearer {JUDGE_KEY}"
                   for h in quoting_server.headers)
        (named,) = receiver.by_name("invoke_agent named")
        arguments = json.loads(named.attributes["input.value"])
        for name in ("openai_key", "api_key", "password", "token"):
            assert arguments[name] == "[REDACTED]"
        assert arguments["client"]["keywords"] == {"api_key": "[REDACTED]"}
        assert arguments["creds"] == {"user": "bob", "api_key": "[REDACTED]"}
        assert arguments["dsn"] == "postgresql://app:[REDACTED]@db.internal:5432/orders"
        (tool,) = receiver.by_name("execute_tool deploy")
        assert "token=[REDACTED]" in tool.events[0][1]["exception.message"]
        quoted = quoting_server.prompts
        assert any("What is the answer?" in p for p in quoted)

        # Every byte the backend got, decoded and raw.
        decoded = json.dumps([[s.name, s.attributes, s.events, s.resource]
                              for s in receiver.spans], default=str)
        assert _leaks(decoded) == []
        assert _leaks(receiver.raw_bytes()) == []
        # Every log line tracescore wrote.
        assert _leaks(caplog.text) == []
        assert _leaks("\n".join(r.getMessage() for r in caplog.records)) == []
        # Every prompt and request the judges received.
        for server in (quoting_server, echoing_server):
            assert _leaks("\n".join(server.prompts)) == []
            assert _leaks(json.dumps(server.requests)) == []


def test_exact_values_shorter_than_the_minimum_are_not_matched() -> None:
    _redact.remember(["short1"])  # would turn every "short1" in ordinary text into a marker
    assert _redact.redact_text("the short1 answer") == "the short1 answer"


@pytest.mark.parametrize(("text", "expected"), [
    ("key sk-ant-api03-AbCdEfGhIjKlMnOpQrSt here", "key [REDACTED] here"),
    ("aws AKIAIOSFODNN7EXAMPLE", "aws [REDACTED]"),
    ("google AIzaSyA1234567890abcdefghijklmnopqrstu", "google [REDACTED]"),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe [REDACTED]"),
    ("hf hf_AbCdEfGhIjKlMnOpQrStUvWxYz12", "hf [REDACTED]"),
    ("pat github_pat_11ABCDEFG0123456789_abcdefghij", "pat [REDACTED]"),
    ("Authorization: Bearer abc.def-ghi_jkl", "Authorization: Bearer [REDACTED]"),
    ("authorization: bearer abcdefghijk", "authorization: bearer [REDACTED]"),
    ("redis://:s3cr3tpass@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"),
    ('{"client_secret": "abc"}', '{"client_secret": "[REDACTED]"}'),
    ("retry with password=hunter2", "retry with password=[REDACTED]"),
    ("Set-Cookie: session=abc123def", "Set-Cookie: [REDACTED]"),
    # Ordinary text stays as it was.
    ("task-management-dashboard-2024 ok", "task-management-dashboard-2024 ok"),
    ("Basic authentication is enabled", "Basic authentication is enabled"),
    ('{"max_tokens": 100, "author": "Ann"}', '{"max_tokens": 100, "author": "Ann"}'),
    ("Note: the time is 10:30", "Note: the time is 10:30"),
])
def test_credential_formats_in_free_text(text: str, expected: str) -> None:
    assert _redact.redact_text(text) == expected


def test_texts_skipped_as_quiet_are_those_the_rules_find_nothing_in() -> None:
    """The fast path (an ASCII text with no needle, no credential word, no disguise is not
    searched) never skips a text in which the full search finds something: texts made of
    pieces of credentials, their words in any case, disguises and plain prose, checked both
    ways against the full search."""
    import random

    pieces = ["sk-", "AbCdEfGhIjKlMnOpQrSt", "AKIA", "IOSFODNN7EXAMPLE", "eyJ", "hbGciOi.x.y",
              "Bearer ", "BASIC ", "Basic ", "pass", "PaSsWoRd", "=", ": ", "token", "TOKEN",
              "Key", "jwt", "PWD", "auth", "Cookie", "://", "user:", "@host", "%2D", "&#45;",
              "\\x2d", "\t", "\n", "\x1b[31m", "\x00", "-----BEGIN", " PRIVATE KEY-----",
              "the capital of France", " ", "_", "ghp_", "hf_", "1234567890", "xoxb-", "é",
              "Paris", " is ", "sunny", "42", ". ", ", ", "What", "weather"]
    rng = random.Random(7)
    rules = _redact.PROCESS.rules()
    quiet = found = 0
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
        plain = not _redact._find(_redact.PROCESS, rules, text) and not _redact._disguised(text)
        if _redact._quiet(rules, text):
            quiet += 1
            assert plain, text
            assert _redact.redact_text(text) is text
        found += not plain
    assert quiet > 1_000 and found > 1_000  # both kinds were drawn


@pytest.mark.parametrize(("name", "secret"), [
    ("openai_key", True), ("API-Key", True), ("apiKey", True), ("x-api-key", True),
    ("client_secret", True), ("DB_PASSWORD", True), ("passwd", True), ("access_token", True),
    ("Authorization", True), ("cookie", True), ("set-cookie", True), ("private_key", True),
    ("credentials", True), ("HF_TOKEN", True),
    ("max_tokens", False), ("prompt_tokens", False), ("token_count", False),
    ("sort_key", False), ("author", False), ("key", False), ("TOKENIZERS_PARALLELISM", False),
])
def test_key_name_rules(name: str, secret: bool) -> None:
    assert _redact.is_secret_key(name) is secret


def test_user_patterns_and_callback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_REDACT_PATTERNS", '["EMP-[0-9]{6}"]')
    tracescore.configure(exporter=False,
                         redaction=tracescore.RedactionOptions(
                             patterns=[r"ACME-\d{4}"],
                             callback=lambda text: text.replace("Alice", "[NAME]")))
    try:
        assert to_json("Alice has ACME-1234 and EMP-123456") == (
            '"[NAME] has [REDACTED] and [REDACTED]"')
    finally:
        tracescore.configure(exporter=False)
    assert to_json("Alice has ACME-1234") == '"Alice has ACME-1234"'


def test_a_raising_callback_redacts_the_whole_value_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(text: str) -> str:
        raise RuntimeError(f"cannot handle {text}")

    redactor = tracescore.testing.runtime().redactor  # configure()'s runtime counts it
    before = redactor.callback_failures
    warned = redactor._callback_warned
    redactor._callback_warned = False
    tracescore.configure(exporter=False, redaction=tracescore.RedactionOptions(callback=broken))
    try:
        with caplog.at_level(logging.WARNING, logger="tracescore"):
            assert to_json("first value") == '"[REDACTED]"'
            assert to_json("plain text") == '"[REDACTED]"'
    finally:
        tracescore.configure(exporter=False)
        redactor._callback_warned = warned
    assert redactor.callback_failures > before
    warnings = [r for r in caplog.records if "redact callback" in r.getMessage()]
    assert len(warnings) == 1
    assert "plain text" not in caplog.text


def test_a_bad_pattern_is_a_configuration_error() -> None:
    with pytest.raises(tracescore.ConfigurationError, match="patterns"):
        tracescore.configure(exporter=False,
                             redaction=tracescore.RedactionOptions(patterns=["(unclosed"]))
