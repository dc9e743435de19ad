"""The conversation, session and user a turn belongs to (issue 24).

``tracescore.conversation(...)`` puts ``gen_ai.conversation.id`` (and ``session.id``,
``user.id`` when given) in a context variable; every span started inside it, by tracescore's
decorators, ``tracescore.span(...)`` or another instrumentation whose spans pass through
tracescore's processor, carries them as attributes, and so do the scores of those spans. A
context variable, so ``asyncio`` tasks and ``tracescore.bind_context`` carry it as they carry the
current span. It stays in this process: it is not put in OpenTelemetry baggage, which would send
a user id along with every outgoing request.

The ids are redacted and cut to 256 characters here (``tracescore._core.redact.bounded_text``), so
that every signal carries the same bounded value. Imports nothing of tracescore's but
``_semconv``, ``_errors`` and ``_redact`` (standard library only).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from typing import Any

from tracescore._core import semconv as sc
from tracescore._core.errors import ConfigurationError
from tracescore._core.redact import MAX_NAME_LENGTH, bounded_text

_current: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "tracescore_conversation", default=None
)


def current() -> Mapping[str, str] | None:
    """The attributes of the conversation around the caller, or None outside one."""
    return _current.get()


@contextlib.contextmanager
def conversation(conversation_id: str | None = None, *, session_id: str | None = None,
                 user_id: str | None = None) -> Iterator[Mapping[str, str]]:
    """Mark every span started inside the block as part of one conversation turn.

    Spans started in the block (tracescore's decorators and ``tracescore.span``, and the spans
    of other instrumentations that pass through tracescore's span processor) get
    ``gen_ai.conversation.id`` (the OpenTelemetry GenAI conventions' attribute) and, when given,
    ``session.id`` and ``user.id``. Their scores carry the same attributes on the
    ``gen_ai.evaluation.result`` event and log record, and a ``ScoringRule(attributes={...})``
    can select on them. Score metrics do not carry them: ids are unbounded, and a metric's
    attributes must not be (use the score's exemplar, which links to the trace).

    Blocks nest: an inner block overrides the ids it is given and keeps the others. ``asyncio``
    tasks started inside inherit them; threads do through ``tracescore.bind_context``.

    Args:
        conversation_id: the conversation (thread, chat) the turn belongs to.
        session_id: the user's session, when the application has one.
        user_id: the end user. It is written on spans and scores as given: pass a pseudonymous
            id if the user's identity must not reach your backend.

    Each id is cut to 256 characters and redacted like every string tracescore writes (a
    credential passed as an id goes out as ``[REDACTED]``).

    Yields:
        The attributes in force inside the block.

    Raises:
        ConfigurationError: an id that is not a string (backends compare ids as strings).

    Examples:
        >>> with tracescore.conversation("chat-42", user_id="u-7"):
        ...     answer("How do I reset my password?")
    """
    given = {sc.GEN_AI_CONVERSATION_ID: conversation_id, sc.SESSION_ID: session_id,
             sc.USER_ID: user_id}
    for key, value in given.items():
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(f"tracescore.conversation(): {key} takes a string, "
                                     f"got {type(value).__name__}")
    outer = _current.get() or {}
    attributes = {**outer, **{k: bounded_text(v, MAX_NAME_LENGTH)
                              for k, v in given.items() if v}}
    token = _current.set(attributes or None)
    try:
        yield dict(attributes)
    finally:
        _current.reset(token)


def with_conversation(attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    """``attributes`` plus the conversation's (for ``start_span``); the same mapping when
    there is no conversation around."""
    extra = _current.get()
    if not extra:
        return attributes
    return {**attributes, **extra}
