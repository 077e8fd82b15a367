"""Independent plain-Python references of numerics §2.2 and 2.3, written from the text only (no
golden code): used by several test files. Python integers throughout."""

from fractions import Fraction
from math import floor

THR8 = 127


def ref_rnd(v: int, r: int) -> int:
    """``v / 2**r`` rounded half away from zero, via exact rationals."""
    x = Fraction(int(v), 2 ** int(r))
    mag = floor(abs(x) + Fraction(1, 2))
    return -mag if x < 0 else mag


def ref_quantize(u, r0, thr, e_max):
    """numerics §2.2 steps 1-4 for one sub-channel, straight from the text.

    ``thr`` = (thr2, thr4, thr6); thr8 = 127. Returns ``(q list, b, e, M, saturated)`` with
    ``b = 0`` (and ``e = 0``) for an all-zero sub-channel.
    """
    u = [int(x) for x in u]
    thr_b = {2: thr[0], 4: thr[1], 6: thr[2], 8: THR8}
    amax = max(abs(x) for x in u)
    M = ref_rnd(amax, r0)                                          # step 1
    if M == 0:                                                     # step 4: all-zero sub-channel
        return [0] * len(u), 0, 0, 0, False
    fitting = [b for b in (2, 4, 6, 8) if M <= thr_b[b]]           # step 2
    b = min(fitting) if fitting else 8
    if M <= thr_b[8]:                                              # step 3
        e = 0
    else:
        e = None
        for cand in range(1, e_max + 1):
            if ref_rnd(amax, r0 + cand) <= THR8:
                e = cand
                break
        if e is None:   # beyond e_max: values saturate
            e = e_max
        b = 8
    lim = 2 ** (b - 1) - 1                                         # step 4
    raw = [ref_rnd(x, r0 + e) for x in u]
    q = [max(-lim, min(lim, v)) for v in raw]
    return q, b, e, M, q != raw


def ref_digits(q: int, b: int):
    """numerics §2.3: ``q`` in two's complement on ``b`` bits, cut into ``b/2`` 2-bit digits, least
    significant first; the top digit is signed {-2..1}, the others unsigned {0..3}."""
    v = int(q) % (2 ** b)                  # two's complement pattern
    out = []
    for k in range(b // 2):
        d = (v // 4 ** k) % 4
        if k == b // 2 - 1 and d >= 2:
            d -= 4
        out.append(d)
    return out


def tile_columns(groups):
    """A tile's group stream checked for its markers (``first`` on the first group only, ``last``
    on the last only); returns its valid lanes' ``(channel, k)``, sorted: which columns it
    carries."""
    n = len(groups)
    assert [g.first for g in groups] == [True] + [False] * (n - 1)
    assert [g.last for g in groups] == [False] * (n - 1) + [True]
    return sorted((int(g.channel[j]), int(g.k[j])) for g in groups
                  for j in range(int(g.valid.sum())))
