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
    """The trace-sampling decision of a set of rules, made once per trace: for each
    ``(rate, salt)`` sample whether it picks the trace. The last trace asked about is
    remembered (the spans of one trace end one after another, and the decorators ask when a
    span starts as well as the span processor when it ends), so the hashes are computed once.

    Args:
        samples: ``(rate, salt)`` pairs, as ``trace_sampled`` takes them, one per rule.

    Attributes:
        fixed: every trace's decision when each rate is 0 or 1 (known without the trace's
            id), else None.
        always: whether any sample picks every trace (True) or none picks any (False) when
            ``fixed``; else None.

    Examples:
        >>> picks = TracePicker([(0.0, ""), (1.0, "")])
        >>> picks.decide(0x5b8efff798038103d269b633813fc60c)
        (False, True)
        >>> picks(0x5b8efff798038103d269b633813fc60c)
        True
    """

    __slots__ = ("_samples", "_last", "fixed", "always", "_salts", "_one")

    def __init__(self, samples: list[tuple[float, str]] | tuple[tuple[float, str], ...]) -> None:
        self._samples = tuple((float(rate), str(salt)) for rate, salt in samples)
        self._last: tuple[int, tuple[bool, ...]] = (-1, ())
        # Known without hashing when every rate is 0 or 1.
        self.fixed: tuple[bool, ...] | None = (
            tuple(rate >= 1.0 for rate, _ in self._samples)
            if all(rate >= 1.0 or rate <= 0.0 for rate, _ in self._samples) else None)
        self.always: bool | None = None if self.fixed is None else True in self.fixed
        # ``trace_sampled``'s test, taken apart: one hash per distinct salt (rules that share
        # one share the hash), compared with each rule's bound (``2**64`` picks every trace,
        # 0 none).
        salts: dict[bytes, list[tuple[int, int]]] = {}
        for i, (rate, salt) in enumerate(self._samples):
            bound = _BOUND if rate >= 1.0 else 0 if rate <= 0.0 else int(rate * _BOUND)
            salts.setdefault(salt.encode("utf-8"), []).append((i, bound))
        self._salts = tuple((salt, tuple(pairs)) for salt, pairs in salts.items())
        # The common case, one rule: its salt and bound.
        self._one = ((self._salts[0][0], self._salts[0][1][0][1])
                     if len(self._samples) == 1 else None)

    def decide(self, trace_id: int) -> tuple[bool, ...]:
        """For each sample, in order, whether it picks ``trace_id`` (as ``trace_sampled``
        decides)."""
        fixed = self.fixed
        if fixed is not None:
            return fixed
        last = self._last  # one read: a pair written whole by any thread
        if last[0] == trace_id:
            return last[1]
        key = trace_id.to_bytes(16, "big")
        one = self._one
        if one is not None:
            decision: tuple[bool, ...] = (int.from_bytes(
                hashlib.blake2b(key + one[0], digest_size=8).digest(), "big") < one[1],)
        else:
            picked = [False] * len(self._samples)
            for salt, pairs in self._salts:
                hashed = int.from_bytes(hashlib.blake2b(key + salt, digest_size=8).digest(),
                                        "big")
                for i, bound in pairs:
                    picked[i] = hashed < bound
            decision = tuple(picked)
        self._last = (trace_id, decision)
        return decision

    def __call__(self, trace_id: int) -> bool:
        """Whether any sample picks ``trace_id``."""
        return True in self.decide(trace_id)
