"""The LLM judge: the only part of tracescore that talks to litellm.

litellm and pydantic are imported lazily, on the first judge call, so ``import tracescore``
and ``import tracescore.scorers`` stay light. The package, one module per idea:

- ``judge``: ``Judge`` (options, validation, ``acomplete``);
- ``resolve``: which judge a scorer uses (``resolve_judge``, ``check_model_spec``);
- ``calls``: one logical call: retries, structured-output fallback, the repair retry;
- ``failures``: classifying failures and mapping them to tracescore's exceptions;
- ``cache``: the request cache and single flight;
- ``output``: structured output: response formats, prompts, parsing answers;
- ``metrics``: cost and the GenAI client metrics of each call;
- ``transport``: in-process litellm or the child process, and their end at exit;
- ``direct``: the OpenAI chat-completions client (aiohttp);
- ``limit``: the judge's own limit on calls in flight and the queue the others wait in;
- ``process``: the child process (``python -m tracescore._judge.process``);
- ``loading``: importing litellm on first use;
- ``scrub``: keeping secrets out of messages, reprs and cache keys;
- ``reply``: ``JudgeReply``.

Every call runs on the one tracescore loop (``tracescore._core.loop``). An exit hook registered
here, when ``import tracescore`` first imports the judge and so before ``configure()``
registers its own exit flush, stops that loop and the child process: exit hooks run last-in
first-out, so the final flush still has a judge.
"""

from __future__ import annotations

import atexit

from tracescore._core.loop import run_blocking

from . import transport
from .cache import JudgeCacheInfo
from .judge import Judge
from .loading import load_litellm
from .reply import JudgeReply
from .resolve import check_model_spec, resolve_judge

__all__ = [
    "Judge",
    "JudgeCacheInfo",
    "JudgeReply",
    "check_model_spec",
    "load_litellm",
    "resolve_judge",
    "run_blocking",
]

# What tracescore._setup.config._preload_judge calls; that module's owner is moving it to
# load_litellm, after which this alias goes.
_litellm = load_litellm

atexit.register(transport.stop)
