"""The matrix engine's own requantizer: ``acc_requant`` (numerics §2.5, :func:`golden.vpu.
acc_requant`) on ``T`` lanes, one drained token per cycle, so that the MPU's drain never needs
the VPU and the vector engine may run beside the matrix engine.

Per lane: ``Y' = sat(Y + acc, acc_bits)``, then ``y = sat(rnd(Y'·m + bias·2**sh, sh), act)``;
the flags of both saturations ride along. With a stored ``Y`` (``ystate_frac``, numerics §2.5)
the running sum arrives at ``ystate_width`` and goes back rounded: ``Y' = sat((Y << s) + acc,
acc_bits)`` with ``s = max(0, sh - mult_width - ystate_frac)`` per lane, ``y`` from that
``Y'``, and ``sat(rnd(Y', s), ystate_width)`` back to YBUF one stage later. Stages (one
register each): the sum and its saturation; the product and ``bias << sh``; their sum; the
rounding bias; the rounding shift; the saturation to the activation format. The arithmetic is
the VPU lane's (``rtl.arith``, the golden model's formula), at the widths ``acc_requant`` needs
and no wider.

Latency :attr:`Requant.y_latency` (1, or 2 with a stored ``Y``) cycles from ``i`` to the
running sums ``Y'`` (``y_valid``) and :attr:`Requant.LATENCY` (6) to the outputs ``y``
(``o_valid``), one row per cycle, no
back-pressure (the consumer takes every row: the matrix engine writes ABUF and YBUF with
priority). ``Y'`` leaves as soon as it is known, so it is not carried down the pipeline. A
``side`` payload travels with each row to ``o``, a ``ytag`` payload to ``Y'``. ``bad`` is high
in the cycle a row whose shift on any lane is outside ``[0, sh_max]`` enters (``sh`` is signed
here, so the caller passes ``sh - SREG - e`` as is).
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import Config, bitlen

from .arith import round_bias, saturate, shift_round
from .params import check_config

__all__ = ["Requant"]


class Requant(wiring.Component):
    """Parameters: ``cfg`` and, keyword-only, ``lanes`` (``T``), ``sh_width`` (bits of the
    signed shift the caller computes), ``side`` (the shape carried alongside each row to ``o``)
    and ``ytag`` (the shape carried to ``Y'``).

    Members
    -------
    i_valid, i_Y, i_acc, i_m, i_sh, i_bias, i_side, i_ytag : In. One row: per lane the running
        sum ``Y`` (``ystate_width`` signed) and the new partial sum ``acc`` (``acc_bits``
        signed), the mantissa ``m``
        (``mult_width`` unsigned), the shift ``sh`` (signed) and ``bias`` (act format).
    bad : Out(1). A shift outside ``[0, sh_max]`` on a row entering now.
    y_valid, o_Y, o_Ysat, o_ytag : Out. The row ``y_latency`` cycles later: ``Y'`` as stored
        (``ystate_width``) and its per-lane saturation flags.
    o_valid, o_y, o_sat, o_side : Out. The row ``LATENCY`` cycles later: ``y`` (act format) and
        its per-lane saturation flags.
    """

    LATENCY = 6

    def __init__(self, cfg: Config, *, lanes: int, sh_width: int, side, ytag=1):
        self._cfg = check_config(cfg)
        self._T = lanes
        A, W, Z = cfg.acc_bits, cfg.act_width, cfg.ystate_width
        T = lanes
        self._side = side
        #: Cycles from a row's entry to its running sums (``y_valid``): one more to round a
        #: stored Y.
        self.y_latency = 1 if cfg.ystate_frac is None else 2
        super().__init__({
            "i_valid": In(1),
            "i_Y": In(data.ArrayLayout(signed(Z), T)),
            "i_acc": In(data.ArrayLayout(signed(A), T)),
            "i_m": In(data.ArrayLayout(unsigned(cfg.mult_width), T)),
            "i_sh": In(data.ArrayLayout(signed(sh_width), T)),
            "i_bias": In(data.ArrayLayout(signed(W), T)),
            "i_side": In(side),
            "i_ytag": In(ytag),
            "bad": Out(1),
            "y_valid": Out(1),
            "o_Y": Out(data.ArrayLayout(signed(Z), T)),
            "o_Ysat": Out(T),
            "o_ytag": Out(ytag),
            "o_valid": Out(1),
            "o_y": Out(data.ArrayLayout(signed(W), T)),
            "o_sat": Out(T),
            "o_side": Out(side),
        })

    def elaborate(self, platform):
        cfg, T = self._cfg, self._T
        A, W, M = cfg.acc_bits, cfg.act_width, cfg.mult_width
        shb = bitlen(cfg.sh_max)
        m = Module()

        def reg(shape, value, name):
            r = Signal(shape, name=name)
            m.d.sync += r.eq(value)
            return r

        def carry(ctl, d):
            return {k: reg(v.shape(), v, f"{k}_{d}") for k, v in ctl.items()}

        ctl = {"valid": self.i_valid, "side": self.i_side}
        bad = []
        Ys, prod, rs = [], [], []
        stored = cfg.ystate_frac is not None
        drop = cfg.mult_width + (cfg.ystate_frac or 0)
        Z = cfg.ystate_width
        for t in range(T):
            sh = self.i_sh[t]
            Yin = self.i_Y[t]
            if stored:            # the stored Y back at full width by its lane's shift
                zs = Signal(unsigned(max(1, bitlen(max(0, cfg.sh_max - drop)))),
                            name=f"zs{t}")
                m.d.comb += zs.eq(Mux(sh > drop, sh - drop, 0))
                Yin = Yin << zs
            s, f = saturate(m, Yin + self.i_acc[t], -(1 << (A - 1)), (1 << (A - 1)) - 1,
                            A, f"ysum{t}")
            Ys.append(reg(signed(A), s, f"Y1_{t}"))
            if stored:            # rounded back by the same shift, a stage later
                zs1 = reg(zs.shape(), zs, f"zs1_{t}")
                f1 = reg(1, f, f"Ysat1_{t}")
                z, fz = saturate(m, shift_round(m, Ys[t], zs1, A + 1, f"zrnd{t}"),
                                 -(1 << (Z - 1)), (1 << (Z - 1)) - 1, Z, f"zsat{t}")
                m.d.sync += [self.o_Y[t].eq(z), self.o_Ysat[t].eq(f1 | fz)]
            else:
                m.d.sync += self.o_Ysat[t].eq(f)
                m.d.comb += self.o_Y[t].eq(Ys[t])
            bad.append((sh < 0) | (sh > cfg.sh_max))
            rs.append(reg(unsigned(shb), sh[:shb], f"rs1_{t}"))
            m_ = reg(unsigned(M), self.i_m[t], f"m1_{t}")
            b_ = reg(signed(W), self.i_bias[t], f"bias1_{t}")
            prod.append((m_, b_))
        m.d.comb += self.bad.eq(self.i_valid & Cat(*bad).any())
        c1 = carry(ctl, 1)
        if stored:
            yv, yt = reg(1, self.i_valid, "y_valid1"), reg(self.i_ytag.shape(), self.i_ytag,
                                                            "ytag1")
            m.d.sync += [self.y_valid.eq(yv), self.o_ytag.eq(yt)]
        else:
            m.d.sync += [self.y_valid.eq(self.i_valid), self.o_ytag.eq(self.i_ytag)]

        # The product and the shifted bias.
        pw, aw = A + M + 1, W + cfg.sh_max
        sw = max(pw, aw) + 1
        st2 = []
        for t in range(T):
            m_, b_ = prod[t]
            st2.append((reg(signed(pw), Ys[t] * m_, f"prod2_{t}"),
                        reg(signed(aw), b_ << rs[t], f"add2_{t}"),
                        reg(unsigned(shb), rs[t], f"rs2_{t}")))
        c2 = carry(c1, 2)
        # Their sum.
        st3 = []
        for t in range(T):
            p, a, r = st2[t]
            st3.append((reg(signed(sw), p + a, f"sum3_{t}"), reg(unsigned(shb), r, f"rs3_{t}")))
        c3 = carry(c2, 3)
        # The rounding bias, then the shift.
        st4 = []
        for t in range(T):
            s, r = st3[t]
            b = round_bias(m, s, r, f"rnd{t}")
            st4.append((reg(b.shape(), b, f"biased4_{t}"), reg(unsigned(shb), r, f"rs4_{t}")))
        c4 = carry(c3, 4)
        st5 = []
        for t in range(T):
            b, r = st4[t]
            st5.append(reg(signed(sw), b >> r, f"r5_{t}"))
        c5 = carry(c4, 5)
        # The saturation to the activation format.
        for t in range(T):
            v, flag = saturate(m, st5[t], -(1 << (W - 1)), (1 << (W - 1)) - 1, W, f"ysat{t}")
            m.d.sync += [self.o_y[t].eq(v), self.o_sat[t].eq(flag)]
        m.d.sync += [self.o_valid.eq(c5["valid"]), self.o_side.eq(c5["side"])]
        return m
