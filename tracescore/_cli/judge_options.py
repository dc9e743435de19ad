"""The judge options every ``tracescore`` subcommand that judges takes: ``--judge MODEL``,
``--judge-api-base URL`` (an OpenAI-compatible server of one's own: llama.cpp, vLLM, Ollama,
LM Studio, a proxy), ``--judge-response-format`` and ``--judge-timeout``.

litellm's own variables keep working instead of the flags: ``OPENAI_API_BASE`` and
``OPENAI_API_KEY`` for ``openai/<model>``, each provider's key variable for the others.
"""

from __future__ import annotations

import argparse
from typing import Any

from tracescore._judge.output import RESPONSE_FORMATS

# litellm's OpenAI provider refuses to call without a key; a local server takes any.
_PLACEHOLDER_KEY = "none"


def add_judge_options(parser: argparse.ArgumentParser, *, default_help: str) -> None:
    """Add ``--judge``, ``--judge-api-base``, ``--judge-response-format`` and
    ``--judge-timeout`` to ``parser``.

    Args:
        parser: a subcommand's parser.
        default_help: what ``--judge`` defaults to, for its help text.
    """
    parser.add_argument(
        "--judge", metavar="MODEL",
        help=f"litellm model string of the judge for LLM scorers (default: {default_help}); "
        "with --judge-api-base a bare name means openai/NAME",
    )
    parser.add_argument(
        "--judge-api-base", metavar="URL",
        help="base URL of an OpenAI-compatible judge server, e.g. http://127.0.0.1:8080/v1 "
        "(llama.cpp, vLLM, Ollama's /v1, LM Studio); the key is OPENAI_API_KEY when set, else "
        "none (default: litellm's OPENAI_API_BASE, or the provider's own endpoint)",
    )
    parser.add_argument(
        "--judge-response-format", choices=RESPONSE_FORMATS, default="auto",
        help="structured output to ask the judge for (default auto: json_schema, falling back "
        "as the server refuses; json_object suits llama.cpp's server)",
    )
    parser.add_argument(
        "--judge-timeout", type=float, default=None, metavar="SECONDS",
        help="seconds per judge call (default 60; a local model on a CPU may need minutes)",
    )


def judge_from_args(args: argparse.Namespace) -> Any:
    """The ``tracescore.Judge`` the options describe, or None when they name no model and no
    server (scorers then use the configured judge or ``TRACESCORE_JUDGE_MODEL``).

    Raises:
        ConfigurationError: an option is invalid (``Judge`` says which).
    """
    from tracescore._core.errors import ConfigurationError
    from tracescore._judge import Judge
    from tracescore._setup import env as _env

    model = args.judge or None
    options: dict[str, Any] = {"response_format": args.judge_response_format}
    if args.judge_timeout is not None:
        options["timeout"] = args.judge_timeout
    if args.judge_api_base:
        model = model or _env.judge_model()
        if not model:
            raise ConfigurationError(
                "--judge-api-base needs the model's name too: --judge NAME (the name the server "
                "serves, e.g. its --model_alias) or TRACESCORE_JUDGE_MODEL"
            )
        if "/" not in model:
            model = f"openai/{model}"
        options["api_base"] = args.judge_api_base
        if model.startswith("openai/"):
            options["api_key"] = _env.provider_setting("OPENAI_API_KEY") or _PLACEHOLDER_KEY
    elif model is None and (args.judge_response_format != "auto" or "timeout" in options):
        model = _env.judge_model()
    if model is None:
        return None
    return Judge(model, **options)
