"""The testbench of the two array units (MPU and INT8 baseline): clock, reset, weight loader,
input driver, drain monitor and a scoreboard against the golden model.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.triggers import RisingEdge

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.layouts import drain_layout, pack, unpack, weight_load_layout
from dstar_rtl.perf.timing import array_latency

from .midstream import OutputWatch, hold_until_stalled, quiet, reset_midstream, take
from .streams import StreamSink, StreamSource, reset, start_clock

__all__ = ["config_from_env", "ArrayTB", "env_int"]


def config_from_env() -> Config:
    d = json.loads(os.environ["DSTAR_CONFIG"])
    d["thr"] = tuple(d["thr"])
    return Config(**d)


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


class ArrayTB:
    """Owns the DUT's clock and reset, the ``groups`` driver, the ``drain`` monitor and the
    scoreboard. ``baseline`` selects the baseline's drain layout."""

    def __init__(self, dut, baseline: bool = False, gap: float = 0.0, stall: float = 0.0):
        self.dut = dut
        self.cfg = config_from_env()
        self.baseline = baseline
        self.rng = random.Random(cocotb.RANDOM_SEED)
        self.src = StreamSource(dut, "groups", dut.clk, gap, self.rng)
        self.sink = StreamSink(dut, "drain", dut.clk, stall, random.Random(cocotb.RANDOM_SEED + 1),
                               window=2 * array_latency(self.cfg))
        dut.wload__valid.value = 0
        start_clock(dut)

    async def reset(self):
        await reset(self.dut)

    async def load_weights(self, W):
        lay = weight_load_layout(self.cfg)
        for c, row in enumerate(W):
            row = list(row) + [0] * (self.cfg.cols - len(row))
            self.dut.wload__payload.value = pack(lay, dict(w=row, channel=c))
            self.dut.wload__valid.value = 1
            await RisingEdge(self.dut.clk)
        self.dut.wload__valid.value = 0

    async def run(self, words, n_beats: int):
        """Stream ``words`` in and collect ``n_beats`` drain beats (concurrently)."""
        self.src.cycle = self.sink.cycle = 0
        self.src.cycles.clear()
        self.sink.words.clear()
        self.sink.cycles.clear()
        timeout = 40 * (len(words) + n_beats) + 200
        rx = cocotb.start_soon(self.sink.receive(n_beats, timeout))
        await self.src.send(words)
        await rx

    async def reset_mid_stream(self, old, fresh, taken: int | None = None):
        """Reset in the middle of ``old``'s traffic, then run ``fresh`` and check it.

        ``old`` streams in back to back until ``taken`` drain beats of its first tile are
        received and the drain is then held: its first tile is in the drain, the second in the
        array (every beat but its last, which waits for the drain), the rest not sent; the test
        asserts this state and the beats received. Then the drivers stop, ``rst`` is held for
        two cycles, ``fresh`` loads its weights and streams in with the testbench's gaps and
        back-pressure, and every drain beat is checked against golden; a watch on the drain from
        the reset on asserts that its first valid beat is ``fresh``'s first and that no beat of
        ``old`` comes out, before, among or after ``fresh``'s beats.

        Parameters
        ----------
        old : golden.vectors.Workload
            At least three tiles, the second of two groups or more.
        fresh : golden.vectors.Workload
            The stream after the reset.
        taken : int, optional
            Drain beats of the old stream received before the reset, ``0 < taken < rows``
            (default ``rows // 2``).
        """
        cfg, dut = self.cfg, self.dut
        G = old.groups_per_tile
        taken = cfg.rows // 2 if taken is None else taken
        assert len(G) >= 3 and G[1] >= 2 and 0 < taken < cfg.rows, (G, taken)
        await self.reset()
        await self.load_weights(old.W)
        self.src.cycles.clear()
        tx = cocotb.start_soon(self.src.send(old.words))
        got = await take(dut, "drain", taken)
        sent = await hold_until_stalled(dut, self.src, 32 + cfg.rows + cfg.cols)
        assert got == old.expected[:taken], "the old stream's first drain beats differ"
        assert sent == G[0] + G[1] - 1, (
            f"{sent} beats of the old stream sent, expected {G[0] + G[1] - 1}: its second tile "
            f"should be in the array and its last beat held by the unfinished drain")
        dut._log.info(f"reset with {sent} of {len(old.words)} beats sent, {taken} of "
                      f"{len(old.expected)} drain beats received")
        watch = OutputWatch(dut, "drain")
        await reset_midstream(dut, [tx], inputs=["groups", "wload"], outputs=["drain"],
                              watches=[watch])
        await self.load_weights(fresh.W)
        await self.run(fresh.words, len(fresh.expected))
        self.check(fresh.expected)
        await quiet(dut, 2 * array_latency(cfg) + 2 * cfg.rows)
        watch.check(fresh.expected, "drain")

    def check(self, expected):
        """Scoreboard: every drain beat equals the golden beat, field by field on mismatch."""
        got = self.sink.words
        assert len(got) == len(expected), f"got {len(got)} drain beats, expected {len(expected)}"
        lay = drain_layout(self.cfg, self.baseline)
        for n, (g, e) in enumerate(zip(got, expected)):
            if g != e:
                gu, eu = unpack(lay, g), unpack(lay, e)
                raise AssertionError(f"drain beat {n} (tile {n // self.cfg.rows}, row "
                                     f"{eu['row']}): got {gu}, expected {eu}")
