"""A cocotb model of the host's UART: drives the DUT's ``rx`` pin and decodes its ``tx`` pin, 8N1,
``cycles_per_bit`` clock periods per bit, and :class:`CocotbTransport`, the async transport that
lets :class:`sim.host_driver.HostDriver` talk to a simulated top exactly as it talks to a board.

Python runs once per bit, not per clock cycle (bits are timed with ``Timer``), so the simulator's
own speed sets the pace; start the clock with :func:`start_fast_clock` (the simulator's clock
driver, no Python per edge).
"""

from __future__ import annotations

import cocotb
from cocotb.clock import Clock
from cocotb.queue import Queue
from cocotb.triggers import Event, FallingEdge, SimTimeoutError, Timer, with_timeout

__all__ = ["UartModel", "CocotbTransport", "start_fast_clock", "BREAK"]

BREAK = object()          # queued like a byte: the line held low for two character times


def start_fast_clock(dut, period_ns: int = 10):
    """Start ``dut.clk`` with cocotb's C++ clock (``impl="gpi"``): no Python callback per edge.
    The model writes ``rx`` half a period away from the rising edges, so the simulator's
    inertial writes cannot race the clock."""
    Clock(dut.clk, period_ns, unit="ns", impl="gpi").start()


class UartModel:
    """The host's UART on ``dut.<rx>`` (driven) and ``dut.<tx>`` (decoded).

    ``send(data)`` queues bytes (or :data:`BREAK`) and returns at once; a background task puts
    them on the line back to back. Decoded bytes collect in ``received``; ``framing_errors``
    counts characters whose stop bit was low.
    """

    def __init__(self, dut, cycles_per_bit: int, period_ns: int = 10, rx: str = "rx",
                 tx: str = "tx"):
        self.dut = dut
        self.rx = getattr(dut, rx)
        self.tx = getattr(dut, tx)
        self.bit_ns = cycles_per_bit * period_ns
        self.period_ns = period_ns
        self.received = bytearray()
        self.framing_errors = 0
        self.sent = 0
        self._queue: Queue = Queue()
        self._arrived = Event()
        self.rx.value = 1
        cocotb.start_soon(self._sender())
        cocotb.start_soon(self._receiver())

    def send(self, data) -> None:
        for b in data:
            self._queue.put_nowait(b)

    def send_break(self) -> None:
        self._queue.put_nowait(BREAK)

    async def _sender(self):
        bit = Timer(self.bit_ns, unit="ns")
        while True:
            if self._queue.empty():
                item = await self._queue.get()
                await FallingEdge(self.dut.clk)          # align to the clock's low phase
            else:
                item = self._queue.get_nowait()
            if item is BREAK:
                self.rx.value = 0
                await Timer(20 * self.bit_ns, unit="ns")
                self.rx.value = 1
                await Timer(2 * self.bit_ns, unit="ns")
                continue
            for level in [0] + [(item >> i) & 1 for i in range(8)] + [1]:
                self.rx.value = level
                await bit
            self.sent += 1

    async def _receiver(self):
        half = Timer(self.bit_ns // 2, unit="ns")
        bit = Timer(self.bit_ns, unit="ns")
        while True:
            await FallingEdge(self.tx)
            await half
            if int(self.tx.value):
                continue                                  # a glitch, not a start bit
            v = 0
            for i in range(8):
                await bit
                v |= int(self.tx.value) << i
            await bit
            if not int(self.tx.value):
                self.framing_errors += 1
                continue
            self.received.append(v)
            self._arrived.set()

    async def read(self, max_bytes: int, timeout_ns: int) -> bytes:
        """At least one received byte (at most ``max_bytes``), or ``b""`` after ``timeout_ns``."""
        if not self.received:
            self._arrived.clear()
            try:
                await with_timeout(self._arrived.wait(), timeout_ns, "ns")
            except SimTimeoutError:
                return b""
        data = bytes(self.received[:max_bytes])
        del self.received[:max_bytes]
        return data


class CocotbTransport:
    """The async transport of :class:`sim.host_driver.HostDriver` over a :class:`UartModel`.
    ``timeout_bytes``: how many character times a read waits before it reports a timeout."""

    def __init__(self, model: UartModel, timeout_bytes: int = 2000):
        self.model = model
        self.timeout_ns = timeout_bytes * 10 * model.bit_ns

    async def write(self, data: bytes) -> None:
        self.model.send(data)

    async def read(self, max_bytes: int) -> bytes:
        return await self.model.read(max_bytes, self.timeout_ns)

    async def send_break(self) -> None:
        self.model.send_break()
