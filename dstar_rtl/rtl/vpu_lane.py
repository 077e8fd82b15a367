"""One VPU lane: the multiply-add-round-saturate datapath every VPU function is mapped onto.

``r = rnd(x·y + add, rs)``, then a post step chosen by ``mode``:

=========  =========================================================================
mode       post step
=========  =========================================================================
SAT_W      saturate to the activation format (``act_width`` signed)
SAT_XHAT   saturate to ``x̂`` (``act_width + 1`` signed)
SAT_8      saturate to INT8
RAW        pass ``r`` (``x²`` for LayerNorm's sum of squares, ``Δx``, the K/V shift)
EXP        softmax's exponential: ``k = min(r >> Z, E + 2)``, ``fr = r mod 2**Z``,
           ``ex = rnd(exp_lut[fr] << (E - Et), k)`` (:func:`golden.vpu.softmax`)
=========  =========================================================================

A disabled lane (``lane_en`` low: past the row's end, masked, or a LayerNorm row with zero
variance) gives 0 and no saturation flag. ``side``/``side_flag`` (``acc_requant``'s running sum
``Y`` and its saturation) ride along unchanged.

Latency ``LATENCY = 6`` cycles (product, sum, rounding bias, rounding shift, post, exponential
shift); every register
advances when ``en`` is high, so a lane holds its contents while the VPU's output is stalled.
Throughput one element per cycle.
"""

import enum

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.vpu import VPUTables

from .arith import rom, round_bias, saturate, shift_round
from .params import check_config, check_tables

__all__ = ["LaneMode", "VPULane", "lane_widths"]


class LaneMode(enum.IntEnum):
    SAT_W = 0
    SAT_XHAT = 1
    SAT_8 = 2
    RAW = 3
    EXP = 4


def lane_widths(cfg: Config, t: VPUTables, requant: bool = True) -> dict:
    """Operand and result widths of a lane for one configuration (all signed except ``rs``).

    ``x``: the widest of ``acc_requant``'s saturated sum (``acc_bits``), a reconstruction
    (``act_width + 3``) and a logit difference; ``y``: the widest of LayerNorm's ``n·y1``, the
    requantization mantissa and ``log2(e)`` (softmax's output, the exponential times the
    reciprocal, runs on :class:`rtl.vpu_pout.SoftmaxOut`); ``add``: the widest addend
    (``bias << sh_max``, LayerNorm's ``S1·y1``, GELU's table sum); ``rs``: the largest rounding
    shift; ``r``: the widest rounded result (``x²``, an exponential's argument). Without
    ``requant`` (a VPU that does not run ``acc_requant``) the widths the other operations need.
    """
    W, F = cfg.act_width, cfg.act_frac
    w = t.widths
    ny1 = w["layernorm.y1"][0] + cfg.ln_max.bit_length()
    s1y1 = w["layernorm.S1"][0] + w["layernorm.y1"][0]
    rq = requant
    xw = max(cfg.acc_bits if rq else 0, cfg.recon_width, W + 1, w["gelu.delta"][0])
    yw = max(ny1 + 1, cfg.mult_width + 1 if rq else 0, t.log2e_q.bit_length() + 1, W + 1,
             w["gelu.f"][0] + 1)
    aw = max(W + cfg.sh_max if rq else 0, s1y1, w["gelu.sum"][0], W + F + 1,
             cfg.recon_width) + 1
    rs_max = max(cfg.sh_max if rq else 0, F + t.log2e_frac - t.exp_lut_bits,
                 t.gelu_frac - t.gelu_seg_log2,
                 (1 << w["layernorm.shift"][0]) - 1, W)
    sw = max(xw + yw, aw) + 1
    rw = max(2 * W + 1, w["softmax.a"][0] + 1, cfg.dx_width, t.exp_frac + 2)
    return {"x": xw, "y": yw, "add": aw, "rs": rs_max.bit_length(), "sum": sw, "r": rw,
            "ny1": ny1, "s1y1": s1y1}


