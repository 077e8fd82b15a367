"""The VPU's per-row scalar units: softmax's reciprocal, LayerNorm's reciprocal square root and
the K/V weight shift (:mod:`golden.vpu`, bit for bit).

Each is a free-running register chain: every register loads every cycle from the one before, so
``LATENCY`` cycles after its inputs settle the outputs hold the row's scalars. The VPU holds the
inputs (the row's sums) still for that long and then latches the outputs. One row at a time; the
chains cost a few multipliers in total, not per lane.
"""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.vpu import VPUTables

from .arith import bit_length, rom, shift_round
from .params import check_config, check_int, check_tables

__all__ = ["SoftmaxRecip", "LayerNormRsqrt", "KVShift"]


def _reg(m, shape, value, name):
    r = Signal(shape, name=name)
    m.d.sync += r.eq(value)
    return r


class SoftmaxRecip(wiring.Component):
    """``y1 = recip_core(X)`` of a softmax row's sum and the output shift ``Qr + j - pb``
    (:func:`golden.vpu.softmax`). A zero sum (a fully masked row) is treated as ``2**E`` like the
    golden model; its outputs are then irrelevant because every exponential is 0.

    Parameters: ``cfg`` and, keyword-only, ``tables`` (:class:`golden.vpu.VPUTables`).
    Members: ``total`` In; ``y1``, ``shift`` Out. Latency 5 cycles.
    """

    LATENCY = 5

    def __init__(self, cfg: Config, *, tables: VPUTables):
        self._cfg, self._t = check_config(cfg), check_tables(tables)
        t = tables
        w = t.widths
        super().__init__({
            "total": In(unsigned(w["softmax.sum"][0])),
            "y1": Out(unsigned(w["softmax.y1"][0])),
            "shift": Out(unsigned(w["softmax.shift"][0])),
        })

    def elaborate(self, platform):
        cfg, t = self._cfg, self._t
        Qr, Kr, E, pb = t.recip_frac, t.recip_lut_bits, t.exp_frac, cfg.p_base_log2
        m = Module()
        tot = Mux(self.total == 0, 1 << E, self.total)
        c1_tot = _reg(m, self.total.shape(), tot, "c1_tot")
        c1_j = _reg(m, range(len(self.total) + 1), bit_length(m, tot, "bits") - 1, "c1_j")
        X = Mux(c1_j >= Qr, c1_tot >> (c1_j - Qr)[:len(c1_j)],
                c1_tot << (Qr - c1_j)[:max(1, Qr.bit_length())])
        c2_X = _reg(m, unsigned(Qr + 1), X, "c2_X")
        c2_shift = _reg(m, self.shift.shape(), Qr + c1_j - pb, "c2_shift")
        lut = rom(m, "recip_lut", t.recip_lut, unsigned(Qr))
        m.d.comb += lut.addr.eq(c2_X[Qr - Kr:Qr])
        c3_X = _reg(m, c2_X.shape(), c2_X, "c3_X")
        c3_y0 = _reg(m, unsigned(Qr), lut.data, "c3_y0")
        c3_shift = _reg(m, c2_shift.shape(), c2_shift, "c3_shift")
        tt = shift_round(m, c3_X * c3_y0, Qr, t.widths["recip.t"][0] + 1, "recip_t")
        c4_e = _reg(m, unsigned(Qr + 2), (1 << (Qr + 1)) - tt, "c4_e")
        c4_y0 = _reg(m, unsigned(Qr), c3_y0, "c4_y0")
        c4_shift = _reg(m, c2_shift.shape(), c3_shift, "c4_shift")
        y1 = shift_round(m, c4_y0 * c4_e, Qr, t.widths["recip.y1"][0] + 1, "recip_y1")
        m.d.sync += [self.y1.eq(y1), self.shift.eq(c4_shift)]
        return m


