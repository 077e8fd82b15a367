"""The DSTAR core (MPC): MPU + QPU + VPU, the buffers and the controller that executes the
command stream of program/isa.py (docs/core.md).

Structure: the :class:`~rtl.core_dispatch.Dispatcher` issues commands to four engines, host
:class:`~rtl.core_host.HostEngine` (H), quantize :class:`~rtl.core_quant.QuantEngine` (Q, owns
the QPU), matrix :class:`~rtl.core_matrix.MatrixEngine` (M, owns the MPU, whose weight buffer is
WMEM and which requantizes its drain itself) and vector :class:`~rtl.core_vector.VectorEngine`
(V, owns the VPU). H never runs beside another engine, nor does V, except a VROW with
``overlap``, which reads ABUF only through the port Q does not use and yields ABUF's write port
to M; every other shared port is a plain multiplexer on the requests of whichever engine uses
it. Buffers are
``amaranth.lib.memory`` memories: ABUF (:class:`~rtl.core_abuf.SkewedBuffer`), XBUF, YBUF, RBUF,
VBUF, MASK, GMEM (group streams and the P cache), and WMEM inside the MPU; SREG is 16 registers.

With ``cfg.datapath == "int8"`` this is the INT8 core (numerics §2.8, docs/architecture.md §16):
Q is :class:`~rtl.core_quant_int8.Int8QuantEngine` (the INT8 activation quantizer) and M drives
the INT8 :class:`~rtl.baseline.Baseline` array; everything else is the same.

Ports: ``cmd`` (commands of :func:`program.isa.cmd_bits` bits: 128 at every preset),
``host_in`` / ``host_out`` (32-bit words), ``status``
(``done``, ``busy``, ``error`` code of :data:`program.isa.ERRORS`, ``error_index``,
``phase``). The performance counters (:data:`program.isa.COUNTERS`) are read with
``STORE CNT``.
"""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import Config, bitlen
from dstar_rtl.program import isa

from .core_abuf import SkewedBuffer
from .core_dispatch import ENGINES, Dispatcher
from .core_host import HostEngine
from .core_layouts import BUF, row_layout
from .core_matrix import MatrixEngine
from .core_quant import QuantEngine
from .core_quant_int8 import Int8QuantEngine
from .core_vector import VectorEngine
from .layouts import gmem_layout, to_layout
from .params import check_config, check_core
from .vpu import VPU

__all__ = ["Core", "status_layout"]


def status_layout() -> data.StructLayout:
    return to_layout(isa.status_layout())


def _share(m, target, users, fields):
    """Drive ``target``'s request ``fields`` from whichever user has ``en`` high (first wins),
    ``en`` from any of them, and fan its read ``data`` back out when the target has one."""
    m.d.comb += target.en.eq(Cat(*(u.en for u in users)).any())
    for f in fields:
        val = getattr(users[-1], f)
        for u in reversed(users[:-1]):
            val = Mux(u.en, getattr(u, f), val)
        m.d.comb += getattr(target, f).eq(val)


