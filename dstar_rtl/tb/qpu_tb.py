"""Testbench of the QPU (and of the QPU → MPU chain): configuration writer, sub-channel driver,
group / reconstruction / drain monitors, counter read-back and scoreboards against golden."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from dstar_rtl.golden.layouts import (
    counters_layout,
    group_layout,
    pack,
    qpu_config_layout,
    unpack,
    weight_load_layout,
)
from dstar_rtl.perf.timing import array_latency, qpu_latency

from .array_tb import config_from_env
from .midstream import OutputWatch, hold_until_stalled, quiet, reset_midstream, take
from .streams import StreamSink, StreamSource, reset, start_clock

__all__ = ["QPUTB"]


class QPUTB:
    """Owns the clock, reset and streams of a ``dstar_qpu`` or ``dstar_qpu_mpu`` DUT."""

    def __init__(self, dut, gap: float = 0.0, stall: float = 0.0, chain: bool = False):
        self.dut = dut
        self.cfg = config_from_env()
        self.chain = chain
        seed = cocotb.RANDOM_SEED
        self.src = StreamSource(dut, "subch", dut.clk, gap, random.Random(seed))
        out = "drain" if chain else "groups"
        lat = qpu_latency(self.cfg) + (array_latency(self.cfg) if chain else 0)
        self.out = StreamSink(dut, out, dut.clk, stall, random.Random(seed + 1), window=2 * lat)
        self.recon = StreamSink(dut, "recon", dut.clk, stall, random.Random(seed + 2),
                                window=2 * qpu_latency(self.cfg))
        dut.config__valid.value = 0
        dut.counters_clear.value = 0
        if chain:
            dut.wload__valid.value = 0
        start_clock(dut)

    async def reset(self):
        await reset(self.dut)

    async def configure(self, base_log2, thr):
        self.dut.config__payload.value = pack(qpu_config_layout(self.cfg),
                                              dict(base_log2=base_log2, thr=list(thr)))
        self.dut.config__valid.value = 1
        await RisingEdge(self.dut.clk)
        self.dut.config__valid.value = 0

    async def load_weights(self, W):
        lay = weight_load_layout(self.cfg)
        for c, row in enumerate(W):
            self.dut.wload__payload.value = pack(lay, dict(w=list(row), channel=c))
            self.dut.wload__valid.value = 1
            await RisingEdge(self.dut.clk)
        self.dut.wload__valid.value = 0

    async def run(self, words, n_out: int, n_recon: int):
        timeout = 60 * (len(words) + n_out) + 500
        rx = cocotb.start_soon(self.out.receive(n_out, timeout))
        rr = cocotb.start_soon(self.recon.receive(n_recon, timeout))
        await self.src.send(words)
        await rx
        await rr
        for _ in range(4):
            await RisingEdge(self.dut.clk)

    async def clear_counters(self):
        """Pulse ``counters_clear`` for one cycle."""
        self.dut.counters_clear.value = 1
        await RisingEdge(self.dut.clk)
        self.dut.counters_clear.value = 0

    async def reset_mid_stream(self, old, old_config, fresh, groups_taken: int = 3):
        """Reset in the middle of ``old``'s traffic, then run ``fresh`` and check it (QPU only).

        ``old`` runs under ``old_config``, after which an illegal word sets ``config_error``;
        its sub-channels stream in, the reconstructions are taken as they come and the groups
        until ``groups_taken`` are, then held, until the QPU stops taking input (back-pressure
        from the held group); the test asserts that the input was partly sent, both outputs
        partly received, and the beats received. Then the drivers stop and ``rst`` is held for
        two cycles: the counters, ``config_error`` and ``overflow`` must read zero. ``fresh``
        then streams in with the testbench's gaps and back-pressure: its groups,
        reconstructions and counters equal golden, and watches on both outputs from the reset
        on assert that the first valid beat of each is ``fresh``'s first and that no beat of
        ``old`` comes out.

        Parameters
        ----------
        old : golden.vectors.QPUWorkload
            The stream interrupted by the reset, built for ``old_config``.
        old_config : (int, tuple of int)
            ``(base_log2, thr)`` written before ``old``.
        fresh : golden.vectors.QPUWorkload
            Built for the elaboration-time configuration, which the reset must restore (it is
            not written again).
        groups_taken : int
            Groups of ``old`` received before the output is held.
        """
        cfg, dut = self.cfg, self.dut
        assert not self.chain
        await self.reset()
        await self.configure(*old_config)
        await self.configure(old_config[0], (7, 7, 31))   # refused (not increasing): config_error
        self.src.cycles.clear()
        got_groups, got_recon = [], []
        tx = cocotb.start_soon(self.src.send(old.words))
        tg = cocotb.start_soon(take(dut, "groups", groups_taken, into=got_groups))
        tr = cocotb.start_soon(take(dut, "recon", len(old.recon), into=got_recon))
        await tg
        sent = await hold_until_stalled(dut, self.src, 32)
        self.check_stream(got_groups, old.groups[:groups_taken], "old group", group_layout(cfg))
        self.check_stream(got_recon, old.recon[:len(got_recon)], "old reconstruction")
        assert groups_taken < len(old.groups) and len(got_recon) < len(old.recon)
        assert 0 < sent < len(old.words), f"{sent} of {len(old.words)} old sub-channels sent"
        dut._log.info(f"reset with {sent} of {len(old.words)} sub-channels sent, {groups_taken} "
                      f"of {len(old.groups)} groups and {len(got_recon)} reconstructions "
                      f"received")
        await ReadOnly()
        assert int(dut.config_error.value) == 1 and any(self.counters().values())
        await RisingEdge(dut.clk)
        watches = [OutputWatch(dut, "groups"), OutputWatch(dut, "recon")]
        await reset_midstream(dut, [tx, tr], inputs=["subch", "config"],
                              outputs=["groups", "recon"], watches=watches)
        await ReadOnly()
        assert not any(self.counters().values()), f"counters after reset: {self.counters()}"
        assert int(dut.config_error.value) == 0 and int(dut.overflow.value) == 0
        await RisingEdge(dut.clk)
        self.out.words.clear()
        self.recon.words.clear()
        await self.run(fresh.words, len(fresh.groups), len(fresh.recon))
        self.check_groups(fresh.groups)
        self.check_stream(self.recon.words, fresh.recon, "reconstruction")
        assert self.counters() == fresh.counters, \
            f"counters {self.counters()} != golden {fresh.counters}"
        assert int(dut.config_error.value) == 0
        await quiet(dut, 100)
        watches[0].check(fresh.groups, "groups")
        watches[1].check(fresh.recon, "recon")

    def counters(self) -> dict:
        return unpack(counters_layout(), self.dut.counters.value.to_unsigned())

    def check_stream(self, got, expected, what, layout=None):
        assert len(got) == len(expected), f"{what}: got {len(got)} beats, expected {len(expected)}"
        for n, (g, e) in enumerate(zip(got, expected)):
            if g != e:
                detail = ""
                if layout is not None:
                    detail = f": got {unpack(layout, g)}, expected {unpack(layout, e)}"
                raise AssertionError(f"{what} beat {n} differs{detail}")

    def check_groups(self, expected):
        self.check_stream(self.out.words, expected, "group", group_layout(self.cfg))
