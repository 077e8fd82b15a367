"""The core's DRAM engine D: DLOAD and DSTORE between the buffers and DRAM through an AXI4
manager port (program/isa.py, "DRAM image"; docs/core.md §9).

A transfer of ``count`` rows of ``R`` bytes (:func:`program.isa.dram_row_bytes`) moves
``ceil(count·R / B)`` beats of ``B`` bytes (:func:`program.isa.dram_beats`) from or to beat
``dram``, in INCR bursts of at most :data:`rtl.axi.BURST_BEATS` beats that never cross 4 KiB.
Between the beats and the rows sits a byte gearbox: a register of ``max R + B`` bytes with a
fill count; each cycle it can give out a row (or a beat) from its bottom and take a beat (or a
row) in above what it holds, so rows and beats of any sizes pass at the rate of the slower side.

* **DLOAD.** The read-address side issues bursts as long as the read buffer
  (:data:`READ_BUFFER_BEATS` beats) has room for every beat already asked for, so up to four
  bursts are outstanding and ``rready`` never stalls DRAM. Beats go through the buffer into
  the gearbox; a row leaves it whenever it holds one and the buffer's write port is free of
  the other engines (D asks last: ``wgrant``).
* **DSTORE.** Rows are read from the buffer (when its read port is free: ``rgrant``; the data
  comes the cycle after) into the gearbox while it has room; a beat leaves into a write queue
  (two bursts) whenever the gearbox holds one (or the transfer's last bytes), with ``wstrb``
  covering exactly the image's bytes on the last beat. A burst's address goes out once the
  queue holds its beats (or the last of them), at most :data:`WRITE_BURSTS` without their
  response, its length queued for ``wlast``; so a group stream (``groups``: GMEM rows through
  the first ``last`` one, one at a time) learns its length on the way and ends with its header
  beat at the transfer's first beat. The command is done when every response has come back.
* **DLOAD of a group stream** reads its header beat first and then its rows.

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

import math

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.layouts import gmem_layout, layout_width
from dstar_rtl.program import isa

from .axi import BURST_BEATS, INCR, OKAY, AXI4Signature, burst_beats
from .core_layouts import OP, cmd_layout
from .params import check_config
from .stream_queue import StreamQueue

__all__ = ["DramEngine", "dram_bus_signature", "READ_BUFFER_BEATS", "WRITE_BURSTS",
           "COMMAND_QUEUE",
           "dram_port_signature"]

#: R beats the read side buffers (so this many beats may be asked for ahead): four bursts, so
#: reads keep a beat a cycle coming through about 48 cycles of DRAM latency (two bursts held
#: the digits DiT's DSTAR core at 0.65 beats a busy cycle behind 30 cycles of latency).
READ_BUFFER_BEATS = 4 * BURST_BEATS
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


def _field_offset(layout, name: str) -> int:
    """Bit offset of field ``name`` in a golden layout."""
    off = 0
    for n, w, dims, _s in layout:
        if n == name:
            return off
        off += w * (math.prod(dims) if dims else 1)
    raise ValueError(f"no field {name!r}")


class DramEngine(wiring.Component):
    """DLOAD / DSTORE (module docstring). Parameter: ``cfg`` (with a DRAM port:
    ``cfg.dram_width`` > 0).

    Members: ``cmd`` In(stream of commands, taken while the queue has room); ``dram`` (the AXI4
    manager port, :func:`dram_port_signature`); ``bus`` (:func:`dram_bus_signature`);
    ``busy``; ``done`` (one cycle when a command completes) with ``signal`` (its semaphore
    mask); ``fault`` (the ``dram`` error code while an error response has been seen, else 0);
    ``read_beat`` / ``write_beat`` (one per R / W beat taken or given).
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
        # Only the fields the engine uses wait in it.
        fields = cmd_layout(cfg, "DLOAD")(self.cmd.payload)    # DSTORE has the same fields
        queued = data.StructLayout({"store": 1, "buf": len(fields.buf), "groups": 1,
                                    "addr": len(fields.addr), "count": len(fields.count),
                                    "dram": len(fields.dram), "signal": isa.SEMAPHORES})
        m.submodules.cmdq = cq = StreamQueue(queued, depth=COMMAND_QUEUE)
        m.d.comb += [cq.i.valid.eq(self.cmd.valid), self.cmd.ready.eq(cq.i.ready),
                     cq.i.p.store.eq(fields.op == OP["DSTORE"])]
        for f in ("buf", "groups", "addr", "count", "dram", "signal"):
            m.d.comb += getattr(cq.i.p, f).eq(getattr(fields, f))
        cmd = cq.o.p
        active = Signal()
        m.d.comb += self.busy.eq(active | (cq.level != 0))

        is_store = Signal()
        groups = Signal()               # a GMEM group stream behind its header beat
        buf = Signal(range(len(isa.DRAM_BUFFERS)))
        addr = Signal(A)
        rows = Signal(A + 1)            # rows still to write (DLOAD) or to read (DSTORE)
        count = Signal(A + 1)
        first = Signal(D)               # the transfer's first beat
        sig = Signal(isa.SEMAPHORES)
        rb_max = max(self._rb.values())
        nbytes = Signal(A + 1 + rb_max.bit_length())
        err = Signal()
        m.d.comb += [self.signal.eq(sig), self.fault.eq(Mux(err, isa.ERRORS.index("dram"), 0)),
                     self.bus.wbuf.eq(buf), self.bus.rbuf.eq(buf),
                     self.bus.waddr.eq(addr), self.bus.raddr.eq(addr)]
        rb = Signal(range(rb_max + 1))   # bytes of a row of ``buf``
        with m.Switch(buf):
            for i, b in enumerate(isa.DRAM_BUFFERS):
                with m.Case(i):
                    m.d.comb += rb.eq(self._rb[b])
        rb_gmem = self._rb["GMEM"]
        last_bit = _field_offset(gmem_layout(cfg), "last")

        # The gearbox (shared by both directions; one command at a time).
        acc = Signal(8 * cap)
        fill = Signal(range(cap + 1))
        loading, storing = Signal(), Signal()
        m.d.comb += [ax.arid.eq(0), ax.awid.eq(0), ax.arsize.eq(lgB), ax.awsize.eq(lgB),
                     ax.arburst.eq(INCR), ax.awburst.eq(INCR), ax.bready.eq(1)]

        # ---------------------------------------------------------------- DLOAD
        # Reads are asked for while the read buffer has room for every beat already asked.
        r_left = Signal(D + 1)          # beats still to ask for
        r_beat = Signal(D)              # the next beat to ask for
        reserved = Signal(range(READ_BUFFER_BEATS + 1))     # beats asked, not yet taken
        asking = Signal()               # AR may ask (the header phase, or the rows)
        rburst = burst_beats(m, r_beat, r_left, B, "rburst")
        ask = asking & ~ax.arvalid & (r_left != 0) & (reserved + rburst <= READ_BUFFER_BEATS)
        ar_valid = Signal()
        m.d.comb += ax.arvalid.eq(ar_valid)
        with m.If(ask):
            m.d.sync += [ar_valid.eq(1), ax.araddr.eq(r_beat << lgB), ax.arlen.eq(rburst - 1),
                         r_beat.eq(r_beat + rburst), r_left.eq(r_left - rburst)]
        with m.If(ar_valid & ax.arready):
            m.d.sync += ar_valid.eq(0)
        m.submodules.rbuf = rq = StreamQueue(cfg.dram_width, depth=READ_BUFFER_BEATS)
        m.d.comb += [rq.i.valid.eq(ax.rvalid), rq.i.p.eq(ax.rdata), ax.rready.eq(rq.i.ready),
                     self.read_beat.eq(ax.rvalid & ax.rready)]
        with m.If(ax.rvalid & ax.rready & (ax.rresp != OKAY)):
            m.d.sync += err.eq(1)
        ld_want = loading & (rows != 0) & (fill >= rb)
        ld_emit = ld_want & self.bus.wgrant
        m.d.comb += [self.bus.wen.eq(ld_want & ~err), self.bus.wdata.eq(acc)]
        ld_fill1 = Signal.like(fill)
        m.d.comb += ld_fill1.eq(Mux(ld_emit, fill - rb, fill))
        ld_take = loading & rq.o.valid & (ld_fill1 + B <= cap)
        head_take = Signal()            # the header beat of a group stream, taken
        m.d.comb += rq.o.ready.eq(ld_take | head_take)
        m.d.sync += reserved.eq(reserved + Mux(ask, rburst, 0) - (ld_take | head_take))

        # ---------------------------------------------------------------- DSTORE
        # Rows into the gearbox, beats out of it into the write queue; a burst's address goes
        # out once the queue holds its beats (or the last of them); the write side follows the
        # announced bursts. A group stream ends at its ``last`` row and is followed by its
        # header beat, written to the transfer's first beat.
        rd_pend = Signal()
        stop = Signal()                 # a group stream's last row has been read
        stored = Signal(A + 1)          # rows read so far (a group stream's header)
        pend_bytes = Mux(rd_pend, rb, 0)
        st_want = (storing & (rows != 0) & ~stop & (fill + pend_bytes + rb <= cap) &
                   ~(groups & rd_pend))
        st_read = st_want & self.bus.rgrant
        m.d.comb += self.bus.ren.eq(st_want)
        m.d.sync += rd_pend.eq(st_read)
        with m.If(st_read):
            m.d.sync += stored.eq(stored + 1)
        with m.If(rd_pend & groups & self.bus.rdata[last_bit]):
            m.d.sync += stop.eq(1)
        ended = ((rows == 0) | stop) & ~rd_pend
        m.submodules.wq = wq = StreamQueue(cfg.dram_width + B, depth=2 * BURST_BEATS)
        produced = Signal(D + 1)        # data beats into the write queue
        hdr_in, hdr_out = Signal(), Signal()    # the header beat queued / its burst announced
        data_done = ended & (fill == 0) & storing
        push = storing & wq.i.ready & ((fill >= B) | (ended & (fill != 0)))
        push_hdr = data_done & groups & ~hdr_in & wq.i.ready
        m.d.comb += [wq.i.valid.eq(push | push_hdr),
                     wq.i.p.eq(Mux(push_hdr, Cat(stored[:min(32, A + 1)].as_unsigned(),
                                                 Const(0, cfg.dram_width - min(32, A + 1)),
                                                 Const((1 << B) - 1, B)),
                                   Cat(acc[:8 * B],
                                       Mux(fill >= B, (1 << B) - 1,
                                           (Const(1, B + 1) << fill) - 1)[:B])))]
        with m.If(push):
            m.d.sync += produced.eq(produced + 1)
        with m.If(push_hdr):
            m.d.sync += hdr_in.eq(1)
        st_fill1 = Signal.like(fill)
        m.d.comb += st_fill1.eq(Mux(push, Mux(fill > B, fill - B, 0), fill))

        w_beat = Signal(D)              # the next data beat to announce
        announced = Signal(D + 1)
        b_out = Signal(range(WRITE_BURSTS + 1))
        aw_valid = Signal()
        m.d.comb += ax.awvalid.eq(aw_valid)
        m.submodules.lens = lq = StreamQueue(range(BURST_BEATS + 1), depth=WRITE_BURSTS + 1)
        wburst = burst_beats(m, w_beat, Const(BURST_BEATS), B, "wburst")
        avail = Signal(D + 1)
        m.d.comb += avail.eq(produced - announced)
        can = storing & ~aw_valid & (b_out < WRITE_BURSTS) & lq.i.ready
        data_burst = can & (avail != 0) & ((avail >= wburst) | data_done)
        n_data = Mux(avail < wburst, avail, wburst)
        hdr_burst = can & ~data_burst & data_done & (avail == 0) & hdr_in & ~hdr_out
        with m.If(data_burst):
            m.d.sync += [aw_valid.eq(1), ax.awaddr.eq(w_beat << lgB), ax.awlen.eq(n_data - 1),
                         w_beat.eq(w_beat + n_data), announced.eq(announced + n_data)]
        with m.If(hdr_burst):
            m.d.sync += [aw_valid.eq(1), ax.awaddr.eq(first << lgB), ax.awlen.eq(0),
                         hdr_out.eq(1)]
        m.d.comb += [lq.i.valid.eq(data_burst | hdr_burst),
                     lq.i.p.eq(Mux(hdr_burst, 1, n_data))]
        with m.If(aw_valid & ax.awready):
            m.d.sync += aw_valid.eq(0)
        w_cnt = Signal(range(BURST_BEATS))
        wlast = w_cnt == lq.o.p - 1
        m.d.comb += [ax.wvalid.eq(wq.o.valid & lq.o.valid), ax.wdata.eq(wq.o.p[:8 * B]),
                     ax.wstrb.eq(Mux(err, 0, wq.o.p[8 * B:])), ax.wlast.eq(wlast)]
        st_fire = ax.wvalid & ax.wready
        m.d.comb += [wq.o.ready.eq(st_fire), lq.o.ready.eq(st_fire & wlast),
                     self.write_beat.eq(st_fire)]
        with m.If(st_fire):
            m.d.sync += w_cnt.eq(Mux(wlast, 0, w_cnt + 1))
        with m.If(ax.bvalid & (ax.bresp != OKAY)):
            m.d.sync += err.eq(1)
        m.d.sync += b_out.eq(b_out + (data_burst | hdr_burst) - ax.bvalid)

        # ---------------------------------------------------------------- the gearbox
        shifted = Signal(8 * cap)
        m.d.comb += shifted.eq(acc)
        with m.If(ld_emit):
            with m.Switch(buf):
                for i, b in enumerate(isa.DRAM_BUFFERS):
                    with m.Case(i):
                        m.d.comb += shifted.eq(acc >> (8 * self._rb[b]))
        with m.If(push):
            m.d.comb += shifted.eq(Mux(fill > B, acc >> (8 * B), 0))
        incoming = Signal(8 * cap)
        with m.If(ld_take):
            m.d.comb += incoming.eq(rq.o.p << Cat(Const(0, 3), ld_fill1))
        with m.If(rd_pend):
            m.d.comb += incoming.eq(self.bus.rdata << Cat(Const(0, 3), st_fill1))
        with m.If(loading | storing):
            m.d.sync += acc.eq(shifted | incoming)
            m.d.sync += fill.eq(Mux(storing, st_fill1 + pend_bytes,
                                    ld_fill1 + Mux(ld_take, B, 0)))
        with m.If(ld_emit | st_read):
            m.d.sync += [addr.eq(addr + 1), rows.eq(rows - 1)]

        # ---------------------------------------------------------------- control
        finish = Signal()
        m.d.comb += self.done.eq(finish)
        store_idle = (data_done & (~groups | hdr_out) & (announced == produced) & ~aw_valid &
                      (wq.level == 0) & (lq.level == 0) & (b_out == 0))
        load_idle = (rows == 0) & (r_left == 0) & ~ar_valid & (reserved == 0)
        with m.FSM(name="dram"):
            with m.State("IDLE"):
                m.d.comb += cq.o.ready.eq(1)
                with m.If(cq.o.valid):
                    m.d.sync += [is_store.eq(cmd.store), buf.eq(cmd.buf),
                                 groups.eq(cmd.groups), addr.eq(cmd.addr), count.eq(cmd.count),
                                 first.eq(cmd.dram), sig.eq(cmd.signal)]
                    m.next = "SIZE"
            with m.State("SIZE"):
                m.d.comb += active.eq(1)
                with m.Switch(buf):
                    for i, b in enumerate(isa.DRAM_BUFFERS):
                        with m.Case(i):
                            m.d.sync += nbytes.eq(count * self._rb[b])
                m.d.sync += [rows.eq(count), acc.eq(0), fill.eq(0), stop.eq(0), stored.eq(0),
                             produced.eq(0), announced.eq(0), hdr_in.eq(0), hdr_out.eq(0),
                             r_beat.eq(first), w_beat.eq(first + groups)]
                with m.If(groups & ~is_store):
                    m.d.sync += r_left.eq(1)         # the header beat first
                    m.next = "HEAD"
                with m.Else():
                    m.next = "BEATS"
            with m.State("HEAD"):
                # A group stream's header beat: its row count (at most ``count``).
                m.d.comb += [active.eq(1), asking.eq(1), head_take.eq(rq.o.valid)]
                with m.If(rq.o.valid):
                    n = rq.o.p[:32]
                    with m.If(n > count):
                        m.d.sync += [err.eq(1), rows.eq(0)]
                    with m.Else():
                        m.d.sync += rows.eq(n)
                    m.d.sync += nbytes.eq(Mux(n > count, 0, n * rb_gmem))
                    m.next = "BEATS"
            with m.State("BEATS"):
                m.d.comb += active.eq(1)
                with m.If(~is_store):
                    m.d.sync += r_left.eq((nbytes + B - 1) >> lgB)
                m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [active.eq(1), loading.eq(~is_store), storing.eq(is_store),
                             asking.eq(~is_store)]
                with m.If(Mux(is_store, store_idle, load_idle)):
                    m.d.comb += finish.eq(1)
                    m.next = "IDLE"
        return m
