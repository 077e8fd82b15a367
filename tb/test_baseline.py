"""cocotb tests of the generated INT8 baseline array against a NumPy product."""

import numpy as np
import cocotb

from golden.vectors import baseline_workload

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
