"""The VPU: every function of DESIGN.md 2.7 on ``vpu_lanes`` elements per cycle, bit for bit the
integer golden model (:mod:`golden.vpu`).

A *command* (:func:`golden.layouts.vpu_cmd_layout`) names an operation and a row length ``n``;
the row's elements then arrive as ``ceil(n / vpu_lanes)`` input beats and leave as as many output
beats (one for ``kv_amax``). The operands of each operation (which of a beat's ``a``, ``b``, ``c``,
``m``, ``sh``, ``mask`` it reads) are in :mod:`golden.vpu_stream`.

Structure: an input register (I) or a row-buffer read (R) feeds an operand stage (A) that maps
the operation onto the lanes' multiply-add-round-saturate datapath
(:class:`rtl.vpu_lane.VPULane`, 6 stages); a row buffer (``amaranth.lib.memory``,
``ceil(max_reduction / vpu_lanes)`` words, one write and one read port) holds a softmax or
LayerNorm row between its passes; the row reductions (max, Σx, max |v|) are a registered tree per
beat and an accumulator; per-row scalars come from :mod:`rtl.vpu_scalar`. Every pipeline register
advances together unless the output holds a beat that is not taken.

Passes and cycles per row (``nb = ceil(n / vpu_lanes)``, no stalls; measured figures in
``reports/vpu.md``)
-----------------------------------------------------------------------------------------------
* element-wise (``modulate``, ``gelu``, ``gated_residual``, ``acc_requant``, ``diff_delta``,
  ``xhat_update``, ``kv_quant``): one beat per cycle in and out, ``nb`` cycles per row in steady
  state, also for one-beat rows (the next command starts on the edge the row's last beat is
  taken; one more waits in a register); 9 cycles from an input beat to its output beat.
* ``softmax``: load ``nb`` (row max), drain, exponentials and their sum (written back to the
  buffer) ``nb``, drain, the reciprocal (5), output ``nb``: ``3·nb + 19`` in steady state.
* ``layernorm``: load ``nb`` (``Σx``; ``x²`` through the lanes for ``Σx²``), drain, the
  reciprocal square root (10), output ``nb``: ``2·nb + 21``.
* ``kv_amax``: load ``nb`` (the running max |v|; ``param`` bit 0 continues the previous command's
  max, so a head longer than ``max_reduction`` takes several commands), the drain and the shift
  (6 cycles), then one output beat with the shift ``e`` in lane 0.

Errors: a command with an unknown operation, ``n`` outside ``1 .. max_reduction`` or a
``kv_quant`` shift above ``act_width`` is consumed without effect and sets the sticky ``error``
(reset clears it); no input beat is consumed for it. An ``acc_requant`` beat with a shift above
``sh_max`` also sets ``error`` (its outputs are then not meaningful).
"""

import enum
from math import ceil

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from golden.config import Config, ConfigError
from golden.layouts import VPU_OPS, vpu_cmd_layout, vpu_in_layout, vpu_out_layout
from golden.vpu import VPUTables, vpu_tables

from .arith import rom, saturate, tree_reduce
from .layouts import to_layout
from .params import check_config
from .vpu_lane import LaneMode, VPULane, lane_widths
from .vpu_scalar import KVShift, LayerNormRsqrt, SoftmaxRecip

__all__ = ["VPU", "VPUOp"]

VPUOp = enum.IntEnum("VPUOp", {name.upper(): i for i, name in enumerate(VPU_OPS)})


class _U(enum.IntEnum):
    """Micro-operations: what the operand stage maps onto the lanes."""
    NONE = 0
    MODULATE = 1
    GELU = 2
    GATED = 3
    REQUANT = 4
    DIFF = 5
    XHAT = 6
    KVQ = 7
    LNSQ = 8      # LayerNorm load: x² into Σx²
    SMEXP = 9     # softmax exponentials (from the row buffer), written back
    SMOUT = 10    # softmax output P (from the row buffer)
    LNOUT = 11    # LayerNorm output (from the row buffer)
    KVE = 12      # the K/V shift, one beat
    LDSM = 13     # softmax load: row buffer and max (no lane work)
    LDKV = 14     # K/V load: max |v| (no lane work)


