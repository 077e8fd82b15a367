"""The core's matrix engine M: GEMM (program/isa.py) on the MPU and the VPU's
accumulate-and-requantize.

Two decoupled halves, so that the next GEMM's groups enter the MPU while the previous tile drains:

* **replay**: reads GMEM from ``gsrc`` up to the group marked ``last`` (one read per cycle
  against the room of a 4-beat :class:`~rtl.stream_queue.StreamQueue`; the one read past
  ``last`` is dropped), adds ``wbase`` to every lane's channel (the MPU's weight buffer is the
  core's WMEM), and feeds the MPU. The GEMM's drain job (``ysrc``, ``rrow``, ``dst``, flags,
  semaphore mask) waits in a 2-entry queue.
* **drain**: for each drain beat (token ``i``) reads ``YBUF[ysrc + i]`` (when ``accum``) and
  ``RBUF[rrow]``, sends one ``acc_requant`` row of ``T`` elements to the VPU with
  ``sh - SREG[sreg]`` (when ``use_sreg``), and writes ``y`` to the ABUF token segment and ``Y``
  back to YBUF as the VPU's results come back in order (a 16-entry queue holds each row's
  write-back record meanwhile). The job is done (``done``, ``signal``) when its last token is
  written. A GEMM with ``rmax`` also keeps each token's max over its ``T`` results in RMAX
  (``rmax`` out; 1: set, 2: the running max), through a registered max tree a few cycles after
  the write (the engine stays busy meanwhile), for a softmax_mx VROW.

Throughput: one group per cycle into the MPU; one drain beat per cycle (the VPU's element-wise
rate for one-beat rows). Errors: a GMEM read past the end, a weight row past WMEM, a negative
shift.

The INT8 core (``cfg.datapath == "int8"``, numerics §2.8) has the INT8 :class:`~rtl.baseline.
Baseline` array in place of the MPU and GMEM rows of :func:`golden.layouts.int8_group_layout`:
each group is one beat (its channel plus ``wbase``); the tile's exponent of the group marked
``last`` waits in a 2-entry queue beside the drain job and is subtracted from the shift, which
is then taken as 0 when below 0 (no ``shift`` error).
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from golden.config import bitlen
from golden.layouts import vpu_cmd_layout, vpu_in_layout, vpu_out_layout
from program import isa

from .arith import tree_reduce
from .baseline import Baseline
from .core_abuf import ABufPort
from .core_layouts import VOP, MemRead, MemWrite, cmd_layout, row_layout
from .layouts import gmem_layout, to_layout
from .mpu import MPU
from .params import check_config, check_core
from .stream_queue import StreamQueue

__all__ = ["MatrixEngine"]

_GFIFO = 4      # groups between GMEM and the MPU
_WB = 16        # acc_requant rows in flight in the VPU


class MatrixEngine(wiring.Component):
    """Parameters: ``cfg`` and, keyword-only, ``core`` (:class:`program.isa.CoreConfig`).

    Members: ``cmd`` (a GEMM is taken when the replay half is free and the job queue has
    room), ``busy``, ``done``/``signal``, ``fault`` (error code: ``address`` for a GMEM read or
    a weight row past the end, ``shift`` for a negative shift); ports ``grd`` (GMEM read),
    ``yrd``/``ywr`` (YBUF), ``rrd`` (RBUF read), ``awr`` (ABUF write); ``wload`` (the MPU's
    weight-buffer write, WMEM); ``sreg`` (the 16 shift registers, In); ``vpu_cmd``, ``vpu_in``,
    ``vpu_out`` (the VPU's streams, shared with V); event pulses ``group`` with ``lanes`` (valid
    lanes), ``pcache_group``, ``ybuf_read``, ``ybuf_write``, ``abuf_write``, ``vpu_row``, and
    ``ysat``/``Ysat`` (saturated lanes of a result)."""

    def __init__(self, cfg, *, core):
        self._cfg, self._core = check_config(cfg), check_core(core)
        T = cfg.tile
        self._int8 = cfg.datapath == "int8"
        self._mpu = (Baseline if self._int8 else MPU)(cfg, weight_depth=core.wmem_rows)
        shb = bitlen(cfg.sh_max)
        super().__init__({
            "cmd": In(stream.Signature(isa.CMD_BITS)),
            "busy": Out(1), "done": Out(1), "signal": Out(isa.SEMAPHORES),
            "fault": Out(range(len(isa.ERRORS))),
            "grd": Out(MemRead(core.gmem_rows, gmem_layout(cfg))),
            "yrd": Out(MemRead(core.ybuf_rows, row_layout(cfg, "YBUF"))),
            "ywr": Out(MemWrite(core.ybuf_rows, row_layout(cfg, "YBUF"))),
            "rrd": Out(MemRead(core.rbuf_rows, row_layout(cfg, "RBUF"))),
            "awr": Out(ABufPort(T, cfg.act_width, core.abuf_rows, True)),
            "wload": self._mpu.signature.members["wload"],
            "sreg": In(data.ArrayLayout(shb, isa.SREGS)),   # read through a multiplexer
            "vpu_cmd": Out(stream.Signature(to_layout(vpu_cmd_layout(cfg)))),
            "vpu_in": Out(stream.Signature(to_layout(vpu_in_layout(cfg)))),
            "vpu_out": In(stream.Signature(to_layout(vpu_out_layout(cfg)))),
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
        wb_lay = data.StructLayout({"dst": range(core.abuf_rows), "yaddr": range(core.ybuf_rows),
                                    "token": range(T), "accum": 1, "last": 1,
                                    "signal": isa.SEMAPHORES, "rmax": 2})
        m.submodules.wb = wb = StreamQueue(wb_lay, depth=_WB)
        b_push = Signal()
        # The VPU streams are driven straight from stage B; cmd and in are separate streams, so
        # each is offered until taken.
        cmd_sent = Signal()
        in_sent = Signal()
        cmd_fire = self.vpu_cmd.valid & self.vpu_cmd.ready
        in_fire = self.vpu_in.valid & self.vpu_in.ready
        m.d.comb += [self.vpu_cmd.valid.eq(b_valid & ~cmd_sent & wb.i.ready),
                     self.vpu_in.valid.eq(b_valid & ~in_sent & wb.i.ready)]
        m.d.comb += b_push.eq(b_valid & wb.i.ready & (cmd_sent | cmd_fire) & (in_sent | in_fire))
        with m.If(b_push):
            m.d.sync += [cmd_sent.eq(0), in_sent.eq(0)]
        with m.Else():
            with m.If(cmd_fire):
                m.d.sync += cmd_sent.eq(1)
            with m.If(in_fire):
                m.d.sync += in_sent.eq(1)

        m.d.comb += dr.ready.eq(jobs.o.valid & (~b_valid | b_push))
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
        with m.If(dtake):
            m.d.sync += [b_valid.eq(1), b_acc.eq(dr.p.acc), b_i.eq(dr.p.row), b_job.eq(job)]
        with m.Elif(b_push):
            m.d.sync += b_valid.eq(0)

        # Stage B: the acc_requant row.
        y = self.yrd.data.v
        r = self.rrd.data
        s = Array(self.sreg[i] for i in range(isa.SREGS))[b_job.sreg]
        neg = Signal()
        m.d.comb += [self.vpu_cmd.p.op.eq(VOP("acc_requant")), self.vpu_cmd.p.n.eq(T),
                     self.vpu_cmd.p.param.eq(0), self.vpu_row.eq(b_push)]
        negs = []
        for t in range(T):
            lane = self.vpu_in.p
            m.d.comb += [lane.a[t].eq(Mux(b_job.accum, y[t], 0)), lane.b[t].eq(b_acc[t]),
                         lane.c[t].eq(r.bias[t]), lane.m[t].eq(r.m[t])]
            sh = Signal(signed(len(r.sh[t]) + 2), name=f"sh{t}")
            m.d.comb += sh.eq(r.sh[t] - Mux(b_job.use_sreg, s, 0) - b_exp)
            if self._int8:        # below 0 is taken as 0 (numerics §2.8)
                m.d.comb += lane.sh[t].eq(Mux(sh < 0, 0, sh))
            else:
                m.d.comb += lane.sh[t].eq(sh)
                negs.append(sh < 0)
        m.d.comb += neg.eq(b_push & Cat(*negs).any() if negs else 0)
        wb_in = wb.i.p
        m.d.comb += [wb_in.dst.eq(b_job.dst), wb_in.yaddr.eq(b_job.ysrc + b_i),
                     wb_in.token.eq(b_i), wb_in.accum.eq(b_job.accum),
                     wb_in.last.eq(b_i == T - 1), wb_in.signal.eq(b_job.signal),
                     wb_in.rmax.eq(b_job.rmax),
                     wb.i.valid.eq(b_push)]

        # Stage C: results back in order, each joined with its write-back record.
        o = self.vpu_out
        w = wb.o.p
        m.d.comb += [o.ready.eq(wb.o.valid), wb.o.ready.eq(o.valid)]
        back = o.valid & wb.o.valid
        m.d.comb += [self.awr.en.eq(back), self.awr.row.eq(w.dst), self.awr.token.eq(w.token),
                     self.awr.seg.eq(1), self.abuf_write.eq(back),
                     self.ywr.en.eq(back & w.accum), self.ywr.addr.eq(w.yaddr),
                     self.ybuf_write.eq(back & w.accum)]
        for t in range(T):
            m.d.comb += [self.awr.data[t].eq(o.p.y[t]), self.ywr.data.v[t].eq(o.p.Y[t])]
        m.d.comb += [self.ysat.eq(Mux(back, sum(o.p.sat[t] for t in range(T)), 0)),
                     self.Ysat.eq(Mux(back, sum(o.p.Ysat[t] for t in range(T)), 0))]
        m.d.comb += [self.done.eq(back & w.last), self.signal.eq(w.signal)]

        # RMAX: each written token's max over its T results, through a registered max tree (its
        # control delayed alongside), then set or folded into the token's register.
        W = cfg.act_width
        y_in = []
        for t in range(T):              # registered first, off the VPU's output path
            r_t = Signal(signed(W), name=f"rmax_in{t}")
            m.d.sync += r_t.eq(o.p.y[t][:W].as_signed())
            y_in.append(r_t)
        top, stages = tree_reduce(m, y_in, "max", "rmax_tree", every=2)
        ctl = [(back & (w.rmax != 0), w.rmax, w.token)]
        for d in range(stages + 1):
            v_, md, tk = (Signal(name=f"rmax_v{d}"), Signal(2, name=f"rmax_m{d}"),
                          Signal(range(T), name=f"rmax_t{d}"))
            m.d.sync += [v_.eq(ctl[-1][0]), md.eq(ctl[-1][1]), tk.eq(ctl[-1][2])]
            ctl.append((v_, md, tk))
        rv, rm, rt = ctl[-1]
        for t in range(T):
            reg = Signal(signed(W), init=-(1 << (W - 1)), name=f"rmax{t}")
            with m.If(rv & (rt == t)):
                m.d.sync += reg.eq(Mux((rm == 1) | (top > reg), top, reg))
            m.d.comb += self.rmax[t].eq(reg)
        pending = Cat(*(c[0] for c in ctl)).any()

        m.d.comb += self.busy.eq(replaying | jobs.o.valid | b_valid | wb.o.valid | gfifo.o.valid |
                                 pending)
        with m.If(neg):
            m.d.comb += self.fault.eq(isa.ERRORS.index("shift"))
        with m.If(bad_w | (replaying & ~seen_last & past_end & ~inflight)):
            m.d.comb += self.fault.eq(isa.ERRORS.index("address"))
        return m
