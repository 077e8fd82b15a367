"""Testbench of the core (``dstar_core``): the command, host-in and host-out streams and the
status port. The DiT-block workload the core tests run is :mod:`golden.core_workloads`."""

from __future__ import annotations

import random

import cocotb
import numpy as np
from cocotb.triggers import Edge, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from golden import core_isa as isa
from golden.config import Config
from golden.layouts import unpack

from .array_tb import config_from_env
from .streams import StreamSink, StreamSource, reset, start_clock

__all__ = ["CoreTB", "out_words"]


def out_words(cfg: Config, cmds) -> int:
    """Host words the STOREs of ``cmds`` return."""
    n = 0
    for c in cmds:
        c = c if isinstance(c, isa.Cmd) else isa.decode(cfg, c)
        if c.op == "STORE":
            n += c.count * isa.host_words_per_row(cfg, isa.BUFFERS[c.buf])
    return n


class CoreTB:
    """Owns the clock, reset, the ``cmd`` / ``host_in`` sources and the ``host_out`` sink of a
    ``dstar_core`` DUT; ``gap`` and ``stall`` randomise the host side."""

    def __init__(self, dut, gap: float = 0.0, stall: float = 0.0):
        self.dut = dut
        self.cfg = config_from_env()
        self.core = isa.core_for(self.cfg)
        seed = cocotb.RANDOM_SEED
        dut.cmd__valid.value = 0
        self.host = StreamSource(dut, "host_in", dut.clk, gap, random.Random(seed + 1))
        self.out = StreamSink(dut, "host_out", dut.clk, stall, random.Random(seed + 2))
        self.cycles = 0
        start_clock(dut)

    async def reset(self):
        await reset(self.dut)

    def status(self) -> dict:
        return unpack(isa.status_layout(), self.dut.status.value.to_unsigned())

    async def send_commands(self, words):
        """Drive ``cmd``; while the core does not take a command, sleep until ``ready`` changes
        instead of waking every cycle (commands can run for thousands of cycles)."""
        dut = self.dut
        for w in words:
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
        return round(get_sim_time(unit="ns") / 10)

    async def wait_status(self, timeout: int):
        """Wait until the status shows ``done`` or an error (waking only when it changes)."""
        start = self._cycle()
        while True:
            await ReadOnly()
            st = self.status()
            if st["error"] or st["done"]:
                return st
            if self._cycle() - start > timeout:
                raise TimeoutError(f"core not done after {timeout} cycles")
            await Edge(self.dut.status)

    async def run(self, cmds, host_words=(), timeout: int = 2_000_000,
                  n_out: int | None = None) -> list:
        """Send ``cmds`` (the last one END) and ``host_words``; return the host words the
        program stores once the core reports ``done``. :attr:`cycles`: clock cycles from the
        first command offered to ``done``. Raises on an error status. ``n_out``: the words the
        program stores, when a SKIP may discard a STORE (default: every STORE's words)."""
        words = [c if isinstance(c, int) else isa.encode(self.cfg, c) for c in cmds]
        n = out_words(self.cfg, words) if n_out is None else n_out
        self.out.words.clear()
        rx = cocotb.start_soon(self.out.receive(n, timeout=timeout))
        tx = cocotb.start_soon(self.host.send(list(host_words)))
        start = self._cycle()
        await self.send_commands(words)
        await rx
        await tx
        st = await self.wait_status(timeout)
        self.cycles = self._cycle() - start
        await RisingEdge(self.dut.clk)
        if st["error"]:
            raise AssertionError(f"core error {isa.ERRORS[st['error']]!r} at command "
                                 f"{st['error_index']}")
        return list(self.out.words)

    async def run_until_error(self, cmds, host_words=(), timeout: int = 100_000) -> dict:
        """Send ``cmds``; wait until the status shows an error and every command was taken."""
        words = [c if isinstance(c, int) else isa.encode(self.cfg, c) for c in cmds]
        cocotb.start_soon(self.host.send(list(host_words)))
        await self.send_commands(words)
        for _ in range(timeout):
            await ReadOnly()
            st = self.status()
            await RisingEdge(self.dut.clk)
            if st["error"]:
                return st
        raise TimeoutError("no error status")


def assert_equal(got: dict, exp: dict, where: str):
    """Every key of ``exp`` equal in ``got`` (arrays exactly); the message names the first
    difference."""
    for k, e in exp.items():
        g = got[k]
        if isinstance(e, dict):
            assert_equal(g, e, f"{where}{k}.")
            continue
        e, g = np.asarray(e), np.asarray(g)
        if e.shape != g.shape or not np.array_equal(e, g):
            idx = np.argwhere(e != g)[0] if e.shape == g.shape else None
            raise AssertionError(f"{where}{k}: shapes {g.shape} / {e.shape}, first difference "
                                 f"at {None if idx is None else tuple(idx)}: got "
                                 f"{None if idx is None else g[tuple(idx)]}, expected "
                                 f"{None if idx is None else e[tuple(idx)]}")
