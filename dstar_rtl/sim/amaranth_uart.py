"""The host's UART in Amaranth's simulator: :class:`AmaranthUartTransport` lets
:class:`sim.host_driver.HostDriver` drive a UART top (``rx``/``tx`` pins) in an Amaranth
testbench exactly as it drives a board over pyserial and the generated Verilog under cocotb.

The transport bit-bangs ``rx`` (8N1, ``cycles_per_bit`` clock cycles per bit) from the testbench
that awaits the driver, and :meth:`AmaranthUartTransport.receiver` decodes ``tx`` in a background
testbench, sampling each bit in its middle.

>>> tr = AmaranthUartTransport(top, cycles_per_bit=4)     # doctest: +SKIP
>>> sim.add_testbench(tr.receiver, background=True)
>>> async def bench(ctx):
...     tr.bind(ctx)
...     st = await HostDriver(tr).sync()
"""

from __future__ import annotations

__all__ = ["AmaranthUartTransport"]


class AmaranthUartTransport:
    """Async transport of :class:`~sim.host_driver.HostDriver` over the ``rx``/``tx`` pins of
    ``top`` in Amaranth's simulator.

    Parameters
    ----------
    top : the simulated top (members ``rx`` in, ``tx`` out).
    cycles_per_bit : int, the top's bit time in clock cycles.
    timeout_bytes : int, character times a read waits for a first byte before it returns ``b""``
        (the driver then reports a timeout).

    Attributes
    ----------
    received : bytearray, bytes decoded from ``tx`` and not yet read.
    framing_errors : int, characters whose stop bit was low.
    """

    def __init__(self, top, cycles_per_bit: int, timeout_bytes: int = 400):
        self.top = top
        self.cpb = cycles_per_bit
        self.timeout_cycles = timeout_bytes * 10 * cycles_per_bit
        self.received = bytearray()
        self.framing_errors = 0
        self._ctx = None

    def bind(self, ctx) -> None:
        """Use the simulator context of the testbench that awaits the driver."""
        self._ctx = ctx
        ctx.set(self.top.rx, 1)

    async def write(self, data: bytes) -> None:
        ctx = self._ctx
        for byte in data:
            for level in [0] + [(byte >> i) & 1 for i in range(8)] + [1]:
                ctx.set(self.top.rx, level)
                await ctx.tick().repeat(self.cpb)

    async def send_break(self) -> None:
        ctx = self._ctx
        ctx.set(self.top.rx, 0)
        await ctx.tick().repeat(20 * self.cpb)
        ctx.set(self.top.rx, 1)
        await ctx.tick().repeat(2 * self.cpb)

    async def read(self, max_bytes: int) -> bytes:
        ctx = self._ctx
        waited = 0
        while not self.received and waited < self.timeout_cycles:
            await ctx.tick()
            waited += 1
        data = bytes(self.received[:max_bytes])
        del self.received[:max_bytes]
        return data

    async def receiver(self, ctx) -> None:
        """Background testbench: decode every character the top sends on ``tx``."""
        tx = self.top.tx
        while True:
            while ctx.get(tx):
                await ctx.tick()
            await ctx.tick().repeat(self.cpb // 2)
            if ctx.get(tx):
                continue                          # a glitch, not a start bit
            value = 0
            for i in range(8):
                await ctx.tick().repeat(self.cpb)
                value |= ctx.get(tx) << i
            await ctx.tick().repeat(self.cpb)
            if not ctx.get(tx):
                self.framing_errors += 1
                continue
            self.received.append(value)
