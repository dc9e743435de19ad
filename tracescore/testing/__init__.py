"""Testing kit: check what your agent's spans and scores look like, without a real model.

* ``InMemoryScoreExporter``: a ``SpanExporter`` keeping spans in memory, with readers for their
  ``gen_ai.evaluation.result`` events, scores by scorer id, and spans as plain dicts.
* ``ScriptedJudge``: a real OpenAI chat-completions server on loopback, scripted per
  structured-output schema or prompt text, recording every request; ``make_judge`` points a
  ``tracescore.Judge`` at it (litellm reaches it over HTTP, so the whole path runs).
* ``SequentialIdGenerator``: trace and span ids 1, 2, 3, ..., for whole-span comparisons.
* ``CaptureScores``: all three wired into ``tracescore.configure`` for one test.
* pytest fixtures, loaded automatically when tracescore is installed (entry point
  ``pytest11``): ``capscore`` (a ``CaptureScores``), ``scripted_judge`` and
  ``tracescore_evals`` (an ``EvalRunner``).
* ``assert_passed``: an evaluation passed, or an assertion message with the per-scorer table.
* ``local_runtime()``: tracescore configured but not installed (as logfire's
  ``configure(local=True)``): a ``LocalRuntime`` with its own provider, rules and exporter, used
  by decorated code inside ``with runtime.activate():`` only; ``configure()``'s configuration
  and the global providers are untouched, so tests in one process cannot see each other's spans.
* ``runtime()``: the one test hook into tracescore's internals: the process's runtime, the
  object ``configure()`` fills (``processor``, ``readers`` with ``add_reader``/``remove_reader``,
  ``telemetry``, ``judge``, ``caps``). For tests of tracescore itself and of new readers; not a
  stable API.

Examples:
    >>> def test_answer_is_scored(capscore):
    ...     capscore.judge.route("answer_relevancy_statements", {"statements": ["Paris."]})
    ...     capscore.judge.route("answer_relevancy_verdicts",
    ...                          {"results": [{"result": "yes", "reason": "on topic"}]})
    ...     capscore.judge.route("answer_relevancy_reason", {"reason": "Direct."})
    ...     capscore.configure(scoring=[tracescore.ScoringRule(
    ...         scorer=create_answer_relevancy_scorer(), on="agent")])
    ...     answer("What is the capital of France?")
    ...     assert capscore.scores() == {"answer-relevancy": [1.0]}

Importing this package imports neither litellm nor pydantic.
"""

from importlib.util import find_spec as _find_spec
from typing import Any

from ._capture import CaptureScores
from ._eval_helpers import EvalRunner, assert_passed, failure_message
from ._exporter import InMemoryScoreExporter, evaluation_events, span_as_dict
from ._ids import SequentialIdGenerator
from ._judge_server import (
    SCRIPTED_JUDGE_API_KEY,
    Reply,
    ScriptedJudge,
    make_judge,
    prompt_of,
    schema_name_of,
)
from ._local import LocalRuntime, local_runtime


def runtime() -> Any:
    """The process's ``tracescore._pipeline.runtime.Runtime``: what ``configure()`` built (its
    scoring
    processor, span readers, telemetry, default judge, scorer input caps).

    This is the one documented seam into tracescore's internals for tests (of tracescore
    itself, or of a new span reader: ``runtime().add_reader(reader)`` before ``configure()``).
    Its attributes may change between releases.

    Examples:
        >>> tracescore.testing.runtime().add_reader(AcmeReader())
        >>> tracescore.configure(scoring=[...])
    """
    from tracescore._pipeline.runtime import RUNTIME

    return RUNTIME


if _find_spec("pytest") is not None:  # without pytest, everything above still works
    from ._plugin import capscore, scripted_judge, tracescore_evals

__all__ = [
    "SCRIPTED_JUDGE_API_KEY",
    "CaptureScores",
    "EvalRunner",
    "InMemoryScoreExporter",
    "LocalRuntime",
    "Reply",
    "ScriptedJudge",
    "SequentialIdGenerator",
    "assert_passed",
    "capscore",
    "evaluation_events",
    "failure_message",
    "local_runtime",
    "make_judge",
    "prompt_of",
    "runtime",
    "schema_name_of",
    "scripted_judge",
    "span_as_dict",
    "tracescore_evals",
]
