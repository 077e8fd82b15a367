"""The DSTAR core (MPC): MPU + QPU + VPU, the buffers and the controller that executes the
command stream of program/isa.py (docs/core.md).

Structure: the :class:`~rtl.core_dispatch.Dispatcher` issues commands to four engines, host
:class:`~rtl.core_host.HostEngine` (H), quantize :class:`~rtl.core_quant.QuantEngine` (Q, owns
the QPU), matrix :class:`~rtl.core_matrix.MatrixEngine` (M, owns the MPU, whose weight buffer is
WMEM and which requantizes its drain itself) and vector :class:`~rtl.core_vector.VectorEngine`
(V, owns the VPU), and with a DRAM port (``cfg.dram_width``) the DRAM engine
:class:`~rtl.core_dram.DramEngine` (D, owns the AXI4 manager port ``dram``). H never runs
beside another engine, nor does V, except a VROW with ``overlap``, which reads ABUF only through
the port Q does not use and yields ABUF's write port to M; every other shared port is a plain
multiplexer on the requests of whichever engine uses it, D asking last (it moves a row in a
cycle no other engine uses the port: ``wgrant``/``rgrant``). Buffers are
``amaranth.lib.memory`` memories: ABUF (:class:`~rtl.core_abuf.SkewedBuffer`), XBUF, YBUF, RBUF,
VBUF, MASK, GMEM (group streams and the P cache), and WMEM inside the MPU; SREG is 16 registers.

With ``cfg.datapath == "int8"`` this is the INT8 core (numerics §2.8, docs/architecture.md §16):
Q is :class:`~rtl.core_quant_int8.Int8QuantEngine` (the INT8 activation quantizer) and M drives
the INT8 :class:`~rtl.baseline.Baseline` array; everything else is the same.

Ports: ``cmd`` (commands of :func:`program.isa.cmd_bits` bits: 128 at every preset),
``host_in`` / ``host_out`` (32-bit words), ``status``
(``done``, ``busy``, ``error`` code of :data:`program.isa.ERRORS`, ``error_index``,
``phase``), and ``dram`` (AXI4 manager, :func:`rtl.core_dram.dram_port_signature`) when the
configuration has a DRAM port. The performance counters (:data:`program.isa.COUNTERS`) are read with
``STORE CNT``.
"""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Module, Mux, Shape, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import Config, bitlen
from dstar_rtl.program import isa

