"""QPU stages 1-3: max, precision/exponent bins, quantize and slice (numerics §2.2, 2.3).

One sub-channel (the T differences of one input channel of a token tile) enters per cycle. All
bin decisions are comparisons on ``y = (2 · max|u|) >> r0``, which needs no rounding:

- ``M = rnd(max|u|, r0) == 0``  ⟺ ``y < 1``;
- ``M <= thr``                  ⟺ ``y < 2·thr + 1``;
- ``rnd(max|u|, r0 + e) <= 127`` ⟺ ``(y >> e) < 255``.

(each because ``rnd(a, s) <= t`` ⟺ ``2a < (2t + 1)·2**s`` and the right side is a multiple of
``2**s``). Then ``q = clip(rnd(u, r0 + e), ±(2**(b-1) - 1))``; the raw 2-bit digit ``k`` of a
value is bits ``2k+1..2k`` of ``q`` in two's complement (the top digit read as signed), or with
``cfg.digits == "booth"`` the radix-4 Booth digit ``q[2k] + q[2k-1] - 2·q[2k+1]`` (``q[-1] = 0``)
as 3-bit two's complement (``q`` is sign-extended to 8 bits, so the digits above ``b/2`` are 0
by themselves), and ``dequant(q) = q << (r0 + e)``.

Latency 3 cycles, one sub-channel per cycle; the three registers advance together whenever the
output register is empty or being read.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden import layouts as gl
from dstar_rtl.golden.config import Config

from .layouts import to_layout
from .params import check_config

__all__ = ["QuantizeSlice", "front_in_layout", "front_out_layout", "qpu_config_layout"]


def qpu_config_layout(cfg: Config) -> data.StructLayout:
    """The per-layer configuration the QPU applies: the static base ``B`` and ``thr2..thr6``."""
    return to_layout(gl.qpu_config_layout(cfg))


def front_in_layout(cfg: Config) -> data.StructLayout:
    """One sub-channel: the T differences and the tile's last marker."""
    return to_layout(gl.subchannel_layout(cfg))


def front_out_layout(cfg: Config) -> data.StructLayout:
    """One quantized sub-channel: precision, exponent, flags, raw digits, kept columns and the
    reconstruction of its T values."""
    return data.StructLayout({
        "b": range(9),
        "e": cfg.exp_width,
        "saturated": 1,
        "kept": 4,
        "digits": data.ArrayLayout(data.ArrayLayout(cfg.digit_width, cfg.rows), 4),  # [k][token]
        "recon": data.ArrayLayout(signed(cfg.recon_width), cfg.rows),
        "last": 1,
    })


