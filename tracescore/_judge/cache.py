"""A judge's request cache: a bounded LRU of validated answers, plus single flight.

Identical requests are answered once: the cache holds the last ``maxsize`` validated answers,
keyed by (model, ``api_base``, every litellm argument except secrets, system prompt, user
prompt, schema name and JSON schema), and a request identical to one in flight waits for that
call instead of making its own. Two scorers asking the same question about the same span
(faithfulness and hallucination both extract the claims of the answer) so pay for it once.

A reply served without a call of its own reports ``calls=0`` and no tokens; among the callers
sharing one flight, the first to receive the reply accounts for it. Failed calls are never
cached. Each caller gets its own parsed instance, checked by its own validator.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .output import InvalidOutput
from .reply import JudgeReply, SchemaT, cached_reply
from .scrub import is_secret_kwarg


class JudgeCacheInfo(NamedTuple):
    """Counters of a judge's request cache (see ``Judge.cache_info``).

    Attributes:
        hits: replies served without a call of their own: from the cache, or by joining an
            identical request in flight.
        misses: requests that made a call (cache enabled only).
        maxsize: the cache bound, ``cache_size``.
        currsize: answers held now.
    """

    hits: int
    misses: int
    maxsize: int
    currsize: int


@dataclass
class _Flight:
    """One call in flight that identical requests join (single flight)."""

    task: asyncio.Task[JudgeReply[Any]]
    waiters: int = 0
    # The first caller to receive the reply accounts for its calls, tokens and cost.
    claimed: bool = False


def key_prefix(model: str, kwargs: Mapping[str, Any]) -> bytes:
    """The part of a cache key fixed per judge: model, ``api_base`` and request parameters
    (``temperature`` 0 unless overridden), never the secret arguments."""
    params = {k: v for k, v in {"temperature": 0, **kwargs}.items() if not is_secret_kwarg(k)}
    api_base = kwargs.get("api_base") or kwargs.get("base_url")
    text = json.dumps([model, api_base, params], sort_keys=True, ensure_ascii=False, default=repr)
    return text.encode("utf-8", "surrogatepass")


class RequestCache:
    """One judge's cache of answers and of calls in flight.

    ``info`` and ``clear`` work from any thread; ``answer`` runs on the tracescore loop, whose
    single thread is why the flights need no lock.

    Args:
        model: the judge's litellm model string (the ``model`` of cached replies).
        kwargs: the judge's litellm arguments, part of every key.
        maxsize: how many answers to hold, least recently used dropped first; > 0.
    """

    def __init__(self, model: str, kwargs: Mapping[str, Any], maxsize: int) -> None:
        self.maxsize = maxsize
        self._model = model
        self._prefix = key_prefix(model, kwargs)
        # Hashed keys -> the validated answer's text.
        self._answers: OrderedDict[bytes, str] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._flights: dict[bytes, _Flight] = {}

    def info(self) -> JudgeCacheInfo:
        """Hits, misses, bound and current size."""
        with self._lock:
            return JudgeCacheInfo(self._hits, self._misses, self.maxsize, len(self._answers))

    def clear(self) -> None:
        """Forget every answer and reset the counters (calls in flight go on)."""
        with self._lock:
            self._answers.clear()
            self._hits = self._misses = 0

    def key(self, system: str, user: str, name: str, schema_text: str) -> bytes:
        """The key of one request."""
        # Hashed: keys stay small whatever the prompts' size, and no prompt text is retained.
        digest = hashlib.sha256(self._prefix)
        for part in (system, user, name, schema_text):
            encoded = part.encode("utf-8", "surrogatepass")
            digest.update(len(encoded).to_bytes(8, "big"))
            digest.update(encoded)
        return digest.digest()

    async def answer(
        self,
        key: bytes,
        call: Callable[[], Coroutine[Any, Any, JudgeReply[SchemaT]]],
        parse: Callable[[str], SchemaT],
    ) -> JudgeReply[SchemaT]:
        """The reply to the request ``key``: cached, shared with the identical call in flight,
        or from ``call()``.

        Args:
            key: from ``key()``.
            call: makes the call (a fresh coroutine each time it is called).
            parse: this caller's parsing of an answer's text; raises ``InvalidOutput`` when
                the text does not satisfy this caller (then it gets a call of its own).
        """
        cached = self._lookup(key, parse)
        if cached is not None:
            return cached
        flight = self._flights.get(key)
        if flight is not None and flight.task.get_loop() is not asyncio.get_running_loop():
            # Left over from a loop that was stopped (interpreter exit): start afresh.
            flight = None
        leader = flight is None
        if flight is None:
            # The call runs in its own task, so a caller that gives up (its scorer timed out)
            # does not cancel it for the others; it is cancelled when nobody waits any more.
            task: asyncio.Task[JudgeReply[Any]] = asyncio.get_running_loop().create_task(call())
            new_flight = flight = self._flights[key] = _Flight(task)
            task.add_done_callback(lambda done: self._land(key, new_flight, done))
            with self._lock:
                self._misses += 1
        else:
            with self._lock:
                self._hits += 1
        flight.waiters += 1
        try:
            reply: JudgeReply[Any] = await asyncio.shield(flight.task)
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                if self._flights.get(key) is flight:
                    del self._flights[key]
                flight.task.cancel()
        if not leader:
            try:
                # A fresh instance of this caller's schema, checked by this caller's validator.
                parsed = parse(reply.content)
            except InvalidOutput:
                return await call()
            reply = dataclasses.replace(reply, parsed=parsed)
        if flight.claimed:
            return cached_reply(reply.parsed, reply.content, reply.model)
        flight.claimed = True
        return reply

    def _lookup(self, key: bytes, parse: Callable[[str], SchemaT]) -> JudgeReply[SchemaT] | None:
        with self._lock:
            content = self._answers.get(key)
            if content is None:
                return None
            self._answers.move_to_end(key)
        try:
            # Parsed again: each caller gets its own instance, checked by its own validator.
            parsed = parse(content)
        except InvalidOutput:
            return None
        with self._lock:
            self._hits += 1
        return cached_reply(parsed, content, self._model)

    def _land(self, key: bytes, flight: _Flight, task: asyncio.Task[JudgeReply[Any]]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if task.cancelled() or task.exception() is not None:
            return  # errors are never cached: the next identical request calls again
        content = task.result().content
        with self._lock:
            self._answers[key] = content
            self._answers.move_to_end(key)
            while len(self._answers) > self.maxsize:
                self._answers.popitem(last=False)