from .core_abuf import SkewedBuffer
from .core_dispatch import ENGINES, Dispatcher
from .core_dram import DramEngine, dram_port_signature
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
        ports = {
            "cmd": In(stream.Signature(isa.cmd_bits(cfg))),
            "host_in": In(stream.Signature(isa.HOST_WORD)),
            "host_out": Out(stream.Signature(isa.HOST_WORD)),
            "status": Out(status_layout()),
        }
        if cfg.dram_width:
            ports["dram"] = Out(dram_port_signature(cfg))
        super().__init__(ports)

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
        if cfg.dram_width:
            m.submodules.dram = d = DramEngine(cfg)
            eng["D"] = d
            wiring.connect(m, d.dram, wiring.flipped(self.dram))
        else:                    # no port: the dispatcher refuses DLOAD/DSTORE, D stays idle
            d = None

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
        drdata = {}      # D's read data per buffer DSTORE moves
        dgrant = {"w": [], "r": []}     # D's grant on the port it asks for

        def dram(buf, write, shape=None):
            """D's request to ``buf`` (a list of one port-like record, like :func:`host`'s, or
            none without a DRAM port), the last user of the port it joins: ``grant(users)``
            then records that D has it when no other user asks."""
            if d is None:
                return []
            shape = (gmem_layout(cfg) if buf == "GMEM" else row_layout(cfg, buf)) \
                if shape is None else shape
            i = isa.DRAM_BUFFERS.index(buf)
            side = "w" if write else "r"
            p = SimpleNamespace(en=Signal(name=f"d_{buf}_{side}_en"),
                                addr=Signal(isa.addr_bits(cfg), name=f"d_{buf}_{side}_addr"),
                                data=Signal(shape, name=f"d_{buf}_{side}_data"), side=side,
                                buf=i)
            db = d.bus
            if write:
                width = Shape.cast(shape).width
                m.d.comb += [p.en.eq(db.wen & (db.wbuf == i)), p.addr.eq(db.waddr),
                             p.data.eq(db.wdata[:width])]
            else:
                m.d.comb += [p.en.eq(db.ren & (db.rbuf == i)), p.addr.eq(db.raddr)]
                drdata[buf] = p.data
            return [p]

        def grant(users):
            """Record D's grant on a port whose users are ``users`` (D's record last, if any)."""
            if users and isinstance(users[-1], SimpleNamespace) and \
                    getattr(users[-1], "side", None) in ("w", "r"):
                p = users[-1]
                others = Cat(*(u.en for u in users[:-1])).any() if len(users) > 1 else 0
                dgrant[p.side].append((p.buf, ~others))
            return users

        # ABUF: read port 0 = Q / V.a of gated_residual / H / D (sub-channel rows), 1 = V (every
        # other operand); write = M (first) / V / H / D.
        m.submodules.abuf = ab = SkewedBuffer(T, width=cfg.act_width, depth=core.abuf_rows,
                                              read_ports=2)
        ashape = ab.r0.data.shape()
        hr, hw = host("ABUF", False, ashape), host("ABUF", True, ashape)
        dr, dw = dram("ABUF", False, ashape), dram("ABUF", True, ashape)
        for p in (hr, hw, *dr, *dw):   # H and D move rows (sub-channels): no skew
            p.row, p.token, p.seg = p.addr, Signal(range(T)), Signal()
        r0_users = grant([q.abuf, v.ra, hr, *dr])
        _share(m, ab.r0, r0_users, ["row", "token", "seg"])
        for u in r0_users:
            m.d.comb += u.data.eq(ab.r0.data)
        _share(m, ab.r1, [v.rc], ["row", "token", "seg"])
        m.d.comb += v.rc.data.eq(ab.r1.data)
        _share(m, ab.w, grant([mx.awr, v.awr, hw, *dw]), ["row", "token", "seg", "data"])

        memory("xbuf", core.xbuf_rows, row_layout(cfg, "XBUF"),
               [grant([q.xrd, host("XBUF", False), *dram("XBUF", False)]), [q.xupd]],
               grant([q.xwr, host("XBUF", True), *dram("XBUF", True)]))
        memory("ybuf", core.ybuf_rows, row_layout(cfg, "YBUF"),
               [grant([mx.yrd, host("YBUF", False), *dram("YBUF", False)])],
               grant([mx.ywr, host("YBUF", True), *dram("YBUF", True)]))
        memory("rbuf", core.rbuf_rows, row_layout(cfg, "RBUF"), [[mx.rrd]],
               grant([host("RBUF", True), *dram("RBUF", True)]))
        memory("vbuf", core.vbuf_rows, row_layout(cfg, "VBUF"), [[v.vb], [v.vc]],
               grant([host("VBUF", True), *dram("VBUF", True)]))
        memory("mask", core.mask_rows, row_layout(cfg, "MASK"), [[v.mrd]],
               grant([host("MASK", True), *dram("MASK", True)]))
        memory("gmem", core.gmem_rows, gmem_layout(cfg),
               [grant([mx.grd, *dram("GMEM", False)])], grant([q.gwr, *dram("GMEM", True)]))

        # WMEM (inside the MPU): H, V and D write rows.
        hw_w = host("WMEM", True)
        dw_w = grant([v.wwr, hw_w, *dram("WMEM", True)])
        wl = mx.wload
        payload = Cat(hw_w.data.w, hw_w.addr)
        if d is not None:
            payload = Mux(hw_w.en, payload, Cat(dw_w[-1].data.w, dw_w[-1].addr))
        m.d.comb += [wl.valid.eq(Cat(*(u.en for u in dw_w)).any()),
                     wl.payload.eq(Mux(v.wwr.en, Cat(v.wwr.data.w, v.wwr.addr), payload))]

        # D's grant and read data.
        if d is not None:
            for side, sel, flag in (("w", d.bus.wbuf, d.bus.wgrant),
                                    ("r", d.bus.rbuf, d.bus.rgrant)):
                with m.Switch(sel):
                    for i, g in dgrant[side]:
                        with m.Case(i):
                            m.d.comb += flag.eq(g)
            dbuf_q = Signal.like(d.bus.rbuf)
            with m.If(d.bus.ren):
                m.d.sync += dbuf_q.eq(d.bus.rbuf)
            with m.Switch(dbuf_q):
                for buf, dd in drdata.items():
                    with m.Case(isa.DRAM_BUFFERS.index(buf)):
                        m.d.comb += d.bus.rdata.eq(dd)

        # Counters.
        hload = {b: hb.wen & (hb.wbuf == BUF[b]) for b in ("ABUF", "XBUF", "YBUF", "WMEM")}
        hstore = {b: hb.ren & (hb.rbuf == BUF[b]) for b in ("ABUF", "XBUF", "YBUF")}
        if d is not None:        # D's rows count like H's (and its GMEM rows as group writes)
            db = d.bus
            for b in ("ABUF", "XBUF", "YBUF", "WMEM", "GMEM"):
                i = isa.DRAM_BUFFERS.index(b)
                hload[b] = hload.get(b, 0) + (db.wen & db.wgrant & (db.wbuf == i))
            for b in ("ABUF", "XBUF", "YBUF"):
                i = isa.DRAM_BUFFERS.index(b)
                hstore[b] = hstore[b] + (db.ren & db.rgrant & (db.rbuf == i))
        counters = self._counters(m, dsp, eng, hload, hstore)
        cnt_r = host("CNT", False, unsigned(32))
        with m.If(cnt_r.en):
            m.d.sync += cnt_r.data.eq(Array(counters)[cnt_r.addr])
        with m.Switch(hbuf_q):
            for buf, data_ in rdata.items():
                with m.Case(BUF[buf]):
                    m.d.comb += hb.rdata.eq(data_)

        # Errors and status.
        fault = Signal.like(dsp.fault)
        who = Signal.like(dsp.fault_engine)
        with m.If(vpu.error):
            m.d.comb += [fault.eq(isa.ERRORS.index("vpu")), who.eq(ENGINES.index("V"))]
        with m.If(q.fault != 0):
            m.d.comb += [fault.eq(q.fault), who.eq(ENGINES.index("Q"))]
        with m.If(mx.fault != 0):
            m.d.comb += [fault.eq(mx.fault), who.eq(ENGINES.index("M"))]
        if d is not None:
            with m.If(d.fault != 0):
                m.d.comb += [fault.eq(d.fault), who.eq(ENGINES.index("D"))]
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
               "wmem_writes": v.wmem_write + hload["WMEM"],
               "gmem_writes": q.groups + hload.get("GMEM", 0),
               "vpu_rows": mx.vpu_row + v.vpu_row, "vpu_beats": mx.vpu_row + v.vpu_beat,
               "vpu_saturated": v.sat + q.xsat, "y_saturated": mx.ysat, "ysum_saturated": mx.Ysat}
        for e in ENGINES:
            inc[f"busy_{e}"] = eng[e].busy if e in eng else 0
            inc[f"stall_{e}"] = dsp.engine(e).stall
        d = eng.get("D")         # no DRAM port, no D engine: its counters stay 0
        inc.update(dram_read_beats=d.read_beat if d else 0,
                   dram_write_beats=d.write_beat if d else 0)
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

