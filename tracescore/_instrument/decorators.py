"""The ``agent``, ``retrieval``, ``tool`` and ``llm`` decorators.

They turn a call into one OpenTelemetry span named and attributed as the GenAI semantic
conventions and OpenInference say, keep the wrapped function's signature, return value and
exceptions, and hand the call's full, untruncated input and output to scoring (when a scoring
rule is configured) through their ``CallRecord`` (``tracescore._instrument.calls``), which the
runtime's
table of ending calls shows the span processors while ``span.end()`` runs. They read the
configuration from one object, the runtime current when the call starts
(``tracescore._pipeline.runtime.current()``: the process's ``RUNTIME``, or one a block made
current), once per call, and never import scoring or the judge, so the hot path stays small.
"""

from __future__ import annotations

import functools
import inspect
import logging
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar, overload

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from tracescore._core import semconv as sc
from tracescore._core.errors import ConfigurationError
from tracescore._core.redact import redact_text
from tracescore._core.serialize import MAX_DOCUMENTS, to_documents, to_json, truncate, utf8_safe
from tracescore._core.suppress import is_suppressed
from tracescore._instrument import chat_messages as _chat_messages
from tracescore._instrument import usage as _usage
from tracescore._instrument.calls import CallRecord
from tracescore._instrument.conversation import with_conversation
from tracescore._pipeline.runtime import RUNTIME as _rt
from tracescore._pipeline.runtime import Runtime
from tracescore._pipeline.runtime import current as _current
from tracescore._setup import env as _env

logger = logging.getLogger("tracescore")

F = TypeVar("F", bound=Callable[..., Any])

# OpenInference's flattened documents cost three attributes each; past this many they would push
# the span's own attributes (its kind, its input) out of the SDK's 128-attribute limit.
_MAX_FLAT_DOCUMENTS = 32
# Innermost frames kept in an exception event's stack trace: an exception unwinding through N
# nested decorated calls is recorded N times, so each recording must cost O(1) frames.
_STACK_FRAMES = 32

_KINDS: dict[str, tuple[str, str, str]] = {
    # kind: (span name prefix / gen_ai.operation.name, openinference kind)
    "agent": (sc.OPERATION_INVOKE_AGENT, sc.OPERATION_INVOKE_AGENT, sc.OI_KIND_AGENT),
    "retrieval": (sc.OPERATION_RETRIEVAL, sc.OPERATION_RETRIEVAL, sc.OI_KIND_RETRIEVER),
    "tool": (sc.OPERATION_EXECUTE_TOOL, sc.OPERATION_EXECUTE_TOOL, sc.OI_KIND_TOOL),
    "llm": (sc.OPERATION_CHAT, sc.OPERATION_CHAT, sc.OI_KIND_LLM),
}


