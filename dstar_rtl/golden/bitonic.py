"""The bitonic sorting network of numerics §2.3, as a comparator list the RTL builds from.

``network(n)`` is a list of stages; a stage is a list of compare-exchanges ``(i, l, descending)``
with ``i < l`` that touch disjoint positions, so one stage is one layer of hardware. A
compare-exchange orders the pair descending (``a[i] >= a[l]``) or ascending and swaps only when the
pair is strictly out of that order. For ``n`` a power of two the network sorts descending.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["network", "compare_exchanges", "apply_network", "sort_key"]


@lru_cache(maxsize=None)
def network(n: int) -> tuple:
    """Stages of the bitonic network of width ``n`` (a power of two >= 1)."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"sort width must be a power of two >= 1, not {n}")
    stages = []
    k = 2
    while k <= n:
        j = k // 2
        while j >= 1:
            stage = tuple((i, i ^ j, (i & k) == 0) for i in range(n) if (i ^ j) > i)
            stages.append(stage)
            j //= 2
        k *= 2
    return tuple(stages)


def compare_exchanges(n: int) -> int:
    return sum(len(s) for s in network(n))


def sort_key(valid, exp, exp_width: int = 5):
    """The sort key ``(valid, exp)`` as one number, valid in the top bit."""
    return (np.asarray(valid, dtype=np.int64) << exp_width) | np.asarray(exp, dtype=np.int64)


def apply_network(keys, *payloads, n: int | None = None):
    """Run the network over the last axis of ``keys`` (any leading batch shape).

    Payload arrays of the same shape travel with their keys. Returns ``(keys, *payloads)`` sorted.
    """
    keys = np.array(keys, dtype=np.int64, copy=True)
    payloads = [np.array(p, copy=True) for p in payloads]
    n = keys.shape[-1] if n is None else n
    for stage in network(n):
        for i, l, desc in stage:
            a, b = keys[..., i], keys[..., l]
            swap = (a < b) if desc else (a > b)
            if not np.any(swap):
                continue
            for arr in (keys, *payloads):
                ai, al = arr[..., i].copy(), arr[..., l].copy()
                arr[..., i] = np.where(swap, al, ai)
                arr[..., l] = np.where(swap, ai, al)
    return (keys, *payloads)
