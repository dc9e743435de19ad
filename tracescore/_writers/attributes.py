"""Scores as span attributes that backends can search (issue 12): the score as a number, the
label as a string, on the scored span (and on a late score's carrier span).

Span events are hard to query: Jaeger's tag search and TraceQL's ``span.`` scope read span
attributes, Honeycomb makes each one a column. So next to the ``gen_ai.evaluation.result``
event each score also becomes

- ``tracescore.score.<key>``: the score (float), e.g. ``{ span.tracescore.score.faithfulness
  < 0.5 }`` in TraceQL, ``tracescore.score.faithfulness < 0.5`` in Honeycomb;
- ``tracescore.label.<key>``: ``pass``/``fail``/``not_scorable``, e.g. the Jaeger tag search
  ``tracescore.label.faithfulness=fail``;
- ``tracescore.score_error.<key>``: the ``error.type`` when scoring failed.

``<key>`` is the scorer id with every character outside ``[a-z0-9_]`` replaced by ``_``
(``answer-relevancy`` -> ``answer_relevancy``): TraceQL reads a ``-`` in an unquoted name as a
minus sign, so the names stay usable without quoting. The GenAI semantic conventions define no
span attribute for scores (only the event), so the names live in tracescore's namespace rather
than squatting ``gen_ai.*``.
"""

from __future__ import annotations

import re
from typing import Any

from tracescore._core import semconv as sc
from tracescore._pipeline.request import ScoreOutcome

_UNSAFE = re.compile(r"[^a-z0-9_]")


def attribute_key(scorer_id: str) -> str:
    """The scorer id as it appears in attribute names: lowercase, ``[a-z0-9_]`` only.

    Examples:
        >>> attribute_key("answer-relevancy")
        'answer_relevancy'
    """
    return _UNSAFE.sub("_", scorer_id.lower()) or "_"


def span_attributes(outcome: ScoreOutcome) -> dict[str, Any]:
    """The searchable attributes of one score (see the module docstring)."""
    key = attribute_key(outcome.scorer_id)
    attrs: dict[str, Any] = {}
    if outcome.score is not None:
        attrs[sc.TRACESCORE_SCORE_PREFIX + key] = float(outcome.score)
    if outcome.label is not None:
        attrs[sc.TRACESCORE_LABEL_PREFIX + key] = outcome.label
    if outcome.error_type is not None:
        attrs[sc.TRACESCORE_SCORE_ERROR_PREFIX + key] = outcome.error_type
    return attrs