class VPULane(wiring.Component):
    """One lane of the VPU datapath (see the module docstring).

    Parameters: ``cfg`` and, keyword-only, ``tables`` (:class:`golden.vpu.VPUTables` of ``cfg``)
    and ``requant`` (default True: the ``acc_requant`` widths and the ``side`` data; False: a
    lane of a VPU without ``acc_requant``, no ``side``/``side_flag`` ports).

    Members
    -------
    en : In(1): advance every stage.
    x, y, add, rs, mode, lane_en, side, side_flag : In: the operands, registered at the VPU's
        operand stage.
    r, sat, side_o, side_flag_o : Out: the result (``r`` signed, wide enough for every mode),
        its saturation flag and the side data, ``LATENCY`` advances later.
    """

    LATENCY = 6

    def __init__(self, cfg: Config, *, tables: VPUTables, requant: bool = True):
        self._cfg, self._t = check_config(cfg), check_tables(tables)
        self._rq = bool(requant)
        w = self._w = lane_widths(cfg, tables, requant)
        side = {"side": In(signed(cfg.acc_bits)), "side_flag": In(1),
                "side_o": Out(signed(cfg.acc_bits)), "side_flag_o": Out(1)} if requant else {}
        super().__init__({
            "en": In(1),
            "x": In(signed(w["x"])),
            "y": In(signed(w["y"])),
            "add": In(signed(w["add"])),
            "rs": In(unsigned(w["rs"])),
            "mode": In(LaneMode),
            "lane_en": In(1),
            "r": Out(signed(w["r"])),
            "sat": Out(1),
            **side,
        })

    def elaborate(self, platform):
        cfg, t, w = self._cfg, self._t, self._w
        W = cfg.act_width
        Z, E, Et = t.exp_lut_bits, t.exp_frac, t.exp_lut_frac
        m = Module()

        def stage(prefix, **sigs):
            """Registers for the next stage, loaded when ``en``."""
            regs = {}
            for k, (shape, value) in sigs.items():
                reg = Signal(shape, name=f"{prefix}_{k}")
                with m.If(self.en):
                    m.d.sync += reg.eq(value)
                regs[k] = reg
            return regs

        kept = ("mode", "en", "side", "flag") if self._rq else ("mode", "en")

        def carry(prev):
            return {k: (prev[k].shape(), prev[k]) for k in kept}

        s0 = {"mode": self.mode, "en": self.lane_en}
        if self._rq:
            s0.update(side=self.side, flag=self.side_flag)
        # Stage B: the product.
        b = stage("b", prod=(signed(w["x"] + w["y"]), self.x * self.y),
                  add=(signed(w["add"]), self.add), rs=(unsigned(w["rs"]), self.rs),
                  **{k: (v.shape(), v) for k, v in s0.items()})
        # Stage C: the sum.
        c = stage("c", sum=(signed(w["sum"]), b["prod"] + b["add"]), rs=(b["rs"].shape(), b["rs"]),
                  **carry(b))
        # Stages D1, D2: the rounding (the bias, then the shift).
        biased = round_bias(m, c["sum"], c["rs"], "rounded")
        d1 = stage("d1", t=(biased.shape(), biased), rs=(c["rs"].shape(), c["rs"]), **carry(c))
        d = stage("d", r=(signed(w["sum"]), d1["t"] >> d1["rs"]), **carry(d1))

        # Stage E: saturation, or the exponential's table look-up.
        rd = d["r"]
        sats = {
            LaneMode.SAT_W: saturate(m, rd, -(1 << (W - 1)), (1 << (W - 1)) - 1, W, "sat_w"),
            LaneMode.SAT_XHAT: saturate(m, rd, -(1 << W), (1 << W) - 1, W + 1, "sat_xhat"),
            LaneMode.SAT_8: saturate(m, rd, -128, 127, 8, "sat_8"),
        }
        post = Signal(signed(w["r"]), name="post")
        post_sat = Signal(name="post_sat")
        with m.Switch(d["mode"]):
            for mode, (val, flag) in sats.items():
                with m.Case(mode):
                    m.d.comb += [post.eq(val), post_sat.eq(flag)]
            with m.Default():
                m.d.comb += [post.eq(rd), post_sat.eq(0)]
        lut = rom(m, "exp_lut", t.exp_lut, unsigned(Et + 1))
        k = Signal(range(E + 3), name="k")
        m.d.comb += [lut.addr.eq(rd[:Z]), k.eq(Mux((rd >> Z) > E + 2, E + 2, rd >> Z))]
        e = stage("e", post=(signed(w["r"]), Mux(d["en"], post, 0)),
                  sat=(1, d["en"] & post_sat), k=(k.shape(), k),
                  lut=(unsigned(E + 1), lut.data << (E - Et)), **carry(d))

        # Stage F: the exponential's shift, or the saturated value.
        ex = shift_round(m, e["lut"], e["k"], E + 2, "ex")
        is_exp = e["mode"] == LaneMode.EXP
        side = ({"side": (e["side"].shape(), e["side"]), "flag": (1, e["flag"])} if self._rq
                else {})
        f = stage("f", r=(signed(w["r"]), Mux(is_exp, Mux(e["en"], ex, 0), e["post"])),
                  sat=(1, ~is_exp & e["sat"]), **side)
        m.d.comb += [self.r.eq(f["r"]), self.sat.eq(f["sat"])]
        if self._rq:
            m.d.comb += [self.side_o.eq(f["side"]), self.side_flag_o.eq(f["flag"])]
        return m
