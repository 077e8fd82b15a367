"""The INT8 core's quantize engine Q: QUANT (program/isa.py) with the INT8 activation quantizer
of numerics §2.8 in place of the QPU (``cfg.datapath == "int8"``).

QUANT reads the tile's ``nch`` sub-channels from ABUF twice. Pass 1 takes the largest magnitude
over the tile; :class:`~rtl.vpu_scalar.KVShift` turns it into the tile's exponent ``e`` (the
smallest with ``rnd(max, e) <= 127``). Pass 2 rounds every value, ``q = rnd(x, e)``, and writes
one group (:func:`golden.layouts.int8_group_layout`) per sub-channel whose ``q`` is not all
zero to GMEM from ``gdst`` on; each group waits one sub-channel in a register so that the last
one written carries ``last``; a tile with none writes one group with ``valid = 0``. QCFG is
taken and does nothing (the quantizer has no configuration); a QUANT with ``diff`` never
reaches the engine (the dispatcher refuses it).

Latency and throughput: one ABUF read per cycle in each pass; a QUANT of ``nch`` sub-channels
takes ``2·nch + 4`` cycles from its issue to ``done``. Counters (the QPU's, numerics §2.8):
``subchannels``, ``subchannels_b8`` or ``subchannels_zero`` per sub-channel, ``groups`` per
group, ``padded_lanes`` 1 for the group of an all-zero tile; 32-bit, saturating.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import wiring

from dstar_rtl.program import isa

from .arith import shift_round, tree_max
from .core_layouts import OP, cmd_layout
from .core_quant import quant_engine_members
from .params import check_config, check_core
from .vpu_scalar import KVShift

__all__ = ["Int8QuantEngine"]

# Counters this quantizer increments (the others of counters_layout stay 0).
_COUNTED = ("subchannels", "subchannels_b8", "subchannels_zero", "groups", "padded_lanes")


class Int8QuantEngine(wiring.Component):
    """Parameters: ``cfg`` (``datapath == "int8"``) and, keyword-only, ``core``
    (:class:`program.isa.CoreConfig`).

    Members: the same as :class:`rtl.core_quant.QuantEngine`'s, so that the core wires either:
    ``cmd``, ``busy``, ``done``/``signal``, ``fault`` (``address`` for a GMEM write past the
    end), ports ``abuf`` (read), ``xrd`` / ``xupd`` / ``xwr`` (never enabled: no ``x̂``),
    ``gwr`` (GMEM write), ``counters``, and event pulses ``groups``, ``pcache_group``,
    ``abuf_read``, ``xbuf_read``, ``xbuf_write``, ``xsat`` (the last three always 0)."""

    def __init__(self, cfg, *, core):
        self._cfg, self._core = check_config(cfg), check_core(core)
        if cfg.datapath != "int8":
            raise ValueError(f"Int8QuantEngine needs cfg.datapath 'int8', not "
                             f"{cfg.datapath!r}")
        super().__init__(quant_engine_members(cfg, core))

    def elaborate(self, platform):
        cfg, core = self._cfg, self._core
        T, W = cfg.tile, cfg.act_width
        m = Module()
        m.submodules.kvshift = kvs = KVShift(cfg)

        quant = cmd_layout(cfg, "QUANT")(self.cmd.payload)
        qcfg = cmd_layout(cfg, "QCFG")(self.cmd.payload)
        src = Signal(isa.abuf_bits(cfg))
        nch = Signal(isa.ADDR_BITS)
        pcache = Signal()
        sig = Signal(isa.SEMAPHORES)
        gptr = Signal(isa.addr_bits(cfg) + 1)
        fed = Signal(isa.ADDR_BITS)          # reads issued in the current pass
        active = Signal()
        pass2 = Signal()                     # 0: the maximum, 1: the values
        m.d.comb += [self.busy.eq(active), self.signal.eq(sig)]

        m.d.comb += self.cmd.ready.eq(~active)
        take = self.cmd.valid & self.cmd.ready
        done = Signal()
        m.d.comb += self.done.eq(done)
        with m.If(take & (qcfg.op == OP["QCFG"])):
            m.d.comb += [done.eq(1), self.signal.eq(qcfg.signal)]
            m.d.sync += sig.eq(qcfg.signal)

        # Reads: one per cycle in either pass; the data arrives the next cycle.
        issue = Signal()
        rd = Signal()                        # data of a read on abuf.data this cycle
        rd_ch = Signal(isa.ADDR_BITS)        # its channel
        rd_last = Signal()                   # the tile's last sub-channel
        m.d.comb += [issue.eq(active & (fed < nch)),
                     self.abuf.en.eq(issue), self.abuf.row.eq(src + fed), self.abuf.seg.eq(0),
                     self.abuf_read.eq(issue)]
        m.d.sync += [rd.eq(issue), rd_ch.eq(fed), rd_last.eq(issue & (fed == nch - 1))]
        with m.If(issue):
            m.d.sync += fed.eq(fed + 1)

        # Pass 1: the largest magnitude of the tile.
        amax = Signal(unsigned(W))
        mags = []
        for t in range(T):
            a = Signal(unsigned(W), name=f"mag{t}")
            x = self.abuf.data[t]
            m.d.comb += a.eq(Mux(x < 0, -x, x))
            mags.append(a)
        row_max = tree_max(m, mags, "rowmax")
        with m.If(rd & ~pass2):
            m.d.sync += amax.eq(Mux(row_max > amax, row_max, amax))
        m.d.comb += kvs.amax.eq(amax)
        # The pass ends the cycle after its last read's data was taken, when amax is final;
        # KVShift registers e from it in that cycle, so e is right from pass 2's first cycle
        # on (its first data arrives one cycle later) and stays so (amax holds).
        with m.If(active & ~pass2 & (fed == nch) & ~rd):
            m.d.sync += [pass2.eq(1), fed.eq(0)]

        # Pass 2: round, test for zero, hold each group one sub-channel.
        e = kvs.e
        q = []
        for t in range(T):
            q.append(shift_round(m, self.abuf.data[t], e, cfg.weight_width, f"q{t}"))
        nz = Signal()
        m.d.comb += nz.eq(Cat(*(v != 0 for v in q)).any())
        glay = self.gwr.data.shape()          # golden.layouts.int8_group_layout
        pend = Signal(glay)                   # the group waiting for its successor
        pend_v = Signal()
        wrote = Signal()                      # a group of this tile was written
        fin = Signal()                        # the cycle after the last sub-channel's data
        m.d.sync += fin.eq(rd & pass2 & rd_last)
        row2 = rd & pass2
        new = Signal(glay)
        m.d.comb += [new.channel.eq(rd_ch), new.valid.eq(1), new.exp.eq(e)]
        for t in range(T):
            m.d.comb += new.act[t].eq(q[t])
        wr = Signal()
        wdata = Signal(glay)
        with m.If(row2 & nz):
            m.d.sync += [pend.eq(new), pend_v.eq(1)]
            with m.If(pend_v):
                m.d.comb += [wr.eq(1), wdata.eq(pend), wdata.first.eq(~wrote)]
                m.d.sync += wrote.eq(1)
        with m.If(fin):
            m.d.comb += [wr.eq(1), wdata.last.eq(1), wdata.first.eq(~wrote)]
            with m.If(pend_v):
                m.d.comb += [wdata.act.eq(pend.act), wdata.channel.eq(pend.channel),
                             wdata.valid.eq(1)]
            m.d.comb += wdata.exp.eq(e)

        bad = gptr >= core.gmem_rows
        m.d.comb += [self.gwr.en.eq(wr & ~bad), self.gwr.addr.eq(gptr), self.gwr.data.eq(wdata),
                     self.groups.eq(wr & ~bad), self.pcache_group.eq(wr & ~bad & pcache)]
        with m.If(wr):
            m.d.sync += gptr.eq(gptr + 1)
        with m.If(wr & bad):
            m.d.comb += self.fault.eq(isa.ERRORS.index("address"))

        # Counters (32-bit, saturating).
        inc = {"subchannels": row2, "subchannels_b8": row2 & nz, "subchannels_zero": row2 & ~nz,
               "groups": wr & ~bad, "padded_lanes": fin & ~pend_v}
        for name in _COUNTED:
            c = getattr(self.counters, name)
            with m.If(inc[name] & (c != (1 << 32) - 1)):
                m.d.sync += c.eq(c + 1)

        with m.If(take & (quant.op == OP["QUANT"])):
            m.d.sync += [src.eq(quant.src), nch.eq(quant.nch), pcache.eq(quant.pcache),
                         sig.eq(quant.signal), gptr.eq(quant.gdst), fed.eq(0), amax.eq(0),
                         pass2.eq(0), pend_v.eq(0), wrote.eq(0), active.eq(1)]
        with m.If(fin):
            m.d.sync += active.eq(0)
            m.d.comb += done.eq(1)
        return m

