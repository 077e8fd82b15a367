"""The core's dispatcher: reads the command stream in order, checks each command's operands
against the buffer depths, and issues it to its engine under the rules of program/isa.py
(semaphores; H and V run alone, except a VROW with ``overlap``, which waits only for H and V and
lets Q, M and D commands issue while it runs; Q, M and D may run together). Without a DRAM port
(``cfg.dram_width`` 0) DLOAD and DSTORE are unknown opcodes and the D engine's link is idle.
NOP, END, BARRIER, VPARAM, STEP and SKIP execute here (they wait while H or V runs).

Timing: a command is taken into the head register, checked over the next two cycles (the
check's result is registered, so its adders and multipliers are one pipeline stage), and issued
(or executed) from the cycle after that: back-to-back commands to free engines cost 4 cycles
each.
After an error the dispatcher stops issuing and takes and discards every further command.
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.layouts import vpu_cmd_layout
from dstar_rtl.program import isa

from .core_layouts import BUF, OP, VOP, cmd_layout
from .layouts import to_layout
from .params import check_config, check_core

__all__ = ["Dispatcher", "EnginePort", "ENGINES", "ERR"]

#: The engines in the order of :attr:`Dispatcher.engines` (and of ``fault_engine``).
ENGINES = ("H", "Q", "M", "V", "D")
ERR = {name: i for i, name in enumerate(isa.ERRORS)}


class EnginePort(wiring.Signature):
    """The dispatcher's link to one engine, from the dispatcher's side: ``cmd`` Out (stream of
    ``bits``-bit commands, :func:`program.isa.cmd_bits`; the engine's ``cmd``), ``busy``,
    ``done``, ``signal`` In (the engine's state, its one-cycle completion pulse and that
    command's semaphore mask), ``stall`` Out (a command for the engine waits at the head;
    counted as ``stall_<engine>``)."""

    def __init__(self, bits: int = isa.CMD_BITS):
        self._bits = bits
        super().__init__({
            "cmd": Out(stream.Signature(bits)),
            "busy": In(1),
            "done": In(1),
            "signal": In(isa.SEMAPHORES),
            "stall": Out(1),
        })

    def __eq__(self, other):
        return type(other) is type(self) and other._bits == self._bits

    def __hash__(self):
        return hash((type(self), self._bits))

    def __repr__(self):
        return f"EnginePort({self._bits})"


class Dispatcher(wiring.Component):
    """Parameters: ``cfg`` and, keyword-only, ``core`` (:class:`program.isa.CoreConfig`).

    Members: ``cmd`` In(stream of commands, :func:`program.isa.cmd_bits`); ``engines``
    Out(:class:`EnginePort`) array, one per engine of :data:`ENGINES` in that order; ``param``
    Out (the VPARAM register);
    ``fault`` In (an engine's error code, 0 = none) from engine ``fault_engine`` (an index into
    :data:`ENGINES`); ``v_overlap`` In (the vector engine runs a VROW with ``overlap``);
    ``error`` Out (sticky code), ``error_index`` Out (the failing command's
    index: the head's for a refused command, the last command issued to the faulting engine for
    its fault); ``done`` Out (END reached, cleared by the next command); ``executed`` Out (one
    cycle per command executed or issued); ``phase`` Out (the step phase)."""

    def __init__(self, cfg, *, core):
        self._cfg, self._core = check_config(cfg), check_core(core)
        super().__init__({
            "cmd": In(stream.Signature(isa.cmd_bits(cfg))),
            "engines": Out(EnginePort(isa.cmd_bits(cfg))).array(len(ENGINES)),
            "param": Out(to_layout(vpu_cmd_layout(cfg)).members["param"]),
            "fault": In(range(len(isa.ERRORS))),
            "fault_engine": In(range(len(ENGINES))),
            "v_overlap": In(1),
            "error": Out(range(len(isa.ERRORS))),
            "error_index": Out(32),
            "done": Out(1), "executed": Out(1), "phase": Out(8),
        })

    def engine(self, name: str):
        """The :class:`EnginePort` interface of engine ``name`` (one of :data:`ENGINES`)."""
        return self.engines[ENGINES.index(name)]

    # ----------------------------------------------------------------- operand checks
    def _check(self, m, hd):
        """Combinational error code (0 = fine) of the command word ``hd``."""
        cfg, core = self._cfg, self._core
        T = cfg.tile
        k = (T - 1).bit_length()
        code = Signal(range(len(isa.ERRORS)), name="check_code")
        addr_bad = Signal()
        opnd_bad = Signal()
        op = cmd_layout(cfg, "NOP")(hd).op
        depth = {b: isa.buffer_depth(core, b) for b in isa.BUFFERS}
        depth["GMEM"] = core.gmem_rows
        dram_ops = (OP["DLOAD"], OP["DSTORE"]) if cfg.dram_width else ()

        def over(end, buf):
            return end > depth[buf]

        with m.Switch(op):
            with m.Case(OP["LOAD"], OP["STORE"]):
                ld = cmd_layout(cfg, "LOAD")(hd)
                st = cmd_layout(cfg, "STORE")(hd)
                buf = Mux(op == OP["LOAD"], ld.buf, st.buf)
                a = Mux(op == OP["LOAD"], ld.addr, st.addr)
                n = Mux(op == OP["LOAD"], ld.count, st.count)
                with m.Switch(buf):
                    for b in isa.BUFFERS:
                        with m.Case(BUF[b]):
                            m.d.comb += addr_bad.eq(over(a + n, b))
                storable = Cat(*(buf == BUF[b] for b in isa.STORABLE)).any()
                m.d.comb += opnd_bad.eq(Mux(op == OP["LOAD"], buf == BUF["CNT"], ~storable))
            with m.Case(OP["QUANT"]):
                q = cmd_layout(cfg, "QUANT")(hd)
                m.d.comb += [
                    opnd_bad.eq((q.nch == 0) | (q.nch > cfg.max_reduction) |
                                (q.diff if cfg.datapath == "int8" else 0)),   # dense layers
                    addr_bad.eq(over(q.src + q.nch, "ABUF") |
                                (q.diff & over(q.xsrc + q.nch, "XBUF")) |
                                over(q.gdst + 1, "GMEM")),
                ]
            with m.Case(OP["GEMM"]):
                g = cmd_layout(cfg, "GEMM")(hd)
                m.d.comb += addr_bad.eq(over(g.gsrc + 1, "GMEM") | over(g.wbase + 1, "WMEM") |
                                        over(g.rrow + 1, "RBUF") | over(g.dst + T, "ABUF") |
                                        (g.accum & over(g.ysrc + T, "YBUF")))
            with m.Case(OP["VROW"]):
                v = cmd_layout(cfg, "VROW")(hd)
                is_op = {name: v.vop == VOP(name) for name in isa.VROW_OPS}
                known = Cat(*is_op.values()).any()
                nb = Mux(v.cols, v.n, (v.n + T - 1) >> k)
                elems = Mux(v.cols, v.n << k, v.n)
                tiles = Mux(v.cols, v.R - 1, (v.R - 1) >> k)
                span = Signal(2 * isa.ADDR_BITS + 2, name="vrow_span")
                m.d.comb += span.eq(tiles * v.C + Mux(v.cols, v.n, nb << k))
                to_abuf = ~(is_op["kv_amax"] | is_op["kv_quant"])
                wm_rows = Signal(2 * isa.ADDR_BITS + 1, name="vrow_wmem_rows")
                m.d.comb += wm_rows.eq(nb * v.R)
                m.d.comb += [
                    opnd_bad.eq(~known | (v.R == 0) | (v.n == 0) |
                                (elems > Mux(is_op["layernorm"] & ~v.cols, cfg.ln_max,
                                             cfg.max_reduction)) | (v.cols & to_abuf) |
                                (v.overlap & is_op["gated_residual"])),
                    addr_bad.eq(over(v.a + span, "ABUF") |
                                (is_op["gated_residual"] & over(v.c + span, "ABUF")) |
                                (to_abuf & over(v.dst + span, "ABUF")) |
                                (is_op["kv_quant"] & over(v.dst + wm_rows, "WMEM")) |
                                ((is_op["modulate"] | is_op["gated_residual"]) &
                                 over(v.vb + nb, "VBUF")) |
                                (is_op["modulate"] & over(v.c + nb, "VBUF")) |
                                ((is_op["softmax"] | is_op["softmax_mx"]) &
                                 over(v.vb + tiles + 1, "MASK"))),
                ]
            if dram_ops:
                with m.Case(*dram_ops):
                    d = cmd_layout(cfg, "DLOAD")(hd)       # DSTORE has the same fields
                    beats = Signal(isa.DRAM_ADDR_BITS + 2, name="dram_beats")
                    rows_bad = Signal(name="dram_rows_bad")
                    lgB = (isa.beat_bytes(cfg) - 1).bit_length()
                    with m.Switch(d.buf):
                        for i, b in enumerate(isa.DRAM_BUFFERS):
                            with m.Case(i):
                                rb = isa.dram_row_bytes(cfg, b)
                                m.d.comb += [rows_bad.eq(over(d.addr + d.count, b)),
                                             beats.eq((d.count * rb + (1 << lgB) - 1) >> lgB)]
                    storable = Cat(*(d.buf == isa.DRAM_BUFFERS.index(b)
                                     for b in isa.DSTORABLE)).any()
                    gmem = d.buf == isa.DRAM_BUFFERS.index("GMEM")
                    m.d.comb += [opnd_bad.eq(((op == OP["DSTORE"]) & ~storable) |
                                             (d.groups & ~gmem)),
                                 addr_bad.eq(rows_bad | (d.dram + beats + d.groups >
                                                         (1 << isa.DRAM_ADDR_BITS)))]
            with m.Case(*(OP[o] for o in ("NOP", "END", "BARRIER", "QCFG", "VPARAM", "STEP",
                                          "SKIP"))):
                pass
            with m.Default():
                m.d.comb += code.eq(ERR["opcode"])
        with m.If(opnd_bad):
            m.d.comb += code.eq(ERR["operand"])
        with m.Elif(addr_bad):
            m.d.comb += code.eq(ERR["address"])
        return code

    def elaborate(self, platform):
        cfg = self._cfg
        m = Module()
        hd = Signal(isa.cmd_bits(cfg))
        hv = Signal()
        checked = Signal()
        err = Signal.like(self.error)
        index = Signal(32)
        skip = Signal(isa.ADDR_BITS)
        phase = Signal(8)
        param = Signal.like(self.param)
        m.d.comb += [self.error.eq(err), self.phase.eq(phase), self.param.eq(param)]
        hdr = cmd_layout(cfg, "NOP")(hd)
        op = hdr.op

        # Take a command into the head (or drop it while skipping or after an error).
        m.d.comb += self.cmd.ready.eq(~hv)
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [index.eq(index + 1), self.done.eq(0)]
            with m.If((err == 0) & (skip == 0)):
                m.d.sync += [hd.eq(self.cmd.payload), hv.eq(1), checked.eq(0)]
            with m.Elif(skip != 0):
                m.d.sync += skip.eq(skip - 1)

        # The operand check (adders, multipliers, comparators) gets a cycle of its own: its
        # result is registered, and the command counts as checked the cycle after.
        check = self._check(m, hd)
        code = Signal.like(check, name="code")
        staged = Signal()
        with m.If(hv & ~checked & ~staged):
            m.d.sync += [code.eq(check), staged.eq(1)]
        with m.If(~hv):
            m.d.sync += staged.eq(0)
        fault = Signal.like(self.fault)
        fault_idx = Signal(32)
        last_idx = [Signal(32, name=f"last_idx_{e}") for e in ENGINES]
        m.d.comb += fault_idx.eq(index - 1)
        with m.If(hv & ~checked & staged):
            m.d.sync += [checked.eq(1), staged.eq(0)]
            with m.If(code != 0):
                m.d.comb += fault.eq(code)
        with m.If(self.fault != 0):
            m.d.comb += [fault.eq(self.fault),
                         fault_idx.eq(Array(last_idx)[self.fault_engine])]
        with m.If((fault != 0) & (err == 0)):
            m.d.sync += [err.eq(fault), self.error_index.eq(fault_idx), hv.eq(0)]
        with m.If(err != 0):
            m.d.sync += hv.eq(0)

        # Semaphores.
        sems = [Signal(isa.SEM_BITS + 1, name=f"sem{i}") for i in range(isa.SEMAPHORES)]
        busy = {e: self.engine(e).busy for e in ENGINES}
        all_idle = ~Cat(*busy.values()).any()
        sem_ok = Cat(*((~hdr.wait[i]) | (sems[i] != 0) for i in range(isa.SEMAPHORES))).all()
        ready_head = hv & checked & (err == 0) & (code == 0)
        issued = Signal()
        local = Signal()
        # V runs alone unless its command overlaps; a VROW with overlap waits for H (V's own
        # ready covers V).
        v_alone = busy["V"] & ~self.v_overlap
        vrow_ovl = cmd_layout(cfg, "VROW")(hd).overlap
        for e in ENGINES:
            ops = [OP[o] for o, eng in isa.ENGINE.items() if eng == e and o != "VPARAM"]
            mine = Cat(*(op == o for o in ops)).any()
            if e == "H":
                excl = all_idle
            elif e == "V":
                excl = Mux(vrow_ovl, ~busy["H"], all_idle)
            else:
                excl = ~(busy["H"] | v_alone)
            link = self.engine(e)
            port = link.cmd
            m.d.comb += [port.valid.eq(ready_head & mine & sem_ok & excl),
                         port.payload.eq(hd),
                         link.stall.eq(ready_head & mine & ~(port.valid & port.ready))]
            with m.If(port.valid & port.ready):
                m.d.comb += issued.eq(1)
                m.d.sync += last_idx[ENGINES.index(e)].eq(index - 1)
        for i, s in enumerate(sems):
            inc = sum(link.done & link.signal[i] for link in self.engines) + (local & hdr.signal[i])
            nxt = s + inc - ((issued | local) & hdr.wait[i])
            m.d.sync += s.eq(nxt)
            with m.If(nxt > (1 << isa.SEM_BITS) - 1):
                m.d.comb += fault.eq(ERR["semaphore"])

        # A wait that nothing can satisfy any more (every engine idle) is a deadlock: refuse it.
        with m.If(ready_head & ~sem_ok & all_idle):
            m.d.comb += fault.eq(ERR["semaphore"])

        # Commands executed here (they wait on and signal semaphores like the others). Like
        # every other command they wait while H or V runs (those run alone), so a counter read
        # never sees a later command's effects.
        alone_free = ~(busy["H"] | busy["V"])
        with m.If(ready_head & sem_ok & alone_free):
            with m.Switch(op):
                with m.Case(OP["NOP"]):
                    m.d.comb += local.eq(1)
                with m.Case(OP["END"], OP["BARRIER"]):
                    with m.If(all_idle):
                        m.d.comb += local.eq(1)
                        with m.If(op == OP["END"]):
                            m.d.sync += self.done.eq(1)
                with m.Case(OP["VPARAM"]):
                    m.d.comb += local.eq(1)
                    m.d.sync += param.eq(cmd_layout(cfg, "VPARAM")(hd).value)
                with m.Case(OP["STEP"]):
                    m.d.comb += local.eq(1)
                    iv = cmd_layout(cfg, "STEP")(hd).interval
                    m.d.sync += phase.eq(Mux(phase + 1 >= iv, 0, phase + 1))
                with m.Case(OP["SKIP"]):
                    m.d.comb += local.eq(1)
                    with m.If(phase != 0):
                        m.d.sync += skip.eq(cmd_layout(cfg, "SKIP")(hd).count)
        with m.If(issued | local):
            m.d.sync += hv.eq(0)
        m.d.comb += self.executed.eq(issued | local)
        return m

