"""Fleet-wide rate limits and judge budgets in Redis, behind the interface of ``_limits``.

``RedisTokenBucket`` has ``TokenBucket.try_take()``; ``RedisHourlyBudget`` has
``HourlyBudget.admits()``/``spend()``. Neither calls Redis on the caller's thread: the hot path
(``on_end``, a service's request thread) only touches local state, and one background thread
per ``RedisStore`` talks to Redis:

- **Rate limit**: the bucket itself lives in Redis (one hash per rule: tokens and the time of
  the last refill, by the Redis server's clock so replicas' clocks do not matter), refilled and
  taken from by one Lua script, atomically. A replica leases a few tokens at a time
  (``lease_seconds`` worth of the rate, at least one) and spends them locally; when its lease
  runs out it asks for the next one and skips (``rate_limited``) until it arrives. The fleet
  never takes more than the rate plus one burst; a replica holds at most one lease unused.
- **Budget**: spend is added to per-minute counters (``INCRBYFLOAT``, expiring after an hour
  and a minute); the thread sums the last 60 of them every ``refresh_interval`` seconds. A job
  is admitted while that sum plus this replica's spend not yet written is below the caps:
  the rolling hour has one-minute steps, and concurrent replicas may overshoot by what they
  spend within one refresh.

When Redis cannot be reached the limits fall back to this replica's own (``TokenBucket``,
``HourlyBudget``: the behaviour without a store) and ``RedisStore.errors`` counts the failures,
with a warning once per outage; they return to Redis when it answers again.

Requires the ``redis`` package (``pip install 'redis>=5,<8'``, part of the ``serve`` extra).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from tracescore._pipeline.limits import HourlyBudget, TokenBucket

logger = logging.getLogger("tracescore")

# KEYS[1]: the bucket's hash; ARGV: rate (tokens/s), capacity, tokens wanted. Returns the tokens
# granted (0..wanted). Redis's TIME keeps one clock for the whole fleet.
_TAKE = """
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local v = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(v[1]) or capacity
local ts = tonumber(v[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local got = math.min(want, math.floor(tokens))
tokens = tokens - got
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(capacity / rate) + 60)
return got
"""
_MINUTE = 60
_HOUR_BUCKETS = 60


class RedisStore:
    """One Redis connection and the background thread that serves the limits of a process.

    Args:
        url: a Redis URL, e.g. ``redis://redis:6379/0``.
        refresh_interval: seconds between budget refreshes (and lease checks) at most.
        client: a ``redis.Redis`` (tests); default one made from ``url``.
        clock: wall seconds, for the per-minute budget keys.
    """

    def __init__(self, url: str, *, refresh_interval: float = 0.5, client: Any = None,
                 clock: Callable[[], float] = time.time) -> None:
        if client is None:
            import redis

            client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
        self.url = url
        self.client = client
        self.refresh_interval = refresh_interval
        self._clock = clock
        self._take = client.register_script(_TAKE)
        self._cond = threading.Condition(threading.Lock())
        self._buckets: list[RedisTokenBucket] = []
        self._budgets: list[RedisHourlyBudget] = []
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.errors = 0
        self.healthy = True

    def add_bucket(self, bucket: RedisTokenBucket) -> None:
        """Serve ``bucket`` (called by its constructor)."""
        with self._cond:
            self._buckets.append(bucket)

    def add_budget(self, budget: RedisHourlyBudget) -> None:
        """Serve ``budget`` (called by its constructor)."""
        with self._cond:
            self._budgets.append(budget)

    def wake(self) -> None:
        """Ask the thread for a round now (a lease ran out)."""
        with self._cond:
            self._cond.notify()

    def start(self) -> None:
        """One round on the caller's thread (first leases, budget totals), then the thread."""
        self.round()
        self._thread = threading.Thread(target=self._run, name="tracescore-limits-redis",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Write what is still unwritten, then stop the thread."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(5.0)
        try:
            for budget in list(self._budgets):
                budget._flush()
        except Exception:
            logger.debug("tracescore: final budget write to Redis failed", exc_info=True)

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                self._cond.wait(self.refresh_interval)
                if self._stopped:
                    return
            self.round()

    def round(self) -> None:
        """Lease tokens for buckets that ran low, write spend, read the budgets' totals."""
        try:
            for bucket in list(self._buckets):
                if bucket._wants_lease():
                    granted = int(self._take(keys=[bucket.key + ":bucket"],
                                             args=[bucket.rate, bucket.capacity, bucket.lease]))
                    bucket._grant(granted)
            for budget in list(self._budgets):
                budget._flush()
                budget._refresh()
            if not self.healthy:
                logger.warning("tracescore: Redis at %s answers again; fleet-wide limits resume",
                               self.url)
            self.healthy = True
        except Exception as exc:
            self.errors += 1
            if self.healthy:
                logger.warning("tracescore: Redis at %s is unreachable (%s); each replica applies "
                               "its own limits until it answers", self.url, type(exc).__name__)
            self.healthy = False

    def minute(self) -> int:
        """The current per-minute budget slot."""
        return int(self._clock() // _MINUTE)


class RedisTokenBucket:
    """A token bucket shared by every replica through Redis (see the module docstring).

    Args:
        store: the ``RedisStore``.
        key: the rule's key prefix (``<prefix>:<rule>:<scorer id>``).
        rate_per_minute: sustained jobs per minute for the whole fleet.
        lease_seconds: how much of the rate one lease takes (at least one token).
    """

    def __init__(self, store: RedisStore, key: str, rate_per_minute: float, *,
                 lease_seconds: float = 0.25) -> None:
        self.store = store
        self.key = key
        self.rate = float(rate_per_minute) / 60.0
        self.capacity = max(1.0, self.rate)
        self.lease = max(1, math.ceil(self.rate * lease_seconds))
        self._local = TokenBucket(rate_per_minute)  # while Redis is unreachable
        self._tokens = 0
        self._lock = threading.Lock()
        store.add_bucket(self)

    def try_take(self) -> bool:
        """Take one leased token if there is one; never blocks."""
        if not self.store.healthy:
            return self._local.try_take()
        with self._lock:
            if self._tokens > 0:
                self._tokens -= 1
                low = self._tokens == 0
                taken = True
            else:
                low = True
                taken = False
        if low:
            self.store.wake()
        return taken

    def _wants_lease(self) -> bool:
        with self._lock:
            return self._tokens == 0

    def _grant(self, tokens: int) -> None:
        with self._lock:
            self._tokens += tokens


class RedisHourlyBudget:
    """A judge budget (tokens and/or cost per rolling hour) shared through Redis.

    Args:
        store: the ``RedisStore``.
        key: the rule's key prefix.
        max_tokens_per_hour: judge tokens for the fleet per hour, or None.
        max_cost_per_hour: USD for the fleet per hour, or None.
    """

    def __init__(self, store: RedisStore, key: str, max_tokens_per_hour: float | None,
                 max_cost_per_hour: float | None) -> None:
        self.store = store
        self.key = key
        self.max_tokens = max_tokens_per_hour
        self.max_cost = max_cost_per_hour
        self._local = HourlyBudget(max_tokens_per_hour, max_cost_per_hour)
        self._lock = threading.Lock()
        self._unwritten = [0.0, 0.0]  # tokens, cost spent here and not yet in Redis
        self._fleet = [0.0, 0.0]  # the last hour's totals as last read
        store.add_budget(self)

    def admits(self) -> bool:
        """Whether the fleet's spend of the past hour leaves room for another job."""
        if not self.store.healthy:
            return self._local.admits()
        with self._lock:
            tokens = self._fleet[0] + self._unwritten[0]
            cost = self._fleet[1] + self._unwritten[1]
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return False
        return not (self.max_cost is not None and cost >= self.max_cost)

    def spend(self, tokens: float, cost: float | None) -> None:
        """Record what a finished job used (written to Redis by the store's thread)."""
        self._local.spend(tokens, cost)
        if not tokens and not cost:
            return
        with self._lock:
            self._unwritten[0] += float(tokens)
            self._unwritten[1] += float(cost or 0.0)

    def _keys(self, minute: int) -> tuple[str, str]:
        return f"{self.key}:tokens:{minute}", f"{self.key}:cost:{minute}"

    def _flush(self) -> None:
        with self._lock:
            tokens, cost = self._unwritten
            self._unwritten = [0.0, 0.0]
        if not tokens and not cost:
            return
        token_key, cost_key = self._keys(self.store.minute())
        try:
            pipe = self.store.client.pipeline()
            for key, value in ((token_key, tokens), (cost_key, cost)):
                if value:
                    pipe.incrbyfloat(key, value)
                    pipe.expire(key, 3600 + _MINUTE)
            pipe.execute()
        except Exception:
            with self._lock:  # kept for the next round
                self._unwritten[0] += tokens
                self._unwritten[1] += cost
            raise

    def _refresh(self) -> None:
        now = self.store.minute()
        minutes = range(now - _HOUR_BUCKETS + 1, now + 1)
        keys = [k for m in minutes for k in self._keys(m)]
        values = self.store.client.mget(keys)
        tokens = sum(float(v) for v in values[0::2] if v is not None)
        cost = sum(float(v) for v in values[1::2] if v is not None)
        with self._lock:
            self._fleet = [tokens, cost]
