"""The counters ``tracescore.stats()`` returns."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Stats:
    """Counters of one configured tracescore instance since ``configure()``.

    Attributes:
        spans_exported: spans handed to the export processor (carrier spans included).
        spans_scored: spans that had at least one scoring job.
        spans_held: spans waiting for their scores right now.
        scores_attached: ``gen_ai.evaluation.result`` events on their scored span.
        scores_late: events that missed their span's deadline and went out on a carrier span.
        scores_not_scorable: events labelled ``not_scorable``.
        scoring_errors: events carrying ``error.type``.
        skipped_queue_full: scoring jobs refused because the queue was full.
        skipped_held_full: scoring jobs skipped because ``max_held_spans`` spans were held.
        skipped_rate_limited: scoring jobs skipped by a rule's ``max_per_minute``.
        skipped_budget: scoring jobs skipped by a rule's hourly judge budget.
        deadline_exports: spans exported before every score was in, by their
            ``score_timeout`` or by a ``force_flush``/``shutdown`` deadline.
        jobs_dropped: scoring jobs accepted that never finished because tracescore shut down
            (cancelled, or never started).
        trace_buffer_evictions: traces whose remembered documents and tool calls were evicted
            from the trace buffer to keep it within its bounds (by trace count, by bytes, or
            items per trace); a context scorer on such a trace sees fewer documents.
    """

    spans_exported: int = 0
    spans_scored: int = 0
    spans_held: int = 0
    scores_attached: int = 0
    scores_late: int = 0
    scores_not_scorable: int = 0
    scoring_errors: int = 0
    skipped_queue_full: int = 0
    skipped_held_full: int = 0
    skipped_rate_limited: int = 0
    skipped_budget: int = 0
    deadline_exports: int = 0
    jobs_dropped: int = 0
    trace_buffer_evictions: int = 0
