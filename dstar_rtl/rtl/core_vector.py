"""The core's vector engine V: VROW (program/isa.py) on the VPU.

An issue side walks the rows and beats of the command (token rows of ABUF tensors, or
sub-channels), reads the operands (ABUF ``a`` through port ``rc``, or for ``gated_residual``
``a`` through ``ra`` and ``c`` through ``rc``; VBUF vectors for ``b`` and, for ``modulate``,
``c``; the MASK row for ``softmax`` and ``softmax_mx``, whose row maxima are the matrix engine's
RMAX, ``rmax``, copied when the command is taken) and sends one VPU command per row and one
input beat per cycle; an output side counts the VPU's results back in order and writes them
(ABUF token segments, WMEM rows for ``kv_quant``, a shift register for ``kv_amax``). The command
is done when the last result is written. A LayerNorm row longer than ``max_reduction`` (up to
``ln_row_max``) is read and sent twice (:func:`golden.vpu.layernorm_passes`: the VPU takes its
statistics from the first copy and normalizes the second).

A VROW with ``overlap`` runs beside the quantize and matrix engines (the dispatcher's rule): it
reads ABUF only through ``rc`` (Q reads through the port ``ra`` shares), and while ``awr_busy``
(the matrix engine writes ABUF this cycle, which has priority) it takes no result bound for ABUF,
holding the VPU's output.

Throughput: one input beat per cycle (reads are issued against the room of the 4-beat input
queue, a :class:`~rtl.stream_queue.StreamQueue`; the commands wait in another); the VPU's own
rate per operation (rtl/vpu.py) sets the rest.
"""

from amaranth.hdl import Array, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import bitlen
from dstar_rtl.golden.layouts import vpu_cmd_layout, vpu_in_layout, vpu_out_layout
from dstar_rtl.program import isa

from .core_abuf import ABufPort
from .core_layouts import VOP, MemRead, MemWrite, cmd_layout, row_layout
from .layouts import to_layout
from .params import check_config, check_core
from .stream_queue import StreamQueue

__all__ = ["VectorEngine"]

_FIFO = 4


