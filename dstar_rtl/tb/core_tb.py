"""Testbench of the core (``dstar_core``): the command, host-in and host-out streams and the
status port. The DiT-block workload the core tests run is :mod:`program.workloads`."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import Edge, Event, First, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time

from dstar_rtl.golden.layouts import unpack
from dstar_rtl.perf.timing import core_store_latency
from dstar_rtl.program import isa
from dstar_rtl.program.sampling import assert_equal

from .array_tb import config_from_env
from .streams import CLOCK_NS, StreamSink, StreamSource, reset, start_clock

__all__ = ["CoreTB", "assert_equal"]   # assert_equal: program.sampling's


def _axi_ram(dut, cfg, pause: float, rng):
    """cocotbext-axi's AXI RAM on the core's ``dram`` port (the port's whole address space,
    sparse), each channel paused at random with probability ``pause``."""
    from cocotbext.axi import AxiBus, AxiRam

    ram = AxiRam(AxiBus.from_prefix(dut, "dram_"), dut.clk, dut.rst,
                 size=isa.beat_bytes(cfg) << isa.DRAM_ADDR_BITS)
    if pause:
        def pauses():
            while True:
                yield rng.random() < pause
        for ch in (ram.write_if.aw_channel, ram.write_if.w_channel, ram.write_if.b_channel,
                   ram.read_if.ar_channel, ram.read_if.r_channel):
            ch.set_pause_generator(pauses())
    return ram


class CoreTB:
    """Owns the clock, reset, the ``cmd`` / ``host_in`` sources and the ``host_out`` sink of a
    ``dstar_core`` DUT.

    Parameters
    ----------
    dut : the cocotb handle of ``dstar_core``.
    gap : float
        Probability of an idle cycle before each ``host_in`` word.
    stall : float
        Probability of ``host_out`` not ready in a cycle.
    cmd_gap : float
        Probability of an idle cycle before each command on ``cmd`` (seeded by
        ``cocotb.RANDOM_SEED``); :attr:`cmd_idle` counts the idle cycles inserted.

    dram_pause : float
        With a DRAM port (``cfg.dram_width``): the probability that each channel of
        cocotbext-axi's ``AxiRam`` behind it (:attr:`ram`, made by the first :meth:`reset`,
        every byte zero until written) pauses in a cycle (random latency and back-pressure on
        AW, W, B, AR and R).
    dram_timing : sim.dram_timing.DramTiming, optional
        With a DRAM port: a deterministic DRAM of this latency and bandwidth
        (:class:`tb.dram_model.DramModel`) in place of the paused AXI RAM.

    The ``host_out`` sink takes every word until the core reports ``done`` (or an error), then
    watches a trailing window of twice :func:`perf.timing.core_store_latency`: a word in it fails
    (nothing may follow ``done``).
    """

    def __init__(self, dut, gap: float = 0.0, stall: float = 0.0, cmd_gap: float = 0.0,
                 dram_pause: float = 0.0, dram_timing=None):
        self.dut = dut
        self.cfg = config_from_env()
        self.core = isa.core_for(self.cfg)
        seed = cocotb.RANDOM_SEED
        dut.cmd__valid.value = 0
        self.host = StreamSource(dut, "host_in", dut.clk, gap, random.Random(seed + 1))
        self.out = StreamSink(dut, "host_out", dut.clk, stall, random.Random(seed + 2),
                              window=2 * core_store_latency(self.cfg))
        self.cmd_gap = cmd_gap
        self.cmd_rng = random.Random(seed + 3)
        self.cmd_idle = 0
        self.cycles = 0
        self.ram = None
        self._dram = (dram_pause, random.Random(seed + 4))
        self._dram_timing = dram_timing
        start_clock(dut)

    async def reset(self):
        """Reset the core; with a DRAM port, the AXI RAM (:attr:`ram`) starts behind it after
        the first reset (its models sample the port from then on)."""
        await reset(self.dut)
        if self.cfg.dram_width and self.ram is None:
            if self._dram_timing is not None:
                from .dram_model import DramModel

                self.ram = DramModel(self.dut, isa.beat_bytes(self.cfg), self._dram_timing)
            else:
                self.ram = _axi_ram(self.dut, self.cfg, *self._dram)

    def status(self) -> dict:
        return unpack(isa.status_layout(), self.dut.status.value.to_unsigned())

    async def send_commands(self, words):
        """Drive ``cmd``, with an idle cycle before a command at probability ``cmd_gap``; while
        the core does not take a command, sleep until ``ready`` changes instead of waking every
        cycle (commands can run for thousands of cycles). Call it right after a rising edge."""
        dut = self.dut
        for w in words:
            while self.cmd_gap and self.cmd_rng.random() < self.cmd_gap:
                dut.cmd__valid.value = 0
                await RisingEdge(dut.clk)
                self.cmd_idle += 1
            dut.cmd__payload.value = int(w)
            dut.cmd__valid.value = 1
            while True:
                await ReadOnly()
                ready = int(dut.cmd__ready.value) == 1
                if ready:
                    await RisingEdge(dut.clk)
                    break
                await Edge(dut.cmd__ready)
        dut.cmd__valid.value = 0

    def _cycle(self) -> int:
        return round(get_sim_time(unit="ns") / CLOCK_NS)

    async def wait_status(self, timeout: int):
        """Wait until the status shows ``done`` or an error (waking only when it changes, or
        when ``timeout`` cycles have passed: TimeoutError); returns in the read-only phase."""
        start = self._cycle()
        while True:
            await ReadOnly()
            st = self.status()
            if st["error"] or st["done"]:
                return st
            left = timeout - (self._cycle() - start)
            timer = Timer(max(left, 1) * CLOCK_NS, unit="ns")
            if left <= 0 or await First(Edge(self.dut.status), timer) is timer:
                raise TimeoutError(f"core not done after {timeout} cycles, status {st}")

    async def _program(self, cmds, host_words, timeout: int) -> tuple:
        """Send ``cmds`` and ``host_words`` with ``host_out`` watched from the first command:
        every word is collected until the status shows ``done`` or an error, then the trailing
        window follows. Returns ``(status, words, host words left unread)``, the sender of
        those stopped; :attr:`cycles` counts the clock cycles from the first command offered to
        that status."""
        words = [c if isinstance(c, int) else isa.encode(self.cfg, c) for c in cmds]
        host_words = [int(w) for w in host_words]
        self.out.words.clear()
        self.out.cycles.clear()
        self.out.cycle = 0
        end = Event()
        rx = cocotb.start_soon(self.out.receive(None, timeout, stop=end))
        sent = len(self.host.cycles)
        tx = cocotb.start_soon(self.host.send(host_words))
        start = self._cycle()
        await self.send_commands(words)
        st = await self.wait_status(timeout)
        self.cycles = self._cycle() - start
        end.set()
        await rx
        left = len(host_words) - (len(self.host.cycles) - sent)
        if not tx.done():
            tx.cancel()
            self.dut.host_in__valid.value = 0
        return st, list(self.out.words), left

    async def run(self, cmds, host_words=(), timeout: int = 2_000_000) -> list:
        """Send ``cmds`` (the last one END) and ``host_words``; return every host word the
        program stored before the core reported ``done``, however many (a SKIP may discard a
        STORE, so the caller checks the count against its own expectation). A word after
        ``done`` fails the sink's trailing window; an error status raises AssertionError.
        :attr:`cycles`: clock cycles from the first command offered to ``done``."""
        st, words, left = await self._program(cmds, host_words, timeout)
        if st["error"]:
            raise AssertionError(f"core error {isa.ERRORS[st['error']]!r} at command "
                                 f"{st['error_index']}")
        assert left == 0, f"done with {left} of {len(host_words)} host words not taken"
        return words

    async def run_until_error(self, cmds, host_words=(), timeout: int = 100_000) -> dict:
        """Send ``cmds``; once every command was taken, the status must show an error
        (AssertionError if it shows ``done`` instead). ``host_out`` is ready and watched from
        the first command to the end of the trailing window after the error: the words it
        carried are in ``self.out.words`` (a word in the window fails). Returns the status."""
        st, _, _ = await self._program(cmds, host_words, timeout)
        if not st["error"]:
            raise AssertionError(f"no error status: {st}")
        return st
