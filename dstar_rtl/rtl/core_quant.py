"""The core's quantize engine Q: QCFG and QUANT (program/isa.py) around the QPU.

QUANT reads the tile's sub-channels from ABUF (and ``x̂`` from XBUF in differential mode), feeds
``u = x - x̂`` (or ``x``) to the :class:`~rtl.qpu.QPU`, writes its groups to GMEM from ``gdst``
on, and in differential mode adds the QPU's reconstruction to ``x̂`` (saturating to
``act_width + 1`` bits) and writes it back. The command is done when the tile's last group and
every reconstruction have been written.

Latency and throughput: one sub-channel per cycle into the QPU (reads are issued against the
room of a 4-beat :class:`~rtl.stream_queue.StreamQueue`); the QPU's latency (rtl/qpu.py) until
the last group.
"""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.program import isa

from .arith import saturate
from .core_abuf import ABufPort
from .core_layouts import OP, MemRead, MemWrite, cmd_layout, row_layout
from .layouts import gmem_layout
from .params import check_config, check_core
from .qpu import QPU, counters_layout
from .qpu_front import front_in_layout
from .stream_queue import StreamQueue

__all__ = ["QuantEngine", "quant_engine_members"]

_FIFO = 4


def quant_engine_members(cfg, core) -> dict:
    """The members a Q engine has (this one and the INT8 core's,
    :class:`rtl.core_quant_int8.Int8QuantEngine`), so that the core wires either; GMEM rows in
    ``cfg``'s datapath layout."""
    T = cfg.tile
    xrow = row_layout(cfg, "XBUF")
    return {
        "cmd": In(stream.Signature(isa.cmd_bits(cfg))),
        "busy": Out(1), "done": Out(1), "signal": Out(isa.SEMAPHORES),
        "fault": Out(range(len(isa.ERRORS))),
        "abuf": Out(ABufPort(T, cfg.act_width, core.abuf_rows, False)),
        "xrd": Out(MemRead(core.xbuf_rows, xrow)),
        "xupd": Out(MemRead(core.xbuf_rows, xrow)),
        "xwr": Out(MemWrite(core.xbuf_rows, xrow)),
        "gwr": Out(MemWrite(core.gmem_rows, gmem_layout(cfg))),
        "counters": Out(counters_layout()),
        "groups": Out(1), "pcache_group": Out(1),
        "abuf_read": Out(1), "xbuf_read": Out(1), "xbuf_write": Out(1),
        "xsat": Out(range(T + 1)),
    }


