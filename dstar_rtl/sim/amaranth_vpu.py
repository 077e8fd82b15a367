"""Run the VPU in Amaranth's simulator on golden rows (:mod:`golden.vpu_stream`)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from dstar_rtl.golden.vpu_stream import cmd_word, in_words, out_beats
from dstar_rtl.perf.timing import vpu_latency

from .amaranth_reuse import idle, reused_simulator
from .amaranth_streams import stream_get, stream_put

__all__ = ["VPURun", "run_vpu"]


@dataclass
class VPURun:
    """Output words per row, and the cycle (from the start of the simulation) of every command,
    input beat and output beat transferred."""

    outputs: list
    cmd_cycles: list = field(default_factory=list)
    in_cycles: list = field(default_factory=list)
    out_cycles: list = field(default_factory=list)
    error: int = 0


def run_vpu(dut, rows, *, gap=0.0, stall=0.0, seed=0, limit=200_000, raw_cmds=(),
            cmds_ahead=False) -> VPURun:
    """Send every row's command and beats (after the words of ``raw_cmds``, sent on ``cmd`` alone,
    e.g. illegal commands), collect the output beats and split them by row. After the last
    expected beat the output stays ready for twice :func:`perf.timing.vpu_latency` cycles and a
    further beat raises AssertionError. By default a row's command follows the previous row's
    last beat; ``cmds_ahead``: the commands are sent on their own, as fast as they are taken
    (as the core's vector engine queues them), and the beats after them."""
    cfg = dut.cfg
    rng = random.Random(seed)
    words_out: list = []
    run = VPURun([])

    async def feed(ctx):
        t = 0                                   # cycles passed since the start

        async def put(port, words, stamps=None, **kw):
            nonlocal t
            c = []
            await stream_put(ctx, port, words, cycles=c, limit=limit, **kw)
            if stamps is not None:
                stamps += [t + k for k in c]
            t += c[-1] + 1 if c else 0          # stream_put returns after its last transfer

        if cmds_ahead:
            await put(dut.i, [w for row in rows for w in in_words(cfg, row)], run.in_cycles,
                      gap=gap, rng=rng)
            return
        await put(dut.cmd, list(raw_cmds))
        for row in rows:
            await put(dut.cmd, [cmd_word(cfg, row)], run.cmd_cycles, gap=gap, rng=rng)
            await put(dut.i, in_words(cfg, row), run.in_cycles, gap=gap, rng=rng)

    async def feed_cmds(ctx):
        c = []
        await stream_put(ctx, dut.cmd, list(raw_cmds) + [cmd_word(cfg, row) for row in rows],
                         cycles=c, limit=limit)
        run.cmd_cycles += c[len(raw_cmds):]

    async def sink(ctx):
        total = sum(out_beats(cfg, r) for r in rows)
        await stream_get(ctx, dut.o, total, words_out, stall=stall, rng=random.Random(seed + 1),
                         cycles=run.out_cycles, limit=limit, window=2 * vpu_latency(cfg))
        run.error = ctx.get(dut.error)

    sim, job = reused_simulator(dut, ("feed", "feed_cmds", "sink"))
    job.update(feed=feed, feed_cmds=feed_cmds if cmds_ahead else idle, sink=sink)
    sim.run()
    k = 0
    for row in rows:
        nb = out_beats(cfg, row)
        run.outputs.append(words_out[k:k + nb])
        k += nb
    return run
