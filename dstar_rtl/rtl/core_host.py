"""The core's host engine H: LOAD and STORE between the host streams and the buffers.

A buffer row travels as ``host_words_per_row`` 32-bit words, least significant first
(:func:`program.isa.row_to_words`). The engine talks to the buffers through one generic
port (``buf`` id, address, raw row bits); the core routes it to the buffer's own port.

Latency and throughput: LOAD takes one cycle per host word (the row is written on the edge its
last word is taken) plus one; LOAD ``zero`` one cycle per row; STORE takes ``k + 2`` cycles per
row of ``k`` words (read, register, then one word per cycle) plus one. The LOAD and STORE laws
are what the core's ``busy_H`` counter measures (sim/perf_validate.py checks them).
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.program import isa

from .core_layouts import BUF, OP, cmd_layout
from .params import check_config

__all__ = ["HostEngine", "host_bus_signature"]


def _bufs():
    return len(isa.BUFFERS)


def host_bus_signature(width: int, addr_bits: int = isa.ADDR_BITS) -> wiring.Signature:
    """The engine's generic buffer port (engine side): a write (``wen``, ``wbuf``, ``waddr``,
    ``wdata``) and a read (``ren``, ``rbuf``, ``raddr``; ``rdata`` valid the next cycle);
    addresses of ``addr_bits`` (:func:`program.isa.addr_bits`)."""
    return wiring.Signature({
        "wen": Out(1), "wbuf": Out(range(_bufs())), "waddr": Out(addr_bits),
        "wdata": Out(width),
        "ren": Out(1), "rbuf": Out(range(_bufs())), "raddr": Out(addr_bits),
        "rdata": In(width),
    })


class HostEngine(wiring.Component):
    """LOAD / STORE (program/isa.py). Parameter: ``cfg``.

    Members: ``cmd`` In(stream of commands (:func:`program.isa.cmd_bits`), taken when idle);
    ``host_in`` In(stream of 32-bit words); ``host_out`` Out(stream of 32-bit words); ``bus``
    (:func:`host_bus_signature`); ``busy``; ``done`` (one cycle when a command completes) with
    ``signal`` (its semaphore mask); ``words_in`` (one per word), ``words_out`` (words sent: one per
    word, except that a STORE of CNT adds all of its words when it completes, so the counters it
    returns are a snapshot of the moment it started).
    """

    def __init__(self, cfg):
        self._cfg = check_config(cfg)
        self._k = {b: isa.host_words_per_row(cfg, b) for b in isa.BUFFERS}
        self._width = max(isa.row_width(cfg, b) for b in isa.BUFFERS)
        super().__init__({
            "cmd": In(stream.Signature(isa.cmd_bits(cfg))),
            "host_in": In(stream.Signature(isa.HOST_WORD)),
            "host_out": Out(stream.Signature(isa.HOST_WORD)),
            "bus": Out(host_bus_signature(self._width, isa.addr_bits(cfg))),
            "busy": Out(1), "done": Out(1), "signal": Out(isa.SEMAPHORES),
            "words_in": Out(1), "words_out": Out(isa.ADDR_BITS + 1),
        })

    @property
    def bus_width(self):
        return self._width

    def elaborate(self, platform):
        cfg = self._cfg
        W = isa.HOST_WORD
        kmax = max(self._k.values())
        m = Module()

        load = cmd_layout(cfg, "LOAD")(self.cmd.payload)
        store = cmd_layout(cfg, "STORE")(self.cmd.payload)
        is_store = Signal()
        zero = Signal()
        buf = Signal(range(_bufs()))
        A = isa.addr_bits(cfg)
        addr = Signal(A)
        left = Signal(A + 1)
        total = Signal(A + 1)   # rows of a STORE of CNT (one word each)
        sig = Signal(isa.SEMAPHORES)
        words = [Signal(W, name=f"word{i}") for i in range(kmax)]
        widx = Signal(range(kmax + 1))
        k_of = Signal(range(kmax + 1))
        with m.Switch(buf):
            for b, k in self._k.items():
                with m.Case(BUF[b]):
                    m.d.comb += k_of.eq(k)

        finish = Signal()
        m.d.comb += [self.done.eq(finish), self.signal.eq(sig),
                     self.bus.wbuf.eq(buf), self.bus.rbuf.eq(buf),
                     self.bus.waddr.eq(addr), self.bus.raddr.eq(addr)]

        with m.FSM(name="host"):
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    st = load.op == OP["STORE"]
                    m.d.sync += [is_store.eq(st), zero.eq(~st & load.zero),
                                 buf.eq(load.buf), addr.eq(load.addr), sig.eq(load.signal),
                                 left.eq(load.count), widx.eq(0)]
                    with m.If(st):
                        m.d.sync += [buf.eq(store.buf), addr.eq(store.addr),
                                     left.eq(store.count), total.eq(store.count)]
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += self.busy.eq(1)
                with m.If(left == 0):
                    m.d.comb += finish.eq(1)
                    with m.If(is_store & (buf == BUF["CNT"])):
                        m.d.comb += self.words_out.eq(total)
                    m.next = "IDLE"
                with m.Elif(is_store):
                    m.d.comb += [self.bus.ren.eq(1)]
                    m.next = "READ"
                with m.Elif(zero):
                    m.d.comb += [self.bus.wen.eq(1), self.bus.wdata.eq(0)]
                    m.d.sync += [addr.eq(addr + 1), left.eq(left - 1)]
                with m.Else():
                    # One host word per cycle; the row is written with its last word.
                    m.d.comb += [self.host_in.ready.eq(1), self.words_in.eq(self.host_in.valid)]
                    m.d.comb += self.bus.wdata.eq(Cat(*(
                        Mux(widx == i, self.host_in.payload, words[i])
                        for i in range(kmax)))[:self._width])
                    with m.If(self.host_in.valid):
                        m.d.sync += widx.eq(widx + 1)
                        for i in range(kmax):
                            with m.If(widx == i):
                                m.d.sync += words[i].eq(self.host_in.payload)
                        with m.If(widx == k_of - 1):
                            m.d.comb += self.bus.wen.eq(1)
                            m.d.sync += [widx.eq(0), addr.eq(addr + 1), left.eq(left - 1)]
            with m.State("READ"):
                m.d.comb += self.busy.eq(1)
                for i in range(kmax):
                    m.d.sync += words[i].eq(self.bus.rdata[W * i:min(W * (i + 1), self._width)])
                m.d.sync += widx.eq(0)
                m.next = "EMIT"
            with m.State("EMIT"):
                m.d.comb += [self.busy.eq(1), self.host_out.valid.eq(1),
                             self.words_out.eq(self.host_out.ready & (buf != BUF["CNT"]))]
                with m.Switch(widx):
                    for i in range(kmax):
                        with m.Case(i):
                            m.d.comb += self.host_out.payload.eq(words[i])
                with m.If(self.host_out.ready):
                    m.d.sync += widx.eq(widx + 1)
                    with m.If(widx == k_of - 1):
                        m.d.sync += [addr.eq(addr + 1), left.eq(left - 1)]
                        m.next = "RUN"
        return m
