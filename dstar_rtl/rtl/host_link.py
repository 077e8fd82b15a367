"""The host link: framed word streams over a UART, generic over the number and widths of ports.

Frames (both directions)
------------------------
``[0xA5, port, count_lo, count_hi, payload...]``: a sync byte, a port number, a 16-bit word
count (little-endian) and ``count`` words of that port's width ``w``, each little-endian in
``ceil(w / 8)`` bytes (the unused high bits of a word's last byte are ignored on input and sent
as 0).

Host → link:

* ``port < len(in_ports)``: ``count`` words (0 .. 65535) for input stream ``in_<port>``; the link
  offers each word on the stream as soon as its last byte arrived and takes the next byte only
  when the word was accepted (a stalled port stalls the link's input; bytes wait in the receive
  FIFO).
* ``port = 0xFF``: status query. The count is ignored (send 0) and no payload follows. The link
  answers when it *processes* the query, i.e. after every byte sent before it has left the receive
  FIFO and every word before it has been accepted by its port; so a reply acknowledges all bytes
  up to its query (this is the host's flow control, below).

Link → host:

* ``port < len(out_ports)``: one frame per word (``count = 1``) taken from output stream
  ``out_<port>``; the ports are served round robin, one frame at a time.
* ``port = 0xFF``: the status reply, ``count = 4`` bytes: ``flags`` (bit 0 ``error``, bit 1
  ``overrun``, bit 2 ``frame_error``, others 0), ``user_status`` (8 bits from the design, e.g.
  its error and busy flags), and ``rx_depth`` (16 bits, little-endian). It goes out before any
  further output word.

Errors and resynchronization (the exact rule)
---------------------------------------------
1. Where a frame must start, a byte other than 0xA5 sets the sticky ``error``; the link then
   drops every byte up to the next 0xA5, which it takes as the sync byte of a frame.
2. A header whose port is neither an input port nor 0xFF sets ``error``; the link drops the
   header's two count bytes, then, as in 1, every byte up to the next 0xA5 (the payload of an
   unknown port has no known length; a 0xA5 inside it is taken as a sync byte).
3. A break (the host holds the line low for at least one character) aborts any frame in
   progress, in order with the bytes around it: the bytes received before it are processed, a
   partly received word is dropped, and the link then expects a frame start (the break itself is
   not an error). Words already complete are still delivered.
4. A character whose stop bit is low sets the sticky ``frame_error`` and is dropped; a byte that
   arrives while the receive FIFO is full sets the sticky ``overrun`` and is dropped. Both can
   shift a frame; a break (3) then resynchronizes.

``error``, ``overrun`` and ``frame_error`` stay set until reset and are reported in every status
reply.

Flow control
------------
The link never stalls the line: a byte that finds the receive FIFO (``rx_depth`` bytes) full is
lost. A host that keeps at most ``rx_depth`` bytes sent after the query of its last status reply
never overruns it, whatever the ports do (:class:`sim.host_driver.HostDriver` does this; the reply
carries ``rx_depth``). Output needs no flow control: the host reads continuously.

Rates: ``10·cycles_per_bit`` cycles per byte in each direction (full duplex); an input word of
``w`` bits costs ``ceil(w / 8)`` bytes plus 4 per frame, an output word ``ceil(w / 8) + 4``.
"""

from math import ceil

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .params import check_shape
from .stream_queue import StreamQueue
from .uart import UARTRx, UARTTx, check_cycles_per_bit

__all__ = ["HostLink", "LinkedTop", "SYNC", "STATUS_PORT", "STATUS_BYTES", "HEADER_BYTES",
           "MAX_PORTS", "word_bytes"]

SYNC = 0xA5
STATUS_PORT = 0xFF
STATUS_BYTES = 4          # flags, user_status, rx_depth (2)
MAX_PORTS = 255           # port numbers 0 .. 254; 0xFF is the status port
HEADER_BYTES = 4


def word_bytes(width: int) -> int:
    """Bytes per word of a ``width``-bit port."""
    return ceil(width / 8)


