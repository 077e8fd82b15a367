"""The testbench of the two array units (MPU and INT8 baseline): clock, reset, weight loader,
input driver, drain monitor and a scoreboard against the golden model.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.triggers import RisingEdge

from golden.config import Config
from golden.layouts import drain_layout, pack, unpack, weight_load_layout

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
        self.sink = StreamSink(dut, "drain", dut.clk, stall, random.Random(cocotb.RANDOM_SEED + 1))
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
