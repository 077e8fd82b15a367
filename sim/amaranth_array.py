"""Run the MPU or the baseline array in Amaranth's simulator on packed stream beats.

Used by the fast unit tests and by the cycle measurements: it loads a weight block, streams
input beats with optional random valid gaps, drains with optional random back-pressure, and
returns the drained beats with the cycle each transferred on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from amaranth.sim import Simulator

from golden.layouts import pack, unpack, weight_load_layout

from .amaranth_streams import stream_get, stream_put

__all__ = ["ArrayRun", "run_array"]


@dataclass
class ArrayRun:
    beats: list          # packed drain words, in order
    beat_cycles: list    # cycle of each drain transfer
    in_cycles: list      # cycle of each input transfer
    start_cycle: int     # cycle of the first input transfer


def run_array(dut, cfg, W, words, *, gap=0.0, stall=0.0, seed=0, max_cycles=None,
              vcd=None) -> ArrayRun:
    """Simulate ``dut`` (an :class:`rtl.array.ArrayUnit`).

    ``W``: (channels, <= cols) integer weights loaded first; ``words``: packed input beats;
    ``gap``: probability of holding the input invalid for a cycle; ``stall``: probability of
    deasserting the drain's ready. Returns an :class:`ArrayRun`.
    """
    rng = random.Random(seed)
    expected_beats = sum(unpack(dut.in_fields, w)["last"] for w in words) * cfg.rows
    limit = max_cycles or (len(words) * 4 + 64) * (1 + int(10 * (gap + stall))) + 8 * len(W)
    out = ArrayRun([], [], [], -1)
    wl = weight_load_layout(cfg)

    async def load_and_feed(ctx):
        for c, row in enumerate(W):
            row = list(row) + [0] * (cfg.cols - len(row))
            ctx.set(dut.wload.payload.as_value(), pack(wl, dict(w=row, channel=c)))
            ctx.set(dut.wload.valid, 1)
            await ctx.tick()
        ctx.set(dut.wload.valid, 0)
        await stream_put(ctx, dut.groups, words, gap=gap, rng=rng, cycles=out.in_cycles,
                         limit=limit)

    async def drain(ctx):
        await ctx.tick().repeat(len(W))
        await stream_get(ctx, dut.drain, expected_beats, out.beats, stall=stall, rng=rng,
                         cycles=out.beat_cycles, limit=limit)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(load_and_feed)
    sim.add_testbench(drain)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    out.start_cycle = out.in_cycles[0] if out.in_cycles else -1
    return out
