"""cocotb test of the QPU streaming straight into the MPU: differences in, accumulators out,
equal to Σ q·2**e·W of the golden numerics for every tile."""

import cocotb
import numpy as np

from dstar_rtl.golden.fmdq import quantize_subchannels
from dstar_rtl.golden.layouts import drain_layout
from dstar_rtl.golden.schedule import execute, reference_product
from dstar_rtl.golden.vectors import drain_words, qpu_workload, random_weights

from .array_tb import env_int
from .qpu_tb import QPUTB


@cocotb.test()
async def differences_to_accumulators(dut):
    tb = QPUTB(dut, gap=0.1, stall=0.2, chain=True)
    cfg = tb.cfg
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    C = min(cfg.max_reduction, 3 * cfg.sort_n // 2 + 1)
    wl = qpu_workload(cfg, rng, tiles=env_int("DSTAR_TILES", 4), channels=C,
                      kinds=("mixed", "outlier", "zero", "sweep"))
    W = random_weights(cfg, rng, C)
    accs, flags = execute(wl.group_objs, W, cfg)
    for (dx, _), acc in zip(wl.tiles, accs):  # the chain computes the numerics' product
        assert (reference_product(quantize_subchannels(dx.T, cfg), 1, W, cfg)[0] == acc).all()
    await tb.reset()
    await tb.load_weights(W)
    await tb.run(wl.words, len(accs) * cfg.rows, len(wl.recon))
    tb.check_stream(tb.out.words, drain_words(cfg, accs, flags), "drain", drain_layout(cfg))
    tb.check_stream(tb.recon.words, wl.recon, "reconstruction")
