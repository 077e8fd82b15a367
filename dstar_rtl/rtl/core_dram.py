"""The core's DRAM engine D: DLOAD and DSTORE between the buffers and DRAM through an AXI4
manager port (program/isa.py, "DRAM image"; docs/core.md §9).

A transfer of ``count`` rows of ``R`` bytes (:func:`program.isa.dram_row_bytes`) moves
``ceil(count·R / B)`` beats of ``B`` bytes (:func:`program.isa.dram_beats`) from or to beat
``dram``, in INCR bursts of at most :data:`rtl.axi.BURST_BEATS` beats that never cross 4 KiB.
Between the beats and the rows sits a byte gearbox: a register of ``max R + B`` bytes with a
fill count; each cycle it can give out a row (or a beat) from its bottom and take a beat (or a
row) in above what it holds, so rows and beats of any sizes pass at the rate of the slower side.

* **DLOAD.** The read-address side issues bursts as long as the read buffer
  (:data:`READ_BUFFER_BEATS` beats) has room for every beat already asked for, so up to two
  bursts are outstanding and ``rready`` never stalls DRAM. Beats go through the buffer into
  the gearbox; a row leaves it whenever it holds one and the buffer's write port is free of
  the other engines (D asks last: ``wgrant``).
* **DSTORE.** Rows are read from the buffer (when its read port is free: ``rgrant``; the data
  comes the cycle after) into the gearbox while it has room; a beat leaves whenever the gearbox
  holds one (or the transfer's last bytes), with ``wstrb`` covering exactly the image's bytes
  on the last beat. The write-address side issues bursts ahead of the data, at most
  :data:`WRITE_BURSTS` without their response; the command is done when every response has
  come back.

An error response (``rresp`` or ``bresp`` not OKAY) raises the ``dram`` fault; the engine then
writes no more rows and sends the rest of its write data with no strobes, so the bus is left
idle and nothing more changes.

Commands wait in a queue of :data:`COMMAND_QUEUE` (so the dispatcher moves on past a
transfer while the one before it runs); they run one after another, in order, and each signals
its semaphores as it completes.

Latency and throughput: two cycles from starting a command to its first request (the
transfer's beats are computed in between; a command that arrives at an idle engine starts two
cycles after it is taken); then one beat per cycle either way when rows are at least a
beat wide and DRAM and the ports keep up (rows narrower than a beat: one row per cycle). A
DLOAD completes with its last row written, a DSTORE one cycle after its last response.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.layouts import layout_width
from dstar_rtl.program import isa

from .axi import BURST_BEATS, INCR, OKAY, AXI4Signature, burst_beats
from .core_layouts import OP, cmd_layout
from .params import check_config
from .stream_queue import StreamQueue

__all__ = ["DramEngine", "dram_bus_signature", "READ_BUFFER_BEATS", "WRITE_BURSTS",
           "COMMAND_QUEUE",
           "dram_port_signature"]

#: R beats the read side buffers (so this many beats may be asked for ahead).
READ_BUFFER_BEATS = 2 * BURST_BEATS
#: Write bursts that may wait for their response.
WRITE_BURSTS = 4
#: Commands the engine holds: the one it runs and those queued behind it.
COMMAND_QUEUE = 4


def dram_port_signature(cfg) -> AXI4Signature:
    """The core's AXI4 manager port for ``cfg``: ``cfg.dram_width``-bit beats, byte addresses
    wide enough for :data:`program.isa.DRAM_ADDR_BITS` bits of beat address."""
    bb = isa.beat_bytes(cfg)
    return AXI4Signature(addr_width=isa.DRAM_ADDR_BITS + (bb - 1).bit_length(),
                         data_width=cfg.dram_width)


def dram_bus_signature(width: int, addr_bits: int) -> wiring.Signature:
    """The engine's generic buffer port (engine side): a write request (``wen``, ``wbuf`` an
    index into :data:`program.isa.DRAM_BUFFERS`, ``waddr``, ``wdata``) done in a cycle where
    ``wgrant`` is high, and a read request (``ren``, ``rbuf``, ``raddr``) done where ``rgrant``
    is high, its ``rdata`` valid the next cycle."""
    nb = len(isa.DRAM_BUFFERS)
    return wiring.Signature({
        "wen": Out(1), "wbuf": Out(range(nb)), "waddr": Out(addr_bits), "wdata": Out(width),
        "wgrant": In(1),
        "ren": Out(1), "rbuf": Out(range(nb)), "raddr": Out(addr_bits), "rgrant": In(1),
        "rdata": In(width),
    })


class DramEngine(wiring.Component):
    """DLOAD / DSTORE (module docstring). Parameter: ``cfg`` (with a DRAM port:
    ``cfg.dram_width`` > 0).

    Members: ``cmd`` In(stream of commands, taken while the queue has room); ``dram`` (the AXI4 manager port,
    :func:`dram_port_signature`); ``bus`` (:func:`dram_bus_signature`); ``busy``; ``done`` (one
    cycle when a command completes) with ``signal`` (its semaphore mask); ``fault`` (the
    ``dram`` error code while an error response has been seen, else 0); ``read_beat`` /
    ``write_beat`` (one per R / W beat taken or given).
    """

    def __init__(self, cfg):
        self._cfg = check_config(cfg)
        if not cfg.dram_width:
            raise ValueError("DramEngine needs a DRAM port: cfg.dram_width is 0 (set it to one "
                             "of golden.config.DRAM_WIDTHS)")
        self._rb = {b: isa.dram_row_bytes(cfg, b) for b in isa.DRAM_BUFFERS}
        self._width = max(layout_width(isa.dram_row_layout(cfg, b)) for b in isa.DRAM_BUFFERS)
        super().__init__({
            "cmd": In(stream.Signature(isa.cmd_bits(cfg))),
            "dram": Out(dram_port_signature(cfg)),
            "bus": Out(dram_bus_signature(self._width, isa.addr_bits(cfg))),
            "busy": Out(1), "done": Out(1), "signal": Out(isa.SEMAPHORES),
            "fault": Out(range(len(isa.ERRORS))),
            "read_beat": Out(1), "write_beat": Out(1),
        })

    @property
    def bus_width(self) -> int:
        """Bits of the widest row the engine moves (its ``bus.wdata``/``rdata``)."""
        return self._width

    def elaborate(self, platform):
        cfg = self._cfg
        m = Module()
        B = isa.beat_bytes(cfg)
        lgB = (B - 1).bit_length()
        cap = max(self._rb.values()) + B                 # gearbox bytes
        A = isa.addr_bits(cfg)
        D = isa.DRAM_ADDR_BITS
        ax = self.dram
        # Commands wait in a queue, so the dispatcher issues a transfer while the one before
        # it runs and moves on to the commands behind it.
        m.submodules.cmdq = cq = StreamQueue(isa.cmd_bits(cfg), depth=COMMAND_QUEUE)
        wiring.connect(m, wiring.flipped(self.cmd), cq.i)
        cmd = cmd_layout(cfg, "DLOAD")(cq.o.p)    # DSTORE has the same fields
        active = Signal()
        m.d.comb += self.busy.eq(active | (cq.level != 0))

        is_store = Signal()
        buf = Signal(range(len(isa.DRAM_BUFFERS)))
        addr = Signal(A)
        rows = Signal(A + 1)            # rows still to write (DLOAD) or to read (DSTORE)
        first = Signal(D)               # the transfer's first beat
        sig = Signal(isa.SEMAPHORES)
        nbytes = Signal(A + 1 + (max(self._rb.values())).bit_length())
        err = Signal()
        m.d.comb += [self.signal.eq(sig), self.fault.eq(Mux(err, isa.ERRORS.index("dram"), 0)),
                     self.bus.wbuf.eq(buf), self.bus.rbuf.eq(buf),
                     self.bus.waddr.eq(addr), self.bus.raddr.eq(addr)]

        rb = Signal(range(max(self._rb.values()) + 1))   # bytes of a row of ``buf``
        with m.Switch(buf):
            for i, b in enumerate(isa.DRAM_BUFFERS):
                with m.Case(i):
                    m.d.comb += rb.eq(self._rb[b])

        # The gearbox (shared by both directions; one command at a time).
        acc = Signal(8 * cap)
        fill = Signal(range(cap + 1))

        # Address sides: beats still to ask for, the next beat, bursts in flight.
        a_left = Signal(D + 1)
        a_beat = Signal(D)
        a_valid = Signal()
        a_addr = Signal(len(ax.araddr))
        a_len = Signal(8)
        reserved = Signal(range(READ_BUFFER_BEATS + 1))     # DLOAD: beats asked, not taken
        b_out = Signal(range(WRITE_BURSTS + 1))             # DSTORE: bursts without response
        burst = burst_beats(m, a_beat, a_left, B, "burst")
        m.d.comb += [ax.arid.eq(0), ax.awid.eq(0), ax.arsize.eq(lgB), ax.awsize.eq(lgB),
                     ax.arburst.eq(INCR), ax.awburst.eq(INCR),
                     ax.araddr.eq(a_addr), ax.awaddr.eq(a_addr),
                     ax.arlen.eq(a_len), ax.awlen.eq(a_len),
                     ax.arvalid.eq(a_valid & ~is_store), ax.awvalid.eq(a_valid & is_store),
                     ax.bready.eq(1)]
        room = Mux(is_store, b_out < WRITE_BURSTS,
                   reserved + burst <= READ_BUFFER_BEATS)
        running = Signal()
        with m.If(running & ~a_valid & (a_left != 0) & room):
            m.d.sync += [a_valid.eq(1), a_addr.eq(a_beat << lgB), a_len.eq(burst - 1),
                         a_beat.eq(a_beat + burst), a_left.eq(a_left - burst)]
        with m.If(a_valid & Mux(is_store, ax.awready, ax.arready)):
            m.d.sync += a_valid.eq(0)
        b_in = ax.bvalid
        with m.If(b_in & (ax.bresp != OKAY)):
            m.d.sync += err.eq(1)
        took_burst = running & ~a_valid & (a_left != 0) & room & is_store
        m.d.sync += b_out.eq(b_out + took_burst - b_in)

        # ---------------------------------------------------------------- DLOAD
        m.submodules.rbuf = rq = StreamQueue(cfg.dram_width, depth=READ_BUFFER_BEATS)
        m.d.comb += [rq.i.valid.eq(ax.rvalid), rq.i.p.eq(ax.rdata), ax.rready.eq(rq.i.ready),
                     self.read_beat.eq(ax.rvalid & ax.rready)]
        with m.If(ax.rvalid & ax.rready & (ax.rresp != OKAY)):
            m.d.sync += err.eq(1)
        ld_want = running & ~is_store & (rows != 0) & (fill >= rb)
        ld_emit = ld_want & self.bus.wgrant
        m.d.comb += [self.bus.wen.eq(ld_want & ~err), self.bus.wdata.eq(acc)]
        ld_fill1 = Signal.like(fill)
        m.d.comb += ld_fill1.eq(Mux(ld_emit, fill - rb, fill))
        ld_take = running & ~is_store & rq.o.valid & (ld_fill1 + B <= cap)
        m.d.comb += rq.o.ready.eq(ld_take)
        asked = running & ~is_store & ~a_valid & (a_left != 0) & room
        m.d.sync += reserved.eq(reserved + Mux(asked, burst, 0) - ld_take)

        # ---------------------------------------------------------------- DSTORE
        rd_pend = Signal()
        st_last = Signal()       # the beat on W is the transfer's last
        w_left = Signal(D + 1)
        w_beat = Signal(D)
        w_cnt = Signal(range(BURST_BEATS))
        tail = Signal(range(B))  # bytes of the last beat that belong to the image (0: all)
        st_fire = ax.wvalid & ax.wready
        m.d.comb += self.write_beat.eq(st_fire)
        st_fill1 = Signal.like(fill)
        m.d.comb += st_fill1.eq(Mux(st_fire, Mux(fill > B, fill - B, 0), fill))
        pend_bytes = Mux(rd_pend, rb, 0)
        st_want = running & is_store & (rows != 0) & (fill + pend_bytes + rb <= cap)
        st_read = st_want & self.bus.rgrant
        m.d.comb += self.bus.ren.eq(st_want)
        m.d.sync += rd_pend.eq(st_read)
        m.d.comb += st_last.eq(w_left == 1)
        page = (4096 // B) - 1
        m.d.comb += [
            ax.wvalid.eq(running & is_store & (w_left != 0) &
                         ((fill >= B) | ((rows == 0) & ~rd_pend & (fill != 0)))),
            ax.wdata.eq(acc[:8 * B]),
            ax.wstrb.eq(Mux(err, 0, Mux(st_last & (tail != 0),
                                        (Const(1, B + 1) << tail) - 1, (1 << B) - 1))),
            ax.wlast.eq(st_last | (w_cnt == BURST_BEATS - 1) |
                        (w_beat[:page.bit_length()] == page)),
        ]
        with m.If(st_fire):
            m.d.sync += [w_left.eq(w_left - 1), w_beat.eq(w_beat + 1),
                         w_cnt.eq(Mux(ax.wlast, 0, w_cnt + 1))]

        # ---------------------------------------------------------------- the gearbox
        shifted = Signal(8 * cap)
        m.d.comb += shifted.eq(acc)
        with m.If(ld_emit):
            with m.Switch(buf):
                for i, b in enumerate(isa.DRAM_BUFFERS):
                    with m.Case(i):
                        m.d.comb += shifted.eq(acc >> (8 * self._rb[b]))
        with m.If(st_fire):
            m.d.comb += shifted.eq(Mux(fill > B, acc >> (8 * B), 0))
        incoming = Signal(8 * cap)
        with m.If(ld_take):
            m.d.comb += incoming.eq(rq.o.p << Cat(Const(0, 3), ld_fill1))
        with m.If(rd_pend):
            m.d.comb += incoming.eq(self.bus.rdata << Cat(Const(0, 3), st_fill1))
        with m.If(running):
            m.d.sync += acc.eq(shifted | incoming)
            m.d.sync += fill.eq(Mux(is_store, st_fill1 + pend_bytes,
                                    ld_fill1 + Mux(ld_take, B, 0)))
        with m.If(ld_emit | st_read):
            m.d.sync += [addr.eq(addr + 1), rows.eq(rows - 1)]

        # ---------------------------------------------------------------- control
        count = Signal(A + 1)
        finish = Signal()
        m.d.comb += self.done.eq(finish)
        with m.FSM(name="dram"):
            with m.State("IDLE"):
                m.d.comb += cq.o.ready.eq(1)
                with m.If(cq.o.valid):
                    m.d.sync += [is_store.eq(cmd.op == OP["DSTORE"]), buf.eq(cmd.buf),
                                 addr.eq(cmd.addr), count.eq(cmd.count), first.eq(cmd.dram),
                                 sig.eq(cmd.signal)]
                    m.next = "SIZE"
            with m.State("SIZE"):
                m.d.comb += active.eq(1)
                with m.Switch(buf):
                    for i, b in enumerate(isa.DRAM_BUFFERS):
                        with m.Case(i):
                            m.d.sync += nbytes.eq(count * self._rb[b])
                m.d.sync += [rows.eq(count), acc.eq(0), fill.eq(0), a_beat.eq(first),
                             w_beat.eq(first), w_cnt.eq(0)]
                m.next = "BEATS"
            with m.State("BEATS"):
                m.d.comb += active.eq(1)
                beats = (nbytes + B - 1) >> lgB
                m.d.sync += [a_left.eq(beats), w_left.eq(Mux(is_store, beats, 0)),
                             tail.eq(nbytes[:lgB] if lgB else 0)]
                m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [active.eq(1), running.eq(1)]
                idle = ((rows == 0) & (a_left == 0) & ~a_valid & ~rd_pend & (w_left == 0) &
                        (b_out == 0) & (reserved == 0))
                with m.If(idle):
                    m.d.comb += finish.eq(1)
                    m.next = "IDLE"
        return m
