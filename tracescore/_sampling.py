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
