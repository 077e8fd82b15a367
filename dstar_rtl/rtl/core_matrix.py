"""The core's matrix engine M: GEMM (program/isa.py) on the MPU and its own
accumulate-and-requantize (:class:`~rtl.requant.Requant`).

Two decoupled halves, so that the next GEMM's groups enter the MPU while the previous tile drains:

* **replay**: reads GMEM from ``gsrc`` up to the group marked ``last`` (one read per cycle
  against the room of a 4-beat :class:`~rtl.stream_queue.StreamQueue`; the one read past
  ``last`` is dropped), adds ``wbase`` to every lane's channel (the MPU's weight buffer is the
  core's WMEM), and feeds the MPU. The GEMM's drain job (``ysrc``, ``rrow``, ``dst``, flags,
  semaphore mask) waits in a 2-entry queue.
* **drain**: for each drain beat (token ``i``) reads ``YBUF[ysrc + i]`` (when ``accum``) and
  ``RBUF[rrow]`` and sends one ``acc_requant`` row of ``T`` elements through the engine's own
  :class:`~rtl.requant.Requant` with ``sh - SREG[sreg]`` (when ``use_sreg``); ``Y`` goes back to
  YBUF a cycle later, and ``y`` to the ABUF token segment ``Requant.LATENCY`` cycles later,
  its write-back record (``dst``, flags, semaphore mask) travelling with the row. The engine
  never uses the VPU, so the vector engine may run beside it. The job is done (``done``,
  ``signal``) when its last token is written and RMAX holds its maxima: a GEMM with ``rmax``
  keeps each token's max over its ``T`` results in RMAX (``rmax`` out; 1: set, 2: the running
  max), through a registered max tree a few cycles after the write, for a softmax_mx VROW, and
  every job's completion waits as long (0 cycles at ``tiny``, 1 at ``fpga``, 2 at ``paper``).

Throughput: one group per cycle into the MPU; one drain beat per cycle. Errors: a GMEM read
past the end, a weight row past WMEM, a requantization shift outside ``[0, sh_max]``.

The INT8 core (``cfg.datapath == "int8"``, numerics §2.8) has the INT8 :class:`~rtl.baseline.
Baseline` array in place of the MPU and GMEM rows of :func:`golden.layouts.int8_group_layout`:
each group is one beat (its channel plus ``wbase``); the tile's exponent of the group marked
``last`` waits in a 2-entry queue beside the drain job and is subtracted from the shift, which
is then taken as 0 when below 0 (a shift below 0 is no ``shift`` error there).
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import bitlen
from dstar_rtl.program import isa

from .arith import tree_reduce
from .baseline import Baseline
from .core_abuf import ABufPort
from .core_layouts import MemRead, MemWrite, cmd_layout, row_layout
from .layouts import gmem_layout
from .mpu import MPU
from .params import check_config, check_core
from .requant import Requant
from .stream_queue import StreamQueue

__all__ = ["MatrixEngine"]

_GFIFO = 4      # groups between GMEM and the MPU


class MatrixEngine(wiring.Component):
    """Parameters: ``cfg`` and, keyword-only, ``core`` (:class:`program.isa.CoreConfig`).

    Members: ``cmd`` (a GEMM is taken when the replay half is free and the job queue has
    room), ``busy``, ``done``/``signal``, ``fault`` (error code: ``address`` for a GMEM read or
    a weight row past the end, ``shift`` for a shift outside ``[0, sh_max]``); ports ``grd``
    (GMEM read), ``yrd``/``ywr`` (YBUF), ``rrd`` (RBUF read), ``awr`` (ABUF write); ``wload``
    (the MPU's weight-buffer write, WMEM); ``sreg`` (the 16 shift registers, In); ``rmax`` (the
    row maxima, Out); event pulses ``group`` with ``lanes`` (valid lanes), ``pcache_group``,
    ``ybuf_read``, ``ybuf_write``, ``abuf_write``, ``vpu_row`` (a requantized row, counted as a
    VPU row as the instruction set does), and
    ``ysat``/``Ysat`` (saturated lanes of a result)."""

    def __init__(self, cfg, *, core):
        self._cfg, self._core = check_config(cfg), check_core(core)
        T = cfg.tile
        self._int8 = cfg.datapath == "int8"
        self._mpu = (Baseline if self._int8 else MPU)(cfg, weight_depth=core.wmem_rows)
        shb = bitlen(cfg.sh_max)
        super().__init__({
            "cmd": In(stream.Signature(isa.cmd_bits(cfg))),
            "busy": Out(1), "done": Out(1), "signal": Out(isa.SEMAPHORES),
            "fault": Out(range(len(isa.ERRORS))),
            "grd": Out(MemRead(core.gmem_rows, gmem_layout(cfg))),
            "yrd": Out(MemRead(core.ybuf_rows, row_layout(cfg, "YBUF"))),
            "ywr": Out(MemWrite(core.ybuf_rows, row_layout(cfg, "YBUF"))),
            "rrd": Out(MemRead(core.rbuf_rows, row_layout(cfg, "RBUF"))),
            "awr": Out(ABufPort(T, cfg.act_width, core.abuf_rows, True)),
            "wload": self._mpu.signature.members["wload"],
            "sreg": In(data.ArrayLayout(shb, isa.SREGS)),   # read through a multiplexer
            "group": Out(1), "lanes": Out(range(cfg.lanes + 1)), "pcache_group": Out(1),
            "ybuf_read": Out(1), "ybuf_write": Out(1), "abuf_write": Out(1), "vpu_row": Out(1),
            "ysat": Out(range(T + 1)), "Ysat": Out(range(T + 1)),
            "rmax": Out(data.ArrayLayout(signed(cfg.act_width), T)),
        })

    def elaborate(self, platform):
        cfg, core = self._cfg, self._core
        T, L = cfg.tile, cfg.lanes
        A = isa.addr_bits(cfg)
        m = Module()
        m.submodules.mpu = mpu = self._mpu
        wiring.connect(m, wiring.flipped(self.wload), mpu.wload)

        gemm = cmd_layout(cfg, "GEMM")(self.cmd.payload)
        job_lay = data.StructLayout({
            "ysrc": range(core.ybuf_rows), "rrow": range(core.rbuf_rows),
            "dst": range(core.abuf_rows), "accum": 1, "use_sreg": 1, "sreg": 4,
            "signal": isa.SEMAPHORES, "rmax": 2})

        # ------------------------------------------------------------------ replay half
        m.submodules.jobs = jobs = StreamQueue(job_lay, depth=2)
        replaying = Signal()
        gptr = Signal(A + 1)
        wbase = Signal(A)
        pc = Signal()
        seen_last = Signal()
        m.d.comb += self.cmd.ready.eq(~replaying & jobs.i.ready)
        take = self.cmd.valid & self.cmd.ready
        job_in = jobs.i.p
        m.d.comb += [job_in.ysrc.eq(gemm.ysrc), job_in.rrow.eq(gemm.rrow),
                     job_in.dst.eq(gemm.dst), job_in.accum.eq(gemm.accum),
                     job_in.use_sreg.eq(gemm.use_sreg), job_in.sreg.eq(gemm.sreg),
                     job_in.signal.eq(gemm.signal), job_in.rmax.eq(gemm.rmax),
                     jobs.i.valid.eq(take)]
        with m.If(take):
            m.d.sync += [replaying.eq(1), gptr.eq(gemm.gsrc), wbase.eq(gemm.wbase),
                         pc.eq(gemm.pcache), seen_last.eq(0)]

        m.submodules.gfifo = gfifo = StreamQueue(mpu.groups.p.shape(), depth=_GFIFO)
        inflight = Signal()
        past_end = gptr >= core.gmem_rows
        issue = Signal()
        m.d.comb += issue.eq(replaying & ~seen_last & ~past_end & gfifo.room_for(inflight))
        m.d.sync += inflight.eq(issue)
        m.d.comb += [self.grd.en.eq(issue), self.grd.addr.eq(gptr)]
        with m.If(issue):
            m.d.sync += gptr.eq(gptr + 1)
        g = self.grd.data
        widened = gfifo.i.p
        bad_w = Signal()
        push = inflight & ~seen_last
        if self._int8:
            ch = Signal(A + 1, name="wrow")
            m.d.comb += [ch.eq(wbase + g.channel), widened.channel.eq(ch),
                         widened.act.eq(g.act), widened.first.eq(g.first),
                         widened.last.eq(g.last)]
            bad_lane = [g.valid & (ch >= core.wmem_rows)]
            nvalid = g.valid
            # The tile's exponent, for the drain job of this GEMM.
            m.submodules.exps = exps = StreamQueue(unsigned(cfg.exp_width), depth=2)
            m.d.comb += [exps.i.valid.eq(push & g.last), exps.i.p.eq(g.exp)]
        else:
            m.d.comb += [widened.digits.eq(g.digits), widened.signed.eq(g.signed),
                         widened.valid.eq(g.valid), widened.exp.eq(g.exp),
                         widened.first.eq(g.first), widened.last.eq(g.last)]
            bad_lane = []
            for lane in range(L):
                ch = Signal(A + 1, name=f"wrow{lane}")
                m.d.comb += [ch.eq(wbase + g.channel[lane]),
                             widened.channel[lane].eq(ch)]
                bad_lane.append(g.valid[lane] & (ch >= core.wmem_rows))
            nvalid = Signal(range(L + 1))
            m.d.comb += nvalid.eq(sum(g.valid[lane] for lane in range(L)))
        m.d.comb += [bad_w.eq(push & Cat(*bad_lane).any()), gfifo.i.valid.eq(push)]
        with m.If(push & g.last):
            m.d.sync += [seen_last.eq(1), replaying.eq(0)]
        wiring.connect(m, gfifo.o, mpu.groups)
        m.d.comb += [self.group.eq(push), self.pcache_group.eq(push & pc),
                     self.lanes.eq(Mux(push, nvalid, 0))]

        # ------------------------------------------------------------------ drain half
        job = jobs.o.p
        dr = mpu.drain
        b_valid = Signal()
        b_acc = Signal.like(dr.p.acc)
        b_i = Signal(range(T))
        b_job = Signal(job_lay)
        wb_lay = data.StructLayout({"dst": range(core.abuf_rows), "token": range(T), "last": 1,
                                    "signal": isa.SEMAPHORES, "rmax": 2})
        y_lay = data.StructLayout({"yaddr": range(core.ybuf_rows), "accum": 1})
        sh_w = bitlen(cfg.sh_max) + 2
        m.submodules.requant = rq = Requant(cfg, lanes=T, sh_width=sh_w, side=wb_lay,
                                            ytag=y_lay)

        # Stage A: take a drain beat, read YBUF (when accum) and RBUF (data in stage B).
        m.d.comb += dr.ready.eq(jobs.o.valid)
        dtake = dr.valid & dr.ready
        m.d.comb += [self.yrd.en.eq(dtake), self.yrd.addr.eq(job.ysrc + dr.p.row),
                     self.rrd.en.eq(dtake), self.rrd.addr.eq(job.rrow),
                     self.ybuf_read.eq(dtake & job.accum),
                     jobs.o.ready.eq(dtake & dr.p.last)]
        b_exp = Signal(unsigned(cfg.exp_width))     # the tile's exponent (INT8 core)
        if self._int8:
            m.d.comb += exps.o.ready.eq(dtake & dr.p.last)
            with m.If(dtake):
                m.d.sync += b_exp.eq(exps.o.p)
        m.d.sync += b_valid.eq(dtake)
        with m.If(dtake):
            m.d.sync += [b_acc.eq(dr.p.acc), b_i.eq(dr.p.row), b_job.eq(job)]

        # Stage B: the requantizer's row.
        y = self.yrd.data.v
        r = self.rrd.data
        s = Array(self.sreg[i] for i in range(isa.SREGS))[b_job.sreg]
        m.d.comb += [rq.i_valid.eq(b_valid), self.vpu_row.eq(b_valid)]
        for t in range(T):
            m.d.comb += [rq.i_Y[t].eq(Mux(b_job.accum, y[t], 0)), rq.i_acc[t].eq(b_acc[t]),
                         rq.i_bias[t].eq(r.bias[t]), rq.i_m[t].eq(r.m[t])]
            sh = Signal(signed(sh_w), name=f"sh{t}")
            m.d.comb += sh.eq(r.sh[t] - Mux(b_job.use_sreg, s, 0) - b_exp)
            if self._int8:        # below 0 is taken as 0 (numerics §2.8)
                m.d.comb += rq.i_sh[t].eq(Mux(sh < 0, 0, sh))
            else:
                m.d.comb += rq.i_sh[t].eq(sh)
        side = rq.i_side
        m.d.comb += [side.dst.eq(b_job.dst), side.token.eq(b_i), side.last.eq(b_i == T - 1),
                     side.signal.eq(b_job.signal), side.rmax.eq(b_job.rmax),
                     rq.i_ytag.yaddr.eq(b_job.ysrc + b_i), rq.i_ytag.accum.eq(b_job.accum)]

        # Stage C: the running sums back to YBUF a cycle after stage B; y to ABUF at the end.
        yt = rq.o_ytag
        yback = rq.y_valid
        m.d.comb += [self.ywr.en.eq(yback & yt.accum), self.ywr.addr.eq(yt.yaddr),
                     self.ybuf_write.eq(yback & yt.accum),
                     self.Ysat.eq(Mux(yback, sum(rq.o_Ysat[t] for t in range(T)), 0))]
        w = rq.o_side
        back = rq.o_valid
        m.d.comb += [self.awr.en.eq(back), self.awr.row.eq(w.dst), self.awr.token.eq(w.token),
                     self.awr.seg.eq(1), self.abuf_write.eq(back)]
        for t in range(T):
            m.d.comb += [self.awr.data[t].eq(rq.o_y[t]), self.ywr.data.v[t].eq(rq.o_Y[t])]
        m.d.comb += self.ysat.eq(Mux(back, sum(rq.o_sat[t] for t in range(T)), 0))

        # RMAX: each written token's max over its T results, through a registered max tree (its
        # control delayed alongside), then set or folded into the token's register.
        W = cfg.act_width
        y_in = [rq.o_y[t] for t in range(T)]     # the requantizer's output registers
        top, stages = tree_reduce(m, y_in, "max", "rmax_tree", every=2)
        # The job's completion travels with it, so a GEMM with rmax signals once RMAX holds its
        # maxima (every job waits as long, so completions stay one per cycle and in order).
        ctl = [(back & (w.rmax != 0), w.rmax, w.token, back & w.last, w.signal)]
        for d in range(stages):
            v_, md, tk, dn, sg = (Signal(name=f"rmax_v{d}"), Signal(2, name=f"rmax_m{d}"),
                                  Signal(range(T), name=f"rmax_t{d}"), Signal(name=f"done_{d}"),
                                  Signal(isa.SEMAPHORES, name=f"signal_{d}"))
            m.d.sync += [a.eq(b) for a, b in zip((v_, md, tk, dn, sg), ctl[-1])]
            ctl.append((v_, md, tk, dn, sg))
        rv, rm, rt, done, signal = ctl[-1]
        m.d.comb += [self.done.eq(done), self.signal.eq(signal)]
        for t in range(T):
            reg = Signal(signed(W), init=-(1 << (W - 1)), name=f"rmax{t}")
            with m.If(rv & (rt == t)):
                m.d.sync += reg.eq(Mux((rm == 1) | (top > reg), top, reg))
            m.d.comb += self.rmax[t].eq(reg)
        pending = Cat(*(c[0] | c[3] for c in ctl)).any()

        inflight_rq = Signal(Requant.LATENCY, name="requant_rows")   # one bit per stage
        m.d.sync += inflight_rq.eq(Cat(b_valid, inflight_rq[:-1]))
        m.d.comb += self.busy.eq(replaying | jobs.o.valid | b_valid | inflight_rq.any() |
                                 gfifo.o.valid | pending)
        with m.If(rq.bad):
            m.d.comb += self.fault.eq(isa.ERRORS.index("shift"))
        with m.If(bad_w | (replaying & ~seen_last & past_end & ~inflight)):
            m.d.comb += self.fault.eq(isa.ERRORS.index("address"))
        return m
