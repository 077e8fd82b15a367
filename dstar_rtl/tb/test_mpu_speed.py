"""Simulation speed of the generated MPU: a long golden workload streamed without gaps or
back-pressure, timed in simulated cycles and wall-clock seconds, then checked beat for beat.

Knobs (environment): ``DSTAR_SPEED_TILES`` tiles (default 40), ``DSTAR_SPEED_CHANNELS`` input
channels per tile (default 64, at most ``max_reduction``), ``DSTAR_SPEED_JSON`` the file the
measurement is written to (JSON; nothing is written when unset).

The workload is built before the clock starts, and the scoreboard runs after the timed region,
so the figure is the simulator plus the cocotb drivers, not the golden model.
"""

import os
import time

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge
from cocotb.utils import get_sim_time

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.golden.vectors import mpu_workload

from .array_tb import ArrayTB, env_int


@cocotb.test()
async def stream_speed(dut):
    """Cycles per wall-clock second over reset, weight load and a long gap-free stream."""
    tb = ArrayTB(dut)
    cfg = tb.cfg
    tiles = env_int("DSTAR_SPEED_TILES", 40)
    channels = min(env_int("DSTAR_SPEED_CHANNELS", 64), cfg.max_reduction)
    t0 = time.perf_counter()
    wl = mpu_workload(cfg, np.random.default_rng(cocotb.RANDOM_SEED), tiles=tiles,
                      channels=channels)
    golden_s = time.perf_counter() - t0

    # The clock period, measured rather than assumed.
    await RisingEdge(dut.clk)
    e0 = get_sim_time(unit="ps")
    await RisingEdge(dut.clk)
    period_ps = get_sim_time(unit="ps") - e0

    wall0, sim0 = time.perf_counter(), get_sim_time(unit="ps")
    await tb.reset()
    await tb.load_weights(wl.W)
    run_wall0 = time.perf_counter()
    await tb.run(wl.words, len(wl.expected))
    wall1, sim1 = time.perf_counter(), get_sim_time(unit="ps")

    cycles = round((sim1 - sim0) / period_ps)
    result = dict(
        simulator=cocotb.SIM_NAME, simulator_version=cocotb.SIM_VERSION,
        cocotb=cocotb.__version__, config_hash=cfg.hash(), preset=cfg.name,
        tiles=tiles, channels=channels, input_beats=len(wl.words),
        drain_beats=len(wl.expected), cycles=cycles, wall_s=wall1 - wall0,
        cycles_per_s=cycles / (wall1 - wall0),
        run_cycles=tb.sink.cycle, run_wall_s=wall1 - run_wall0,
        run_cycles_per_s=tb.sink.cycle / (wall1 - run_wall0),
        golden_s=golden_s, seed=str(cocotb.RANDOM_SEED))
    dut._log.info("speed: %d cycles in %.2f s = %.0f cycles/s (%s)", cycles, result["wall_s"],
                  result["cycles_per_s"], cocotb.SIM_NAME)
    tb.check(wl.expected)
    result["checked"] = True
    path = os.environ.get("DSTAR_SPEED_JSON")
    if path:
        with open(path, "w") as fh:
            fh.write(data_json(result, indent=2))