class Core(wiring.Component):
    """The core. Parameters: ``cfg`` (a :class:`golden.config.Config` with ``rows == cols ==
    vpu_lanes``, a power of two) and, keyword-only, ``core`` (:class:`program.isa.CoreConfig`,
    buffer depths)."""

    def __init__(self, cfg: Config, *, core: isa.CoreConfig):
        check_config(cfg)
        isa.check_core(cfg)
        self._cfg, self._core = cfg, check_core(core)
        super().__init__({
            "cmd": In(stream.Signature(isa.cmd_bits(cfg))),
            "host_in": In(stream.Signature(isa.HOST_WORD)),
            "host_out": Out(stream.Signature(isa.HOST_WORD)),
            "status": Out(status_layout()),
        })

    @property
    def cfg(self):
        return self._cfg

    @property
    def core(self):
        return self._core

    def elaborate(self, platform):
        cfg, core = self._cfg, self._core
        T = cfg.tile
        m = Module()
        m.submodules.dispatch = dsp = Dispatcher(cfg, core=core)
        m.submodules.host = h = HostEngine(cfg)
        quant = Int8QuantEngine if cfg.datapath == "int8" else QuantEngine
        m.submodules.quant = q = quant(cfg, core=core)
        m.submodules.matrix = mx = MatrixEngine(cfg, core=core)
        m.submodules.vector = v = VectorEngine(cfg, core=core)
        m.submodules.vpu = vpu = VPU(cfg, requant=False)   # M requantizes on its own lanes
        eng = {"H": h, "Q": q, "M": mx, "V": v}

        wiring.connect(m, wiring.flipped(self.cmd), dsp.cmd)
        wiring.connect(m, wiring.flipped(self.host_in), h.host_in)
        wiring.connect(m, h.host_out, wiring.flipped(self.host_out))
        for e, unit in eng.items():
            link = dsp.engine(e)
            wiring.connect(m, link.cmd, unit.cmd)
            m.d.comb += [link.busy.eq(unit.busy), link.done.eq(unit.done),
                         link.signal.eq(unit.signal)]
        m.d.comb += v.param.eq(dsp.param)
        m.d.comb += v.rmax.eq(mx.rmax)          # RMAX: written by M (GEMM rmax), read by V
        m.d.comb += [dsp.v_overlap.eq(v.overlap),
                     v.awr_busy.eq(mx.awr.en)]      # M's ABUF writes come first

        # SREG: written by V (kv_amax), read by V and M.
        for i in range(isa.SREGS):
            r = Signal(bitlen(cfg.sh_max), name=f"sreg{i}")
            with m.If(v.sreg_we & (v.sreg_idx == i)):
                m.d.sync += r.eq(v.sreg_val)
            m.d.comb += [v.sreg[i].eq(r), mx.sreg[i].eq(r)]

        # The VPU is V's (M requantizes its drain on its own).
        wiring.connect(m, v.vpu_cmd, vpu.cmd)
        wiring.connect(m, v.vpu_in, vpu.i)
        wiring.connect(m, vpu.o, v.vpu_out)

        # H's generic bus, split per buffer.
        hb = h.bus
        hbuf_q = Signal.like(hb.rbuf)
        with m.If(hb.ren):
            m.d.sync += hbuf_q.eq(hb.rbuf)

        def host(buf, write, shape=None):
            """H's request to ``buf`` as a memory-port-like record (``en``, ``addr``, ``data`` in
            the buffer's row shape); read data is the buffer's, write data H's raw bits."""
            shape = row_layout(cfg, buf) if shape is None else shape
            side = "w" if write else "r"
            p = SimpleNamespace(en=Signal(name=f"h_{buf}_{side}_en"),
                                addr=Signal(isa.addr_bits(cfg), name=f"h_{buf}_{side}_addr"),
                                data=Signal(shape, name=f"h_{buf}_{side}_data"))
            if write:
                m.d.comb += [p.en.eq(hb.wen & (hb.wbuf == BUF[buf])), p.addr.eq(hb.waddr),
                             p.data.eq(hb.wdata[:isa.row_width(cfg, buf)])]
            else:
                m.d.comb += [p.en.eq(hb.ren & (hb.rbuf == BUF[buf])), p.addr.eq(hb.raddr)]
                rdata[buf] = p.data
            return p

        def memory(name, depth, shape, readers, writers):
            """A buffer with one read port per entry of ``readers`` (each a list of users sharing
            the port) and one write port shared by ``writers``."""
            mem = Memory(shape=shape, depth=depth, init=[])
            m.submodules[name] = mem
            for users in readers:
                rp = mem.read_port()
                _share(m, rp, users, ["addr"])
                for u in users:
                    m.d.comb += u.data.eq(rp.data)
            wp = mem.write_port()
            _share(m, wp, writers, ["addr", "data"])

        rdata = {}       # H's read data per storable buffer

        # ABUF: read port 0 = Q / V.a of gated_residual / H (sub-channel rows), 1 = V (every
        # other operand); write = M (first) / V / H.
        m.submodules.abuf = ab = SkewedBuffer(T, width=cfg.act_width, depth=core.abuf_rows,
                                              read_ports=2)
        ashape = ab.r0.data.shape()
        hr, hw = host("ABUF", False, ashape), host("ABUF", True, ashape)
        for p in (hr, hw):   # H moves rows (sub-channels): no skew
            p.row, p.token, p.seg = p.addr, Signal(range(T)), Signal()
        _share(m, ab.r0, [q.abuf, v.ra, hr], ["row", "token", "seg"])
        for u in (q.abuf, v.ra, hr):
            m.d.comb += u.data.eq(ab.r0.data)
        _share(m, ab.r1, [v.rc], ["row", "token", "seg"])
        m.d.comb += v.rc.data.eq(ab.r1.data)
        _share(m, ab.w, [mx.awr, v.awr, hw], ["row", "token", "seg", "data"])

        memory("xbuf", core.xbuf_rows, row_layout(cfg, "XBUF"),
               [[q.xrd, host("XBUF", False)], [q.xupd]], [q.xwr, host("XBUF", True)])
        memory("ybuf", core.ybuf_rows, row_layout(cfg, "YBUF"),
               [[mx.yrd, host("YBUF", False)]], [mx.ywr, host("YBUF", True)])
        memory("rbuf", core.rbuf_rows, row_layout(cfg, "RBUF"), [[mx.rrd]],
               [host("RBUF", True)])
        memory("vbuf", core.vbuf_rows, row_layout(cfg, "VBUF"), [[v.vb], [v.vc]],
               [host("VBUF", True)])
        memory("mask", core.mask_rows, row_layout(cfg, "MASK"), [[v.mrd]],
               [host("MASK", True)])
        memory("gmem", core.gmem_rows, gmem_layout(cfg), [[mx.grd]], [q.gwr])

        # WMEM (inside the MPU): H and V write rows.
        hw_w = host("WMEM", True)
        wl = mx.wload
        m.d.comb += [wl.valid.eq(hw_w.en | v.wwr.en),
                     wl.payload.eq(Mux(v.wwr.en, Cat(v.wwr.data.w, v.wwr.addr),
                                       Cat(hw_w.data.w, hw_w.addr)))]

        # Counters.
        hload = {b: hb.wen & (hb.wbuf == BUF[b]) for b in ("ABUF", "XBUF", "YBUF", "WMEM")}
        hstore = {b: hb.ren & (hb.rbuf == BUF[b]) for b in ("ABUF", "XBUF", "YBUF")}
        counters = self._counters(m, dsp, eng, hload, hstore)
        cnt_r = host("CNT", False, unsigned(32))
        with m.If(cnt_r.en):
            m.d.sync += cnt_r.data.eq(Array(counters)[cnt_r.addr])
        with m.Switch(hbuf_q):
            for buf, d in rdata.items():
                with m.Case(BUF[buf]):
                    m.d.comb += hb.rdata.eq(d)

        # Errors and status.
        fault = Signal.like(dsp.fault)
        who = Signal.like(dsp.fault_engine)
        with m.If(vpu.error):
            m.d.comb += [fault.eq(isa.ERRORS.index("vpu")), who.eq(ENGINES.index("V"))]
        with m.If(q.fault != 0):
            m.d.comb += [fault.eq(q.fault), who.eq(ENGINES.index("Q"))]
        with m.If(mx.fault != 0):
            m.d.comb += [fault.eq(mx.fault), who.eq(ENGINES.index("M"))]
        m.d.comb += [dsp.fault.eq(fault), dsp.fault_engine.eq(who)]
        m.d.comb += [self.status.done.eq(dsp.done), self.status.error.eq(dsp.error),
                     self.status.error_index.eq(dsp.error_index), self.status.phase.eq(dsp.phase),
                     self.status.busy.eq(Cat(*(u.busy for u in eng.values())).any())]
        return m

    def _counters(self, m, dsp, eng, hload, hstore):
        """The counters of :data:`program.isa.COUNTERS`, 32-bit saturating (the ``qpu_*``
        ones are the QPU's own)."""
        h, q, mx, v = eng["H"], eng["Q"], eng["M"], eng["V"]
        inc = {"cycles": 1, "commands": dsp.executed,
               "host_words_in": h.words_in, "host_words_out": h.words_out,
               "groups_replayed": mx.group, "lanes_valid": mx.lanes,
               "pcache_groups_written": q.pcache_group, "pcache_groups_read": mx.pcache_group,
               "abuf_reads": q.abuf_read + v.abuf_reads + hstore["ABUF"],
               "abuf_writes": mx.abuf_write + v.abuf_write + hload["ABUF"],
               "xbuf_reads": q.xbuf_read + hstore["XBUF"],
               "xbuf_writes": q.xbuf_write + hload["XBUF"],
               "ybuf_reads": mx.ybuf_read + hstore["YBUF"],
               "ybuf_writes": mx.ybuf_write + hload["YBUF"],
               "wmem_writes": v.wmem_write + hload["WMEM"], "gmem_writes": q.groups,
               "vpu_rows": mx.vpu_row + v.vpu_row, "vpu_beats": mx.vpu_row + v.vpu_beat,
               "vpu_saturated": v.sat + q.xsat, "y_saturated": mx.ysat, "ysum_saturated": mx.Ysat}
        for e in ENGINES:
            inc[f"busy_{e}"] = eng[e].busy
            inc[f"stall_{e}"] = dsp.engine(e).stall
        out = []
        for name in isa.COUNTERS:
            c = Signal(32, name=f"cnt_{name}")
            if name.startswith("qpu_"):
                m.d.comb += c.eq(getattr(q.counters, name[4:]))
            else:
                nxt = c + inc[name]
                m.d.sync += c.eq(Mux(nxt >> 32 != 0, (1 << 32) - 1, nxt))
            out.append(c)
        return out