def _check_ports(name: str, ports) -> list:
    if isinstance(ports, (str, bytes)) or not hasattr(ports, "__len__"):
        raise ValueError(f"{name} must be a sequence of at most {MAX_PORTS} payload shapes (ints "
                         f"or shape-castables), not {ports!r}")
    if len(ports) > MAX_PORTS:
        raise ValueError(f"{name} must have at most {MAX_PORTS} ports (0xFF is the status port), "
                         f"not {len(ports)}")
    return [check_shape(f"{name}[{k}]", p) for k, p in enumerate(ports)]


class HostLink(wiring.Component):
    """A framing layer between a UART and any number of word streams (protocol: module docstring).

    Parameters
    ----------
    in_ports : sequence of shapes (ints or shape-castables such as a ``data.StructLayout``)
        The payload shape of each input stream (host → design), port numbers in order.
    out_ports : sequence of shapes
        The payload shape of each output stream (design → host).
    cycles_per_bit : int, >= 4
        Clock cycles per UART bit (clock frequency / baud rate).
    rx_depth : int, default 256
        Bytes of receive FIFO (block RAM on an FPGA). At least ``4 + max input word bytes + 4``
        (a one-word frame and a status query, the least window the host driver works with) and at
        most 65535.

    Members
    -------
    rx : In(1), the UART input pin (idle high). tx : Out(1), the UART output pin.
    in_<k> : Out(stream.Signature(in_ports[k])), the words the host sends to input port ``k``.
    out_<k> : In(stream.Signature(out_ports[k])), the words sent to the host from port ``k``.
    user_status : In(8), reported in every status reply.
    error : Out(1), sticky: a bad sync byte or an unknown port.
    overrun : Out(1), sticky: a received byte was lost (receive FIFO full).
    frame_error : Out(1), sticky: a character with a low stop bit.

    Latency and throughput
    ----------------------
    The line: ``10·cycles_per_bit`` cycles per byte in each direction. An input word is offered
    on its stream 3 cycles after the UART receiver offers its last byte (through the FIFO and the
    parser); one output word is taken whenever the transmitter is idle and goes out as
    ``4 + ceil(w / 8)`` back-to-back characters, the first start bit on the edge after the one
    that takes it. Between frames the transmitter scans the output ports round robin, one per
    cycle (at most ``len(out_ports)`` cycles), which a frame ending hides: the next frame is
    loaded while the last character is still on the line.

    Raises
    ------
    ValueError
        A port list is not a sequence of at most 255 shapes of width >= 1; ``cycles_per_bit`` is
        not an integer >= 4; ``rx_depth`` is out of range.
    """

    def __init__(self, in_ports, out_ports, *, cycles_per_bit: int, rx_depth: int = 256):
        self._in = _check_ports("in_ports", in_ports)
        self._out = _check_ports("out_ports", out_ports)
        self._cpb = check_cycles_per_bit(cycles_per_bit)
        least = HEADER_BYTES + max(self.in_bytes, default=0) + HEADER_BYTES
        if (not isinstance(rx_depth, int) or isinstance(rx_depth, bool)
                or not least <= rx_depth <= 0xFFFF):
            raise ValueError(f"rx_depth must be an integer in {least} .. 65535 (a one-word frame "
                             f"of the widest input port and a status query), not {rx_depth!r}")
        self._rx_depth = rx_depth
        members = {"rx": In(1, init=1), "tx": Out(1, init=1), "user_status": In(8),
                   "error": Out(1), "overrun": Out(1), "frame_error": Out(1)}
        for k, shape in enumerate(self._in):
            members[f"in_{k}"] = Out(stream.Signature(shape))
        for k, shape in enumerate(self._out):
            members[f"out_{k}"] = In(stream.Signature(shape))
        super().__init__(members)

    # ------------------------------------------------------------------ parameters
    @property
    def cycles_per_bit(self) -> int:
        return self._cpb

    @property
    def rx_depth(self) -> int:
        return self._rx_depth

    @property
    def in_widths(self) -> list:
        return [Shape.cast(s).width for s in self._in]

    @property
    def out_widths(self) -> list:
        return [Shape.cast(s).width for s in self._out]

    @property
    def in_bytes(self) -> list:
        """Bytes per word of each input port."""
        return [word_bytes(w) for w in self.in_widths]

    @property
    def out_bytes(self) -> list:
        """Bytes per word of each output port."""
        return [word_bytes(w) for w in self.out_widths]

    @property
    def in_streams(self) -> list:
        return [getattr(self, f"in_{k}") for k in range(len(self._in))]

    @property
    def out_streams(self) -> list:
        return [getattr(self, f"out_{k}") for k in range(len(self._out))]

    # ------------------------------------------------------------------ hardware
    def elaborate(self, platform):
        m = Module()
        m.submodules.uart_rx = urx = UARTRx(cycles_per_bit=self._cpb)
        m.submodules.uart_tx = utx = UARTTx(cycles_per_bit=self._cpb)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx), self.overrun.eq(urx.overrun),
                     self.frame_error.eq(urx.frame_error)]

        # Receive FIFO: a byte (bit 8 = 0) or a break marker (bit 8 = 1), in line order.
        m.submodules.rx_fifo = fifo = StreamQueue(9, depth=self._rx_depth)
        brk_pend = Signal()
        m.d.comb += [fifo.i.valid.eq(urx.o.valid | brk_pend),
                     fifo.i.payload.eq(Mux(urx.o.valid, urx.o.payload, 1 << 8)),
                     urx.o.ready.eq(fifo.i.ready)]
        with m.If(fifo.i.ready & ~urx.o.valid):
            m.d.sync += brk_pend.eq(0)
        with m.If(urx.brk):
            m.d.sync += brk_pend.eq(1)

        q_req, q_ack = Signal(), Signal()
        self._receiver(m, fifo, q_req, q_ack)
        self._transmitter(m, utx, q_req, q_ack, urx)
        return m

    def _receiver(self, m, fifo, q_req, q_ack):
        n_in, nbs = len(self._in), self.in_bytes
        mb = max(nbs, default=1)
        avail, byte, is_brk = fifo.o.valid, fifo.o.payload[:8], fifo.o.payload[8]
        take = Signal()
        m.d.comb += fifo.o.ready.eq(take)
        got = avail & ~is_brk                       # a data byte at the FIFO head

        sr = Signal(8 * mb)                         # word assembly, bytes shift in from the top
        port = Signal(8)
        count = Signal(16)                          # words left in the frame
        left = Signal(range(mb + 1))                # bytes left in the word
        wb = Signal(range(mb + 1))                  # bytes per word of the frame's port
        known, nb_new = Signal(), Signal(range(mb + 1))
        with m.Switch(byte):
            for k, nb in enumerate(nbs):
                with m.Case(k):
                    m.d.comb += [known.eq(1), nb_new.eq(nb)]
            with m.Case(STATUS_PORT):
                m.d.comb += known.eq(1)

        def reading():
            """Every state that reads the FIFO consumes its head; a break returns to SYNC."""
            m.d.comb += take.eq(avail)
            with m.If(avail & is_brk):
                m.next = "SYNC"

        with m.FSM() as fsm:
            with m.State("SYNC"):
                reading()
                with m.If(got):
                    with m.If(byte == SYNC):
                        m.next = "PORT"
                    with m.Else():
                        m.d.sync += self.error.eq(1)
                        m.next = "HUNT"
            with m.State("HUNT"):
                reading()
                with m.If(got & (byte == SYNC)):
                    m.next = "PORT"
            with m.State("PORT"):
                reading()
                with m.If(got):
                    m.d.sync += [port.eq(byte), wb.eq(nb_new)]
                    with m.If(known):
                        m.next = "COUNT_LO"
                    with m.Else():
                        m.d.sync += self.error.eq(1)
                        m.next = "SKIP_LO"
            with m.State("COUNT_LO"):
                reading()
                with m.If(got):
                    m.d.sync += count[:8].eq(byte)
                    m.next = "COUNT_HI"
            with m.State("COUNT_HI"):
                reading()
                with m.If(got):
                    m.d.sync += [count[8:].eq(byte), left.eq(wb)]
                    with m.If(port == STATUS_PORT):
                        m.next = "QUERY"
                    with m.Elif(Cat(count[:8], byte) == 0):
                        m.next = "SYNC"
                    with m.Else():
                        m.next = "DATA"
            with m.State("SKIP_LO"):
                reading()
                with m.If(got):
                    m.next = "SKIP_HI"
            with m.State("SKIP_HI"):
                reading()
                with m.If(got):
                    m.next = "HUNT"
            with m.State("DATA"):
                reading()
                with m.If(got):
                    m.d.sync += [sr.eq(Cat(sr[8:], byte)), left.eq(left - 1)]
                    with m.If(left == 1):
                        m.next = "OFFER"
            with m.State("OFFER"):
                accepted = Signal()
                for k in range(n_in):
                    with m.If(port == k):
                        m.d.comb += accepted.eq(self.in_streams[k].ready)
                with m.If(accepted):
                    m.d.sync += [count.eq(count - 1), left.eq(wb)]
                    with m.If(count == 1):
                        m.next = "SYNC"
                    with m.Else():
                        m.next = "DATA"
            with m.State("QUERY"):
                m.d.comb += q_req.eq(1)
                with m.If(q_ack):
                    m.next = "SYNC"
        offer = fsm.ongoing("OFFER")
        for k, (s, nb, w) in enumerate(zip(self.in_streams, nbs, self.in_widths)):
            lo = 8 * (mb - nb)
            m.d.comb += [s.valid.eq(offer & (port == k)),
                         Value.cast(s.payload).eq(sr[lo:lo + w])]

    def _transmitter(self, m, utx, q_req, q_ack, urx):
        n_out, nbs = len(self._out), self.out_bytes
        frame = HEADER_BYTES + max(nbs + [STATUS_BYTES])
        tsr = Signal(8 * frame)                     # the frame, next byte at the bottom
        left = Signal(range(frame + 1))             # bytes left to send
        m.d.comb += [utx.i.valid.eq(left != 0), utx.i.payload.eq(tsr[:8])]
        with m.If(utx.i.valid & utx.i.ready):
            m.d.sync += [tsr.eq(tsr >> 8), left.eq(left - 1)]

        flags = Cat(self.error, urx.overrun, urx.frame_error, Const(0, 5))
        ptr = Signal(range(max(n_out, 1)))          # round-robin scan of the output ports
        with m.If(left == 0):
            with m.If(q_req):
                m.d.comb += q_ack.eq(1)
                m.d.sync += [tsr.eq(Cat(Const(SYNC, 8), Const(STATUS_PORT, 8),
                                        Const(STATUS_BYTES, 16), flags, self.user_status,
                                        Const(self._rx_depth, 16))),
                             left.eq(HEADER_BYTES + STATUS_BYTES)]
            with m.Else():
                for k, (s, nb) in enumerate(zip(self.out_streams, nbs)):
                    nxt = (k + 1) % n_out
                    with m.If(ptr == k):
                        m.d.comb += s.ready.eq(1)
                        m.d.sync += ptr.eq(nxt)
                        with m.If(s.valid):
                            m.d.sync += [tsr.eq(Cat(Const(SYNC, 8), Const(k, 8), Const(1, 16),
                                                    Value.cast(s.payload))),
                                         left.eq(HEADER_BYTES + nb)]


class LinkedTop(wiring.Component):
    """Base of a design behind a :class:`HostLink` (``rtl.uart_vpu``, ``rtl.uart_core``): the
    UART pins and the link's sticky flags as members, the ``cfg``, ``link`` and
    ``cycles_per_bit`` properties, and :meth:`wire_link`. A subclass sets ``self._cfg`` and
    ``self._link`` before calling ``super().__init__()``."""

    rx: In(1, init=1)
    tx: Out(1, init=1)
    link_error: Out(1)
    overrun: Out(1)
    frame_error: Out(1)

    @property
    def cfg(self):
        return self._cfg

    @property
    def link(self) -> "HostLink":
        return self._link

    @property
    def cycles_per_bit(self) -> int:
        return self._link.cycles_per_bit

    def wire_link(self, m, user_status) -> "HostLink":
        """Add the link to ``m``, connect the pins and flags, drive ``user_status``."""
        m.submodules.link = link = self._link
        m.d.comb += [link.rx.eq(self.rx), self.tx.eq(link.tx), link.user_status.eq(user_status),
                     self.link_error.eq(link.error), self.overrun.eq(link.overrun),
                     self.frame_error.eq(link.frame_error)]
        return link
