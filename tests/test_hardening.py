"""Hardening: attacks on the promises of the core.

Instrumentation never raises into user code and never blocks it; the user's exceptions pass
through unchanged; every span is exported exactly once; memory and queues stay bounded;
``force_flush``/``shutdown`` keep their deadlines with a hung scorer or exporter; bad input gets
a safe representation; no secret reaches a span.

Tests that guard against a hang run the attacked call on a helper thread and fail when it has
not returned after a generous bound (``completes``): a failure there means "hung", not "slow".
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import gc
import json
import math
import os
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import tracescore
from tests.helpers import (
    ProbeScorer,
    SimpleResult,
    eval_events,
    finished,
    memory_configure,
    scaled,
)
from tracescore._core.serialize import to_json
from tracescore._setup.config import current

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HANG_BOUND = 10.0  # seconds after which a call that must return is declared hung


@pytest.fixture(autouse=True)
def _cleanup() -> Iterator[None]:
    yield
    tracescore.shutdown(2000)


def completes(fn: Callable[[], Any], within: float = HANG_BOUND) -> Any:
    """Run ``fn`` on a daemon thread; return its result, fail if it is still running after
    ``within`` seconds (it hung), re-raise what it raised."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(within)
    assert not thread.is_alive(), f"{fn!r} did not return within {within} s: it hangs"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def rule(scorer: Any, **kw: Any) -> tracescore.ScoringRule:
    return tracescore.ScoringRule(scorer=scorer, **kw)


