"""Combinational arithmetic shared by the VPU's lanes and scalar units.

Each helper adds comb logic to a module and returns a signal; none has state. The rounding is
the golden model's :func:`golden.fmdq.rnd` (divide by ``2**s``, half away from zero) and the
saturation its clamp, so a unit built from these matches the golden functions by construction
of the same formula, not by a tolerance.
"""

from amaranth.hdl import Const, Mux, Signal, signed, unsigned
from amaranth.lib.memory import Memory

__all__ = ["shift_round", "saturate", "bit_length", "rom"]


def shift_round(m, v, s, width: int, name: str):
    """``rnd(v, s)`` for a signed ``v`` and an unsigned shift ``s`` (a signal or an int):
    ``(v + 2**(s-1) - [v < 0 and s > 0]) >> s``, arithmetic, which equals rounding half away from
    zero. The half is a one-hot decode of ``s`` (no wide variable left shift). Result: a signed
    ``width``-bit signal (the caller sizes it for the largest result)."""
    vs = Signal(v.shape(), name=f"{name}_v")
    m.d.comb += vs.eq(v)
    is_signed = vs.shape().signed
    out = Signal(signed(width), name=name)
    if isinstance(s, int):
        if s == 0:
            m.d.comb += out.eq(vs)
        else:
            m.d.comb += out.eq((vs + (1 << (s - 1)) - ((vs < 0) if is_signed else 0)) >> s)
        return out
    # The half for a shift of i is bit i-1; shifts past the value's width need no half.
    top = min(len(vs) + 1, (1 << len(s)) - 1)
    half = Signal(unsigned(max(1, top)), name=f"{name}_half")
    for i in range(1, top + 1):
        m.d.comb += half[i - 1].eq(s == i)
    t = Signal(signed(len(vs) + 2), name=f"{name}_t")
    if is_signed:
        m.d.comb += t.eq(vs + half - ((vs < 0) & (s != 0)))
    else:
        m.d.comb += t.eq(vs + half)
    m.d.comb += out.eq(t >> s)
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
    """``int.bit_length`` of an unsigned value (0 for 0): a priority encoder, highest bit wins."""
    out = Signal(range(len(v) + 1), name=name)
    m.d.comb += out.eq(0)
    for i in range(len(v)):
        with m.If(v[i]):
            m.d.comb += out.eq(i + 1)
    return out


def rom(m, name: str, values, shape):
    """A read-only table (``amaranth.lib.memory``, asynchronous read): returns its read port;
    drive ``.addr``, read ``.data`` in the same cycle."""
    mem = Memory(shape=shape, depth=len(values), init=[int(v) for v in values])
    m.submodules[name] = mem
    return mem.read_port(domain="comb")
