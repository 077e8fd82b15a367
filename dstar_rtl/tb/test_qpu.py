"""cocotb tests of the generated QPU: group stream, reconstruction stream and counters equal the
golden schedule exactly, under random input gaps and output back-pressure."""

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from dstar_rtl.golden.vectors import qpu_workload

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


def _counting_workload(cfg, seed, thr):
    """The first workload of 3 .. 10 tiles (of :data:`KINDS`, at the default base) in which every
    counter counts, else the 10-tile one (a configuration may never count some, e.g. dropped
    columns without ``drop_zero_columns``)."""
    for tiles in range(3, 11):
        wl = qpu_workload(cfg, np.random.default_rng(seed), tiles=tiles, kinds=KINDS, thr=thr)
        if all(wl.counters.values()):
            break
    return wl


@cocotb.test()
async def counters_clear_then_count_from_zero(dut):
    """The counters read a stream's golden counts; a one-cycle ``counters_clear`` zeroes every
    one of them; a second stream (no reset between) then counts from zero to its own golden
    counts."""
    tb = QPUTB(dut, gap=0.1, stall=0.2)
    cfg = tb.cfg
    thr = (3, 15, 63)              # clipping thresholds, so that `saturated` counts too
    first = _counting_workload(cfg, cocotb.RANDOM_SEED + 11, thr)
    second = qpu_workload(cfg, np.random.default_rng(cocotb.RANDOM_SEED + 12), tiles=2,
                          kinds=("outlier", "mixed"))
    await _check(tb, first, cfg.base_log2, thr)
    dut._log.info(f"counters before the clear: {tb.counters()}")
    await tb.clear_counters()
    await ReadOnly()
    assert not any(tb.counters().values()), f"counters after counters_clear: {tb.counters()}"
    await RisingEdge(dut.clk)
    tb.out.words.clear()
    tb.recon.words.clear()
    await tb.configure(cfg.base_log2, cfg.thr)
    await tb.run(second.words, len(second.groups), len(second.recon))
    tb.check_groups(second.groups)
    tb.check_stream(tb.recon.words, second.recon, "reconstruction")
    assert tb.counters() == second.counters, \
        f"counters {tb.counters()} != golden {second.counters} of the second stream alone"


@cocotb.test()
async def reset_mid_stream(dut):
    """Reset with groups and reconstructions partly received, sub-channels partly sent (the
    QPU stalled behind a held group) and a non-default configuration (and ``config_error``) in
    force; a fresh stream at the default
    configuration is then exact (groups, reconstructions, counters from zero) and nothing of the
    old stream comes out (:meth:`QPUTB.reset_mid_stream`)."""
    tb = QPUTB(dut, gap=0.2, stall=0.3)
    cfg = tb.cfg
    rng = np.random.default_rng(cocotb.RANDOM_SEED + 21)
    old_thr = (3, 15, 63)
    old = qpu_workload(cfg, rng, tiles=3, channels=2 * cfg.sort_n, kinds=KINDS,
                       base_log2=cfg.B_max, thr=old_thr)
    fresh = qpu_workload(cfg, rng, tiles=3, kinds=KINDS)
    await tb.reset_mid_stream(old, (cfg.B_max, old_thr), fresh)
