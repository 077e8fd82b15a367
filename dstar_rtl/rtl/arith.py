"""Combinational arithmetic shared by the VPU's lanes and scalar units.

Each helper adds comb logic to a module and returns a signal; none has state. The rounding is
the golden model's :func:`golden.fmdq.rnd` (divide by ``2**s``, half away from zero) and the
saturation its clamp, so a unit built from these matches the golden functions by construction
of the same formula, not by a tolerance.
"""

from amaranth.hdl import Const, Mux, Signal, signed, unsigned
from amaranth.lib.memory import Memory

__all__ = ["round_bias", "shift_round", "saturate", "bit_length", "tree_max", "tree_reduce", "rom"]


def round_bias(m, v, s, name: str):
    """The first half of :func:`shift_round`: ``v + 2**(s-1) - [v < 0 and s > 0]`` for a signal
    shift ``s`` (an arithmetic shift right by ``s`` then finishes the rounding). The half is a
    one-hot decode of ``s`` (no wide variable left shift)."""
    vs = Signal(v.shape(), name=f"{name}_v")
    m.d.comb += vs.eq(v)
    # The half for a shift of i is bit i-1; shifts past the value's width need no half.
    top = min(len(vs) + 1, (1 << len(s)) - 1)
    half = Signal(unsigned(max(1, top)), name=f"{name}_half")
    for i in range(1, top + 1):
        m.d.comb += half[i - 1].eq(s == i)
    t = Signal(signed(len(vs) + 2), name=f"{name}_t")
    if vs.shape().signed:
        m.d.comb += t.eq(vs + half - ((vs < 0) & (s != 0)))
    else:
        m.d.comb += t.eq(vs + half)
    return t


def shift_round(m, v, s, width: int, name: str):
    """``rnd(v, s)`` for a signed or unsigned ``v`` and an unsigned shift ``s`` (a signal or an
    int): ``(v + 2**(s-1) - [v < 0 and s > 0]) >> s``, arithmetic, which equals rounding half
    away from zero. Result: a signed ``width``-bit signal (the caller sizes it for the largest
    result)."""
    out = Signal(signed(width), name=name)
    if isinstance(s, int):
        vs = Signal(v.shape(), name=f"{name}_v")
        m.d.comb += vs.eq(v)
        if s == 0:
            m.d.comb += out.eq(vs)
        else:
            neg = (vs < 0) if vs.shape().signed else 0
            m.d.comb += out.eq((vs + (1 << (s - 1)) - neg) >> s)
        return out
    m.d.comb += out.eq(round_bias(m, v, s, name) >> s)
    return out


def saturate(m, v, lo: int, hi: int, width: int, name: str):
    """Clamp ``v`` to ``[lo, hi]``; returns ``(value, flag)`` with ``value`` a ``width``-bit signal
    (signed when ``lo < 0``) and ``flag`` high when ``v`` was outside."""
    out = Signal(signed(width) if lo < 0 else unsigned(width), name=name)
    flag = Signal(name=f"{name}_sat")
    m.d.comb += [
        flag.eq((v < lo) | (v > hi)),
        out.eq(Mux(v > hi, Const(hi), Mux(v < lo, Const(lo), v))),
    ]
    return out, flag


def bit_length(m, v, name: str):
    """``int.bit_length`` of an unsigned value (0 for 0): a balanced tree (log2 depth), each node
    choosing the upper half's length when it is non-zero."""
    def node(lo, hi):
        if hi - lo == 1:
            return v[lo], 1
        mid = lo + (hi - lo + 1) // 2
        up, up_w = node(mid, hi)
        dn, dn_w = node(lo, mid)
        width = max(up_w, dn_w, (hi - lo).bit_length())
        out = Signal(width, name=f"{name}_{lo}_{hi}")
        m.d.comb += out.eq(Mux(v[mid:hi].any(), up + (mid - lo), dn))
        return out, width

    res, _ = node(0, len(v))
    out = Signal(range(len(v) + 1), name=name)
    m.d.comb += out.eq(res)
    return out


def _registered(depth: int, n: int, every: int) -> bool:
    """Whether :func:`tree_reduce` registers the level after ``depth`` (``n`` values enter it)."""
    return bool(every and (depth + 1) % every == 0 and n > 2)


def tree_stages(n: int, every: int) -> int:
    """The registers :func:`tree_reduce` puts on the way from ``n`` values to their result."""
    stages = depth = 0
    while n > 1:
        stages += _registered(depth, n, every)
        n, depth = (n + 1) // 2, depth + 1
    return stages


def tree_reduce(m, values, kind: str, name: str, every: int = 0):
    """Reduce ``values`` by a balanced tree of ``kind`` (``"max"`` or ``"sum"``); with
    ``every > 0`` a register follows every ``every`` levels (free-running: the caller delays its
    valid flag by the returned stage count). Returns ``(result, stages)``; sums widen by one bit
    per level, maxima keep the values' shape."""
    level = list(values)
    depth = stages = 0
    while len(level) > 1:
        nxt = []
        registered = _registered(depth, len(level), every)
        for i in range(0, len(level) - 1, 2):
            a, b = level[i], level[i + 1]
            if kind == "max":
                shape, value = a.shape(), Mux(a > b, a, b)
            else:
                w = max(len(a), len(b)) + 1
                shape, value = (signed(w) if a.shape().signed or b.shape().signed
                                else unsigned(w)), a + b
            s = Signal(shape, name=f"{name}_{depth}_{i // 2}")
            if registered:
                m.d.sync += s.eq(value)
            else:
                m.d.comb += s.eq(value)
            nxt.append(s)
        if len(level) % 2:
            last = level[-1]
            if registered:
                r = Signal(last.shape(), name=f"{name}_{depth}_pass")
                m.d.sync += r.eq(last)
                last = r
            nxt.append(last)
        stages += bool(registered)
        level, depth = nxt, depth + 1
    return level[0], stages


def tree_max(m, values, name: str):
    """The largest of ``values`` (signals of one shape) by a balanced combinational tree."""
    return tree_reduce(m, values, "max", name)[0]


def rom(m, name: str, values, shape):
    """A read-only table (``amaranth.lib.memory``, asynchronous read): returns its read port;
    drive ``.addr``, read ``.data`` in the same cycle."""
    mem = Memory(shape=shape, depth=len(values), init=[int(v) for v in values])
    m.submodules[name] = mem
    return mem.read_port(domain="comb")
