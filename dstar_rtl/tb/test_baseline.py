"""cocotb tests of the generated INT8 baseline array against a NumPy product."""

import cocotb
import numpy as np

from dstar_rtl.golden.vectors import baseline_workload

from .array_tb import ArrayTB, env_int


@cocotb.test()
async def random_tiles(dut):
    """Random INT8 tiles (extremes included), random input gaps and drain back-pressure."""
    tb = ArrayTB(dut, baseline=True, gap=0.2, stall=0.3)
    wl = baseline_workload(tb.cfg, np.random.default_rng(cocotb.RANDOM_SEED),
                           tiles=env_int("DSTAR_TILES", 6))
    await tb.reset()
    await tb.load_weights(wl.W)
    await tb.run(wl.words, len(wl.expected))
    tb.check(wl.expected)


@cocotb.test()
async def reset_mid_stream(dut):
    """Reset with a tile in the drain (half of it received) and the next in the array, then a
    fresh stream with new weights: every drain beat equals the NumPy product and none of the old
    stream comes out after the reset (:meth:`ArrayTB.reset_mid_stream`)."""
    tb = ArrayTB(dut, baseline=True, gap=0.2, stall=0.3)
    rng = np.random.default_rng(cocotb.RANDOM_SEED + 1)
    C = min(tb.cfg.rows + tb.cfg.cols + 2, tb.cfg.max_reduction)
    old = baseline_workload(tb.cfg, rng, tiles=3, channels=C)
    fresh = baseline_workload(tb.cfg, rng, tiles=3)
    await tb.reset_mid_stream(old, fresh)