class LayerNormRsqrt(wiring.Component):
    """The per-row scalars of :func:`golden.vpu.layernorm`: from ``S1 = Σx``, ``S2 = Σx²``, the
    row length ``n`` and ``eps_q``: ``V = n·S2 - S1²``, ``Vp = (V << Ge) + eps_q``, the even
    normalization ``2h``, ``y1 = rsqrt_core(X)``, and the lane operands ``ny1 = n·y1``,
    ``s1y1 = S1·y1``, the output shift ``Qs + h - F - Ge/2`` and ``zero`` (``Vp == 0``: the row's
    outputs are 0). The lanes then compute ``rnd(x·ny1 - s1y1, shift) = rnd((n·x - S1)·y1, shift)``
    exactly.

    Parameters: ``cfg`` and, keyword-only, ``tables`` (:class:`golden.vpu.VPUTables`) and the
    widths (integers >= 1) of the ``ny1`` and ``s1y1`` outputs and of the ``eps_q`` input.
    Members: ``n``, ``s1``, ``s2``, ``eps_q`` In; ``ny1``, ``s1y1``, ``shift``, ``zero`` Out.
    Latency 10 cycles.
    """

    LATENCY = 10

    def __init__(self, cfg: Config, *, tables: VPUTables, ny1_width: int, s1y1_width: int,
                 eps_width: int):
        self._cfg, self._t = check_config(cfg), check_tables(tables)
        t = tables
        for name, width in (("ny1_width", ny1_width), ("s1y1_width", s1y1_width),
                            ("eps_width", eps_width)):
            check_int(name, width, lo=1)
        w = t.widths
        super().__init__({
            "n": In(range(cfg.ln_max + 1)),
            "s1": In(signed(w["layernorm.S1"][0])),
            "s2": In(unsigned(w["layernorm.S2"][0])),
            "eps_q": In(unsigned(eps_width)),
            "ny1": Out(unsigned(ny1_width)),
            "s1y1": Out(signed(s1y1_width)),
            "shift": Out(unsigned(w["layernorm.shift"][0])),
            "zero": Out(1),
        })

    def elaborate(self, platform):
        cfg, t = self._cfg, self._t
        w = t.widths
        Qs, Ks, Ge, F = t.rsqrt_frac, t.rsqrt_lut_bits, t.ln_eps_frac, cfg.act_frac
        m = Module()
        vpw = w["layernorm.Vp"][0]
        c1_ns2 = _reg(m, unsigned(w["layernorm.nS2"][0]), self.n * self.s2, "c1_ns2")
        c1_s1sq = _reg(m, unsigned(w["layernorm.S1sq"][0]), self.s1 * self.s1, "c1_s1sq")
        c2_v = _reg(m, unsigned(w["layernorm.V"][0]), c1_ns2 - c1_s1sq, "c2_v")
        c3_vp = _reg(m, unsigned(vpw), (c2_v << Ge) + self.eps_q, "c3_vp")
        zero = c3_vp == 0
        vs = Mux(zero, 1, c3_vp)
        b = bit_length(m, vs, "b") - 1
        h = Signal(range(vpw), name="h")
        m.d.comb += h.eq(b >> 1)
        c4_vs = _reg(m, unsigned(vpw), vs, "c4_vs")
        c4_h = _reg(m, h.shape(), h, "c4_h")
        c4_zero = _reg(m, 1, zero, "c4_zero")
        two_h = c4_h << 1
        X = Mux(two_h >= Qs, c4_vs >> (two_h - Qs)[:len(two_h)],
                c4_vs << (Qs - two_h)[:max(1, Qs.bit_length())])
        chain = [("h", c4_h), ("zero", c4_zero)]

        def delay(regs, prefix):
            return [(k, _reg(m, v.shape(), v, f"{prefix}_{k}")) for k, v in regs]

        c5_X = _reg(m, unsigned(Qs + 2), X, "c5_X")
        chain = delay(chain, "c5")
        o = c5_X[Qs + 1]
        idx = Signal(Ks + 1, name="rsqrt_idx")
        m.d.comb += idx.eq(Mux(o, (1 << Ks) | c5_X[Qs + 1 - Ks:Qs + 1], c5_X[Qs - Ks:Qs]))
        lut = rom(m, "rsqrt_lut", t.rsqrt_lut, unsigned(Qs))
        m.d.comb += lut.addr.eq(idx)
        c6_X = _reg(m, c5_X.shape(), c5_X, "c6_X")
        c6_y0 = _reg(m, unsigned(Qs), lut.data, "c6_y0")
        chain = delay(chain, "c6")
        y0sq = shift_round(m, c6_y0 * c6_y0, Qs, w["rsqrt.y0sq"][0] + 1, "y0sq")
        c7_y0sq = _reg(m, unsigned(Qs + 1), y0sq, "c7_y0sq")
        c7_X = _reg(m, c5_X.shape(), c6_X, "c7_X")
        c7_y0 = _reg(m, unsigned(Qs), c6_y0, "c7_y0")
        chain = delay(chain, "c7")
        vy2 = shift_round(m, c7_X * c7_y0sq, Qs, w["rsqrt.vy2"][0] + 1, "vy2")
        c8_e = _reg(m, unsigned(Qs + 3), 3 * (1 << Qs) - vy2, "c8_e")
        c8_y0 = _reg(m, unsigned(Qs), c7_y0, "c8_y0")
        chain = delay(chain, "c8")
        y1 = shift_round(m, c8_y0 * c8_e, Qs + 1, w["rsqrt.y1"][0] + 1, "y1")
        c9_y1 = _reg(m, unsigned(w["layernorm.y1"][0]), y1, "c9_y1")
        chain = dict(delay(chain, "c9"))
        m.d.sync += [
            self.ny1.eq(self.n * c9_y1),
            self.s1y1.eq(self.s1 * c9_y1),
            self.shift.eq(Qs + chain["h"] - F - Ge // 2),
            self.zero.eq(chain["zero"]),
        ]
        return m


class KVShift(wiring.Component):
    """The K/V weight shift (:func:`golden.vpu.kv_shift`): the smallest ``e`` with
    ``rnd(amax, e) <= 127``. Parameter: ``cfg``. Members: ``amax`` In, ``e`` Out. Latency 1
    cycle."""

    LATENCY = 1

    def __init__(self, cfg: Config):
        self._cfg = check_config(cfg)
        # The shift the largest magnitude, 2**(act_width - 1), needs.
        amax, e_max = 1 << (cfg.act_width - 1), 0
        while (amax + ((1 << e_max) >> 1)) >> e_max > 127:
            e_max += 1
        self._e_max = e_max
        super().__init__({"amax": In(unsigned(cfg.act_width)),
                          "e": Out(range(self._e_max + 1))})

    def elaborate(self, platform):
        m = Module()
        e = Signal(self.e.shape(), name="e_next")
        m.d.comb += e.eq(self._e_max)
        # Descending, so the smallest fitting shift is assigned last and wins.
        for cand in reversed(range(self._e_max + 1)):
            half = (1 << (cand - 1)) if cand else 0
            with m.If(((self.amax + half) >> cand) <= 127):
                m.d.comb += e.eq(cand)
        m.d.sync += self.e.eq(e)
        return m