class QuantEngine(wiring.Component):
    """Parameters: ``cfg`` and, keyword-only, ``core`` (:class:`program.isa.CoreConfig`).

    Members: ``cmd`` (taken when idle), ``busy``, ``done``/``signal``, ``fault`` (an error code:
    ``address`` for a GMEM write past the end, ``qpu`` for a refused QPU configuration or a tile
    longer than ``max_reduction``), ports
    ``abuf`` (read), ``xrd`` / ``xupd`` (XBUF reads), ``xwr`` (XBUF write), ``gwr`` (GMEM write),
    the QPU ``counters``, and event pulses ``groups`` (a group written), ``pcache_group``,
    ``abuf_read``, ``xbuf_read``, ``xbuf_write``, ``xsat`` (x̂ values saturated by an update)."""

    def __init__(self, cfg, *, core):
        self._cfg, self._core = check_config(cfg), check_core(core)
        super().__init__(quant_engine_members(cfg, core))

    def elaborate(self, platform):
        cfg, core = self._cfg, self._core
        T = cfg.tile
        m = Module()
        m.submodules.qpu = qpu = QPU(cfg)
        m.d.comb += self.counters.eq(qpu.counters)

        quant = cmd_layout(cfg, "QUANT")(self.cmd.payload)
        qcfg = cmd_layout(cfg, "QCFG")(self.cmd.payload)
        src = Signal(isa.abuf_bits(cfg))
        xsrc = Signal(isa.addr_bits(cfg))
        nch = Signal(isa.ADDR_BITS)
        diff = Signal()
        pcache = Signal()
        sig = Signal(isa.SEMAPHORES)
        gptr = Signal(isa.addr_bits(cfg) + 1)
        fed = Signal(isa.ADDR_BITS)        # sub-channels whose reads were issued
        recs = Signal(isa.ADDR_BITS)       # reconstructions received
        tile_done = Signal()               # the tile's last group was written
        active = Signal()
        m.d.comb += [self.busy.eq(active), self.signal.eq(sig)]

        # Commands: QCFG goes straight to the QPU (always ready); QUANT starts a tile.
        m.d.comb += self.cmd.ready.eq(~active)
        take = self.cmd.valid & self.cmd.ready
        m.d.comb += [qpu.config.valid.eq(take & (qcfg.op == OP["QCFG"])),
                     qpu.config.p.base_log2.eq(qcfg.base_log2)]
        for i in range(3):
            m.d.comb += qpu.config.p.thr[i].eq(qcfg.thr[i])
        done = Signal()
        m.d.comb += self.done.eq(done)
        with m.If(take & (qcfg.op == OP["QCFG"])):
            m.d.comb += done.eq(1)
            m.d.sync += sig.eq(qcfg.signal)
            m.d.comb += self.signal.eq(qcfg.signal)
        with m.If(take & (quant.op == OP["QUANT"])):
            m.d.sync += [src.eq(quant.src), xsrc.eq(quant.xsrc), nch.eq(quant.nch),
                         diff.eq(quant.diff), pcache.eq(quant.pcache), sig.eq(quant.signal),
                         gptr.eq(quant.gdst), fed.eq(0), recs.eq(0), tile_done.eq(0),
                         active.eq(1)]

        # Feed: read x (and x̂), subtract, queue to the QPU.
        m.submodules.fifo = subch_q = StreamQueue(front_in_layout(cfg), depth=_FIFO)
        inflight = Signal()
        issue = Signal()
        room = Signal()
        m.d.comb += room.eq(subch_q.room_for(inflight))
        m.d.comb += issue.eq(active & (fed < nch) & room)
        m.d.sync += inflight.eq(issue)
        last_q = Signal()
        m.d.sync += last_q.eq(fed == nch - 1)
        m.d.comb += [self.abuf.en.eq(issue), self.abuf.row.eq(src + fed), self.abuf.seg.eq(0),
                     self.xrd.en.eq(issue & diff), self.xrd.addr.eq(xsrc + fed),
                     self.abuf_read.eq(issue), self.xbuf_read.eq(issue & diff)]
        with m.If(issue):
            m.d.sync += fed.eq(fed + 1)
        beat = subch_q.i.p
        for t in range(T):
            x = self.abuf.data[t]
            with m.If(diff):
                m.d.comb += beat.u[t].eq(x - self.xrd.data.v[t])
            with m.Else():
                m.d.comb += beat.u[t].eq(x)
        m.d.comb += [beat.last.eq(last_q), subch_q.i.valid.eq(inflight)]
        wiring.connect(m, subch_q.o, qpu.subch)

        # Reconstruction: read x̂ again, add, saturate, write back (differential mode).
        rec_a = Signal()
        rec_val = Signal.like(qpu.recon.p)
        rec_addr = Signal(isa.addr_bits(cfg))
        m.d.comb += [qpu.recon.ready.eq(1),
                     self.xupd.en.eq(qpu.recon.valid & diff),
                     self.xupd.addr.eq(xsrc + recs)]
        m.d.sync += rec_a.eq(qpu.recon.valid & diff)
        with m.If(qpu.recon.valid):
            m.d.sync += [recs.eq(recs + 1), rec_val.eq(qpu.recon.p), rec_addr.eq(xsrc + recs)]
        lim = 1 << (cfg.xhat_width - 1)
        flags = []
        for t in range(T):
            s = Signal(signed(cfg.xhat_width + 3), name=f"xsum{t}")
            m.d.comb += s.eq(self.xupd.data.v[t] + rec_val.value[t])
            v, f = saturate(m, s, -lim, lim - 1, cfg.xhat_width, f"xhat{t}")
            m.d.comb += self.xwr.data.v[t].eq(v)
            flags.append(f)
        m.d.comb += self.xsat.eq(Mux(rec_a, sum(flags), 0))
        m.d.comb += [self.xwr.en.eq(rec_a), self.xwr.addr.eq(rec_addr),
                     self.xbuf_write.eq(rec_a)]

        # Groups into GMEM.
        bad = gptr >= core.gmem_rows
        m.d.comb += [qpu.groups.ready.eq(1),
                     self.gwr.en.eq(qpu.groups.valid & ~bad), self.gwr.addr.eq(gptr),
                     self.gwr.data.eq(qpu.groups.p),
                     self.groups.eq(qpu.groups.valid & ~bad),
                     self.pcache_group.eq(qpu.groups.valid & ~bad & pcache)]
        with m.If(qpu.groups.valid):
            m.d.sync += gptr.eq(gptr + 1)
            with m.If(qpu.groups.p.last):
                m.d.sync += tile_done.eq(1)
        with m.If(qpu.config_error | qpu.overflow):
            m.d.comb += self.fault.eq(isa.ERRORS.index("qpu"))
        with m.If(qpu.groups.valid & bad):
            m.d.comb += self.fault.eq(isa.ERRORS.index("address"))

        # Completion: the last group written, every reconstruction written back.
        finish = active & tile_done & (recs == nch) & ~rec_a
        with m.If(finish):
            m.d.sync += active.eq(0)
            m.d.comb += done.eq(1)
        return m

