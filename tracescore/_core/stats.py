"""The counters ``tracescore.stats()`` returns."""

from __future__ import annotations

from dataclasses import dataclass, field

# Why a span never reached the backend (``Stats.spans_dropped`` keys, the
# ``tracescore.spans.dropped`` metric's ``tracescore.drop.reason``).
SPAN_DROP_CAUSES = ("queue_full", "export_failed", "too_large", "shutdown")


def _no_drops() -> dict[str, int]:
    return dict.fromkeys(SPAN_DROP_CAUSES, 0)


# What a destination besides the span exporter did not deliver (``Stats.not_sent`` keys).
NOT_SENT_KINDS = ("log_records", "metric_points", "annotations")


def _nothing_unsent() -> dict[str, int]:
    return dict.fromkeys(NOT_SENT_KINDS, 0)


# What the retry spool would not take from a folder left by another process
# (``Stats.spool_refused`` keys).
SPOOL_REFUSED_KINDS = ("folders", "files")


def _nothing_refused() -> dict[str, int]:
    return dict.fromkeys(SPOOL_REFUSED_KINDS, 0)


@dataclass
class Stats:
    """Counters of one configured tracescore instance since ``configure()``.

    Attributes:
        spans_exported: spans the exporter accepted (carrier spans included): for OTLP, spans
            the backend answered for with success.
        spans_dropped: spans that will never reach the backend, by cause: ``queue_full`` (the
            export queue's byte bound was reached), ``export_failed`` (the exporter failed and
            the retry spool could not keep them: off, full, expired or unwritable),
            ``too_large`` (a span that could not be cut to fit one request) and ``shutdown``
            (still queued or spooled when tracescore shut down). Every cause is always present.
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
        not_sent: what the destinations besides the span exporter did not deliver, as of
            this snapshot: ``log_records`` (score log records emitted into tracescore's own
            logs provider and not accepted by its exporter: failed, cut off at a flush or
            shutdown deadline, dropped by a full queue, or still waiting), ``metric_points``
            (data points of tracescore's own metrics exports that failed or were cut off),
            ``annotations`` (Phoenix annotations dropped or failed). Every key is always
            present; 0 where tracescore owns no such destination.
        spool_refused: what the retry spool would not adopt from the spool folders of
            processes that ended on the same directory: ``folders`` (left alone: not owned by
            this user or not mode 0700) and ``files`` (dropped unread: larger than a batch can
            be, not a regular file of this user, or not decodable, so their spans are unknown
            and not in ``spans_dropped``). Both keys always present.
    """

    spans_exported: int = 0
    spans_dropped: dict[str, int] = field(default_factory=_no_drops)
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
    not_sent: dict[str, int] = field(default_factory=_nothing_unsent)
    spool_refused: dict[str, int] = field(default_factory=_nothing_refused)

    def __post_init__(self) -> None:
        # Snapshots are made with Stats(**vars(live)): each gets its own dict.
        self.spans_dropped = {**_no_drops(), **self.spans_dropped}
        self.not_sent = {**_nothing_unsent(), **self.not_sent}
        self.spool_refused = {**_nothing_refused(), **self.spool_refused}

    def clear(self) -> None:
        """Every counter back to 0, in place (the holders of this instance keep it): a child
        process after ``fork()`` counts its own work, not what the parent had done."""
        fresh = Stats()
        for name, value in vars(fresh).items():
            setattr(self, name, value)

    def count_export(self, outcome: str, spans: int) -> None:
        """Add ``spans`` to ``spans_exported`` (``outcome="exported"``) or to the drop cause
        ``outcome``. The caller holds whatever lock guards this instance."""
        if outcome == "exported":
            self.spans_exported += spans
        else:
            self.spans_dropped[outcome] = self.spans_dropped.get(outcome, 0) + spans
