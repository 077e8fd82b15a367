"""cocotb tests of the generated MPU against the golden schedule and executor.

Knobs (environment): ``DSTAR_TILES`` tiles per random test (default 6).
"""

import cocotb
import numpy as np

from dstar_rtl.golden.schedule import execute, schedule_matrix
from dstar_rtl.golden.vectors import (
    Workload,
    drain_words,
    exponent_sweep,
    mpu_workload,
    random_group_stream,
    random_weights,
)
from dstar_rtl.perf.timing import array_first_beats

from .array_tb import ArrayTB, env_int


def _rng():
    return np.random.default_rng(cocotb.RANDOM_SEED)


async def _run(tb, wl: Workload):
    await tb.reset()
    await tb.load_weights(wl.W)
    await tb.run(wl.words, len(wl.expected))
    tb.check(wl.expected)


@cocotb.test()
async def random_tiles(dut):
    """Random, zero, extreme and outlier tiles; random input gaps and drain back-pressure."""
    tb = ArrayTB(dut, gap=0.2, stall=0.3)
    cfg = tb.cfg
    wl = mpu_workload(cfg, _rng(), tiles=env_int("DSTAR_TILES", 6),
                      kinds=("mixed", "zero", "max", "outlier"))
    await _run(tb, wl)


@cocotb.test()
async def every_exponent(dut):
    """A tile whose channels reach every PoT exponent 0..e_max and every precision."""
    tb = ArrayTB(dut, gap=0.1, stall=0.1)
    cfg = tb.cfg
    rng = _rng()
    dx, B = exponent_sweep(cfg, rng)
    dx = np.concatenate([dx, rng.integers(-8, 9, size=(cfg.tile, 6))], axis=1)
    if dx.shape[1] > cfg.max_reduction:
        dx = dx[:, :cfg.max_reduction]
    W = random_weights(cfg, rng, dx.shape[1])
    _, tiles = schedule_matrix(dx, cfg, B)
    groups = tiles[0].groups
    accs, flags = execute(groups, W, cfg)
    await _run(tb, Workload(W=W, words=[g.word(cfg) for g in groups],
                            expected=drain_words(cfg, accs, flags),
                            groups_per_tile=[len(groups)], accs=accs))


@cocotb.test()
async def arbitrary_groups(dut):
    """Group streams the scheduler would never emit: any exponent order, any lane mix."""
    tb = ArrayTB(dut, gap=0.3, stall=0.5)
    rng = _rng()
    wl = random_group_stream(tb.cfg, rng, [int(g) for g in rng.integers(1, 30, size=4)])
    await _run(tb, wl)


@cocotb.test()
async def cycles(dut):
    """Measured drain timing equals the documented formula (no gaps, no back-pressure)."""
    tb = ArrayTB(dut)
    cfg = tb.cfg
    G = [1, 3, 2 * cfg.rows + cfg.cols + 8, 5, 40]
    wl = random_group_stream(cfg, _rng(), G)
    await _run(tb, wl)
    start = tb.src.cycles[0]
    measured = [tb.sink.cycles[k * cfg.rows] - start for k in range(len(G))]
    expected = array_first_beats(cfg, G)
    assert measured == expected, f"first drain beats at {measured}, formula says {expected}"


@cocotb.test()
async def reset_mid_stream(dut):
    """Reset with a tile in the drain (half of it received) and the next in the array, then a
    fresh stream of schedule tiles with new weights: every drain beat equals golden and none of
    the old stream comes out after the reset (:meth:`ArrayTB.reset_mid_stream`)."""
    tb = ArrayTB(dut, gap=0.2, stall=0.3)
    cfg = tb.cfg
    rng = _rng()
    old = random_group_stream(cfg, rng, [6, cfg.rows + cfg.cols + 4, 5])
    fresh = mpu_workload(cfg, rng, tiles=3, kinds=("mixed", "outlier", "max"))
    await tb.reset_mid_stream(old, fresh)
