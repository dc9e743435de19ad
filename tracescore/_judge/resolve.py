"""Which judge a scorer uses: its own ``model=``, else the configured one, else the
environment's; and the early check of a factory's ``model=``.

A model string resolves to one shared ``Judge`` per process, so a provider's structured-output
fallback is learnt once and identical requests share one cache.
"""

from __future__ import annotations

import threading

from tracescore._core.errors import ConfigurationError, NoJudgeConfiguredError
from tracescore._pipeline import runtime as _runtime
from tracescore._setup import env as _env

from .judge import Judge
from .scrub import short_repr


def resolve_judge(model: str | Judge | None) -> Judge:
    """Return the judge to use, resolved at call time.

    Args:
        model: a ``Judge``, a litellm model string, or ``None`` for the default: the judge of
            the runtime the scoring job runs for (a service file's ``judge``, or the one set
            with ``tracescore.configure(judge=...)``), else ``TRACESCORE_JUDGE_MODEL``.

    Returns:
        A ``Judge``. The same string resolves to the same ``Judge`` object within a process, so
        a provider's structured-output fallback is learnt once.

    Raises:
        NoJudgeConfiguredError: ``model`` is ``None`` and no default judge is configured.
        ConfigurationError: ``model`` is neither a string nor a ``Judge``, or is empty.

    Examples:
        >>> resolve_judge("openai/gpt-4o-mini").model
        'openai/gpt-4o-mini'
    """
    if isinstance(model, Judge):
        return model
    if isinstance(model, str):
        return _judge_for(model)
    if model is not None:
        check_model_spec(model)
    default = _runtime.current().judge
    if isinstance(default, Judge):
        return default
    if isinstance(default, str) and default.strip():
        return _judge_for(default)
    env_model = _env.judge_model()
    if env_model:
        return _judge_for(env_model)
    raise NoJudgeConfiguredError(
        "no judge model configured for an LLM-judged scorer: pass model= to the scorer factory "
        "(e.g. model='openai/gpt-4o-mini'), configure(judge=...), or set TRACESCORE_JUDGE_MODEL"
    )


def check_model_spec(model: object) -> None:
    """Fail early when a factory's ``model=`` cannot name a judge.

    Args:
        model: what the factory was given.

    Raises:
        ConfigurationError: ``model`` is not ``None``, a ``Judge`` or a non-empty string.

    Examples:
        >>> check_model_spec("openai/gpt-4o-mini")
    """
    if model is None or isinstance(model, Judge):
        return
    if isinstance(model, str) and model.strip():
        return
    raise ConfigurationError(
        "model must be a litellm model string such as 'openai/gpt-4o-mini', a tracescore.Judge, "
        f"or None for the configured judge; got {type(model).__name__} {short_repr(model)}"
    )


_judges_by_model: dict[str, Judge] = {}
_judges_lock = threading.Lock()


def _judge_for(model: str) -> Judge:
    key = model.strip()
    with _judges_lock:
        judge = _judges_by_model.get(key)
        if judge is None:
            judge = _judges_by_model[key] = Judge(model)
        return judge
