"""Per-rule rate limits and judge budgets.

Both take an injectable clock (``time.monotonic`` by default) so tests can drive them exactly.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

Clock = Callable[[], float]


class RateLimiter(Protocol):
    """What a rule's rate limit offers the hot path (``TokenBucket``, or the fleet-wide
    ``_limits_redis.RedisTokenBucket``)."""

    def try_take(self) -> bool:
        """Take one permit if there is one, without blocking."""
        ...


class Budget(Protocol):
    """What a rule's judge budget offers (``HourlyBudget``, or the fleet-wide
    ``_limits_redis.RedisHourlyBudget``)."""

    def admits(self) -> bool:
        """Whether another job fits the budget now, without blocking."""
        ...

    def spend(self, tokens: float, cost: float | None) -> None:
        """Record what a finished job used."""
        ...


class TokenBucket:
    """A token bucket: ``rate_per_minute`` tokens refill per minute up to ``burst``.

    Args:
        rate_per_minute: sustained scores per minute (> 0).
        burst: bucket capacity; default ``max(1, rate_per_minute / 60)``, i.e. one second's
            worth, so a quiet rule cannot unload a minute's allowance at once.
        clock: seconds, monotonic.

    The bucket starts full. ``try_take()`` never blocks.
    """

    def __init__(self, rate_per_minute: float, burst: float | None = None,
                 clock: Clock = time.monotonic) -> None:
        self.rate = float(rate_per_minute) / 60.0
        self.capacity = float(burst) if burst is not None else max(1.0, self.rate)
        self._clock = clock
        self._tokens = self.capacity
        self._last = clock()
        self._lock = threading.Lock()

    def try_take(self) -> bool:
        """Take one token if there is one; return whether it was taken."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
            self._last = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False


class HourlyBudget:
    """A rolling one-hour budget of judge tokens and/or cost.

    Args:
        max_tokens_per_hour: input + output tokens the rule's judge may use in any rolling
            hour; None for no token cap.
        max_cost_per_hour: USD (as litellm prices it) in any rolling hour; None for no cost cap.
            Calls whose cost litellm does not know count as 0.
        clock: seconds, monotonic.

    A job is admitted while the spend of the past hour is below both caps; what it spends is
    recorded when it finishes, so a burst of concurrent jobs can overshoot by at most what
    they spend together.
    """

    def __init__(self, max_tokens_per_hour: float | None = None,
                 max_cost_per_hour: float | None = None, clock: Clock = time.monotonic) -> None:
        self.max_tokens = max_tokens_per_hour
        self.max_cost = max_cost_per_hour
        self._clock = clock
        self._spent: deque[tuple[float, float, float]] = deque()
        self._tokens = 0.0
        self._cost = 0.0
        self._lock = threading.Lock()

    def _expire(self, now: float) -> None:
        while self._spent and self._spent[0][0] <= now - 3600.0:
            _, tokens, cost = self._spent.popleft()
            self._tokens -= tokens
            self._cost -= cost

    def admits(self) -> bool:
        """Whether the past hour's spend leaves room for another job."""
        with self._lock:
            self._expire(self._clock())
            if self.max_tokens is not None and self._tokens >= self.max_tokens:
                return False
            return not (self.max_cost is not None and self._cost >= self.max_cost)

    def spend(self, tokens: float, cost: float | None) -> None:
        """Record what a finished job used."""
        if not tokens and not cost:
            return
        with self._lock:
            now = self._clock()
            self._expire(now)
            self._spent.append((now, float(tokens), float(cost or 0.0)))
            self._tokens += float(tokens)
            self._cost += float(cost or 0.0)