_EW = {VPUOp.MODULATE: _U.MODULATE, VPUOp.GELU: _U.GELU, VPUOp.GATED_RESIDUAL: _U.GATED,
       VPUOp.ACC_REQUANT: _U.REQUANT, VPUOp.DIFF_DELTA: _U.DIFF, VPUOp.XHAT_UPDATE: _U.XHAT,
       VPUOp.KV_QUANT: _U.KVQ}


class _S(enum.IntEnum):
    IDLE = 0
    EW = 1
    LOAD = 2
    DRAIN = 3
    SCALAR = 4
    EXP = 5
    OUT = 6
    EMIT = 7


class _Dest(enum.IntEnum):
    OUT = 0
    SUM = 1      # softmax: write back and add to Σex
    SQ = 2       # LayerNorm: add to Σx²


class VPU(wiring.Component):
    """Vector processing unit.

    Parameters
    ----------
    cfg : Config (vpu_lanes, act format, p_base_log2, max_reduction, acc_bits, mult_width, sh_max).
    tables : VPUTables, default :func:`golden.vpu.vpu_tables` of ``cfg`` (the RTL's ROMs hold
        exactly these).

    Members
    -------
    cmd : In(stream of :func:`golden.layouts.vpu_cmd_layout`): one command waits in a register
        while a row runs.
    i : In(stream of :func:`golden.layouts.vpu_in_layout`).
    o : Out(stream of :func:`golden.layouts.vpu_out_layout`).
    error : Out(1), sticky: a refused command. busy : Out(1): a row in progress or in flight.
    """

    def __init__(self, cfg: Config, tables: VPUTables | None = None):
        check_config(cfg)
        t = vpu_tables(cfg) if tables is None else tables
        if t.rsqrt_frac < cfg.act_frac + t.ln_eps_frac // 2:
            raise ConfigError(f"VPU: act_frac ({cfg.act_frac}) + ln_eps_frac/2 "
                              f"({t.ln_eps_frac // 2}) must not exceed rsqrt_frac "
                              f"({t.rsqrt_frac}): LayerNorm's output shift would be negative")
        self._cfg, self._t = cfg, t
        super().__init__({
            "cmd": In(stream.Signature(to_layout(vpu_cmd_layout(cfg)))),
            "i": In(stream.Signature(to_layout(vpu_in_layout(cfg)))),
            "o": Out(stream.Signature(to_layout(vpu_out_layout(cfg)))),
            "error": Out(1),
            "busy": Out(1),
        })

    @property
    def cfg(self):
        return self._cfg

    @property
    def depth(self) -> int:
        """Row buffer words."""
        return ceil(self._cfg.max_reduction / self._cfg.vpu_lanes)

    def elaborate(self, platform):
        cfg, t = self._cfg, self._t
        L, W, n_max = cfg.vpu_lanes, cfg.act_width, cfg.max_reduction
        E = t.exp_frac
        lw = lane_widths(cfg, t)
        m = Module()

        # ---------------------------------------------------------------- units
        lanes = []
        for k in range(L):
            lane = VPULane(cfg, t)
            m.submodules[f"lane{k}"] = lane
            lanes.append(lane)
        m.submodules.recip = recip = SoftmaxRecip(cfg, t)
        eps_w = len(self.cmd.p.param)
        m.submodules.rsqrt = rsqrt = LayerNormRsqrt(cfg, t, lw["ny1"], lw["s1y1"], eps_w)
        m.submodules.kvshift = kvshift = KVShift(cfg)

        bw = max(W, E + 1)
        word = data.ArrayLayout(data.StructLayout({"v": bw, "m": 1}), L)
        m.submodules.buf = buf = Memory(shape=word, depth=self.depth, init=[])
        wr = buf.write_port()
        rd = buf.read_port()

        # ---------------------------------------------------------------- command and FSM state
        state = Signal(_S)
        op = Signal(range(len(VPU_OPS)))
        n = Signal(range(n_max + 1))
        param = Signal(eps_w)
        nb = Signal(range(self.depth + 1))
        cnt = Signal(range(self.depth + 1))      # beats done in the current pass
        rem = Signal(range(n_max + 1))           # elements left from the current beat on
        wait = Signal(range(16))
        second = Signal()                        # softmax: the exponentials are done

        # Pipeline: I (an input beat, registered) or R (a row-buffer read), then A (the lanes'
        # operands), then the lanes' stages. I and R load on the same advance from states that
        # exclude each other, so at most one of them is valid.
        lat = VPULane.LATENCY
        adv = Signal()
        i_valid, i_last = Signal(), Signal()
        i_uop = Signal(_U)
        i_len = Signal(L)
        i_p = Signal(self.i.p.shape())
        i_addr = Signal(range(self.depth))
        i_shift = Signal(range(W + 1))           # kv_quant's shift, travelling with its beat
        r_valid, r_last = Signal(), Signal()
        r_uop = Signal(_U)
        r_addr = Signal(range(self.depth))
        r_len = Signal(L)
        a_valid, a_last = Signal(), Signal()
        a_dest = Signal(_Dest)
        a_addr = Signal(range(self.depth))
        ctl = [(Signal(name=f"p{s}_valid"), Signal(_Dest, name=f"p{s}_dest"),
                Signal(name=f"p{s}_last"), Signal(range(self.depth), name=f"p{s}_addr"))
               for s in range(lat)]
        f_valid, f_dest, f_last, f_addr = ctl[-1]
        # Reduction pipelines between a beat and its row accumulator: valid flags, delayed as
        # many cycles as the trees' registers (filled in below).
        red_valids, sum_valids, sq_valids = [], [], []
        in_flight = Signal()
        empty = ~(i_valid | r_valid | a_valid | Cat(*(c[0] for c in ctl)).any() | in_flight)
        m.d.comb += [
            adv.eq(~(f_valid & (f_dest == _Dest.OUT) & ~self.o.ready)),
        ]
        with m.If(adv):
            prev = (a_valid, a_dest, a_last, a_addr)
            for c in ctl:
                m.d.sync += [c[i].eq(prev[i]) for i in range(4)]
                prev = c
        for lane in lanes:
            m.d.comb += lane.en.eq(adv)

        # Per-row accumulators and latched scalars.
        smax = Signal(signed(W))
        total = Signal(unsigned(t.widths["softmax.sum"][0]))
        s1 = Signal(signed(t.widths["layernorm.S1"][0]))
        s2 = Signal(unsigned(t.widths["layernorm.S2"][0]))
        amax = Signal(unsigned(W))
        y1_row = Signal.like(recip.y1)
        smshift_row = Signal.like(recip.shift)
        ny1_row, s1y1_row = Signal.like(rsqrt.ny1), Signal.like(rsqrt.s1y1)
        lnshift_row, zero_row = Signal.like(rsqrt.shift), Signal()
        e_row = Signal.like(kvshift.e)
        m.d.comb += [recip.total.eq(total), rsqrt.n.eq(n), rsqrt.s1.eq(s1), rsqrt.s2.eq(s2),
                     rsqrt.eps_q.eq(param), kvshift.amax.eq(amax)]

        # ---------------------------------------------------------------- input beats
        lane_ok = Signal(L)
        m.d.comb += lane_ok.eq(Cat(*(rem > k for k in range(L))))
        m.d.comb += self.i.ready.eq(adv & ((state == _S.EW) | (state == _S.LOAD)))
        take = self.i.valid & self.i.ready
        last_beat = cnt + 1 == nb
        with m.If(take):
            m.d.sync += [cnt.eq(cnt + 1), rem.eq(rem - L)]
            with m.If(last_beat):
                m.d.sync += [cnt.eq(0), rem.eq(n)]
                m.d.sync += state.eq(Mux(state == _S.EW, _S.IDLE, _S.DRAIN))
        inject = (state == _S.EMIT) & adv
        with m.If(inject):
            m.d.sync += state.eq(_S.IDLE)
        in_uop = Signal(_U)
        with m.Switch(op):
            for o, u in _EW.items():
                with m.Case(o):
                    m.d.comb += in_uop.eq(u)
            with m.Case(VPUOp.SOFTMAX):
                m.d.comb += in_uop.eq(_U.LDSM)
            with m.Case(VPUOp.LAYERNORM):
                m.d.comb += in_uop.eq(_U.LNSQ)
            with m.Case(VPUOp.KV_AMAX):
                m.d.comb += in_uop.eq(Mux(inject, _U.KVE, _U.LDKV))
        with m.If(adv):
            m.d.sync += [i_valid.eq(take | inject), i_uop.eq(in_uop), i_last.eq(last_beat | inject),
                         i_len.eq(lane_ok), i_addr.eq(cnt), i_p.eq(self.i.payload),
                         i_shift.eq(param)]
        used = i_valid & adv                     # I moves on: its beat is used exactly once

        # The row's reductions (LOAD): a tree per beat, registered, then the accumulator.
        xs = [i_p.a[k][:W].as_signed() for k in range(L)]
        low = -(1 << (W - 1))
        kept, mags, xsum = [], [], []
        for k in range(L):
            kv = Signal(signed(W), name=f"kept{k}")
            mv = Signal(unsigned(W), name=f"mag{k}")
            xv = Signal(signed(W), name=f"xin{k}")
            m.d.comb += [
                kv.eq(Mux(i_len[k] & ((i_uop != _U.LDSM) | i_p.mask[k]), xs[k], low)),
                mv.eq(Mux(i_len[k], Mux(xs[k] < 0, -xs[k], xs[k])[:W], 0)),
                xv.eq(Mux(i_len[k], xs[k], 0)),
            ]
            kept.append(kv)
            mags.append(mv)
            xsum.append(xv)
        t_max, stages = tree_reduce(m, kept, "max", "beat_max", every=2)
        t_amax, _ = tree_reduce(m, mags, "max", "beat_amax", every=2)
        t_s1, _ = tree_reduce(m, xsum, "sum", "beat_s1", every=2)
        red_max, red_amax, red_s1 = (Signal.like(t_max, name="red_max"),
                                     Signal.like(t_amax, name="red_amax"),
                                     Signal.like(t_s1, name="red_s1"))
        m.d.sync += [red_max.eq(t_max), red_amax.eq(t_amax), red_s1.eq(t_s1)]
        red_in = used & ((i_uop == _U.LDSM) | (i_uop == _U.LNSQ) | (i_uop == _U.LDKV))
        red_valid = self._delay(m, red_in, stages + 1, "red_valid", red_valids)
        with m.If(red_valid):
            m.d.sync += [smax.eq(Mux(red_max > smax, red_max, smax)),
                         amax.eq(Mux(red_amax > amax, red_amax, amax)), s1.eq(s1 + red_s1)]
        if (1 << len(i_p.sh[0])) - 1 > cfg.sh_max:
            bad_sh = Cat(*(i_len[k] & (i_p.sh[k] > cfg.sh_max) for k in range(L))).any()
            with m.If(used & (i_uop == _U.REQUANT) & bad_sh):
                m.d.sync += self.error.eq(1)

        # ---------------------------------------------------------------- row passes
        scalar_wait = Mux(op == VPUOp.SOFTMAX, SoftmaxRecip.LATENCY,
                          Mux(op == VPUOp.LAYERNORM, LayerNormRsqrt.LATENCY, KVShift.LATENCY))
        with m.Switch(state):
            with m.Case(_S.DRAIN):
                with m.If(empty):
                    with m.If((op == VPUOp.SOFTMAX) & ~second):
                        m.d.sync += state.eq(_S.EXP)
                    with m.Else():
                        m.d.sync += [state.eq(_S.SCALAR), wait.eq(scalar_wait)]
            with m.Case(_S.SCALAR):
                m.d.sync += wait.eq(wait - 1)
                with m.If(wait == 0):
                    m.d.sync += [y1_row.eq(recip.y1), smshift_row.eq(recip.shift),
                                 ny1_row.eq(rsqrt.ny1), s1y1_row.eq(rsqrt.s1y1),
                                 lnshift_row.eq(rsqrt.shift), zero_row.eq(rsqrt.zero),
                                 e_row.eq(kvshift.e)]
                    m.d.sync += state.eq(Mux(op == VPUOp.KV_AMAX, _S.EMIT, _S.OUT))
        issue = ((state == _S.EXP) | (state == _S.OUT)) & adv
        m.d.comb += [rd.en.eq(adv), rd.addr.eq(cnt)]
        with m.If(adv):
            m.d.sync += [r_valid.eq(issue), r_last.eq(last_beat), r_addr.eq(cnt),
                         r_len.eq(lane_ok),
                         r_uop.eq(Mux(state == _S.EXP, _U.SMEXP,
                                      Mux(op == VPUOp.SOFTMAX, _U.SMOUT, _U.LNOUT)))]
        with m.If(issue):
            m.d.sync += [cnt.eq(cnt + 1), rem.eq(rem - L)]
            with m.If(last_beat):
                m.d.sync += [cnt.eq(0), rem.eq(n)]
                with m.If(state == _S.EXP):
                    m.d.sync += [state.eq(_S.DRAIN), second.eq(1)]
                with m.Else():
                    m.d.sync += state.eq(_S.IDLE)

        # ---------------------------------------------------------------- operand stage (A)
        uop = Signal(_U)
        with m.If(r_valid):
            m.d.comb += uop.eq(r_uop)
        with m.Elif(i_valid):
            m.d.comb += uop.eq(i_uop)
        lane_op = (uop != _U.NONE) & (uop != _U.LDSM) & (uop != _U.LDKV)
        with m.If(adv):
            m.d.sync += [
                a_valid.eq(lane_op),
                a_dest.eq(Mux(uop == _U.SMEXP, _Dest.SUM, Mux(uop == _U.LNSQ, _Dest.SQ,
                                                              _Dest.OUT))),
                a_last.eq(Mux(r_valid, r_last, i_last)),
                a_addr.eq(r_addr),
            ]
        self._operands(m, lanes, uop, i_p, rd.data, i_len, r_len, adv,
                       dict(smax=smax, y1=y1_row, smshift=smshift_row, ny1=ny1_row,
                            s1y1=s1y1_row, lnshift=lnshift_row, zero=zero_row, e=e_row,
                            kv_shift=i_shift))

        # ---------------------------------------------------------------- results
        # The row buffer's one write port: exponentials written back, or a loaded beat.
        write_back = f_valid & (f_dest == _Dest.SUM)
        exs = []
        sqs = []
        for k, lane in enumerate(lanes):
            e_k = Signal(unsigned(E + 1), name=f"ex{k}")
            q_k = Signal(unsigned(2 * W), name=f"sq{k}")
            m.d.comb += [e_k.eq(lane.r[:E + 1]), q_k.eq(lane.r[:2 * W])]
            exs.append(e_k)
            sqs.append(q_k)
        t_sum, stages = tree_reduce(m, exs, "sum", "beat_sum", every=2)
        t_sq, _ = tree_reduce(m, sqs, "sum", "beat_sq", every=2)
        sum_val, sq_val = Signal.like(t_sum, name="sum_val"), Signal.like(t_sq, name="sq_val")
        m.d.sync += [sum_val.eq(t_sum), sq_val.eq(t_sq)]
        sum_valid = self._delay(m, write_back, stages + 1, "sum_valid", sum_valids)
        sq_valid = self._delay(m, f_valid & (f_dest == _Dest.SQ), stages + 1, "sq_valid",
                               sq_valids)
        m.d.comb += in_flight.eq(Cat(*red_valids, *sum_valids, *sq_valids).any())
        with m.If(sum_valid):
            m.d.sync += total.eq(total + sum_val)
        with m.If(sq_valid):
            m.d.sync += s2.eq(s2 + sq_val)
        with m.If(write_back):
            m.d.comb += [wr.en.eq(1), wr.addr.eq(f_addr)]
            for k, lane in enumerate(lanes):
                m.d.comb += wr.data[k].v.eq(lane.r[:bw])
        with m.Elif(used & ((i_uop == _U.LDSM) | (i_uop == _U.LNSQ))):
            m.d.comb += [wr.en.eq(1), wr.addr.eq(i_addr)]
            for k in range(L):
                m.d.comb += [wr.data[k].v.eq(xs[k]),
                             wr.data[k].m.eq(i_len[k] & ((i_uop != _U.LDSM) | i_p.mask[k]))]
        o = self.o.p
        m.d.comb += [self.o.valid.eq(f_valid & (f_dest == _Dest.OUT)), o.last.eq(f_last)]
        for k, lane in enumerate(lanes):
            m.d.comb += [o.y[k].eq(lane.r), o.Y[k].eq(lane.side_o), o.sat[k].eq(lane.sat),
                         o.Ysat[k].eq(lane.side_flag_o)]

        # ---------------------------------------------------------------- command intake
        # A command starts when the VPU is idle or, so that rows follow each other without a
        # gap, on the very edge the current row's last beat is taken or issued; one more waits
        # in a register meanwhile. (Last in the module: its assignments win.)
        pend = Signal(self.cmd.p.shape())
        pend_valid = Signal()
        finishing = (((state == _S.EW) & take & last_beat) |
                     ((state == _S.OUT) & issue & last_beat) | inject)
        # The command to start: the waiting one, else the one on the port (taken directly).
        c = Signal(self.cmd.p.shape())
        m.d.comb += [self.cmd.ready.eq(~pend_valid),
                     c.eq(Mux(pend_valid, pend, self.cmd.payload))]
        start = (pend_valid | self.cmd.valid) & ((state == _S.IDLE) | finishing)
        with m.If(start):
            m.d.sync += pend_valid.eq(0)
        with m.Elif(self.cmd.valid & self.cmd.ready):
            m.d.sync += [pend.eq(self.cmd.payload), pend_valid.eq(1)]
        legal = ((c.op < len(VPU_OPS)) & (c.n >= 1) & (c.n <= n_max) &
                 ~((c.op == VPUOp.KV_QUANT) & (c.param > W)))
        beats = (c.n + (L - 1)) // L if L & (L - 1) else (c.n + (L - 1)) >> (L.bit_length() - 1)
        with m.If(start):
            with m.If(~legal):
                m.d.sync += self.error.eq(1)
            with m.Else():
                m.d.sync += [op.eq(c.op), n.eq(c.n), param.eq(c.param), nb.eq(beats),
                             cnt.eq(0), rem.eq(c.n), second.eq(0),
                             smax.eq(-(1 << (W - 1))), total.eq(0), s1.eq(0), s2.eq(0)]
                with m.If((c.op != VPUOp.KV_AMAX) | ~c.param[0]):
                    m.d.sync += amax.eq(0)
                with m.If((c.op == VPUOp.SOFTMAX) | (c.op == VPUOp.LAYERNORM) |
                          (c.op == VPUOp.KV_AMAX)):
                    m.d.sync += state.eq(_S.LOAD)
                with m.Else():
                    m.d.sync += state.eq(_S.EW)
        m.d.comb += self.busy.eq((state != _S.IDLE) | ~empty | pend_valid)
        return m

    @staticmethod
    def _delay(m, value, cycles: int, name: str, regs: list):
        """``value`` delayed ``cycles`` cycles by free-running registers (appended to ``regs``)."""
        for k in range(cycles):
            r = Signal(name=f"{name}{k}")
            m.d.sync += r.eq(value)
            regs.append(r)
            value = r
        return value

    # -------------------------------------------------------------------- operand mapping
    def _operands(self, m, lanes, uop, ip, rdata, lane_ok, r_len, adv, row):
        """Register each lane's ``x, y, add, rs, mode, lane_en, side`` for the micro-operation."""
        cfg, t = self._cfg, self._t
        W, F, A = cfg.act_width, cfg.act_frac, cfg.acc_bits
        G, Sg, Ra = t.gelu_frac, t.gelu_seg_log2, t.gelu_range_log2
        lw = lane_widths(cfg, t)
        for k, lane in enumerate(lanes):
            a, b, cc = ip.a[k], ip.b[k], ip.c[k]
            x_w = a[:W].as_signed()
            bv = rdata[k].v
            x = Signal(signed(lw["x"]), name=f"op{k}_x")
            y = Signal(signed(lw["y"]), name=f"op{k}_y")
            add = Signal(signed(lw["add"]), name=f"op{k}_add")
            rs = Signal(unsigned(lw["rs"]), name=f"op{k}_rs")
            mode = Signal(LaneMode, name=f"op{k}_mode")
            en = Signal(name=f"op{k}_en")
            side = Signal(signed(A), name=f"op{k}_side")
            flag = Signal(name=f"op{k}_flag")
            m.d.comb += [en.eq(lane_ok[k]), mode.eq(LaneMode.RAW)]
            # GELU's tables, indexed by the clamped magnitude.
            mag = Mux(x_w < 0, -x_w, x_w)[:W]
            ac = Mux(mag > (1 << (F + Ra)) - 1, (1 << (F + Ra)) - 1, mag)
            base = rom(m, f"gelu_base{k}", t.gelu_base, signed(t.widths["gelu.base"][0]))
            delta = rom(m, f"gelu_delta{k}", t.gelu_delta, signed(t.widths["gelu.delta"][0]))
            m.d.comb += [base.addr.eq(ac >> (F - Sg)), delta.addr.eq(ac >> (F - Sg))]
            frac = ac[:F - Sg] if F > Sg else Const(0, 1)
            ysum = a[:A].as_signed() + b[:A].as_signed()
            ys, ysat = saturate(m, ysum, -(1 << (A - 1)), (1 << (A - 1)) - 1, A, f"op{k}_Ysum")
            with m.Switch(uop):
                with m.Case(_U.MODULATE):
                    m.d.comb += [x.eq(x_w), y.eq(cc + (1 << F)), add.eq(b[:W].as_signed() << F),
                                 rs.eq(F), mode.eq(LaneMode.SAT_W)]
                with m.Case(_U.GELU):
                    m.d.comb += [x.eq(delta.data), y.eq(frac), rs.eq(G - Sg),
                                 add.eq((base.data << (F - Sg)) +
                                        Mux(x_w >= 0, x_w << (G - Sg), 0)),
                                 mode.eq(LaneMode.SAT_W)]
                with m.Case(_U.GATED):
                    m.d.comb += [x.eq(b[:W].as_signed()), y.eq(cc), add.eq(x_w << F), rs.eq(F),
                                 mode.eq(LaneMode.SAT_W)]
                with m.Case(_U.REQUANT):
                    m.d.comb += [x.eq(ys), y.eq(ip.m[k]), add.eq(cc << ip.sh[k]),
                                 rs.eq(ip.sh[k]), mode.eq(LaneMode.SAT_W), side.eq(ys),
                                 flag.eq(ysat)]
                with m.Case(_U.DIFF):
                    m.d.comb += [x.eq(b[:cfg.xhat_width].as_signed()), y.eq(-1), add.eq(x_w)]
                with m.Case(_U.XHAT):
                    m.d.comb += [x.eq(b[:cfg.recon_width].as_signed()), y.eq(1),
                                 add.eq(a[:cfg.xhat_width].as_signed()),
                                 mode.eq(LaneMode.SAT_XHAT)]
                with m.Case(_U.KVQ):
                    m.d.comb += [x.eq(x_w), y.eq(1), rs.eq(row["kv_shift"]), mode.eq(LaneMode.SAT_8)]  # noqa: E501 (kept on one line: src positions key stored synthesis runs)
                with m.Case(_U.LNSQ):
                    m.d.comb += [x.eq(x_w), y.eq(x_w)]
                with m.Case(_U.SMEXP):
                    s = bv[:W].as_signed()
                    m.d.comb += [x.eq(Mux(rdata[k].m, row["smax"] - s, 0)), y.eq(t.log2e_q),
                                 rs.eq(F + t.log2e_frac - t.exp_lut_bits),
                                 mode.eq(LaneMode.EXP), en.eq(rdata[k].m & r_len[k])]
                with m.Case(_U.SMOUT):
                    m.d.comb += [x.eq(bv[:t.exp_frac + 1]), y.eq(row["y1"]),
                                 rs.eq(row["smshift"]), mode.eq(LaneMode.SAT_P), en.eq(r_len[k])]
                with m.Case(_U.LNOUT):
                    m.d.comb += [x.eq(bv[:W].as_signed()), y.eq(row["ny1"]),
                                 add.eq(-row["s1y1"]), rs.eq(row["lnshift"]),
                                 mode.eq(LaneMode.SAT_W), en.eq(r_len[k] & ~row["zero"])]
                with m.Case(_U.KVE):
                    m.d.comb += [x.eq(row["e"]), y.eq(1), en.eq(k == 0)]
            with m.If(adv):
                m.d.sync += [lane.x.eq(x), lane.y.eq(y), lane.add.eq(add), lane.rs.eq(rs),
                             lane.mode.eq(mode), lane.lane_en.eq(en), lane.side.eq(side),
                             lane.side_flag.eq(flag)]