def utf8_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Hung(ProbeScorer):
    """A scorer that never returns (until the worker is shut down)."""

    async def arun(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        await asyncio.Event().wait()


# -- bad input: a safe, bounded representation ---------------------------------------------------


class Hostile:
    """Every dunder a serializer might touch raises."""

    def __repr__(self) -> str:
        raise RuntimeError("repr")

    def __str__(self) -> str:
        raise RuntimeError("str")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __len__(self) -> int:
        raise RuntimeError("len")

    def __iter__(self) -> Iterator[Any]:
        raise RuntimeError("iter")


class RaisesOnEveryAttribute:
    def __getattribute__(self, name: str) -> Any:
        if name == "__class__":
            return object.__getattribute__(self, name)
        raise RuntimeError(f"no {name}")


class HostileDict(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        raise RuntimeError("items")

    def __len__(self) -> int:
        raise RuntimeError("len")


class ArrayLike:
    """numpy-like: shape, dtype, tolist, __array__, and a large repr."""

    shape = (1000, 1000)
    dtype = "float64"

    def tolist(self) -> list[list[float]]:
        return [[0.0] * 1000] * 1000

    def __array__(self) -> Any:
        raise RuntimeError("no numpy here")

    def __repr__(self) -> str:
        return "array(" + "0., " * 250_000 + ")"


def _deep(levels: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(levels):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


def _cyclic_dict() -> dict[str, Any]:
    d: dict[str, Any] = {"a": 1}
    d["self"] = d
    return d


def _cyclic_list() -> list[Any]:
    lst: list[Any] = [1]
    lst.append([lst])
    return lst


BAD_VALUES: dict[str, Callable[[], Any]] = {
    "none": lambda: None,
    "bytes": lambda: b"\xff\xfe\x00raw",
    "10MB-str": lambda: "x" * 10_000_000,
    "10MB-bytes": lambda: b"y" * 10_000_000,
    "huge-list": lambda: list(range(2_000_000)),
    "huge-dict": lambda: {i: i for i in range(200_000)},
    "huge-deque": lambda: collections.deque(range(1_000_000)),
    "dict-view": lambda: {i: i for i in range(200_000)}.keys(),
    "deep-100k": lambda: _deep(100_000),
    "hostile": Hostile,
    "raises-on-every-attribute": RaisesOnEveryAttribute,
    "hostile-dict": lambda: HostileDict(a=1),
    "cyclic-dict": _cyclic_dict,
    "cyclic-list": _cyclic_list,
    "array-like": ArrayLike,
    "nan-inf": lambda: [math.nan, math.inf, -math.inf],
    "lone-surrogate": lambda: "ok \ud800 ok",
    "generator": lambda: (i for i in range(3)),
}
try:
    import numpy

    BAD_VALUES["numpy-array"] = lambda: numpy.zeros((2000, 2000))
    BAD_VALUES["numpy-scalar"] = lambda: numpy.float32("nan")
except ImportError:  # pragma: no cover - numpy is a test dependency
    pass


@pytest.mark.parametrize("make", list(BAD_VALUES.values()), ids=list(BAD_VALUES))
def test_bad_values_in_and_out_get_a_safe_bounded_representation(make: Callable[[], Any]) -> None:
    _, exp = memory_configure(content=tracescore.ContentOptions(max_length=2000))
    value = make()

    @tracescore.tool
    def echo(arg: Any) -> Any:
        return arg

    assert echo(value) is value
    (span,) = finished(exp)
    for key in ("input.value", "output.value", "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result"):
        text = span.attributes[key]
        assert len(text) <= 2000
        assert utf8_ok(text)


def test_shared_references_cannot_blow_up_the_rendering() -> None:
    # A few kilobytes in memory, a billion items (or 16 GB of strings) if walked naively.
    ints = [0] * 1000
    fan = [[ints] * 1000] * 1000
    strings = [["s" * 100_000] * 1000] * 1000
    for value in (fan, strings):
        text = completes(lambda v=value: to_json(v, 16_384))
        assert len(text) <= 16_384


def test_lone_surrogates_reach_the_exporter_as_replacement_characters(tmp_path: Any) -> None:
    path = tmp_path / "spans.jsonl"
    tracescore.configure(exporter=tracescore.FileSpanExporter(path))

    @tracescore.retrieval
    def search(q: str) -> list[str]:
        return ["doc \udcff"]

    @tracescore.agent
    def answer(q: str) -> str:
        search(q)
        raise ValueError("bad \ud800 name")

    with pytest.raises(ValueError):
        answer("q \ud83d")
    assert tracescore.force_flush(5000)
    spans = [s for line in path.read_text(encoding="utf-8").splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    assert len(spans) == 2
    attrs = {a["key"]: a["value"].get("stringValue") for s in spans for a in s["attributes"]}
    # Nothing was dropped by the OTLP encoder: each value is there, surrogates replaced.
    assert "\ufffd" in attrs["input.value"]
    assert "\ufffd" in json.loads(attrs["gen_ai.retrieval.documents"])[0]["content"]
    agent = [s for s in spans if s["name"].startswith("invoke_agent")][0]
    (event,) = agent["events"]
    message = {a["key"]: a["value"] for a in event["attributes"]}
    assert message["exception.message"]["stringValue"] == "bad \ufffd name"
    # The decorator re-raised it: the exception escaped the span.
    assert message["exception.escaped"] == {"boolValue": True}


# -- secrets never reach a span -------------------------------------------------------------------


def test_secret_named_arguments_are_redacted_but_scored_in_full() -> None:
    probe = ProbeScorer(id="probe")
    _, exp = memory_configure(scoring=[rule(probe, on="llm")])

    @tracescore.llm(model="m")
    def call_model(messages: list[dict[str, str]], **kwargs: Any) -> str:
        return "ok"

    call_model([{"role": "user", "content": "my password reset?"}], api_key="sk-SECRET-1",
               extra_headers={"Authorization": "Bearer SECRET-2"}, max_tokens=5,
               client={"access_token": "SECRET-3", "db_password": b"SECRET-4"})
    (span,) = finished(exp)
    text = json.dumps(dict(span.attributes))
    assert "SECRET" not in text
    arguments = json.loads(span.attributes["input.value"])
    assert arguments["kwargs"]["api_key"] == "[REDACTED]"
    assert arguments["kwargs"]["max_tokens"] == 5  # numbers under token-ish names stay
    assert arguments["messages"][0]["content"] == "my password reset?"  # content is content
    # Scoring sees the call as it was made.
    assert probe.calls[0]["input"]["kwargs"]["api_key"] == "sk-SECRET-1"


def test_partial_and_callable_objects_never_put_their_repr_in_the_span_name() -> None:
    _, exp = memory_configure()

    def call_api(query: str, api_key: str) -> str:
        return query

    class Client:
        def __call__(self, query: str) -> str:
            return query

    assert tracescore.tool(functools.partial(call_api, api_key="sk-SECRET"))("q") == "q"
    assert tracescore.tool(Client())("q") == "q"
    names = sorted(s.name for s in finished(exp))
    assert names == sorted(["execute_tool " + Client.__qualname__,
                            "execute_tool " + call_api.__qualname__])
    assert all("SECRET" not in json.dumps(dict(s.attributes)) for s in finished(exp))


# -- the user's exceptions pass through unchanged -------------------------------------------------


class UserError(Exception):
    pass


class BrokenStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str() of this exception fails")


@pytest.mark.parametrize(
    "make", [UserError, KeyboardInterrupt, SystemExit, GeneratorExit, BrokenStr,
             lambda: RecursionError("deep")],
    ids=["user", "KeyboardInterrupt", "SystemExit", "GeneratorExit", "broken-str", "recursion"],
)
@pytest.mark.parametrize("flavour", ["sync", "async", "generator", "asyncgen"])
def test_user_exceptions_pass_through_unchanged(make: Callable[[], BaseException],
                                                flavour: str) -> None:
    _, exp = memory_configure()
    err = make()

    def raise_it() -> None:
        raise err

    if flavour == "sync":
        @tracescore.agent
        def fn() -> None:
            raise_it()

        call: Callable[[], Any] = fn
    elif flavour == "async":
        @tracescore.agent
        async def afn() -> None:
            raise_it()

        def call() -> Any:
            return asyncio.run(afn())
    elif flavour == "generator":
        @tracescore.agent
        def gen() -> Iterator[int]:
            yield 1
            raise_it()

        def call() -> Any:
            return list(gen())
    else:
        @tracescore.agent
        async def agen() -> Any:
            yield 1
            raise_it()

        async def consume() -> list[Any]:
            return [x async for x in agen()]

        def call() -> Any:
            return asyncio.run(consume())

    with pytest.raises(type(err)) as info:
        call()
    assert info.value is err
    assert err.__context__ is None and err.__cause__ is None
    # The traceback still reaches the frame that raised it.
    assert traceback.extract_tb(err.__traceback__)[-1].name == "raise_it"
    (span,) = finished(exp)
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"] == type(err).__qualname__
    (event,) = [e for e in span.events if e.name == "exception"]
    assert "raise_it" in event.attributes["exception.stacktrace"]


def test_exception_through_deep_nesting_is_recorded_with_bounded_cost() -> None:
    # Each level records the exception; the standard formatter made this quadratic (seconds).
    _, exp = memory_configure(content=tracescore.ContentOptions(max_length=4000))

    @tracescore.tool
    def nested(n: int) -> int:
        if n == 0:
            raise UserError("bottom")
        return nested(n - 1)

    with pytest.raises(UserError):
        completes(lambda: nested(150))
    spans = finished(exp)
    assert len(spans) == 151
    for span in spans:
        (event,) = span.events
        stack = event.attributes["exception.stacktrace"]
        assert len(stack) <= 4000
        assert stack.rstrip().endswith("UserError: bottom")


def test_recursion_past_the_limit_restores_context_and_keeps_working() -> None:
    _, exp = memory_configure()

    @tracescore.tool
    def recurse(n: int) -> int:
        return 0 if n == 0 else recurse(n - 1) + 1

    assert recurse(200) == 200  # 200 nested decorated calls
    with pytest.raises(RecursionError):
        recurse(100_000)
    # No span leaked into the current context, no span is stuck open.
    assert not trace.get_current_span().get_span_context().is_valid
    assert recurse(0) == 0
    spans = finished(exp)
    assert spans[-1].parent is None
    assert len({(s.context.trace_id, s.context.span_id) for s in spans}) == len(spans)
    assert tracescore.stats().spans_held == 0


# -- every shape of callable ---------------------------------------------------------------------


def test_call_shapes_keep_their_values_and_record_their_arguments() -> None:
    _, exp = memory_configure()

    @tracescore.tool
    def shapes(a: int, /, b: int, *args: int, c: int = 3, d: int, **kw: int) -> tuple[Any, ...]:
        return (a, b, args, c, d, kw)

    class Box:
        factor = 2

        @tracescore.tool
        @classmethod
        def cm_outer(cls, x: int) -> int:
            return x * cls.factor

        @classmethod
        @tracescore.tool
        def cm_inner(cls, x: int) -> int:
            return x * cls.factor

        @tracescore.tool
        @staticmethod
        async def sm_outer(x: int) -> int:
            return x + 1

        @staticmethod
        @tracescore.tool
        def sm_inner(x: int) -> int:
            return x + 1

        @property
        @tracescore.tool
        def prop(self) -> str:
            return "p"

        @tracescore.tool
        async def __call__(self, x: int) -> int:
            return x

    twice = tracescore.agent(tracescore.tool(lambda x: x * 3))

    class AsyncCallable:
        async def __call__(self, x: int) -> int:
            await asyncio.sleep(0)
            return x + 10

    assert shapes(1, 2, 9, d=4, e=5) == (1, 2, (9,), 3, 4, {"e": 5})
    assert Box.cm_outer(2) == 4 and Box.cm_inner(2) == 4
    assert asyncio.run(Box.sm_outer(1)) == 2 and Box.sm_inner(1) == 2
    assert Box().prop == "p"
    assert asyncio.run(Box()(7)) == 7
    assert twice(2) == 6
    assert asyncio.run(tracescore.tool(AsyncCallable())(1)) == 11
    assert tracescore.tool(functools.partial(lambda x, y: x + y, 1))(2) == 3

    spans = finished(exp)
    outputs = {s.name: json.loads(s.attributes["output.value"]) for s in spans}
    inputs = {s.name: json.loads(s.attributes["input.value"]) for s in spans}
    prefix = "execute_tool test_call_shapes_keep_their_values_and_record_their_arguments.<locals>."
    assert inputs[prefix + "shapes"] == {"a": 1, "b": 2, "args": [9], "c": 3, "d": 4,
                                         "kw": {"e": 5}}
    assert inputs[prefix + "Box.cm_outer"] == {"x": 2}  # cls left out
    assert outputs[prefix + "Box.sm_outer"] == 2  # the awaited value, not a coroutine
    assert outputs["execute_tool " + AsyncCallable.__qualname__] == 11
    assert inputs[prefix + "Box.__call__"] == {"x": 7}  # self left out
    assert len([s for s in spans if s.name.endswith("<lambda>")]) == 3  # twice + partial


def test_exotic_callables_are_decorated_without_raising() -> None:
    _, exp = memory_configure()

    class BadRepr:
        def __call__(self, x: int) -> int:
            return x

        def __repr__(self) -> str:
            raise RuntimeError("repr")

    class BadAttributes:
        def __getattribute__(self, name: str) -> Any:
            if name in ("__call__", "__class__"):
                return object.__getattribute__(self, name)
            raise RuntimeError(f"no {name}")

        def __call__(self, x: int) -> int:
            return x

    assert tracescore.agent(BadRepr())(1) == 1
    assert tracescore.agent(BadAttributes())(2) == 2  # runs untraced, with a warning
    assert [s.name for s in finished(exp)] == ["invoke_agent " + BadRepr.__qualname__]


def test_generator_return_value_and_returned_generators_pass_through() -> None:
    _, exp = memory_configure()

    @tracescore.agent
    def inner() -> Iterator[int]:
        yield 1
        return "the return value"

    def outer() -> Iterator[int]:
        result = yield from inner()
        yield result  # type: ignore[misc]

    @tracescore.agent
    def make_gen() -> Iterator[int]:
        return (i for i in range(3))

    assert list(outer()) == [1, "the return value"]
    gen = make_gen()
    assert list(gen) == [0, 1, 2]  # handed back unconsumed
    assert len(finished(exp)) == 2


def test_retrieval_returning_an_iterator_is_not_consumed() -> None:
    _, exp = memory_configure()

    @tracescore.retrieval
    def search(q: str) -> Iterator[str]:
        return iter(["a", "b"])

    assert list(search("q")) == ["a", "b"]
    (span,) = finished(exp)
    assert json.loads(span.attributes["gen_ai.retrieval.documents"]) == []


def test_many_documents_do_not_push_the_span_identity_out() -> None:
    ctx_probe = ProbeScorer(id="ctx", uses_context=True)
    ret_probe = ProbeScorer(id="ret")
    # Above the scoring cap's default (32 documents per request): this test is about the span.
    _, exp = memory_configure(scoring=[rule(ctx_probe, on="agent"), rule(ret_probe,
                                                                         on="retrieval")],
                              limits=tracescore.LimitsOptions(max_scoring_documents=200))

    @tracescore.retrieval
    def search(q: str) -> list[dict[str, Any]]:
        return [{"content": f"doc{i}", "id": f"d{i}", "score": 0.5} for i in range(200)]

    @tracescore.agent
    def answer(q: str) -> str:
        search(q)
        return "a"

    answer("q")
    spans = {s.name.split()[0]: s for s in finished(exp)}
    retrieval = spans["retrieval"]
    assert retrieval.dropped_attributes == 0
    assert retrieval.attributes["gen_ai.operation.name"] == "retrieval"
    assert retrieval.attributes["tracescore.span.kind"] == "retrieval"
    assert len(eval_events(retrieval)) == 1  # the retrieval rule still matched
    assert len(ctx_probe.calls[0]["context"]) == 200  # every document reached the scorer


# -- async cancellation, abandoned generators ---------------------------------------------------


def test_cancelled_coroutine_and_async_generator_end_their_spans_once() -> None:
    _, exp = memory_configure()

    entered = asyncio.Event()

    @tracescore.agent
    async def slow() -> str:
        entered.set()
        await asyncio.sleep(60)  # the scenario: a coroutine cancelled while it waits
        return "never"

    @tracescore.agent
    async def stream() -> Any:
        for i in range(1000):
            yield i
            await asyncio.sleep(0.001 if i < 3 else 60)

    async def main() -> None:
        task = asyncio.create_task(slow())
        await entered.wait()  # its span has started
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        got: list[int] = []
        four = asyncio.Event()

        async def consume() -> None:
            async for x in stream():
                got.append(x)
                if len(got) == 4:
                    four.set()

        consumer = asyncio.create_task(consume())
        await four.wait()
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await consumer
        assert got == [0, 1, 2, 3]

    asyncio.run(main())
    spans = finished(exp)
    assert sorted(s.name.split(".")[-1] for s in spans) == ["slow", "stream"]
    for span in spans:
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes["error.type"] == "CancelledError"


def test_abandoned_generator_is_ended_by_garbage_collection() -> None:
    _, exp = memory_configure()

    @tracescore.agent
    def stream() -> Iterator[str]:
        yield "a"
        yield "b"

    gen = stream()
    assert next(gen) == "a"
    del gen
    gc.collect()
    (span,) = finished(exp)
    assert json.loads(span.attributes["output.value"]) == "a"
    assert span.status.status_code != StatusCode.ERROR


def test_a_failing_tracer_runs_the_call_untraced() -> None:
    class Exploding(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            raise RuntimeError("a broken processor of the application")

    provider = TracerProvider()
    provider.add_span_processor(Exploding())
    tracescore.configure(tracer_provider=provider, exporter=False)

    @tracescore.agent
    def answer(q: str) -> str:
        return q.upper()

    @tracescore.agent
    def stream() -> Iterator[int]:
        got = yield 1
        yield got

    assert answer("q") == "Q"
    gen = stream()
    assert next(gen) == 1 and gen.send(5) == 5


def test_disabled_at_configure_makes_existing_decorators_pass_through(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore.testing import runtime

    monkeypatch.setattr(runtime(), "disabled", runtime().disabled)  # restored after the test

    @tracescore.agent
    def answer(q: str) -> str:
        return q

    monkeypatch.setenv("TRACESCORE_DISABLED", "true")
    _, exp = memory_configure()
    assert answer("q") == "q"
    assert finished(exp) == []


# -- the scoring worker survives anything a scorer or callback does -----------------------------


@pytest.mark.parametrize(
    "error", [asyncio.CancelledError(), KeyboardInterrupt(), SystemExit(3), GeneratorExit(),
              ValueError("x")],
    ids=["CancelledError", "KeyboardInterrupt", "SystemExit", "GeneratorExit", "ValueError"],
)
def test_scorer_raising_base_exceptions_does_not_kill_the_worker(error: BaseException) -> None:
    class Bad(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            if kwargs["input"] == 0:
                raise error
            return await super().arun(**kwargs)

    _, exp = memory_configure(scoring=[rule(Bad(id="bad"))],
                              limits=tracescore.LimitsOptions(max_concurrency=1))

    @tracescore.agent
    def answer(i: int) -> str:
        return "xx"

    for i in range(4):
        answer(i)
    assert tracescore.force_flush(5000)
    spans = finished(exp)
    assert len(spans) == 4
    events = sorted((eval_events(s)[0].get("error.type") or "ok") for s in spans)
    assert events == ["ok", "ok", "ok", "scorer_error"]


def test_on_score_raising_keyboard_interrupt_is_contained() -> None:
    seen: list[Any] = []

    def callback(event: Any) -> None:
        seen.append(event)
        raise KeyboardInterrupt

    _, exp = memory_configure(scoring=[rule(ProbeScorer())],
                              limits=tracescore.LimitsOptions(max_concurrency=1),
                              on_score=callback)

    @tracescore.agent
    def answer(i: int) -> str:
        return "x"

    for i in range(3):
        answer(i)
    assert tracescore.force_flush(5000)
    assert len(seen) == 3
    assert all(len(eval_events(s)) == 1 for s in finished(exp))


def test_rule_predicate_that_raises_skips_the_span_and_nothing_else() -> None:
    calls: list[str] = []

    def predicate(span: Any) -> bool:
        calls.append(span.name)
        raise RuntimeError("predicate bug")

    probe = ProbeScorer(id="kind")
    _, exp = memory_configure(scoring=[rule(ProbeScorer(id="pred"), on=predicate),
                                       rule(probe, on="agent")])

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    assert answer("q") == "x"
    (span,) = finished(exp)
    assert calls == [span.name]
    assert [e["gen_ai.evaluation.name"] for e in eval_events(span)] == ["kind"]


def test_huge_but_finite_env_timeouts_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_SCORE_TIMEOUT", "1e300")
    monkeypatch.setenv("TRACESCORE_FLUSH_TIMEOUT", "1e300")
    _, exp = memory_configure(scoring=[rule(ProbeScorer())])

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("q")
    assert completes(tracescore.force_flush) is True
    assert len(eval_events(exp.get_finished_spans()[0])) == 1


def test_non_finite_score_is_recorded_as_an_error() -> None:
    class NaNScorer(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            return SimpleResult(math.nan, "nan")

    _, exp = memory_configure(scoring=[rule(NaNScorer(id="nan"), threshold=0.5)])

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("q")
    (span,) = finished(exp)
    (event,) = eval_events(span)
    assert event["error.type"] == "scorer_error"
    assert "gen_ai.evaluation.score.value" not in event
    assert "gen_ai.evaluation.score.label" not in event


def test_failing_to_arm_the_deadline_still_exports_each_span_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    class Gated(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            while not release.is_set():
                await asyncio.sleep(0.005)
            return await super().arun(**kwargs)

    inst, exp = memory_configure(scoring=[rule(Gated(id="gated"))])

    def broken() -> None:
        raise RuntimeError("event loop is closed")

    monkeypatch.setattr(inst.processor, "_arm_sweep", broken)
    monkeypatch.setattr(inst.processor._engine, "_on_drain", broken)

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("q")
    release.set()
    assert tracescore.force_flush(5000)
    spans = finished(exp)
    # Once, with its score: not once unscored at the failure and once more with the score.
    assert len(spans) == 1
    assert len(eval_events(spans[0])) == 1


# -- deadlines: hung scorer, blocking callback, hung or failing exporter --------------------------


def test_hung_scorer_cannot_hold_flush_or_shutdown_past_their_deadline() -> None:
    _, exp = memory_configure(scoring=[rule(Hung(id="hung"))],
                              limits=tracescore.LimitsOptions(score_timeout=60))

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("q")
    assert completes(lambda: tracescore.force_flush(300)) is False
    (span,) = exp.get_finished_spans()  # exported without its score, not held forever
    assert eval_events(span) == []
    inst = current()
    assert inst is not None
    completes(lambda: tracescore.shutdown(300))
    # The SDK provider shuts its processors down again at exit: that must return at once.
    completes(lambda: inst.processor.shutdown(30_000), within=2.0)
    assert len(exp.get_finished_spans()) == 1


def stuck_then_fine(stuck_scorer: Any, **options: Any) -> dict[str, Any]:
    """One span for ``stuck_scorer`` then one for a quick probe, one scoring place
    (``max_concurrency=1``): the exported spans by name."""
    probe = ProbeScorer(id="probe")
    _, exp = memory_configure(
        scoring=[rule(stuck_scorer, on=lambda s: s.name.endswith("stuck")),
                 rule(probe, on=lambda s: s.name.endswith("fine"))],
        limits=tracescore.LimitsOptions(max_concurrency=1, **options),
    )

    @tracescore.agent(name="stuck")
    def stuck(q: str) -> str:
        return "x"

    @tracescore.agent(name="fine")
    def fine(q: str) -> str:
        return "y"

    stuck("q")
    fine("q")  # waits behind the stuck job for the one place, then is scored
    return {s.name: s for s in finished(exp, timeout_millis=5_000)}


def test_job_timeout_cancels_a_hung_scorer_and_frees_its_place() -> None:
    by_name = stuck_then_fine(Hung(id="hung"), score_timeout=3, job_timeout=0.5)
    assert sorted(by_name) == ["invoke_agent fine", "invoke_agent stuck"]
    (timeout_event,) = eval_events(by_name["invoke_agent stuck"])
    assert timeout_event["error.type"] == "timeout"
    assert "job timeout (0.5 s)" in timeout_event["gen_ai.evaluation.explanation"]
    (event,) = eval_events(by_name["invoke_agent fine"])
    assert "error.type" not in event
    assert tracescore.stats().scoring_errors == 1


def test_job_timeout_frees_the_place_of_a_scorer_that_ignores_cancellation() -> None:
    # The stubborn scorer swallows every cancellation until the test lets it go, after the
    # flush: so the fine span can only have been scored (in the one place) if the job timeout
    # freed that place without waiting for the scorer to give up.
    let_go = threading.Event()
    gave_up = threading.Event()

    class Stubborn(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            try:
                while not let_go.is_set():
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.sleep(0.05)  # the stand-in for a scorer that ignores us
                return await super().arun(**kwargs)
            finally:
                gave_up.set()

    try:
        spans = stuck_then_fine(Stubborn(id="stubborn"), score_timeout=5, job_timeout=0.3)
        assert not gave_up.is_set()  # the fine span was scored while the scorer still held on
    finally:
        let_go.set()
    (event,) = eval_events(spans["invoke_agent stuck"])
    assert event["error.type"] == "timeout"
    (event,) = eval_events(spans["invoke_agent fine"])
    assert "error.type" not in event


def test_scorer_blocking_the_scoring_loop_loses_no_span() -> None:
    # A scorer that blocks the loop thread itself: spans ended meanwhile are held with their
    # jobs queued. A flush exports them on its own thread, and each span goes out exactly once.
    started = threading.Event()

    class LoopBlocker(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            started.set()
            time.sleep(1.0)  # noqa: ASYNC251 - the point: the loop thread is stuck
            return await super().arun(**kwargs)

    inst, exp = memory_configure(scoring=[rule(LoopBlocker(id="blocker"))],
                                 limits=tracescore.LimitsOptions(score_timeout=60,
                                                                 max_concurrency=1))

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("first")
    assert started.wait(5)
    for i in range(5):
        answer(f"q{i}")
    assert tracescore.stats().spans_held == 6
    assert completes(lambda: tracescore.force_flush(200)) is False
    names = [s.context.span_id for s in exp.get_finished_spans()]
    assert len(names) == len(set(names)) == 6
    completes(lambda: tracescore.shutdown(3_000))
    spans = exp.get_finished_spans()
    scored = [s for s in spans if not s.name.startswith("evaluation ")]
    assert len(scored) == len({s.context.span_id for s in scored}) == 6


def test_shutdown_during_a_flush_with_thousands_held_loses_none() -> None:
    # Thousands of spans are held while a job blocks the scoring loop; one thread flushes while
    # another shuts down with no time to spare: every span still goes out, once.
    started = threading.Event()

    class Blocker(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            if kwargs.get("input") == "block":
                started.set()
                time.sleep(1.0)  # noqa: ASYNC251 - the scenario: a job blocks the loop thread
            await asyncio.sleep(5)
            return await super().arun(**kwargs)

    inst, exp = memory_configure(scoring=[rule(Blocker(id="b"))],
                                 limits=tracescore.LimitsOptions(score_timeout=30,
                                                                 max_queue_size=100_000))

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("block")
    assert started.wait(5)
    for i in range(3000):
        answer(f"q{i}")
    assert inst.stats().spans_held == 3001  # stats() waits until the ended spans are routed
    flusher = threading.Thread(target=lambda: tracescore.force_flush(10_000))
    flusher.start()
    tracescore.shutdown(0)
    flusher.join(15)
    # Once the loop is free again, whatever the blocked jobs still do must not export twice.
    from tracescore._core import loop as _loop

    asyncio.run_coroutine_threadsafe(asyncio.sleep(0), _loop.get_loop()).result(HANG_BOUND)
    ids = [s.context.span_id for s in exp.get_finished_spans()
           if not s.name.startswith("evaluation ")]
    assert len(ids) == len(set(ids)) == 3001


def test_span_ending_during_shutdowns_flush_is_exported_once() -> None:
    # Spans end during shutdown's own flush while a scorer blocks the loop: each goes out once.
    blocking = threading.Event()

    class Blocker(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            # Ended during shutdown (scoring no longer takes the decorators' full values),
            # the span's input reaches the scorer as its JSON attribute, '{"q": "block"}'.
            if "block" in str(kwargs.get("input")):
                blocking.set()
                time.sleep(1.0)  # noqa: ASYNC251 - the scenario: a job blocks the loop thread
            return await super().arun(**kwargs)

    inst, exp = memory_configure(scoring=[rule(Blocker(id="b"))],
                                 limits=tracescore.LimitsOptions(score_timeout=30))

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    downstream = inst.processor._downstream
    assert downstream is not None
    flush = downstream.force_flush
    ended: list[str] = []

    def flush_then_end_spans(*args: Any, **kwargs: Any) -> bool:
        if not ended:  # during shutdown's flush, before it closes the processor
            answer("block")
            assert blocking.wait(HANG_BOUND)  # the loop is inside the blocking job now
            answer("late")
            ended.append("yes")
        return bool(flush(*args, **kwargs))

    downstream.force_flush = flush_then_end_spans  # type: ignore[method-assign]
    tracescore.shutdown(8_000)
    names = [s.name for s in exp.get_finished_spans() if not s.name.startswith("evaluation ")]
    assert len(names) == 2


def _engine_jobs(scorer: Any, n: int) -> list[Any]:
    from tracescore._pipeline.engine import Job
    from tracescore._pipeline.request import ScoringRequest

    compiled = tracescore.ScoringRule(scorer=scorer, on="agent").compile()
    return [Job(ScoringRequest(input=f"q{i}", output="x"), compiled) for i in range(n)]


def test_engine_drops_jobs_it_never_ran_at_shutdown() -> None:
    from tracescore._pipeline.engine import Engine

    started = threading.Event()

    class BlockLoop(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            started.set()
            time.sleep(0.5)  # noqa: ASYNC251 - the scenario: a job blocks the loop thread
            return await super().arun(**kwargs)

    written: list[Any] = []

    class Collect:
        def write(self, outcome: Any) -> None:
            written.append(outcome)

    engine = Engine([Collect()], concurrency=1, max_queue_size=10)
    assert engine.submit(_engine_jobs(BlockLoop(id="blocker"), 1))
    assert started.wait(5)
    assert engine.submit(_engine_jobs(ProbeScorer(id="queued"), 3))
    assert engine.pending == 4
    dropped = engine.shutdown(0.1)
    assert dropped["queued"] == 3  # never started
    assert engine.pending == 0
    assert not engine.submit(_engine_jobs(ProbeScorer(id="late"), 1))  # closed
    assert all(o.scorer_id != "queued" for o in written)


def test_blocking_on_score_callback_cannot_hold_flush_past_its_deadline() -> None:
    release = threading.Event()
    try:
        _, exp = memory_configure(scoring=[rule(ProbeScorer())],
                                  on_score=lambda e: release.wait(30))

        @tracescore.agent
        def answer(q: str) -> str:
            return "x"

        answer("q")
        assert completes(lambda: tracescore.force_flush(300)) in (True, False)
        assert len(exp.get_finished_spans()) == 1
    finally:
        release.set()


class HangingExporter(SpanExporter):
    def __init__(self) -> None:
        self.release = threading.Event()
        self.exported: list[Any] = []

    def export(self, spans: Any) -> SpanExportResult:
        self.release.wait(60)
        self.exported.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.wait(60)


class RaisingExporter(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        raise RuntimeError("backend exploded")

    def shutdown(self) -> None:
        raise RuntimeError("shutdown exploded")


def test_hung_exporter_cannot_hold_flush_or_shutdown_past_their_deadline() -> None:
    exporter = HangingExporter()
    try:
        tracescore.configure(exporter=exporter)

        @tracescore.agent
        def answer(q: str) -> str:
            return "x"

        answer("q")
        assert completes(lambda: tracescore.force_flush(300)) is False
        assert completes(lambda: tracescore.force_flush(300)) is False  # no thread pile-up
        completes(lambda: tracescore.shutdown(300))
        assert answer("after") == "x"  # the application is unaffected
    finally:
        exporter.release.set()


def test_raising_exporter_never_reaches_the_application() -> None:
    tracescore.configure(exporter=RaisingExporter(), scoring=[rule(ProbeScorer())])

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    assert answer("q") == "x"
    assert completes(lambda: tracescore.force_flush(2000)) in (True, False)
    completes(lambda: tracescore.shutdown(2000))


def test_shutdown_twice_and_calls_after_shutdown() -> None:
    _, exp = memory_configure(scoring=[rule(ProbeScorer())])

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("q")
    tracescore.shutdown(2000)
    tracescore.shutdown(2000)
    assert tracescore.force_flush(100) is False  # not configured any more
    assert answer("after") == "x"
    assert len(exp.get_finished_spans()) == 1


def test_force_flush_zero_and_absurd_deadlines() -> None:
    release = threading.Event()

    class Gated(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            while not release.is_set():
                await asyncio.sleep(0.005)
            return await super().arun(**kwargs)

    _, exp = memory_configure(scoring=[rule(Gated(id="gated"))],
                              limits=tracescore.LimitsOptions(flush_timeout=1e300))

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("q")
    assert tracescore.force_flush(0) is False  # a held span is not "everything got out"
    release.set()
    assert completes(lambda: tracescore.force_flush(10**30)) is True
    assert completes(lambda: tracescore.force_flush()) is True  # flush_timeout=1e300
    assert completes(lambda: tracescore.force_flush(-5)) in (True, False)
    spans = exp.get_finished_spans()
    # The held span went out once at force_flush(0); its score on a carrier span.
    assert sorted(s.name for s in spans) == ["evaluation gated",
                                             "invoke_agent " + answer.__qualname__]


# -- configuration: bad values, concurrency, leaks ------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [("TRACESCORE_SCORE_TIMEOUT", "abc"), ("TRACESCORE_SCORE_TIMEOUT", "-1"),
     ("TRACESCORE_SCORE_TIMEOUT", "0"), ("TRACESCORE_SCORE_TIMEOUT", "nan"),
     ("TRACESCORE_JOB_TIMEOUT", "-2"), ("TRACESCORE_JOB_TIMEOUT", "soon"),
     ("TRACESCORE_SCORE_TIMEOUT", "inf"), ("TRACESCORE_FLUSH_TIMEOUT", "1e999"),
     ("TRACESCORE_FLUSH_TIMEOUT", "nan"), ("TRACESCORE_MAX_QUEUE_SIZE", "nan"),
     ("TRACESCORE_MAX_QUEUE_SIZE", "2.5"), ("TRACESCORE_MAX_CONCURRENCY", "-3"),
     ("TRACESCORE_MAX_CONTENT_LENGTH", "inf")],
)
def test_bad_env_values_warn_and_fall_back(monkeypatch: pytest.MonkeyPatch,
                                           caplog: pytest.LogCaptureFixture, name: str,
                                           value: str) -> None:
    monkeypatch.setenv(name, value)
    inst, exp = memory_configure(scoring=[rule(ProbeScorer())])
    assert name in caplog.text
    assert inst.processor._score_timeout == 30.0
    assert inst.flush_timeout == 10.0
    assert inst.processor._engine.max_queue_size == 1000
    assert inst.processor._engine.concurrency == 8
    assert inst.processor._engine.job_timeout == 300.0

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("q")
    assert tracescore.force_flush(5000)
    assert len(eval_events(exp.get_finished_spans()[0])) == 1


@pytest.mark.parametrize("option", ["limits.score_timeout", "limits.flush_timeout",
                                    "limits.max_queue_size", "content.max_length"])
@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_non_finite_explicit_numbers_are_refused(option: str, value: float) -> None:
    group, _, field = option.rpartition(".")
    with pytest.raises(tracescore.ConfigurationError, match=field):
        if group == "limits":
            tracescore.configure(exporter=False,
                                 limits=tracescore.LimitsOptions(**{field: value}))
        else:
            tracescore.configure(exporter=False,
                                 content=tracescore.ContentOptions(**{field: value}))


def test_huge_concurrency_costs_nothing_until_jobs_arrive() -> None:
    _, exp = memory_configure(scoring=[rule(ProbeScorer())],
                              limits=tracescore.LimitsOptions(max_concurrency=10**12))

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    completes(lambda: answer("q"))  # starting the worker used to create 10**12 tasks
    assert tracescore.force_flush(5000)
    assert len(eval_events(exp.get_finished_spans()[0])) == 1


def test_ten_thousand_spans_through_a_tiny_queue_are_each_exported_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK's export queue must hold them all, or it drops some by design.
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "20000")
    release = threading.Event()

    class Gated(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            while not release.is_set():
                await asyncio.sleep(0.005)
            return SimpleResult(1.0, "ok")

    inst, exp = memory_configure(scoring=[rule(Gated(id="gated"))],
                                 limits=tracescore.LimitsOptions(
                                     max_queue_size=2, max_concurrency=1, score_timeout=60))
    tracer = inst.tracer_provider.get_tracer("hardening")
    for _ in range(10_000):
        tracer.start_span("invoke_agent raw", attributes={"tracescore.span.kind": "agent"}).end()
    stats = tracescore.stats()
    assert stats.spans_held == 2
    assert stats.skipped_queue_full == 9_998
    assert inst.processor._engine.pending == 2
    release.set()
    spans = finished(exp, 10_000)
    assert len({(s.context.trace_id, s.context.span_id) for s in spans}) == len(spans) == 10_000
    assert sum(len(eval_events(s)) for s in spans) == 2


def test_reconfigure_while_threads_hammer_loses_and_duplicates_nothing() -> None:
    exporters: list[InMemorySpanExporter] = []
    _, exp = memory_configure(scoring=[rule(ProbeScorer())])
    exporters.append(exp)

    @tracescore.agent
    def answer(i: int) -> str:
        return "x"

    # Each reconfiguration lets the four threads make another BATCH spans, which they start
    # at full speed as configure() begins: every swap happens with spans ending around it, and
    # the run makes 3,000 spans (left to run freely, the threads made 90,000 on a busy machine
    # and the test took 40 s).
    batch = 500
    stop = threading.Event()
    counts = [0] * 4
    allowed = [0]
    started = [0]
    turn = threading.Condition()

    def hammer(slot: int) -> None:
        while True:
            with turn:
                turn.wait_for(lambda: started[0] < allowed[0] or stop.is_set())
                if started[0] >= allowed[0]:
                    return
                started[0] += 1
                if started[0] == allowed[0]:
                    turn.notify_all()
            answer(slot)
            counts[slot] += 1

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        for _ in range(6):
            with turn:
                allowed[0] += batch
                turn.notify_all()
            _, exp = memory_configure(scoring=[rule(ProbeScorer(), sample_rate=0.5)])
            exporters.append(exp)
            with turn:
                assert turn.wait_for(lambda: started[0] >= allowed[0], timeout=scaled(60))
    finally:
        with turn:
            stop.set()
            turn.notify_all()
        for t in threads:
            t.join()
    assert sum(counts) == 6 * batch
    assert tracescore.force_flush(int(scaled(5000)))
    name = "invoke_agent " + answer.__qualname__
    ids = collections.Counter((s.context.trace_id, s.context.span_id)
                              for e in exporters for s in e.get_finished_spans()
                              if s.name == name)
    assert max(ids.values()) == 1
    assert sum(ids.values()) == sum(counts)


def _tracescore_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate()
            if t.name.startswith(("tracescore", "OtelBatch")) and t.is_alive()]


def _settled_thread_count(limit: int) -> int:
    for _ in range(200):
        if len(_tracescore_threads()) <= limit:
            break
        threading.Event().wait(0.01)
    return len(_tracescore_threads())


def test_configure_in_a_loop_and_concurrently_leaks_no_threads() -> None:
    tracescore.shutdown(2000)
    before = _settled_thread_count(0)

    @tracescore.agent
    def answer(i: int) -> str:
        return "x"

    for i in range(20):
        memory_configure(scoring=[rule(ProbeScorer())], service_name=f"svc-{i % 3}")
        answer(i)

    errors: list[BaseException] = []

    def configure() -> None:
        try:
            memory_configure(scoring=[rule(ProbeScorer())])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=configure) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    inst = current()
    assert inst is not None
    answer(0)
    assert tracescore.force_flush(5000)
    tracescore.shutdown(2000)
    assert _settled_thread_count(before) <= before


def test_per_trace_state_stays_bounded_under_a_long_lived_root() -> None:
    probe = ProbeScorer(id="ctx", uses_context=True)
    # Above the scoring cap's default (32 documents per request): this test is about the buffer.
    _, exp = memory_configure(scoring=[rule(probe, on="tool")],
                              limits=tracescore.LimitsOptions(max_scoring_documents=1_000))

    @tracescore.retrieval
    def search(i: int) -> list[str]:
        return [f"doc{i}"]

    @tracescore.tool
    def judge_me() -> str:
        return "x"

    @tracescore.agent
    def worker_loop() -> None:
        for i in range(1_500):
            search(i)
        judge_me()

    worker_loop()
    finished(exp)
    (call,) = probe.calls
    assert len(call["context"]) == 1_000  # the most recent retrievals of the trace
    assert call["context"][-1] == "doc1499"


# -- processes: fork and interpreter exit ---------------------------------------------------------


def test_forked_child_scores_and_does_not_reexport_the_parents_spans() -> None:
    release = threading.Event()

    class ParentGated(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            if kwargs["input"] == "parent":
                while not release.is_set():
                    await asyncio.sleep(0.005)
            elif kwargs["input"] == "child-hung":
                await asyncio.Event().wait()
            return await super().arun(**kwargs)

    inst, exp = memory_configure(scoring=[rule(ParentGated(id="gated"))],
                                 limits=tracescore.LimitsOptions(score_timeout=0.2))

    @tracescore.agent
    def answer(q: str) -> str:
        return "xx"

    answer("parent")  # held in the parent; its deadline sweep is armed
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 0
        try:
            answer("child-hung")
            # The deadline must fire in the child too (its sweep was armed in the parent).
            for _ in range(300):
                if tracescore.stats().deadline_exports:
                    break
                threading.Event().wait(0.01)
            answer("child")
            ok = tracescore.force_flush(600)
            report = {
                "ok": ok,
                "deadline_exports": tracescore.stats().deadline_exports,
                "spans": sorted((json.loads(s.attributes["input.value"])["q"],
                                 len(eval_events(s))) for s in exp.get_finished_spans()
                                if s.name.startswith("invoke_agent")),
            }
            os.write(write_fd, json.dumps(report).encode())
        except BaseException as exc:  # noqa: BLE001
            os.write(write_fd, json.dumps({"error": repr(exc)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    report = json.loads(b"".join(chunks))
    assert report == {"ok": False, "deadline_exports": 1,
                      "spans": [["child", 1], ["child-hung", 0]]}
    release.set()
    assert tracescore.force_flush(5000)
    spans = exp.get_finished_spans()
    # The parent's span went out once, in the parent (its score attached or, past the deadline,
    # on a carrier span).
    assert len([s for s in spans if s.name.startswith("invoke_agent")]) == 1
    assert sum(len(eval_events(s)) for s in spans) == 1


EXIT_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {root!r})
    import tracescore
    from tests.helpers import ProbeScorer

    class Hung(ProbeScorer):
        async def arun(self, **kwargs):
            await asyncio.Event().wait()

    class SyncHung(ProbeScorer):
        async def arun(self, **kwargs):
            import time
            time.sleep(600)  # blocks the scoring loop itself

    # A second provider (another service name) registers its SDK exit hook after tracescore's,
    # so it runs first: it must keep the flush deadline too.
    tracescore.configure(service_name="first", exporter=False)
    tracescore.configure(
        service_name="second", exporter=tracescore.FileSpanExporter({path!r}),
        limits=tracescore.LimitsOptions(score_timeout=60, flush_timeout=0.5),
        scoring=[tracescore.ScoringRule(scorer={scorer}(id="hung"))],
    )

    @tracescore.agent
    def answer(q):
        return "x"

    for i in range(3):
        answer(i)
    print("exiting", flush=True)
    """
)


NONDAEMON_SCRIPT = textwrap.dedent(
    """
    import sys, threading, time
    sys.path.insert(0, {root!r})
    import tracescore
    from tests.helpers import ProbeScorer

    tracescore.configure(exporter=tracescore.FileSpanExporter({path!r}),
                         limits=tracescore.LimitsOptions(flush_timeout=5),
                         scoring=[tracescore.ScoringRule(scorer=ProbeScorer(id="p"))])

    @tracescore.agent
    def answer(q):
        return "x" * 50

    def work():
        for i in range(20):
            time.sleep(0.02)
            answer(i)

    for _ in range(4):
        threading.Thread(target=work).start()  # non-daemon: joined after threading's hooks
    print("main returns", flush=True)
    """
)


def test_spans_of_non_daemon_threads_ending_after_main_are_exported(tmp_path: Any) -> None:
    path = tmp_path / "spans.jsonl"
    script = tmp_path / "nondaemon.py"
    script.write_text(NONDAEMON_SCRIPT.format(root=ROOT, path=str(path)))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    spans = [s for line in path.read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    assert len(spans) == 80
    assert len({s["spanId"] for s in spans}) == 80
    scored = [s for s in spans if any(e["name"] == "gen_ai.evaluation.result"
                                      for e in s.get("events", []))]
    assert len(scored) == 80


EXIT_BUDGETS_SCRIPT = textwrap.dedent(
    """
    import asyncio, atexit, json, sys
    calls = []
    # Registered before tracescore's and the SDK's exit hooks, so it runs after all of them.
    atexit.register(lambda: print(json.dumps(calls), flush=True))
    sys.path.insert(0, {root!r})
    import tracescore
    from tests.helpers import ProbeScorer

    class Hung(ProbeScorer):
        async def arun(self, **kwargs):
            await asyncio.Event().wait()

    # As in EXIT_SCRIPT: a second provider's SDK exit hook runs before tracescore's own.
    tracescore.configure(service_name="first", exporter=False)
    inst = tracescore.configure(
        service_name="second", exporter=tracescore.FileSpanExporter({path!r}),
        limits=tracescore.LimitsOptions(score_timeout=60, flush_timeout=2),
        scoring=[tracescore.ScoringRule(scorer=Hung(id="hung"))],
    )
    processor = inst.processor

    def recording(name):
        method = getattr(processor, name)

        def call(*args, **kwargs):
            entry = [name, args[0] if args else kwargs.get("timeout_millis")]
            calls.append(entry)
            result = method(*args, **kwargs)
            entry.append(result)
            return result

        return call

    # What each exit step asks of the processor: the deadline it gives, what the flush says.
    processor.force_flush = recording("force_flush")
    processor.shutdown = recording("shutdown")

    @tracescore.agent
    def answer(q):
        return "x"

    for i in range(3):
        answer(i)
    print("exiting", flush=True)
    """
)


def test_exit_with_a_hung_scorer_waits_one_flush_deadline_not_two(tmp_path: Any) -> None:
    # Asserted on the deadlines each exit step gives the processor, not on the wall time of
    # the exit: the flush before the threads are joined waits its whole deadline (2 s) for the
    # hung score and says so; the shutdown after them gets a second, not another 2 s.
    path = tmp_path / "spans.jsonl"
    script = tmp_path / "exit.py"
    script.write_text(EXIT_BUDGETS_SCRIPT.format(root=ROOT, path=str(path)))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    exiting, report = proc.stdout.strip().splitlines()
    assert exiting == "exiting"
    calls = json.loads(report)
    flushes = [c for c in calls if c[0] == "force_flush"]
    assert flushes[0] == ["force_flush", 2000, False]  # one whole deadline, missed
    assert len(flushes) >= 2  # the shutdown flushes too...
    assert all(budget <= 1000 for _, budget, _ in flushes[1:])  # ...within a second
    assert any(c[0] == "shutdown" for c in calls)
    spans = [s for line in path.read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    assert len(spans) == 3


@pytest.mark.parametrize("scorer", ["Hung", "SyncHung"])
def test_interpreter_exit_with_pending_scores_keeps_the_flush_deadline(tmp_path: Any,
                                                                       scorer: str) -> None:
    path = tmp_path / "spans.jsonl"
    script = tmp_path / "exit.py"
    script.write_text(EXIT_SCRIPT.format(root=ROOT, path=str(path), scorer=scorer))
    # Before the fix the SDK's own exit hook waited another 30 s for the hung scores.
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=20, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "exiting"
    spans = [s for line in path.read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    assert len(spans) == 3  # the held spans went out at exit, unscored, once each
