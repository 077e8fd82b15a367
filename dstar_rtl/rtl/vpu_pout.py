"""The VPU's softmax output datapath: ``P = min(rnd(ex·y1, shift), 2**pb - 1)`` per lane
(:func:`golden.vpu.softmax`, bit for bit), beside the lanes.

With its own multipliers the output pass of one softmax row runs while the lanes compute the
next rows' exponentials (``rtl/vpu.py``: up to four rows in flight, their words in a ring of two
longest rows), so a row costs its input beats once, not twice.

Latency ``LATENCY = 3`` cycles (the product; the rounding bias; the shift and the saturation),
throughput one beat per cycle; every register advances when ``en`` is high, so the unit holds
its contents while the VPU's output is stalled. A lane past the row's end (``i_len`` low) gives
0 and no saturation flag.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.vpu import VPUTables

from .arith import round_bias, saturate
from .params import check_config, check_tables

__all__ = ["SoftmaxOut"]


class SoftmaxOut(wiring.Component):
    """Parameters: ``cfg`` and, keyword-only, ``tables`` (:class:`golden.vpu.VPUTables`).

    Members
    -------
    en : In(1): advance every stage.
    i_valid, i_last, i_len (``vpu_lanes`` bits: lanes holding an element), i_ex (per lane the
        exponential, ``exp_frac + 1`` bits), i_y1 (the row's reciprocal), i_shift (its output
        shift) : In.
    o_valid, o_last, o_p (per lane ``P``, ``p_base_log2`` bits), o_sat (per lane) : Out,
        ``LATENCY`` advances later.
    """

    LATENCY = 3

    def __init__(self, cfg: Config, *, tables: VPUTables):
        self._cfg, self._t = check_config(cfg), check_tables(tables)
        L, w = cfg.vpu_lanes, tables.widths
        super().__init__({
            "en": In(1),
            "i_valid": In(1), "i_last": In(1), "i_len": In(L),
            "i_ex": In(data.ArrayLayout(unsigned(tables.exp_frac + 1), L)),
            "i_y1": In(unsigned(w["softmax.y1"][0])),
            "i_shift": In(unsigned(w["softmax.shift"][0])),
            "o_valid": Out(1), "o_last": Out(1),
            "o_p": Out(data.ArrayLayout(unsigned(cfg.p_base_log2), L)),
            "o_sat": Out(L),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        cfg = self._cfg
        L, pb = cfg.vpu_lanes, cfg.p_base_log2
        m = Module()

        def reg(shape, value, name):
            r = Signal(shape, name=name)
            with m.If(self.en):
                m.d.sync += r.eq(value)
            return r

        def ctl(prev, stage):
            return {k: reg(v.shape(), v, f"{k}{stage}") for k, v in prev.items()}

        c0 = {"valid": self.i_valid, "last": self.i_last, "len": self.i_len,
              "shift": self.i_shift}
        # Stage 1: the products.
        c1 = ctl(c0, 1)
        prod = [reg(unsigned(len(self.i_ex[k]) + len(self.i_y1)), self.i_ex[k] * self.i_y1,
                    f"prod{k}") for k in range(L)]
        # Stage 2: the rounding bias.
        c2 = ctl(c1, 2)
        biased = []
        for k in range(L):
            b = round_bias(m, prod[k], c1["shift"], f"bias{k}")
            biased.append(reg(b.shape(), b, f"biased{k}"))
        # Stage 3: the shift, the saturation to P's range, the lanes past the row's end.
        c3 = ctl({"valid": c2["valid"], "last": c2["last"]}, 3)
        ps, sats = [], []
        for k in range(L):
            v, f = saturate(m, biased[k] >> c2["shift"], 0, (1 << pb) - 1, pb, f"sat_p{k}")
            ps.append(reg(unsigned(pb), Mux(c2["len"][k], v, 0), f"p{k}"))
            sats.append(reg(1, f & c2["len"][k], f"sat{k}"))
        m.d.comb += [self.o_valid.eq(c3["valid"]), self.o_last.eq(c3["last"]),
                     self.busy.eq(c1["valid"] | c2["valid"] | c3["valid"])]
        for k in range(L):
            m.d.comb += [self.o_p[k].eq(ps[k]), self.o_sat[k].eq(sats[k])]
        return m