class QuantizeSlice(wiring.Component):
    """QPU stages 1-3 for one sub-channel per cycle.

    Members
    -------
    i : In(stream of :func:`front_in_layout`).
    config : In(:func:`qpu_config_layout`), sampled with each sub-channel as it enters.
    o : Out(stream of :func:`front_out_layout`).

    Latency 3 cycles; throughput one sub-channel per cycle.
    """

    def __init__(self, cfg: Config):
        check_config(cfg)
        self._cfg = cfg
        super().__init__({
            "i": In(stream.Signature(front_in_layout(cfg))),
            "config": In(qpu_config_layout(cfg)),
            "o": Out(stream.Signature(front_out_layout(cfg))),
        })

    def elaborate(self, platform):
        cfg = self._cfg
        T = cfg.rows
        m = Module()
        advance = Signal()
        v1, v2, v3 = Signal(), Signal(), Signal()
        m.d.comb += [advance.eq(~v3 | self.o.ready), self.i.ready.eq(advance),
                     self.o.valid.eq(v3)]

        # Stage 1: max |u| (balanced tree) and the configuration in force.
        mag_w = cfg.dx_width
        mags = [Mux(u < 0, -u, u)[:mag_w] for u in self.i.p.u]
        while len(mags) > 1:
            nxt = [Mux(mags[i] > mags[i + 1], mags[i], mags[i + 1])
                   for i in range(0, len(mags) - 1, 2)]
            if len(mags) % 2:
                nxt.append(mags[-1])
            mags = nxt
        s1_u = Signal.like(self.i.p.u, name="s1_u")
        s1_amax = Signal(mag_w, name="s1_amax")
        s1_r0 = Signal(range(cfg.act_frac + 1), name="s1_r0")
        s1_thr = Signal.like(self.config.thr, name="s1_thr")
        s1_last = Signal(name="s1_last")
        with m.If(advance):
            m.d.sync += [s1_u.eq(self.i.p.u), s1_amax.eq(mags[0]), s1_last.eq(self.i.p.last),
                         s1_r0.eq(cfg.act_frac - self.config.base_log2),
                         s1_thr.eq(self.config.thr), v1.eq(self.i.valid)]

        # Stage 2: bins.
        y = Signal(mag_w + 1, name="y")
        m.d.comb += y.eq((s1_amax << 1) >> s1_r0)
        b = Signal(range(9), name="b")
        with m.If(y < 1):
            m.d.comb += b.eq(0)
        with m.Elif(y < 2 * s1_thr[0] + 1):
            m.d.comb += b.eq(2)
        with m.Elif(y < 2 * s1_thr[1] + 1):
            m.d.comb += b.eq(4)
        with m.Elif(y < 2 * s1_thr[2] + 1):
            m.d.comb += b.eq(6)
        with m.Else():
            m.d.comb += b.eq(8)
        e = Signal(cfg.exp_width, name="e")
        m.d.comb += e.eq(0)
        with m.If(y >= 2 * 127 + 1):  # M > 127: the smallest e >= 1 that fits, else e_max
            m.d.comb += e.eq(cfg.e_max)
            for ee in reversed(range(1, cfg.e_max + 1)):
                with m.If((y >> ee) < 255):
                    m.d.comb += e.eq(ee)
        s2_u = Signal.like(s1_u, name="s2_u")
        s2_b = Signal.like(b, name="s2_b")
        s2_e = Signal.like(e, name="s2_e")
        s2_s = Signal(range(cfg.act_frac + cfg.e_max + 1), name="s2_shift")
        s2_last = Signal(name="s2_last")
        with m.If(advance):
            m.d.sync += [s2_u.eq(s1_u), s2_b.eq(b), s2_e.eq(e), s2_s.eq(s1_r0 + e),
                         s2_last.eq(s1_last), v2.eq(v1)]

        # Stage 3: quantize, clip, slice, reconstruct.
        qmax = Signal(7, name="qmax")
        with m.Switch(s2_b):
            for bb, qm in ((2, 1), (4, 7), (6, 31), (8, 127)):
                with m.Case(bb):
                    m.d.comb += qmax.eq(qm)
            with m.Default():
                m.d.comb += qmax.eq(0)
        half = Signal(cfg.dx_width + 1, name="half")
        m.d.comb += half.eq((Const(1, 1) << s2_s) >> 1)
        qs, sats = [], []
        for t in range(T):
            u = s2_u[t]
            mag = Mux(u < 0, -u, u)[:cfg.dx_width]
            rmag = Signal(cfg.dx_width, name=f"rmag{t}")
            m.d.comb += rmag.eq((mag + half) >> s2_s)
            over = rmag > qmax
            cm = Mux(over, qmax, rmag)
            q = Signal(signed(8), name=f"q{t}")
            m.d.comb += q.eq(Mux(u < 0, -cm, cm))
            qs.append(q)
            sats.append(over)
        out = Signal(front_out_layout(cfg), name="s3")
        if cfg.digits == "booth":
            digs = []          # digs[k][t]
            for k in range(4):
                row = []
                for t, q in enumerate(qs):
                    d = Signal(signed(3), name=f"booth{k}_{t}")
                    lo = q[2 * k - 1] if k else Const(0, 1)
                    m.d.comb += d.eq(q[2 * k] + lo - (q[2 * k + 1] << 1))
                    row.append(d)
                digs.append(row)
        else:
            digs = [[q[2 * k:2 * k + 2] for q in qs] for k in range(4)]
        nz = [Cat(*(d != 0 for d in digs[k])).any() for k in range(4)]
        used = [s2_b > 2 * k for k in range(4)]
        kept = [used[k] & (nz[k] if cfg.drop_zero_columns else 1) for k in range(4)]
        with m.If(advance):
            m.d.sync += [
                out.b.eq(s2_b), out.e.eq(s2_e), out.last.eq(s2_last), v3.eq(v2),
                out.saturated.eq(Cat(*sats).any() & (s2_b != 0)),
                out.kept.eq(Cat(*kept)),
            ]
            for t, q in enumerate(qs):
                m.d.sync += out.recon[t].eq(q << s2_s)
                for k in range(4):
                    m.d.sync += out.digits[k][t].eq(digs[k][t])
        m.d.comb += self.o.payload.eq(out)
        return m
