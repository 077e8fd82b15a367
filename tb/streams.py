"""Reusable cocotb stream drivers and monitors for Amaranth ``lib.stream`` ports.

A port named ``x`` in the generated Verilog is the trio ``x__payload``, ``x__valid``,
``x__ready``. Each cycle a driver writes right after the rising edge, samples in the read-only
phase, and counts a transfer when ``valid & ready`` held at the next edge. Payloads are plain
integers packed by :mod:`golden.layouts`.
"""

from __future__ import annotations

import random

from cocotb.clock import Clock
from cocotb.triggers import First, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time

__all__ = ["StreamSource", "StreamSink", "start_clock", "reset", "CLOCK_NS"]

CLOCK_NS = 10   # the clock period of every testbench


def start_clock(dut, period_ns: int = CLOCK_NS):
    """Start the DUT's ``clk`` (Amaranth's sync domain) with cocotb's C++ clock (``impl="gpi"``:
    no Python callback per edge)."""
    Clock(dut.clk, period_ns, unit="ns", impl="gpi").start()


async def reset(dut, cycles: int = 2):
    """Hold Amaranth's synchronous, active-high ``rst`` for ``cycles`` rising edges."""
    dut.rst.value = 1
    for _ in range(cycles):
        await RisingEdge(dut.clk)
    dut.rst.value = 0


class StreamSource:
    """Drives a stream input. ``gap``: probability of an idle (invalid) cycle before a beat."""

    def __init__(self, dut, name: str, clk, gap: float = 0.0, rng=None):
        self.payload = getattr(dut, f"{name}__payload")
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready", None)
        self.clk = clk
        self.gap = gap
        self.rng = rng or random.Random(0)
        self.cycles = []  # cycle number of each transfer (counted from the first call)
        self.cycle = 0
        self.valid.value = 0

    async def send(self, words):
        for w in words:
            while self.gap and self.rng.random() < self.gap:
                self.valid.value = 0
                await RisingEdge(self.clk)
                self.cycle += 1
            self.payload.value = int(w)
            self.valid.value = 1
            while True:
                await ReadOnly()
                ready = self.ready is None or int(self.ready.value) == 1
                await RisingEdge(self.clk)
                self.cycle += 1
                if ready:
                    self.cycles.append(self.cycle - 1)
                    break
        self.valid.value = 0


class StreamSink:
    """Consumes a stream output. ``stall``: probability of holding ``ready`` low for a cycle."""

    def __init__(self, dut, name: str, clk, stall: float = 0.0, rng=None):
        self.payload = getattr(dut, f"{name}__payload")
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.clk = clk
        self.stall = stall
        self.rng = rng or random.Random(1)
        self.words = []
        self.cycles = []
        self.cycle = 0
        self.ready.value = 0

    async def receive(self, count: int, timeout: int):
        """Take ``count`` beats. Without stalls ``ready`` stays high and, while ``valid`` is low,
        the sink sleeps until it rises instead of waking every cycle (``cycle`` advances by the
        cycles slept), so a long computation before the output costs no Python per cycle."""
        while len(self.words) < count:
            ready = not (self.stall and self.rng.random() < self.stall)
            self.ready.value = int(ready)
            await ReadOnly()
            valid = int(self.valid.value) == 1
            if not valid and not self.stall:
                await self._sleep_until_valid(count, timeout)
                continue
            word = self.payload.value.to_unsigned() if valid and ready else None
            await RisingEdge(self.clk)
            if word is not None:
                self.words.append(word)
                self.cycles.append(self.cycle)
            self.cycle += 1
            if self.cycle > timeout:
                raise TimeoutError(f"{len(self.words)}/{count} beats after {self.cycle} cycles")
        self.ready.value = 0

    async def _sleep_until_valid(self, count: int, timeout: int):
        """From the read-only phase after an edge with ``valid`` low: wait for the edge at which
        it rises (it changes only on clock edges) and count the cycles passed."""
        t0 = get_sim_time(unit="ns")
        left = timeout - self.cycle
        timer = Timer(max(left, 1) * CLOCK_NS, unit="ns")
        fired = await First(RisingEdge(self.valid), timer)
        self.cycle += round((get_sim_time(unit="ns") - t0) / CLOCK_NS)
        if fired is timer or self.cycle > timeout:
            raise TimeoutError(f"{len(self.words)}/{count} beats after {self.cycle} cycles")
