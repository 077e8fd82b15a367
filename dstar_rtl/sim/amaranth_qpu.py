"""Run the QPU in Amaranth's simulator on a golden workload
(:func:`golden.vectors.qpu_workload`)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from dstar_rtl.golden.schedule import COUNTER_NAMES
from dstar_rtl.perf.timing import qpu_latency

from .amaranth_reuse import reused_simulator
from .amaranth_streams import stream_get, stream_put

__all__ = ["QPURun", "run_qpu"]


@dataclass
class QPURun:
    groups: list
    recon: list
    counters: dict
    in_cycles: list
    group_cycles: list
    config_error: int


def run_qpu(dut, wl, *, base_log2=None, thr=None, gap=0.0, stall=0.0, seed=0,
            config_words=None, counters_init=None, limit=200_000) -> QPURun:
    """Configure (``base_log2``/``thr``, or raw ``config_words``), stream the workload's
    sub-channels, collect groups and reconstructions, then read the counters. After the
    expected beats each output stays ready for twice :func:`perf.timing.qpu_latency` cycles and
    a further beat raises AssertionError. ``counters_init`` (dict, name → value) is deposited
    into those counter registers before the first sub-channel, as if they had counted that far
    (the simulator overwrites a register's value; the RTL then counts on from it)."""
    rng = random.Random(seed)
    window = 2 * qpu_latency(dut.cfg)
    out = QPURun([], [], {}, [], [], 0)

    async def feed(ctx):
        words = list(config_words or [])
        if base_log2 is not None or thr is not None:
            cfg = dut.cfg
            b = cfg.base_log2 if base_log2 is None else base_log2
            t = cfg.thr if thr is None else thr
            ctx.set(dut.config.payload.base_log2, b)
            for i, v in enumerate(t):
                ctx.set(dut.config.payload.thr[i], v)
            ctx.set(dut.config.valid, 1)
            await ctx.tick()
            ctx.set(dut.config.valid, 0)
        for w in words:
            ctx.set(dut.config.payload.as_value(), w)
            ctx.set(dut.config.valid, 1)
            await ctx.tick()
            ctx.set(dut.config.valid, 0)
        for name, v in (counters_init or {}).items():
            ctx.set(getattr(dut.counters, name), v)
        await stream_put(ctx, dut.subch, wl.words, gap=gap, rng=rng, cycles=out.in_cycles,
                         limit=limit)

    async def groups(ctx):
        await stream_get(ctx, dut.groups, len(wl.groups), out.groups, stall=stall,
                         rng=random.Random(seed + 1), cycles=out.group_cycles, limit=limit,
                         window=window)

    async def recon(ctx):
        await stream_get(ctx, dut.recon, len(wl.recon), out.recon, stall=stall,
                         rng=random.Random(seed + 2), limit=limit, window=window)

    async def counters(ctx):
        while len(out.groups) < len(wl.groups) or len(out.recon) < len(wl.recon):
            await ctx.tick()
        await ctx.tick().repeat(4)  # let the last increments land
        for name in COUNTER_NAMES:
            out.counters[name] = ctx.get(getattr(dut.counters, name))
        out.config_error = ctx.get(dut.config_error)

    sim, job = reused_simulator(dut, ("feed", "groups", "recon", "counters"))
    job.update(feed=feed, groups=groups, recon=recon, counters=counters)
    sim.run()
    return out
