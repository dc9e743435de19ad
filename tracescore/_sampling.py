"""Deterministic, trace-id-based sampling decisions.

A decision depends only on the trace id, the rate and the rule's salt, never on ``random``, so
every process that sees a trace (a scaled-out service, a collector-mode scorer behind trace-id
load balancing) makes the same decision.
"""

from __future__ import annotations

import hashlib

_BOUND = 1 << 64


def trace_sampled(trace_id: int, rate: float, salt: str = "") -> bool:
    """Return whether ``trace_id`` falls within the sampled fraction ``rate``.

    Args:
        trace_id: the 128-bit OpenTelemetry trace id as an int.
        rate: fraction of traces to pick, 0.0..1.0. 0 picks none, 1 picks all.
        salt: mixed into the hash so that two rules at the same rate pick independent
            subsets; an empty salt keeps rules with equal rates nested (a 0.1 rule's traces
            are a subset of a 0.5 rule's).

    Returns:
        True when the trace is sampled.

    The low 64 bits of a W3C trace id are random by specification, but many producers (and
    hand-written ids in tests) are not uniformly random, so the id is hashed (BLAKE2b, 8 bytes)
    before it is compared with ``rate * 2**64``.
    """
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    digest = hashlib.blake2b(
        trace_id.to_bytes(16, "big") + salt.encode("utf-8"), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big") < int(rate * _BOUND)


class TracePicker:
    """Whether any of a set of ``(rate, salt)`` samples picks a trace, remembering the last
    trace asked about (the spans of one trace end one after another, and the decorators ask
    when a span starts as well as the span processor when it ends).

    Args:
        samples: ``(rate, salt)`` pairs, as ``trace_sampled`` takes them.

    Example:
        >>> picks = TracePicker([(0.0, ""), (1.0, "")])
        >>> picks(0x5b8efff798038103d269b633813fc60c)
        True
    """

    __slots__ = ("_samples", "_last", "_fixed")

    def __init__(self, samples: list[tuple[float, str]] | tuple[tuple[float, str], ...]) -> None:
        self._samples = tuple((float(rate), str(salt)) for rate, salt in samples)
        self._last: tuple[int, bool] = (-1, False)
        # Known without hashing: a rate of 1 picks every trace, rates of 0 alone pick none.
        self._fixed: bool | None = (
            True if any(rate >= 1.0 for rate, _ in self._samples)
            else False if all(rate <= 0.0 for rate, _ in self._samples) else None)

    def __call__(self, trace_id: int) -> bool:
        fixed = self._fixed
        if fixed is not None:
            return fixed
        last = self._last  # one read: a pair written whole by any thread
        if last[0] == trace_id:
            return last[1]
        picked = False
        for rate, salt in self._samples:
            if trace_sampled(trace_id, rate, salt):
                picked = True
                break
        self._last = (trace_id, picked)
        return picked
