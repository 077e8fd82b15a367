"""Run the core (:class:`rtl.core.Core`) in Amaranth's simulator on a command stream and host
words, collecting the host output words, the status and the cycle count."""

from __future__ import annotations

import random
from dataclasses import dataclass

from amaranth.sim import Simulator

from dstar_rtl.perf.timing import core_store_latency
from dstar_rtl.program import isa
from dstar_rtl.program.dram import Dram

from .amaranth_axi import AxiRamModel
from .amaranth_reuse import reused_simulator
from .amaranth_streams import stream_put, trailing_window

__all__ = ["CoreRun", "run_core"]


@dataclass
class CoreRun:
    host_out: list
    error: str
    error_index: int
    done: bool
    cycles: int
    dram: Dram | None = None          # the DRAM behind the port (a core with one)
    axi: AxiRamModel | None = None    # its AXI model (the bursts it served)


def run_core(dut, cmds, host_in=(), *, expect_out=None, gap=0.0, stall=0.0, seed=0,
             limit=200_000, vcd=None, dram: Dram | None = None, latency=(1, 1),
             axi_stall=0.0, axi_errors=()) -> CoreRun:
    """Stream ``cmds`` (Cmd objects or command words) and ``host_in`` words into ``dut`` until
    every command is taken and the core reports ``done`` (the program ends with END) or an
    error, collecting every host word on the way (the host engine has sent them all before
    ``done``). Then ``host_out`` stays ready for twice :func:`perf.timing.core_store_latency`
    cycles and a word in them raises AssertionError (nothing may follow ``done`` or an error);
    with ``expect_out`` the number of host words must equal it (AssertionError).

    A core with a DRAM port (``cfg.dram_width``) gets an :class:`sim.amaranth_axi.AxiRamModel`
    behind it, serving ``dram`` (an empty :class:`program.dram.Dram` when None) with
    ``latency``, ``axi_stall`` and ``axi_errors`` (its ``latency``, ``stall`` and
    ``error_at``)."""
    cfg = dut.cfg
    words = [c if isinstance(c, int) else isa.encode(cfg, c) for c in cmds]
    rng = random.Random(seed)
    out: list = []
    state = {"cmds_done": False, "cycles": 0}

    async def feed_cmds(ctx):
        await stream_put(ctx, dut.cmd, words, limit=limit)
        state["cmds_done"] = True

    async def feed_host(ctx):
        await stream_put(ctx, dut.host_in, list(host_in), gap=gap, rng=rng, limit=limit)

    async def main(ctx):
        cycle = 0
        while True:
            ready = not (stall and rng.random() < stall)
            ctx.set(dut.host_out.ready, int(ready))
            _, _, valid, payload, done, err = await ctx.tick().sample(
                dut.host_out.valid, dut.host_out.payload, dut.status.done, dut.status.error)
            cycle += 1
            if valid and ready:
                out.append(int(payload))
            if state["cmds_done"] and (done or err):
                break
            if cycle > limit:
                raise TimeoutError(f"core not done after {cycle} cycles "
                                   f"({len(out)} host words out)")
        state["cycles"] = cycle
        state["error"] = ctx.get(dut.status.error)
        state["index"] = ctx.get(dut.status.error_index)
        state["done"] = bool(ctx.get(dut.status.done))
        await trailing_window(ctx, dut.host_out, 2 * core_store_latency(cfg),
                              f"{'done' if state['done'] else 'the error'} with {len(out)} "
                              f"host words out")

    jobs = dict(feed_cmds=feed_cmds, feed_host=feed_host, main=main)
    axi = None
    if cfg.dram_width:
        dram = dram if dram is not None else Dram(isa.beat_bytes(cfg) << isa.DRAM_ADDR_BITS)
        axi = AxiRamModel(dut.dram, dram, rng=rng, latency=latency, stall=axi_stall,
                          error_at=axi_errors)
        jobs.update(axi_read=axi.read_side, axi_write=axi.write_side)
    background = tuple(n for n in jobs if n != "main")
    if vcd:
        sim = Simulator(dut)
        sim.add_clock(1e-8)
        for name, job in jobs.items():
            sim.add_testbench(job, background=name in background)
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim, job = reused_simulator(dut, tuple(jobs), background=background)
        job.update(jobs)
        sim.run()
    if expect_out is not None and len(out) != expect_out:
        raise AssertionError(f"{len(out)} host words stored, expected {expect_out}")
    return CoreRun(out, isa.ERRORS[state["error"]], state["index"], state["done"],
                   state["cycles"], dram if axi else None, axi)
