"""Run the MPU or the baseline array in Amaranth's simulator on packed stream beats.

Used by the fast unit tests and by the cycle measurements: it loads a weight block, streams
input beats with optional random valid gaps, drains with optional random back-pressure, and
returns the drained beats with the cycle each transferred on; :func:`run_array_reset` resets the
unit in the middle of a stream and records its drain from the reset on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

from dstar_rtl.golden.layouts import pack, unpack, weight_load_layout
from dstar_rtl.perf.timing import array_latency

from .amaranth_reuse import reused_simulator
from .amaranth_streams import stream_get, stream_put

__all__ = ["ArrayRun", "run_array", "ResetRun", "run_array_reset"]


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
    deasserting the drain's ready. After the expected drain beats (``rows`` per tile) the drain
    stays ready for twice :func:`perf.timing.array_latency` cycles and a further beat raises
    AssertionError. Returns an :class:`ArrayRun`.
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
                         cycles=out.beat_cycles, limit=limit, window=2 * array_latency(cfg))

    if vcd:
        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(load_and_feed)
        sim.add_testbench(drain)
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim, job = reused_simulator(dut, ("load_and_feed", "drain"))
        job.update(load_and_feed=load_and_feed, drain=drain)
        sim.run()
    out.start_cycle = out.in_cycles[0] if out.in_cycles else -1
    return out


@dataclass
class ResetRun:
    old_beats: list      # drain beats of the old stream taken before the reset
    old_sent: int        # input beats of the old stream taken before the reset
    beats: list          # drain beats taken after the reset (the fresh stream's), in order
    watched: list        # (payload, taken) of every cycle with drain valid, from the reset on


def run_array_reset(dut, cfg, old, fresh, *, taken=1, gap=0.0, stall=0.0, seed=0,
                    quiet=None, limit=20_000) -> ResetRun:
    """Reset ``dut`` (an :class:`rtl.array.ArrayUnit`) in the middle of a stream, then run a
    fresh one, in Amaranth's simulator.

    The unit sits in a module that owns the ``sync`` domain, so the reset is that domain's
    ``rst`` (the generated Verilog's ``rst``). The old stream's weights load, its beats stream
    in back to back and its drain is ready until ``taken`` beats are taken, then held; when
    the input has not moved for ``2 * array_latency`` cycles, the input goes invalid and the
    drain not ready, and ``rst`` is high for two cycles. Then ``fresh``'s weights load and its
    beats stream in until its drain beats are taken and ``quiet`` more cycles have passed.
    Every cycle with drain ``valid`` high is recorded from the first reset edge on.

    Parameters
    ----------
    dut : rtl.array.ArrayUnit
    cfg : golden.config.Config
    old, fresh : golden.vectors.Workload
        The stream the reset interrupts and the one after it.
    taken : int
        Drain beats of ``old`` taken before the drain is held.
    gap, stall : float
        Probabilities of an idle input cycle and of a drain cycle not ready (fresh stream).
    seed : int
        Seed of those draws.
    quiet : int, optional
        Cycles watched after the fresh stream's last drain beat (default ``2 * array_latency +
        2 * rows``).
    limit : int
        Cycles of each phase before a TimeoutError.

    Returns
    -------
    ResetRun
    """
    rng = random.Random(seed)
    wl = weight_load_layout(cfg)
    lat = array_latency(cfg)
    quiet = 2 * lat + 2 * cfg.rows if quiet is None else quiet
    n_fresh = len(fresh.expected)
    out = ResetRun([], 0, [], [])
    top = Module()
    top.domains.sync = cd = ClockDomain("sync")
    top.submodules.dut = dut

    async def cycle(ctx, in_valid, word, ready, watch):
        """One cycle: drive the input and the drain's ready, return (input taken, drain beat
        taken or None) as decided at the clock edge."""
        ctx.set(dut.groups.valid, in_valid)
        if in_valid:
            ctx.set(dut.groups.payload.as_value(), word)
        ctx.set(dut.drain.ready, ready)
        _, _, in_ready, valid, payload = await ctx.tick().sample(
            dut.groups.ready, dut.drain.valid, dut.drain.payload.as_value())
        if watch and valid:
            out.watched.append((int(payload), bool(ready)))
        return in_valid and in_ready, (int(payload) if valid and ready else None)

    async def load(ctx, W, watch):
        for c, row in enumerate(W):
            row = list(row) + [0] * (cfg.cols - len(row))
            ctx.set(dut.wload.payload.as_value(), pack(wl, dict(w=row, channel=c)))
            ctx.set(dut.wload.valid, 1)
            await cycle(ctx, 0, 0, 0, watch)
        ctx.set(dut.wload.valid, 0)

    async def bench(ctx):
        # The old stream, until the drain is held and the input stalls.
        await load(ctx, old.W, False)
        still = 0
        for _ in range(limit):
            more = out.old_sent < len(old.words)
            word = old.words[out.old_sent] if more else 0
            sent, beat = await cycle(ctx, int(more), word, int(len(out.old_beats) < taken),
                                     False)
            out.old_sent += int(sent)
            if beat is not None:
                out.old_beats.append(beat)
            still = 0 if sent else still + 1
            if len(out.old_beats) == taken and still >= 2 * lat:
                break
        else:
            raise TimeoutError(f"the old stream did not stall in {limit} cycles")
        # Drivers stopped, reset for two cycles, watched from the first reset edge on.
        ctx.set(cd.rst, 1)
        await cycle(ctx, 0, 0, 0, False)
        await cycle(ctx, 0, 0, 0, True)
        ctx.set(cd.rst, 0)
        # The fresh stream.
        await load(ctx, fresh.W, True)
        k, left = 0, None
        for _ in range(limit):
            valid = int(k < len(fresh.words) and not (gap and rng.random() < gap))
            ready = int(not (stall and rng.random() < stall))
            sent, beat = await cycle(ctx, valid, fresh.words[k] if valid else 0, ready, True)
            k += int(sent)
            if beat is not None:
                out.beats.append(beat)
            if left is None and len(out.beats) >= n_fresh:
                left = quiet
            elif left is not None:
                left -= 1
                if left == 0:
                    return
        raise TimeoutError(f"{len(out.beats)}/{n_fresh} fresh drain beats in {limit} cycles")

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out