class _Spec:
    """Everything about a decorated function that is computed once, at decoration time."""

    __slots__ = (
        "kind",
        "name",
        "span_name",
        "span_kind",
        "attributes",
        "capture",
        "param_names",
        "simple_params",
        "signature",
        "skip_first",
        "agent_name",
        "model",
        "provider",
    )

    def __init__(
        self,
        kind: str,
        func: Callable[..., Any],
        name: str | None,
        capture_content: bool | None,
        model: str | None,
        provider: str | None,
        attributes: dict[str, Any] | None,
        remote: bool | None = None,
        data_source: str | None = None,
    ) -> None:
        prefix, operation, oi_kind = _KINDS[kind]
        self.kind = kind
        self.name = name or _callable_name(func)
        # An agent's name rides in the context of its calls: a model call inside is counted
        # for it in the token and cost metrics.
        self.agent_name = self.name if kind == "agent" else None
        self.model = model
        self.provider = provider
        label = (model or self.name) if kind == "llm" else self.name
        self.span_name = f"{prefix} {label}"
        attrs: dict[str, Any] = {
            sc.GEN_AI_OPERATION_NAME: operation,
            sc.OPENINFERENCE_SPAN_KIND: oi_kind,
            sc.TRACESCORE_SPAN_KIND: kind,
        }
        if kind == "agent":
            attrs[sc.GEN_AI_AGENT_NAME] = self.name
        elif kind == "tool":
            attrs[sc.GEN_AI_TOOL_NAME] = self.name
            attrs[sc.TOOL_NAME] = self.name
        elif kind == "llm" and model:
            attrs[sc.GEN_AI_REQUEST_MODEL] = model
            attrs[sc.LLM_MODEL_NAME] = model
        if provider:
            attrs[sc.GEN_AI_PROVIDER_NAME] = provider
            attrs[sc.LLM_PROVIDER] = provider
            if not _env.semconv_gen_ai_latest():
                attrs[sc.GEN_AI_SYSTEM] = provider  # the name before the latest conventions
        if kind == "retrieval" and data_source:
            attrs[sc.GEN_AI_DATA_SOURCE_ID] = data_source
        # The GenAI conventions: a model call or a retrieval from another process is a CLIENT
        # span (INTERNAL when the model or index runs in this process); agents and tools are
        # INTERNAL.
        remote_kind = kind in ("llm", "retrieval") and remote is not False
        self.span_kind = SpanKind.CLIENT if remote_kind else SpanKind.INTERNAL
        if attributes:
            attrs.update(attributes)
        self.attributes = attrs
        self.capture = capture_content
        try:
            self.signature: inspect.Signature | None = inspect.signature(_target(func))
        except Exception:
            self.signature = None
        params = list(self.signature.parameters.values()) if self.signature else []
        self.skip_first = bool(params) and params[0].name in ("self", "cls")
        self.param_names = [p.name for p in params]
        self.simple_params = self.signature is not None and all(
            p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty
            for p in params
        )

    def bind(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Arguments by name, without ``self``/``cls``. Never raises."""
        try:
            names = self.param_names
            if instance is not None and self.skip_first:
                names = names[1:]
            if self.simple_params and len(args) + len(kwargs) == len(names):
                bound = dict(zip(names, args, strict=False))
                bound.update(kwargs)
                return bound
            if self.signature is not None:
                skip = instance is not None and self.skip_first
                call_args = ((instance,) + args) if skip else args
                ba = self.signature.bind_partial(*call_args, **kwargs)
                ba.apply_defaults()
                bound = dict(ba.arguments)
                if instance is not None and self.skip_first and names is not self.param_names:
                    bound.pop(self.param_names[0], None)
                return bound
        except Exception:
            pass
        bound = {f"arg{i}": a for i, a in enumerate(args)}
        bound.update(kwargs)
        return bound


def _callable_name(func: Any) -> str:
    """The span's default ``{name}``: the qualified name, never a ``repr`` (a partial's repr
    carries its bound arguments, API keys included, and an object's its address)."""
    for _ in range(8):
        if isinstance(func, functools.partial):
            func = func.func
            continue
        try:
            name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
        except Exception:
            name = None
        if isinstance(name, str) and name:
            return name
        break
    return type(func).__qualname__


def _target(func: Any) -> Any:
    """What decides the calling convention: the function inside a ``classmethod`` or
    ``staticmethod``, or the ``__call__`` of a callable object."""
    if isinstance(func, (classmethod, staticmethod)):
        return func.__func__
    if _check(inspect.isroutine, func) or isinstance(func, (functools.partial, type)):
        return func
    try:
        call: Any = type(func).__call__
    except AttributeError:
        return func
    if (
        _check(inspect.iscoroutinefunction, call) or _check(inspect.isasyncgenfunction, call)
        or _check(inspect.isgeneratorfunction, call)
    ):
        return functools.partial(call, func)
    return func


def _check(predicate: Callable[[Any], bool], func: Any) -> bool:
    # inspect's predicates read attributes, which an exotic callable may make raise.
    try:
        return bool(predicate(func))
    except Exception:
        return False


def _capture_enabled(rt: Runtime, spec: _Spec) -> bool:
    if spec.capture is not None:
        return spec.capture
    return rt.capture


def _start(rt: Runtime, spec: _Spec, instance: Any, args: tuple[Any, ...],
           kwargs: dict[str, Any]) -> tuple[Span, CallRecord | None, Any]:
    tracer = rt.tracer or trace.get_tracer(sc.INSTRUMENTATION_SCOPE)
    # The conversation around the call (tracescore.conversation): one context variable read.
    span = tracer.start_span(spec.span_name, kind=spec.span_kind,
                             attributes=with_conversation(spec.attributes))
    payload: CallRecord | None = None
    try:
        capture = spec.capture if spec.capture is not None else rt.capture
        wanted = rt.scoring
        if wanted:
            picks = rt.picks
            if picks is not None:
                picked = picks.always  # known without the trace id when every rate is 0 or 1
                if picked is None:
                    picked = picks(span.get_span_context().trace_id)
                if not picked:
                    wanted = False  # no rule can score this trace: scoring needs no record
        if span.is_recording() and (capture or wanted):
            arguments = spec.bind(instance, args, kwargs)
            if wanted:
                payload = CallRecord(spec.kind, arguments)
            if capture:
                limit = rt.max_length
                text = to_json(arguments, limit)
                # set_attribute, not set_attributes: the SDK cleans a mapping through the
                # abstract Sequence and Mapping checks, a single value with two type checks.
                span.set_attribute(sc.INPUT_VALUE, text)
                span.set_attribute(sc.INPUT_MIME_TYPE, sc.MIME_JSON)
                if spec.kind == "tool":
                    span.set_attribute(sc.GEN_AI_TOOL_CALL_ARGUMENTS, text)
                if spec.kind == "llm":
                    _record_input_messages(span, arguments, limit)
    except Exception:
        _internal_error("recording the input")
    token = otel_context.attach(span_context(spec, span))
    return span, payload, token


def span_context(spec: _Spec, span: Span,
                 parent: otel_context.Context | None = None) -> otel_context.Context:
    """The context in which the call runs: ``span`` current and, for an agent, its name."""
    ctx = trace.set_span_in_context(span, parent)
    if spec.agent_name is not None:
        ctx = otel_context.set_value(_usage.AGENT_KEY, spec.agent_name, ctx)
    return ctx


def _finish(rt: Runtime, spec: _Spec, span: Span, payload: CallRecord | None, output: Any,
            streamed: _usage.StreamUsage | None = None,
            context: otel_context.Context | None = None) -> None:
    if spec.kind == "llm":
        _record_usage(rt, spec, span, output, streamed, context)
    try:
        capture = spec.capture if spec.capture is not None else rt.capture
        limit = rt.max_length
        if payload is not None:
            payload.output = output
        if spec.kind == "retrieval":
            # Bounded on the caller's thread: a million-item result costs what MAX_DOCUMENTS
            # costs, for the span and for scoring alike (the span says it was cut).
            docs = to_documents(output, MAX_DOCUMENTS)
            if payload is not None:
                payload.documents = docs
            if capture:
                _record_documents(span, docs, limit)
                if len(docs) == MAX_DOCUMENTS and _has_more(output, MAX_DOCUMENTS):
                    span.set_attribute(sc.TRACESCORE_TRUNCATED, True)
        elif capture:
            text = to_json(output, limit)
            span.set_attribute(sc.OUTPUT_VALUE, text)
            span.set_attribute(sc.OUTPUT_MIME_TYPE, sc.MIME_JSON)
            if spec.kind == "tool":
                span.set_attribute(sc.GEN_AI_TOOL_CALL_RESULT, text)
            if spec.kind == "llm":
                _record_messages(span, _chat_messages.output_messages(output),
                                 sc.GEN_AI_OUTPUT_MESSAGES, sc.LLM_OUTPUT_MESSAGES, limit)
    except Exception:
        _internal_error("recording the output")


def _record_usage(rt: Runtime, spec: _Spec, span: Span, output: Any,
                  streamed: _usage.StreamUsage | None,
                  context: otel_context.Context | None) -> None:
    """A model call's usage, response model, id, finish reasons and cost on its span, and its
    token and cost metrics under the agent it ran in (``streamed``: what a stream's chunks
    reported; ``context``: the call's context when it is not the current one)."""
    try:
        found = streamed.result() if streamed is not None else _usage.from_response(output)
        if found is None:
            return
        spent = _usage.cost(found, _usage.lookup(_usage.prices_or_shipped(rt.price_file),
                                                 found.model or spec.model))
        parent = getattr(span, "parent", None)
        _usage.note_counted(parent.span_id if parent is not None else None)
        # An instrumented SDK call inside this one was counted already: the same model call,
        # whose span carries its cost (a backend summing costs over a trace counts it once).
        wrapper = _usage.counted_beneath(span.get_span_context().span_id)
        attrs = _usage.attributes(found, None if wrapper else spent)
        if found.model and not spec.model:
            attrs[sc.LLM_MODEL_NAME] = found.model  # what Phoenix prices and groups by
        span.set_attributes(attrs)
        telemetry = rt.telemetry
        if telemetry is not None and not wrapper:
            agent = otel_context.get_value(_usage.AGENT_KEY, context)
            telemetry.record_llm_call(found, spent, agent=agent, request_model=spec.model,
                                      provider=spec.provider)
    except Exception:
        _internal_error("recording the usage")


def _has_more(result: Any, count: int) -> bool:
    """Whether a retrieval result holds more than ``count`` items (without reading them)."""
    try:
        return len(result) > count
    except TypeError:  # not sized: an iterable that to_documents read up to its cap
        return True


def _record_documents(span: Span, docs: list[Any], limit: int) -> None:
    # Each document's content is written once, here: the documented form puts it in
    # gen_ai.retrieval.documents, one value under one length limit. Writing it into the
    # flattened form too doubled every retrieval span's size on the wire.
    # Absent fields are left out, never written as null (the conventions' schema has no nulls).
    rows = [{k: v for k, v in (("id", d.id), ("score", d.score), ("content", d.content))
             if v is not None} for d in docs]
    span.set_attribute(sc.GEN_AI_RETRIEVAL_DOCUMENTS, to_json(rows, limit))
    # OpenInference's flattened form, which Phoenix renders as a document list: ids and scores.
    for i, d in enumerate(docs[:_MAX_FLAT_DOCUMENTS]):
        prefix = f"{sc.RETRIEVAL_DOCUMENTS_PREFIX}.{i}."
        if d.id is not None:
            span.set_attribute(prefix + sc.DOCUMENT_ID, d.id)
        if d.score is not None:
            span.set_attribute(prefix + sc.DOCUMENT_SCORE, d.score)


def _record_input_messages(span: Span, arguments: dict[str, Any], limit: int) -> None:
    system = _chat_messages.system_instructions(arguments)
    if system:
        span.set_attribute(sc.GEN_AI_SYSTEM_INSTRUCTIONS, to_json(system, limit))
    _record_messages(span, _chat_messages.input_messages(arguments), sc.GEN_AI_INPUT_MESSAGES,
                     sc.LLM_INPUT_MESSAGES, limit)


def _record_messages(span: Span, messages: list[dict[str, Any]] | None, genai_key: str,
                     oi_prefix: str, limit: int) -> None:
    """The messages as GenAI JSON (one value under one length limit) and in OpenInference's
    flattened form (role and text per message, for Phoenix's chat view; at most
    ``_MAX_FLAT_DOCUMENTS`` messages, the rest are in the JSON)."""
    if not messages:
        return
    span.set_attribute(genai_key, to_json(messages, limit))
    for i, (role, content) in enumerate(_chat_messages.flattened(messages[:_MAX_FLAT_DOCUMENTS])):
        prefix = f"{oi_prefix}.{i}."
        span.set_attribute(prefix + sc.MESSAGE_ROLE, role)
        span.set_attribute(prefix + sc.MESSAGE_CONTENT, truncate(redact_text(content), limit))


def _fail(rt: Runtime, span: Span, payload: CallRecord | None, exc: BaseException) -> None:
    try:
        if payload is not None:
            payload.error = exc
        # An exception's message may quote a credential ("invalid key sk-..."): redacted here,
        # in the status, the event and the stack trace (which ends with the message).
        message = redact_text(_safe_str(exc))
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {message}"[:1024]))
        span.set_attribute(sc.ERROR_TYPE, type(exc).__qualname__)
        # The SDK's record_exception() would format every frame (slowly) and call str(exc)
        # unguarded; the same event, bounded.
        module = type(exc).__module__
        qualname = type(exc).__qualname__
        limit = rt.max_length
        span.add_event(sc.EXCEPTION_EVENT, {
            sc.EXCEPTION_TYPE: f"{module}.{qualname}" if module and module != "builtins"
            else qualname,
            sc.EXCEPTION_MESSAGE: truncate(message, limit),
            sc.EXCEPTION_STACKTRACE: utf8_safe(truncate(redact_text(_stacktrace(exc)), limit)),
            # The decorators re-raise every exception they record: it escapes the span.
            sc.EXCEPTION_ESCAPED: True,
        })
    except Exception:
        _internal_error("recording an exception")


def _safe_str(exc: BaseException) -> str:
    try:
        return utf8_safe(str(exc))
    except Exception:
        return f"<{type(exc).__name__}: str() failed>"


def _stacktrace(exc: BaseException) -> str:
    """The exception's traceback as Python prints it, chained exceptions included, keeping the
    innermost ``_STACK_FRAMES`` frames of each and no caret lines. Linear in the depth: the
    standard formatter computes column positions for every frame and re-parses each line,
    which made an exception unwinding through 100 nested decorated calls cost seconds."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        parts.append(_format_one(current))
        if current.__cause__ is not None:
            parts.append("\nThe above exception was the direct cause of the following "
                         "exception:\n\n")
            current = current.__cause__
        elif current.__context__ is not None and not current.__suppress_context__:
            parts.append("\nDuring handling of the above exception, another exception "
                         "occurred:\n\n")
            current = current.__context__
        else:
            current = None
    return "".join(reversed(parts))


def _format_one(exc: BaseException) -> str:
    frames: deque[tuple[str, int, str]] = deque(maxlen=_STACK_FRAMES)
    omitted = 0
    tb = exc.__traceback__
    while tb is not None:
        if len(frames) == _STACK_FRAMES:
            omitted += 1
        code = tb.tb_frame.f_code
        frames.append((code.co_filename, tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    lines = ["Traceback (most recent call last):\n"] if frames else []
    if omitted:
        lines.append(f"  ... {omitted} outer frames omitted ...\n")
    lines.extend(traceback.StackSummary.from_list(
        [(filename, lineno, name, None) for filename, lineno, name in frames]
    ).format())
    lines.extend(traceback.format_exception_only(type(exc), exc))
    return "".join(lines)


def _end(rt: Runtime, span: Span, payload: CallRecord | None, token: Any) -> None:
    if token is not None:
        # Not contextlib.suppress: that is an object made on every decorated call.
        try:  # noqa: SIM105
            otel_context.detach(token)
        except Exception:
            pass
    try:
        if payload is None or not rt.scoring:
            span.end()
            return
        # The record is in the runtime's table while end() runs the processors' on_end.
        ctx = span.get_span_context()
        key = (ctx.trace_id, ctx.span_id)
        ending = rt.ending
        ending[key] = payload
        try:
            span.end()
        finally:
            ending.pop(key, None)
    except Exception:
        _internal_error("ending the span")


def _internal_error(what: str) -> None:
    logger.debug("tracescore failed while %s; the decorated call is unaffected", what,
                 exc_info=True)
    if _rt.raise_internal_errors:
        raise


def _bypass(rt: Runtime) -> bool:
    return rt.disabled or is_suppressed()


def _join(items: list[Any]) -> Any:
    if items and all(isinstance(i, str) for i in items):
        return "".join(items)
    return items


def _make(kind: str, func: Any, **options: Any) -> Any:
    if func is None:
        return lambda f: _make(kind, f, **options)
    if not callable(func) and not isinstance(func, (classmethod, staticmethod)):
        raise ConfigurationError(
            f"@tracescore.{kind} decorates a function or method, got {type(func).__name__}; "
            f"use @tracescore.{kind} or @tracescore.{kind}(name=...)"
        )
    if _env.disabled():
        return func
    try:
        return _wrap(kind, func, options)
    except Exception:
        # An exotic callable (attribute access that raises) must not break the import of the
        # module that decorates it.
        logger.warning("tracescore could not instrument a %s; it runs untraced and is "
                       "otherwise unaffected", type(func).__qualname__, exc_info=True)
        if _rt.raise_internal_errors:
            raise
        return func


def _wrap(kind: str, func: Any, options: dict[str, Any]) -> Any:
    spec = _Spec(kind, func, **options)
    target = _target(func)

    if _check(inspect.isasyncgenfunction, target):

        @wrapt.decorator
        def asyncgen_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            rt = _current()
            if _bypass(rt):
                return wrapped(*args, **kwargs)
            return _trace_asyncgen(rt, spec, wrapped, instance, args, kwargs,
                                   otel_context.get_current())

        return asyncgen_wrapper(func)

    if _check(inspect.iscoroutinefunction, target):

        @wrapt.decorator
        async def async_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            rt = _current()
            if _bypass(rt):
                return await wrapped(*args, **kwargs)
            try:
                span, payload, token = _start(rt, spec, instance, args, kwargs)
            except Exception:
                _internal_error("starting the span")
                return await wrapped(*args, **kwargs)
            try:
                result = await wrapped(*args, **kwargs)
            except BaseException as exc:
                _fail(rt, span, payload, exc)
                _end(rt, span, payload, token)
                raise
            try:
                _finish(rt, spec, span, payload, result)
            finally:  # a BaseException from reading the result still ends the span
                _end(rt, span, payload, token)
            return result

        return async_wrapper(func)

    if _check(inspect.isgeneratorfunction, target):

        @wrapt.decorator
        def gen_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            rt = _current()
            if _bypass(rt):
                return wrapped(*args, **kwargs)
            return _trace_gen(rt, spec, wrapped, instance, args, kwargs,
                              otel_context.get_current())

        return gen_wrapper(func)

    @wrapt.decorator
    def sync_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        rt = _current()
        if _bypass(rt):
            return wrapped(*args, **kwargs)
        try:
            span, payload, token = _start(rt, spec, instance, args, kwargs)
        except Exception:
            _internal_error("starting the span")
            return wrapped(*args, **kwargs)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            _fail(rt, span, payload, exc)
            _end(rt, span, payload, token)
            raise
        try:
            _finish(rt, spec, span, payload, result)
        finally:  # a BaseException from reading the result (a property) still ends the span
            _end(rt, span, payload, token)
        return result

    return sync_wrapper(func)


def _item_cap(rt: Runtime, spec: _Spec) -> int | None:
    """How many yielded items a generator span keeps: all of them when a scoring processor may
    judge the output (it sees full values), else only as many as the captured output can show
    (each item renders as at least one character), so an endless stream stays bounded."""
    if rt.scoring:
        return None
    if not _capture_enabled(rt, spec):
        return 0
    limit = rt.max_length
    return limit + 1 if limit > 0 else None


class _Stream:
    """A traced stream's span and what its items leave for the span."""

    __slots__ = ("rt", "spec", "span", "payload", "context", "items", "cap", "failed", "closing",
                 "usage")

    def __init__(self, rt: Runtime, spec: _Spec, span: Span, payload: CallRecord | None,
                 parent: otel_context.Context) -> None:
        # The runtime current where the generator function was called: the stream's whole
        # span lives there, wherever its items are consumed.
        self.rt = rt
        self.spec = spec
        self.span = span
        self.payload = payload
        self.context = span_context(spec, span, parent)  # attached while its code runs
        self.items: list[Any] = []
        self.cap = _item_cap(rt, spec)
        self.failed = False
        self.closing = False  # the consumer closed the stream (GeneratorExit is then no error)
        # A model call's stream: every chunk is read for usage (the last one carries it).
        self.usage = _usage.StreamUsage() if spec.kind == "llm" else None

    def keep(self, item: Any) -> None:
        if self.cap is None or len(self.items) < self.cap:
            self.items.append(item)
        if self.usage is not None:
            self.usage.add(item)

    def raised(self, exc: BaseException) -> None:
        # Being closed is no error; a GeneratorExit the generator's own code raises is.
        if not (self.closing and isinstance(exc, GeneratorExit)):
            self.failed = True
            _fail(self.rt, self.span, self.payload, exc)

    def end(self) -> None:
        try:
            if not self.failed:
                _finish(self.rt, self.spec, self.span, self.payload, _join(self.items),
                        self.usage, self.context)
        finally:
            _end(self.rt, self.span, self.payload, None)


def _open_stream(rt: Runtime, spec: _Spec, wrapped: Any, instance: Any, args: Any, kwargs: Any,
                 parent: otel_context.Context) -> tuple[_Stream, Any] | None:
    """Start a stream's span in ``parent`` and call the generator function in its context.

    Returns the stream and the generator, or None when the span could not start (the caller
    then runs the generator untraced). Raises what calling the generator function raises,
    recorded on the ended span."""
    outer = otel_context.attach(parent)
    try:
        span, payload, token = _start(rt, spec, instance, args, kwargs)
    except Exception:
        otel_context.detach(outer)
        _internal_error("starting the span")
        return None
    stream = _Stream(rt, spec, span, payload, parent)
    try:
        gen = wrapped(*args, **kwargs)
    except BaseException as exc:
        _fail(rt, span, payload, exc)
        _end(rt, span, payload, token)
        otel_context.detach(outer)
        raise
    otel_context.detach(token)
    otel_context.detach(outer)
    return stream, gen


def _trace_gen(rt: Runtime, spec: _Spec, wrapped: Any, instance: Any, args: Any, kwargs: Any,
               parent: otel_context.Context) -> Any:
    """The traced generator. ``parent`` is the context current when the generator function was
    called: the span starts in it when iteration starts, so a stream returned by an agent and
    consumed after the agent returned (or inside another span) is still the child of the span
    that called it, in its trace.

    The span starts at the first ``next()``, not at the call: a generator that is never
    iterated never runs its ``finally``, so a span started at the call would never end. Its
    duration is the stream's, from first item to exhaustion or close (docs/decorators.md)."""
    opened = _open_stream(rt, spec, wrapped, instance, args, kwargs, parent)
    if opened is None:
        return (yield from wrapped(*args, **kwargs))
    stream, gen = opened
    result: Any = None
    try:
        to_send: Any = None
        to_throw: BaseException | None = None
        while True:
            tok = otel_context.attach(stream.context)
            try:
                if to_throw is not None:
                    thrown, to_throw = to_throw, None
                    item = gen.throw(thrown)
                else:
                    item = gen.send(to_send)
            except StopIteration as stop:
                result = stop.value
                break
            finally:
                otel_context.detach(tok)
            stream.keep(item)
            try:
                to_send = yield item
            except GeneratorExit:
                stream.closing = True
                gen.close()
                raise
            except BaseException as exc:
                to_throw = exc
    except BaseException as exc:
        stream.raised(exc)
        raise
    finally:
        stream.end()
    return result


async def _trace_asyncgen(rt: Runtime, spec: _Spec, wrapped: Any, instance: Any, args: Any,
                          kwargs: Any, parent: otel_context.Context) -> Any:
    """The traced async generator; ``parent`` and the span's start as in ``_trace_gen``."""
    opened = _open_stream(rt, spec, wrapped, instance, args, kwargs, parent)
    if opened is None:
        async for item in wrapped(*args, **kwargs):
            yield item
        return
    stream, agen = opened
    try:
        to_send: Any = None
        to_throw: BaseException | None = None
        while True:
            tok = otel_context.attach(stream.context)
            try:
                if to_throw is not None:
                    thrown, to_throw = to_throw, None
                    item = await agen.athrow(thrown)
                else:
                    item = await agen.asend(to_send)
            except StopAsyncIteration:
                break
            finally:
                otel_context.detach(tok)
            stream.keep(item)
            try:
                to_send = yield item
            except GeneratorExit:
                stream.closing = True
                await agen.aclose()
                raise
            except BaseException as exc:
                to_throw = exc
    except BaseException as exc:
        stream.raised(exc)
        raise
    finally:
        stream.end()


_DOC_OPTIONS = """
    Args:
        func: the function to wrap (when used bare, ``@tracescore.{kind}``).
        name: the span's ``{{name}}``; default: the function's ``__qualname__``.
        capture_content: record inputs and outputs on the span; default: ``configure``'s
            ``capture_content`` (env ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``,
            default on). Scoring always sees the full values in process.
        attributes: extra constant span attributes.

    Returns:
        The wrapped function, with the same signature, return value and exceptions. Sync
        functions, ``async def``, generators, async generators and methods are supported; a
        generator's span stays open until it is exhausted or closed.

    Raises:
        ConfigurationError: ``func`` is not callable.
"""


@overload
def agent(func: F, /) -> F: ...
@overload
def agent(
    func: None = None, /, *, name: str | None = None, capture_content: bool | None = None,
    attributes: dict[str, Any] | None = None,
) -> Callable[[F], F]: ...
def agent(
    func: Any = None, /, *, name: str | None = None, capture_content: bool | None = None,
    attributes: dict[str, Any] | None = None,
) -> Any:
    """Trace a call as an agent invocation: span ``invoke_agent {name}``.

    The span carries ``gen_ai.operation.name=invoke_agent``, ``gen_ai.agent.name`` and
    ``openinference.span.kind=AGENT``; scoring rules with ``on="agent"`` judge it.

    Examples:
        >>> @tracescore.agent(name="support-bot")
        ... def answer(question: str) -> str: ...
    """
    return _make("agent", func, name=name, capture_content=capture_content, model=None,
                 provider=None, attributes=attributes)


@overload
def retrieval(func: F, /) -> F: ...
@overload
def retrieval(
    func: None = None, /, *, name: str | None = None, capture_content: bool | None = None,
    attributes: dict[str, Any] | None = None, remote: bool = True,
    data_source: str | None = None,
) -> Callable[[F], F]: ...
def retrieval(
    func: Any = None, /, *, name: str | None = None, capture_content: bool | None = None,
    attributes: dict[str, Any] | None = None, remote: bool = True,
    data_source: str | None = None,
) -> Any:
    """Trace a RAG retrieval: span ``retrieval {name}``.

    The function returns a list of strings, of dicts with ``content``/``text``/``page_content``
    and optional ``id``/``score``/``metadata``, or of objects with such attributes. The
    documents go on the span as ``gen_ai.retrieval.documents`` (JSON list of ``id``, ``score``,
    ``content``) and OpenInference's ``retrieval.documents.{i}.document.{id,score}`` (the
    content once, in the former); context scorers of
    the same trace judge them, in retrieval order. A document's absent ``id`` or ``score`` is
    left out, not written as null.

    Args (besides those of every decorator):
        remote: the search goes to another process (a vector database, a search service): the
            span is ``CLIENT``, as the GenAI conventions ask; False for an index in this
            process: ``INTERNAL``. Default True.
        data_source: the index or store searched, recorded as ``gen_ai.data_source.id``.

    Examples:
        >>> @tracescore.retrieval(data_source="kb-articles")
        ... def search(query: str, k: int = 4) -> list[str]: ...
    """
    return _make("retrieval", func, name=name, capture_content=capture_content, model=None,
                 provider=None, attributes=attributes, remote=remote, data_source=data_source)


@overload
def tool(func: F, /) -> F: ...
@overload
def tool(
    func: None = None, /, *, name: str | None = None, capture_content: bool | None = None,
    attributes: dict[str, Any] | None = None,
) -> Callable[[F], F]: ...
def tool(
    func: Any = None, /, *, name: str | None = None, capture_content: bool | None = None,
    attributes: dict[str, Any] | None = None,
) -> Any:
    """Trace a tool call: span ``execute_tool {name}`` with ``gen_ai.tool.name`` and, with
    content capture on, ``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result``.

    Examples:
        >>> @tracescore.tool(name="lookup_order")
        ... def lookup_order(order_id: str) -> dict: ...
    """
    return _make("tool", func, name=name, capture_content=capture_content, model=None,
                 provider=None, attributes=attributes)


@overload
def llm(func: F, /) -> F: ...
@overload
def llm(
    func: None = None, /, *, name: str | None = None, model: str | None = None,
    provider: str | None = None, capture_content: bool | None = None,
    attributes: dict[str, Any] | None = None, remote: bool = True,
) -> Callable[[F], F]: ...
def llm(
    func: Any = None, /, *, name: str | None = None, model: str | None = None,
    provider: str | None = None, capture_content: bool | None = None,
    attributes: dict[str, Any] | None = None, remote: bool = True,
) -> Any:
    """Trace a model call made by hand: span ``chat {model or name}``.

    Args (besides those of every decorator):
        model: the requested model, recorded as ``gen_ai.request.model`` and used in the span
            name.
        provider: recorded as ``gen_ai.provider.name`` and OpenInference's ``llm.provider``
            (``openai``, ``anthropic``, ...); also as ``gen_ai.system``, its older name, unless
            ``OTEL_SEMCONV_STABILITY_OPT_IN`` holds ``gen_ai_latest_experimental``.
        remote: the model runs in another process (an API, a model server): the span is
            ``CLIENT``, as the GenAI conventions ask; False for a model in this process:
            ``INTERNAL``. Default True.

    With content capture on, the call's messages also go on the span as
    ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (and ``gen_ai.system_instructions``
    from a ``system``/``system_prompt``/``instructions`` argument), JSON in the conventions'
    shape, and as OpenInference's ``llm.input_messages.{i}.message.role``/``.content`` and
    ``llm.output_messages.0.message.*``, which Phoenix shows as a chat. The messages are an
    argument named ``messages`` (or the only argument) holding ``{"role", "content"}`` dicts,
    or a ``prompt``/``input``/``question``/``query`` string; the reply is the returned string,
    message dict or ``ChatCompletion``.

    Examples:
        >>> @tracescore.llm(model="gpt-4o-mini", provider="openai")
        ... def call_model(messages: list[dict]) -> str: ...
    """
    return _make("llm", func, name=name, capture_content=capture_content, model=model,
                 provider=provider, attributes=attributes, remote=remote)


for _f, _k in ((agent, "agent"), (retrieval, "retrieval"), (tool, "tool"), (llm, "llm")):
    _f.__doc__ = (_f.__doc__ or "") + _DOC_OPTIONS.format(kind=_k)
