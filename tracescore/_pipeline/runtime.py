"""The runtime: everything one configuration built, in one object.

``configure()`` resolves its options and builds the parts (tracer, scoring processor, writers,
destinations, telemetry), then installs them in the process's ``RUNTIME`` with one call
(``Runtime.install``); ``tracescore serve`` builds a ``Runtime`` of its own for its pipeline.
The decorators read the runtime current in the calling context on every call (``current()``):
``RUNTIME``, unless a block made another one current with ``Runtime.activate()`` (a runtime
configured but not installed, ``tracescore.testing.local_runtime``). A scoring job reads the
runtime it runs for there too: its engine makes it current in each task that runs its jobs
(``run_jobs_for``), so the judge takes its default judge and telemetry, and the scorers' call
site its input caps, from a service's own runtime in ``tracescore serve``. No module writes
another module's globals.

Only the standard library, ``_core.redact``, ``_env``, ``_console``, ``_input_caps``,
``_options`` and ``_readers`` are imported, so every module may read the runtime.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from tracescore._core import redact as _redact
from tracescore._pipeline.input_caps import InputCaps
from tracescore._readers import READERS, Reader
from tracescore._setup import console as _console
from tracescore._setup import env as _env
from tracescore._setup.options import ContentOptions, LimitsOptions


class Runtime:
    """One configuration's parts. Until ``configure()`` runs, ``RUNTIME`` holds the
    environment's defaults, so decorators used without it honour the environment too.

    Attributes:
        tracer: the tracer the decorators use; None: the global provider's.
        capture: whether the decorators put content on spans (``ContentOptions.capture``).
        max_length: characters kept per captured value (``ContentOptions.max_length``).
        price_file: the user's price table added to the shipped one
            (``ContentOptions.price_file``), or None.
        disabled: ``TRACESCORE_DISABLED``: every decorator is a pass-through.
        scoring: whether scoring rules are configured (the decorators then keep each call's
            full values in a ``CallRecord`` for the span's reading).
        picks: whether a trace may be scored, by its trace id (the processor's sampling
            decision, shared); None: any trace may be (a rule scores every failure).
        judge: the default judge of LLM scorers given no ``model=`` (a ``tracescore.Judge``),
            or None.
        caps: what one scorer run is given (``LimitsOptions.max_scoring_*``).
        readers: the span readers the processor asks, in order.
        telemetry: score metrics and log records (``_telemetry.Telemetry``), or None.
        processor: the scoring span processor, or None.
        ending: the ``CallRecord`` of each decorated call whose ``span.end()`` is running, by
            ``(trace_id, span_id)``: the decorator adds it before ``end()`` and removes it after,
            and the processor's ``on_end`` (inside ``end()``) reads the span through it.
        raise_internal_errors: a debugging switch: nothing in tracescore or its tests sets it.
            True makes the decorators re-raise their own internal failures instead of logging
            them; the user's exceptions pass through either way.
        instance: the ``tracescore.Tracescore`` the last ``configure()`` installed here (what
            ``force_flush``, ``shutdown``, ``stats`` and the exit hooks act on), or None.
        shut_down: the instance ``shutdown()`` last took out, whose final counters ``stats()``
            gives until the next ``configure()`` (spans that pass its provider later are
            counted there as dropped at shutdown), or None.
        console: what tracescore prints on its own (``tracescore._setup.console.Console``):
            the process's runtime has one, a service's none.
        redactor: the ``Redactor`` of this runtime's patterns, callback and counters
            (``RUNTIME``'s is ``tracescore._core.redact.PROCESS``, which every path outside a
            service uses; a service's is its own).
    """

    def __init__(self, redactor: _redact.Redactor | None = None, console: Any = None) -> None:
        content = ContentOptions().resolve()
        self.redactor = redactor if redactor is not None else _redact.Redactor()
        self.console = console
        self.instance: Any = None
        self.shut_down: Any = None
        self.tracer: Any = None
        self.capture: bool = bool(content.capture)
        self.max_length: int = int(content.max_length or 0)
        self.price_file: str | None = content.price_file
        self.disabled: bool = _env.disabled()
        self.scoring: bool = False
        self.picks: Any = None
        self.judge: Any = None
        self.caps: InputCaps = InputCaps.from_env()
        self.readers: tuple[Reader, ...] = READERS
        self.telemetry: Any = None
        self.processor: Any = None
        self.ending: dict[tuple[int, int], Any] = {}
        self.raise_internal_errors: bool = False

    def install(self, *, tracer: Any, content: ContentOptions, limits: LimitsOptions,
                judge: Any, processor: Any, telemetry: Any, disabled: bool) -> None:
        """Put a new configuration's parts in place (plain attribute writes: a decorator
        running meanwhile sees either configuration's values, never a broken one).

        Args:
            tracer: the decorators' tracer.
            content: resolved content options.
            limits: resolved limits (the scorer input caps are taken from them).
            judge: the default judge, or None.
            processor: the scoring span processor (its ``trace_picks`` and rules are read).
            telemetry: the telemetry of score metrics and judge calls, or None.
            disabled: ``TRACESCORE_DISABLED``.
        """
        self.judge = judge
        self.capture = bool(content.capture)
        self.max_length = int(content.max_length or 0)
        self.price_file = content.price_file
        self.set_limits(limits)
        self.processor = processor
        self.picks = processor.trace_picks if processor is not None else None
        self.scoring = bool(processor is not None and processor.rules)
        self.telemetry = telemetry
        self.disabled = disabled
        self.tracer = tracer

    def set_limits(self, limits: LimitsOptions) -> None:
        """Take the scorer input caps from resolved ``limits`` (``max_scoring_*``)."""
        self.caps = InputCaps(max_length=int(limits.max_scoring_length or 0),
                              max_documents=int(limits.max_scoring_documents or 0),
                              max_document_length=int(limits.max_scoring_document_length or 0))

    def add_reader(self, reader: Reader) -> None:
        """Ask ``reader`` first from the next ``configure()`` on (a new span source: see
        ``tracescore._readers``). The generic reader stays last.

        Raises:
            TypeError: ``reader`` lacks a member of the ``Reader`` protocol.
        """
        if not isinstance(reader, Reader):
            raise TypeError(f"{type(reader).__name__} is not a tracescore Reader (needs name, "
                            "accepts, kind, observe, read)")
        self.readers = (reader, *self.readers)

    def remove_reader(self, reader: Reader) -> None:
        """Undo ``add_reader`` (from the next ``configure()`` on); unknown readers are
        ignored."""
        self.readers = tuple(r for r in self.readers if r is not reader)

    def stop_scoring(self) -> None:
        """After ``shutdown()``: decorators keep no records and judge calls no metrics."""
        self.scoring = False
        self.telemetry = None

    @contextlib.contextmanager
    def activate(self) -> Iterator[Runtime]:
        """Make this runtime the current one for a ``with`` block: decorated calls and
        ``tracescore.span`` blocks that start inside it (on this thread or task, and in the tasks
        and context copies it starts) use its tracer and settings instead of ``RUNTIME``'s, and
        what they redact as they record it (messages, exceptions, captured values) is redacted
        by its redactor. Blocks nest; leaving one restores what was current before."""
        token = _active.set(self)
        try:
            with _redact.using(self.redactor):
                yield self
        finally:
            _active.reset(token)


#: The process's runtime: what ``configure()`` sets up and the decorators read.
RUNTIME = Runtime(_redact.PROCESS, _console.Console())

# The runtime a ``Runtime.activate()`` block, or an engine running its jobs, made current in
# this context, if any (asyncio copies the context into the tasks a task starts: a job's judge
# calls see its runtime).
_active: ContextVar[Runtime | None] = ContextVar("tracescore_runtime", default=None)


def current() -> Runtime:
    """The runtime of the calling context: the one ``Runtime.activate()`` made current here,
    or the one whose engine runs the scoring job of this task, else ``RUNTIME`` (one
    context-variable read: the decorators call it once per call)."""
    return _active.get() or RUNTIME


def run_jobs_for(runtime: Runtime | None) -> None:
    """Make ``runtime`` current for the rest of the calling task (an engine's job consumer;
    asyncio gives each task its own context, so no other task sees it), and its redactor."""
    _active.set(runtime)
    _redact.use_for_task(runtime.redactor if runtime is not None else None)
