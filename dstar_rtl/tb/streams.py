"""Reusable cocotb stream drivers and monitors for Amaranth ``lib.stream`` ports.

A port named ``x`` in the generated Verilog is the trio ``x__payload``, ``x__valid``,
``x__ready``. Each cycle a driver writes right after the rising edge, samples in the read-only
phase, and counts a transfer when ``valid & ready`` held at the next edge. Payloads are plain
integers packed by :mod:`golden.layouts`. A sink fails on any beat in its trailing window after
the expected ones, so a duplicated or extra beat cannot pass.
"""

from __future__ import annotations

import random

from cocotb.clock import Clock
from cocotb.triggers import Event, First, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time

__all__ = ["StreamSource", "StreamSink", "expect_trailing_beat", "start_clock", "reset",
           "CLOCK_NS"]

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
    """Consumes a stream output and fails on any beat after the expected ones.

    Parameters
    ----------
    dut, name, clk
        The DUT, the port name ``x`` of ``x__payload`` / ``x__valid`` / ``x__ready``, its clock.
    stall : float
        Probability of holding ``ready`` low for a cycle.
    rng : random.Random, optional
        The stall draws (default ``random.Random(1)``).
    window : int
        The trailing window: after the expected beats, ``ready`` stays high for ``window``
        cycles and a ``valid`` in any of them raises AssertionError (a duplicated or extra
        trailing beat). Each testbench sets it to at least twice its unit's latency
        (:mod:`perf.timing`).

    Attributes
    ----------
    words, cycles : list
        The payloads taken and the cycle of each (counted from the last reset of ``cycle``).
    cycle : int
        Cycles counted up to the last expected beat; the trailing window is not counted.
    """

    def __init__(self, dut, name: str, clk, stall: float = 0.0, rng=None, *, window: int):
        if window < 1:
            raise ValueError(f"the trailing window must be at least one cycle, not {window}")
        self.name = name
        self.payload = getattr(dut, f"{name}__payload")
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.clk = clk
        self.stall = stall
        self.window = window
        self.rng = rng or random.Random(1)
        self.words = []
        self.cycles = []
        self.cycle = 0
        self.ready.value = 0

    async def receive(self, count: int | None, timeout: int, stop: Event | None = None, *,
                      hold: bool = False):
        """Take ``count`` beats, or with ``count=None`` every beat until ``stop`` is set, then
        watch the trailing window (:attr:`window`) and drop ``ready``. With ``hold`` the stream
        goes on (a partial take, e.g. before a reset in the middle of traffic): ``ready`` drops
        right after the last beat taken, no window.

        Call it right after a rising edge. Without stalls ``ready`` stays high and, while
        ``valid`` is low, the sink sleeps until it rises (or ``stop`` is set) instead of waking
        every cycle (``cycle`` advances by the cycles slept), so a long computation before the
        output costs no Python per cycle. Raises TimeoutError when ``cycle`` passes ``timeout``
        before the end, AssertionError on a beat in the trailing window."""
        if count is None and stop is None:
            raise ValueError("receive needs a beat count or a stop event")
        while count is None or len(self.words) < count:
            if stop is not None and stop.is_set():
                break
            ready = not (self.stall and self.rng.random() < self.stall)
            self.ready.value = int(ready)
            await ReadOnly()
            valid = int(self.valid.value) == 1
            if not valid and not self.stall:
                await self._sleep_until_valid(count, timeout, stop)
                continue
            word = self.payload.value.to_unsigned() if valid and ready else None
            await RisingEdge(self.clk)
            if word is not None:
                self.words.append(word)
                self.cycles.append(self.cycle)
            self.cycle += 1
            if self.cycle > timeout:
                raise TimeoutError(self._progress(count))
        if not hold:
            await self._trailing_window(count)
        self.ready.value = 0

    def _progress(self, count) -> str:
        want = "and no end signalled" if count is None else f"of {count}"
        return f"{self.name}: {len(self.words)} beats {want} after {self.cycle} cycles"

    async def _trailing_window(self, count):
        """``ready`` high for :attr:`window` cycles; any ``valid`` fails."""
        self.ready.value = 1
        for k in range(self.window):
            await ReadOnly()
            if int(self.valid.value) == 1:
                end = "the end" if count is None else f"the {count} expected beats"
                raise AssertionError(
                    f"{self.name}: a beat ({self.payload.value.to_unsigned():#x}) valid {k} "
                    f"cycles after {end} (a duplicated or extra trailing beat)")
            await RisingEdge(self.clk)

    async def _sleep_until_valid(self, count, timeout: int, stop):
        """From the read-only phase after an edge with ``valid`` low: wait for the edge at which
        it rises (it changes only on clock edges), or for ``stop``, and count the cycles passed.
        Woken by ``stop`` (set in a read-only phase), wait for the next edge, at which nothing
        transfers (``valid`` is still low), so the caller may drive again."""
        t0 = get_sim_time(unit="ns")
        left = timeout - self.cycle
        timer = Timer(max(left, 1) * CLOCK_NS, unit="ns")
        edge = RisingEdge(self.valid)
        fired = await (First(edge, timer) if stop is None else First(edge, timer, stop.wait()))
        if fired is not edge and fired is not timer:
            await RisingEdge(self.clk)
        self.cycle += round((get_sim_time(unit="ns") - t0) / CLOCK_NS)
        if fired is timer or self.cycle > timeout:
            raise TimeoutError(self._progress(count))


async def expect_trailing_beat(sink: StreamSink, count: int, timeout: int, pending=None):
    """Take ``count`` beats from a stream that sends more and require the sink's trailing window
    to fail on the next one (the check a testbench relies on); then wait for ``pending`` (the
    driver task still feeding the unit, ``ready`` kept high meanwhile), leave the read-only
    phase and drop ``ready``. Raises AssertionError if the extra beat passes unnoticed."""
    try:
        await sink.receive(count, timeout=timeout)
    except AssertionError as e:
        assert "extra trailing beat" in str(e), e
    else:
        raise AssertionError(f"{sink.name}: the sink accepted a beat after the expected ones")
    if pending is not None:
        await pending
    await RisingEdge(sink.clk)           # out of the read-only phase the sink failed in
    sink.ready.value = 0