class VectorEngine(wiring.Component):
    """Parameters: ``cfg`` and, keyword-only, ``core`` (:class:`program.isa.CoreConfig`).

    Members: ``cmd`` (taken when idle), ``busy``, ``done``/``signal``, ``overlap`` (the running
    command's flag); ports ``ra``/``rc`` (ABUF reads), ``awr`` (ABUF write) and ``awr_busy`` (In:
    the write port is taken this cycle), ``vb``/``vc`` (VBUF reads), ``mrd`` (MASK read),
    ``wwr`` (WMEM write); ``param`` (the VPARAM register, In), ``sreg`` (In) and ``sreg_we`` /
    ``sreg_idx`` / ``sreg_val`` (a kv_amax result); the VPU streams; event counts
    ``abuf_reads`` (0..2 per cycle), ``abuf_write``, ``wmem_write``, ``vpu_row``, ``vpu_beat``,
    ``sat`` (saturated lanes of a result)."""

    def __init__(self, cfg, *, core):
        self._cfg, self._core = check_config(cfg), check_core(core)
        T = cfg.tile
        shb = bitlen(cfg.sh_max)
        pw = to_layout(vpu_cmd_layout(cfg)).members["param"]
        super().__init__({
            "cmd": In(stream.Signature(isa.cmd_bits(cfg))),
            "busy": Out(1), "done": Out(1), "signal": Out(isa.SEMAPHORES), "overlap": Out(1),
            "awr_busy": In(1),
            "ra": Out(ABufPort(T, cfg.act_width, core.abuf_rows, False)),
            "rc": Out(ABufPort(T, cfg.act_width, core.abuf_rows, False)),
            "awr": Out(ABufPort(T, cfg.act_width, core.abuf_rows, True)),
            "vb": Out(MemRead(core.vbuf_rows, row_layout(cfg, "VBUF"))),
            "vc": Out(MemRead(core.vbuf_rows, row_layout(cfg, "VBUF"))),
            "mrd": Out(MemRead(core.mask_rows, row_layout(cfg, "MASK"))),
            "wwr": Out(MemWrite(core.wmem_rows, row_layout(cfg, "WMEM"))),
            "param": In(pw),
            "sreg": In(data.ArrayLayout(shb, isa.SREGS)),
            "rmax": In(data.ArrayLayout(signed(cfg.act_width), T)),
            "sreg_we": Out(1), "sreg_idx": Out(4), "sreg_val": Out(shb),
            "vpu_cmd": Out(stream.Signature(to_layout(vpu_cmd_layout(cfg)))),
            "vpu_in": Out(stream.Signature(to_layout(vpu_in_layout(cfg)))),
            "vpu_out": In(stream.Signature(to_layout(vpu_out_layout(cfg)))),
            "abuf_reads": Out(2), "abuf_write": Out(1), "wmem_write": Out(1),
            "vpu_row": Out(1), "vpu_beat": Out(1), "sat": Out(range(T + 1)),
        })

    def elaborate(self, platform):
        cfg = self._cfg
        T = cfg.tile
        k = (T - 1).bit_length()
        A = isa.ADDR_BITS
        AB = isa.abuf_bits(cfg)     # ABUF addresses (a, c, dst): A at every preset
        m = Module()
        v = cmd_layout(cfg, "VROW")(self.cmd.payload)

        vop = Signal(4)
        cols = Signal()
        R = Signal(A)
        n = Signal(A)
        C = Signal(A)
        sig = Signal(isa.SEMAPHORES)
        sreg = Signal(4)
        nbeats = Signal(A)
        twice = Signal()            # a long LayerNorm row: its beats are sent twice
        active = Signal()
        ovl = Signal()
        rmax_q = Signal.like(self.rmax)       # RMAX as it was when the command was taken
        m.d.comb += [self.busy.eq(active), self.signal.eq(sig), self.cmd.ready.eq(~active),
                     self.overlap.eq(active & ovl)]
        is_op = {name: vop == VOP(name) for name in isa.VROW_OPS}

        # Issue side state.
        r = Signal(A)               # row (token or tile)
        kk = Signal(A)              # beat in the row
        abase = Signal(AB + 2)       # a + tile·C (token rows) or a + r·C (sub-channels)
        cbase = Signal(AB + 2)
        aoff = Signal(AB + 2)        # kk·T (token rows) or kk
        VB = isa.vbuf_bits(cfg)     # VBUF / MASK rows (vb): A at every preset
        mrow = Signal(VB + 1)
        vbf = Signal(VB)            # VBUF row of b (and the MASK base)
        cf = Signal(max(AB, VB))    # VBUF row of c (modulate)
        issuing = Signal()
        # Output side state.
        ro = Signal(A)
        ko = Signal(A)
        dbase = Signal(AB + 2)       # dst + tile·C
        doff = Signal(AB + 2)
        wstart = Signal(AB + 2)      # WMEM row of the row's first result
        wrow = Signal(AB + 2)

        take = self.cmd.valid & self.cmd.ready
        with m.If(take):
            nb = Mux(v.cols, v.n, (v.n + T - 1) >> k)
            if cfg.ln_max > cfg.max_reduction:
                m.d.sync += twice.eq((v.vop == VOP("layernorm")) & ~v.cols &
                                     (v.n > cfg.max_reduction))
            m.d.sync += [vop.eq(v.vop), cols.eq(v.cols), R.eq(v.R), n.eq(v.n), C.eq(v.C),
                         sig.eq(v.signal), sreg.eq(v.sreg), nbeats.eq(nb), active.eq(1),
                         ovl.eq(v.overlap), rmax_q.eq(self.rmax),
                         r.eq(0), kk.eq(0), abase.eq(v.a), cbase.eq(v.c), aoff.eq(0),
                         mrow.eq(v.vb), vbf.eq(v.vb), cf.eq(v.c), issuing.eq(1),
                         ro.eq(0), ko.eq(0), dbase.eq(v.dst), doff.eq(0),
                         wstart.eq(v.dst), wrow.eq(v.dst)]

        # ---------------------------------------------------------------- issue side
        m.submodules.cfifo = cfifo = StreamQueue(to_layout(vpu_cmd_layout(cfg)), depth=_FIFO)
        m.submodules.ififo = ififo = StreamQueue(to_layout(vpu_in_layout(cfg)), depth=_FIFO)
        inflight = Signal()
        row_start = kk == 0
        issue = Signal()
        m.d.comb += issue.eq(issuing & ififo.room_for(inflight) & (~row_start | cfifo.i.ready))
        m.d.sync += inflight.eq(issue)
        last_beat = kk == Mux(twice, nbeats << 1, nbeats) - 1
        first_end = twice & (kk == nbeats - 1)     # the end of a long row's first copy
        tile_end = cols | (r[:k] == T - 1)
        with m.If(issue):
            with m.If(last_beat):
                m.d.sync += [kk.eq(0), r.eq(r + 1),
                             aoff.eq(0)]
                with m.If(tile_end):
                    m.d.sync += [abase.eq(abase + C), cbase.eq(cbase + C), mrow.eq(mrow + 1)]
                with m.If(r == R - 1):
                    m.d.sync += issuing.eq(0)
            with m.Else():
                m.d.sync += [kk.eq(kk + 1), aoff.eq(Mux(first_end, 0, aoff + Mux(cols, 1, T)))]

        # One VPU command per row.
        vcmd = cfifo.i.p
        m.d.comb += [vcmd.op.eq(vop), vcmd.n.eq(Mux(cols, n << k, n)), vcmd.param.eq(self.param)]
        with m.If(is_op["kv_amax"]):
            m.d.comb += vcmd.param.eq(r != 0)
        with m.If(is_op["kv_quant"]):
            m.d.comb += vcmd.param.eq(Array(self.sreg[i] for i in range(isa.SREGS))[sreg])
        with m.If(is_op["softmax_mx"]):      # the row's max, act_width-bit two's complement
            rm = Array(rmax_q[t] for t in range(T))[r[:k]]
            m.d.comb += vcmd.param.eq(rm.as_unsigned())
        m.d.comb += [cfifo.i.valid.eq(issue & row_start), self.vpu_row.eq(issue & row_start)]

        # Operand reads (data the next cycle).
        two_abuf = is_op["gated_residual"]
        m.d.comb += [
            self.ra.en.eq(issue & two_abuf), self.ra.row.eq(abase + aoff), self.ra.token.eq(r[:k]),
            self.ra.seg.eq(1),
            self.rc.en.eq(issue), self.rc.row.eq(Mux(two_abuf, cbase, abase) + aoff),
            self.rc.token.eq(r[:k]), self.rc.seg.eq(two_abuf | ~cols),
            self.vb.en.eq(issue), self.vb.addr.eq(vbf + kk),
            self.vc.en.eq(issue), self.vc.addr.eq(cf + kk),
            self.mrd.en.eq(issue), self.mrd.addr.eq(mrow),
            self.abuf_reads.eq(Mux(issue, 1 + two_abuf, 0)),
        ]
        kk_q = Signal(A)
        with m.If(issue):
            m.d.sync += kk_q.eq(kk)
        beat = ififo.i.p
        bit = (self.mrd.data.bits >> kk_q)[0]
        for t in range(T):
            # (a signal of its own: the payload's sign extension then reads it, not the payload)
            a_t = Signal(signed(cfg.act_width), name=f"a_sel{t}")
            m.d.comb += a_t.eq(Mux(two_abuf, self.ra.data[t], self.rc.data[t]))
            m.d.comb += [beat.a[t].eq(a_t),
                         beat.b[t].eq(self.vb.data.v[t]),
                         beat.c[t].eq(Mux(two_abuf, self.rc.data[t], self.vc.data.v[t])),
                         beat.mask[t].eq(bit)]
        m.d.comb += [ififo.i.valid.eq(inflight), self.vpu_beat.eq(inflight)]
        wiring.connect(m, cfifo.o, wiring.flipped(self.vpu_cmd))
        wiring.connect(m, ififo.o, wiring.flipped(self.vpu_in))

        # ---------------------------------------------------------------- output side
        o = self.vpu_out
        amax = is_op["kv_amax"]
        to_wmem = is_op["kv_quant"]
        m.d.comb += o.ready.eq(active & ~(self.awr_busy & ~amax & ~to_wmem))
        back = o.valid & o.ready
        obeats = Mux(amax, 1, nbeats)
        olast = ko == obeats - 1
        m.d.comb += [
            self.awr.en.eq(back & ~amax & ~to_wmem), self.awr.row.eq(dbase + doff),
            self.awr.token.eq(ro[:k]), self.awr.seg.eq(1),
            self.wwr.en.eq(back & to_wmem), self.wwr.addr.eq(wrow),
            self.abuf_write.eq(back & ~amax & ~to_wmem), self.wmem_write.eq(back & to_wmem),
            self.sat.eq(Mux(back, sum(o.p.sat[t] for t in range(T)), 0)),
            self.sreg_we.eq(back & amax & (ro == R - 1)), self.sreg_idx.eq(sreg),
            self.sreg_val.eq(o.p.y[0]),
        ]
        for t in range(T):
            m.d.comb += [self.awr.data[t].eq(o.p.y[t]), self.wwr.data.w[t].eq(o.p.y[t])]
        finish = back & olast & (ro == R - 1)
        m.d.comb += self.done.eq(finish)
        with m.If(finish):
            m.d.sync += active.eq(0)
        with m.If(back):
            with m.If(olast):
                m.d.sync += [ko.eq(0), ro.eq(ro + 1), doff.eq(0),
                             wstart.eq(wstart + Mux(cols, n, 1)),
                             wrow.eq(wstart + Mux(cols, n, 1))]
                with m.If(cols | (ro[:k] == T - 1)):
                    m.d.sync += dbase.eq(dbase + C)
            with m.Else():
                m.d.sync += [ko.eq(ko + 1), doff.eq(doff + T),
                             wrow.eq(wrow + Mux(cols, 1, R))]
        return m
