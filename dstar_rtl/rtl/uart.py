"""An 8N1 UART (one start bit, 8 data bits LSB first, one stop bit, no parity) with byte streams
(:mod:`amaranth.lib.stream`, 8-bit payload) on the parallel side.

``cycles_per_bit`` is the clock frequency over the baud rate: the board's ``round(f_clk / baud)``
on hardware (217 for 115200 baud on a 25 MHz clock), a small number in simulation. Both units
time every bit from their own counter; neither needs a baud-rate clock.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["UARTRx", "UARTTx", "check_cycles_per_bit", "MIN_CYCLES_PER_BIT"]

MIN_CYCLES_PER_BIT = 4


def check_cycles_per_bit(cycles_per_bit) -> int:
    """Return ``cycles_per_bit`` if it is an integer >= 4, else raise ValueError."""
    if (not isinstance(cycles_per_bit, int) or isinstance(cycles_per_bit, bool)
            or cycles_per_bit < MIN_CYCLES_PER_BIT):
        raise ValueError(f"cycles_per_bit must be an integer >= {MIN_CYCLES_PER_BIT} (clock "
                         f"frequency / baud rate), not {cycles_per_bit!r}")
    return cycles_per_bit


class _UARTSide(wiring.Component):
    """What the receiver and the transmitter share: the checked ``cycles_per_bit``."""

    def __init__(self, *, cycles_per_bit: int):
        self._cpb = check_cycles_per_bit(cycles_per_bit)
        super().__init__()

    @property
    def cycles_per_bit(self) -> int:
        return self._cpb


class UARTRx(_UARTSide):
    """8N1 receiver.

    The ``rx`` pin passes a two-flip-flop synchronizer (no reset, as is usual for one: in a
    simulation drive ``rx`` high for 3 cycles before reset ends, or an X from an undriven pin
    reaches the state machine). A falling edge on the idle line starts a
    character: the receiver waits half a bit and samples the start bit in its middle; if the line
    is high again there, the edge was a glitch (a *false start bit*) and the receiver returns to
    idle without a byte. Otherwise it samples the 8 data bits (LSB first) and the stop bit one bit
    time apart, each in the middle of its bit. After the stop-bit sample it is idle at once, so
    every character is timed from its own start edge (it resynchronizes on every start bit; a
    sender a few percent fast or slow is received, up to about 5 % at large ``cycles_per_bit``).

    A low stop bit is a *framing error*: the byte is dropped, ``frame_error`` is set (sticky
    until reset) and the receiver waits for the line to go high before it looks for a start
    bit. A character of all zeros with a low stop bit is a *break* (the sender held the line
    low): instead of a framing error it pulses ``brk`` for one cycle.

    Parameters
    ----------
    cycles_per_bit : int, >= 4
        Clock cycles per bit.

    Members
    -------
    rx : In(1), the serial input (idle high).
    o : Out(stream.Signature(8)), the received bytes. One byte is held; it must be taken before
        the next character's stop bit or that character is lost.
    frame_error : Out(1), sticky: a stop bit was low (not a break).
    overrun : Out(1), sticky: a byte arrived while the previous one was still on ``o``; the new
        byte was dropped.
    brk : Out(1), one-cycle strobe: a break was received.

    Latency and throughput
    ----------------------
    ``o.valid`` rises ``9·cycles_per_bit + cycles_per_bit // 2 + 3`` cycles after the first clock
    edge that samples the start bit low on ``rx`` (2 synchronizer stages, the mid-stop-bit sample,
    the output register). One byte per ``10·cycles_per_bit`` cycles (the line rate), characters
    back to back.

    Raises
    ------
    ValueError
        ``cycles_per_bit`` is not an integer >= 4.
    """

    rx: In(1, init=1)
    o: Out(stream.Signature(8))
    frame_error: Out(1)
    overrun: Out(1)
    brk: Out(1)

    def elaborate(self, platform):
        cpb = self._cpb
        m = Module()
        rx = Signal(init=1)
        m.submodules.sync = FFSynchronizer(self.rx, rx, init=1)
        timer = Signal(range(cpb))
        bits = Signal(range(9))           # data bits still to sample
        sr = Signal(8)

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        m.d.sync += self.brk.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~rx):
                    m.d.sync += timer.eq(cpb // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    with m.If(rx):
                        m.next = "IDLE"   # false start bit
                    with m.Else():
                        m.d.sync += [timer.eq(cpb - 1), bits.eq(8)]
                        m.next = "DATA"
            with m.State("DATA"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    m.d.sync += [sr.eq(Cat(sr[1:], rx)), bits.eq(bits - 1), timer.eq(cpb - 1)]
                    with m.If(bits == 1):
                        m.next = "STOP"
            with m.State("STOP"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    with m.If(rx):
                        with m.If(self.o.valid & ~self.o.ready):
                            m.d.sync += self.overrun.eq(1)
                        with m.Else():
                            m.d.sync += [self.o.payload.eq(sr), self.o.valid.eq(1)]
                        m.next = "IDLE"
                    with m.Else():
                        with m.If(sr == 0):
                            m.d.sync += self.brk.eq(1)
                        with m.Else():
                            m.d.sync += self.frame_error.eq(1)
                        m.next = "WAIT_HIGH"
            with m.State("WAIT_HIGH"):
                with m.If(rx):
                    m.next = "IDLE"
        return m


class UARTTx(_UARTSide):
    """8N1 transmitter.

    A byte taken from ``i`` goes out as a start bit (low), its 8 bits LSB first and a stop bit
    (high), each ``cycles_per_bit`` cycles; ``tx`` is a register (no glitches) and idles high.

    Parameters
    ----------
    cycles_per_bit : int, >= 4
        Clock cycles per bit.

    Members
    -------
    i : In(stream.Signature(8)), the bytes to send. ``ready`` is high while idle and in the last
        cycle of a stop bit.
    tx : Out(1), the serial output.

    Latency and throughput
    ----------------------
    ``tx`` falls (start bit) on the clock edge after the one that takes the byte. One byte per
    ``10·cycles_per_bit`` cycles: the next byte is taken in the last cycle of the stop bit, so a
    stream of bytes leaves as back-to-back characters.

    Raises
    ------
    ValueError
        ``cycles_per_bit`` is not an integer >= 4.
    """

    i: In(stream.Signature(8))
    tx: Out(1, init=1)

    def elaborate(self, platform):
        cpb = self._cpb
        m = Module()
        timer = Signal(range(cpb))
        bits = Signal(range(11))          # bit periods left, the current one included
        sr = Signal(9)                    # data bits then the stop bit, next bit at sr[0]

        m.d.comb += self.i.ready.eq((bits == 0) | ((bits == 1) & (timer == 0)))
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [self.tx.eq(0), sr.eq(Cat(self.i.payload, 1)), bits.eq(10),
                         timer.eq(cpb - 1)]
        with m.Elif(bits != 0):
            m.d.sync += timer.eq(timer - 1)
            with m.If(timer == 0):
                # After the stop bit the shift register holds only ones: the line idles high.
                m.d.sync += [self.tx.eq(sr[0]), sr.eq(Cat(sr[1:], 1)), bits.eq(bits - 1),
                             timer.eq(cpb - 1)]
        return m
