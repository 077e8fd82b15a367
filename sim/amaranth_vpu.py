"""Run the VPU in Amaranth's simulator on golden rows (:mod:`golden.vpu_stream`)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from amaranth.sim import Simulator

from golden.vpu_stream import cmd_word, in_words, out_beats

from .amaranth_streams import stream_get, stream_put

__all__ = ["VPURun", "run_vpu"]


@dataclass
class VPURun:
    outputs: list                                  # output words per row
    cmd_cycles: list = field(default_factory=list)
    out_cycles: list = field(default_factory=list)
    error: int = 0


def run_vpu(dut, rows, *, gap=0.0, stall=0.0, seed=0, limit=200_000, raw_cmds=()) -> VPURun:
    """Send every row's command and beats (after the words of ``raw_cmds``, sent on ``cmd`` alone,
    e.g. illegal commands), collect the output beats and split them by row."""
    cfg = dut.cfg
    rng = random.Random(seed)
    words_out: list = []
    run = VPURun([])

    async def feed(ctx):
        await stream_put(ctx, dut.cmd, list(raw_cmds), limit=limit)
        for row in rows:
            await stream_put(ctx, dut.cmd, [cmd_word(cfg, row)], gap=gap, rng=rng,
                             cycles=run.cmd_cycles, limit=limit)
            await stream_put(ctx, dut.i, in_words(cfg, row), gap=gap, rng=rng, limit=limit)

    async def sink(ctx):
        total = sum(out_beats(cfg, r) for r in rows)
        await stream_get(ctx, dut.o, total, words_out, stall=stall, rng=random.Random(seed + 1),
                         cycles=run.out_cycles, limit=limit)
        await ctx.tick().repeat(2)
        run.error = ctx.get(dut.error)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed)
    sim.add_testbench(sink)
    sim.run()
    k = 0
    for row in rows:
        nb = out_beats(cfg, row)
        run.outputs.append(words_out[k:k + nb])
        k += nb
    return run
