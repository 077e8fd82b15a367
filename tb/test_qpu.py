"""cocotb tests of the generated QPU: group stream, reconstruction stream and counters equal the
golden schedule exactly, under random input gaps and output back-pressure."""

import numpy as np
import cocotb

from golden.vectors import qpu_workload

from .array_tb import env_int
from .qpu_tb import QPUTB

KINDS = ("mixed", "zero", "max", "outlier", "sweep")


async def _check(tb, wl, base_log2, thr):
    await tb.reset()
    await tb.configure(base_log2, thr)
    await tb.run(wl.words, len(wl.groups), len(wl.recon))
    tb.check_groups(wl.groups)
    tb.check_stream(tb.recon.words, wl.recon, "reconstruction")
    assert tb.counters() == wl.counters, f"counters {tb.counters()} != golden {wl.counters}"


@cocotb.test()
async def random_and_adversarial_tiles(dut):
    """Mixed, all-zero, extreme, one-outlier and every-exponent tiles at the default base."""
    tb = QPUTB(dut, gap=0.2, stall=0.3)
    cfg = tb.cfg
    wl = qpu_workload(cfg, np.random.default_rng(cocotb.RANDOM_SEED),
                      tiles=env_int("DSTAR_TILES", 6), kinds=KINDS)
    await _check(tb, wl, cfg.base_log2, cfg.thr)


@cocotb.test()
async def finest_base_and_clipping_thresholds(dut):
    """Runtime configuration: B = B_max (every e up to e_max) and thresholds that clip."""
    tb = QPUTB(dut, gap=0.1, stall=0.5)
    cfg = tb.cfg
    thr = (3, 15, 63)
    wl = qpu_workload(cfg, np.random.default_rng(cocotb.RANDOM_SEED + 7), tiles=4, kinds=KINDS,
                      base_log2=cfg.B_max, thr=thr)
    await _check(tb, wl, cfg.B_max, thr)
