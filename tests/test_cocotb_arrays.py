"""The cocotb regression of the array units on generated Verilog, in Verilator and Icarus.

Fast tier (``make test``): ``tiny`` on both simulators and the ``fpga`` INT8 array on Verilator
(the ``fpga`` MPU runs in Amaranth's simulator there, behind the fpga QPU:
tests/test_qpu_amaranth.py::test_chain_qpu_into_mpu). Long tier (``make regress``, ``-m slow``):
the ``fpga`` MPU on Verilator in the short run, every preset on both simulators with several
seeds, and random legal configurations (seed printed, reproducible with ``DSTAR_SEED``).
"""

import os
import random

import pytest

from dstar_rtl.golden.config import ConfigError, preset
from dstar_rtl.sim.runner import run_cocotb

MODULES = {"mpu": "dstar_rtl.tb.test_mpu", "baseline": "dstar_rtl.tb.test_baseline"}

FAST = [("tiny", "verilator"), ("tiny", "icarus"), ("fpga", "verilator")]
SLOW = [("fpga", "icarus")]
#: The short run: the ``fpga`` MPU (a long Verilator build) in ``make regress`` only.
SHORT = [(u, p, s) if (p, u) != ("fpga", "mpu") else pytest.param(u, p, s, marks=pytest.mark.slow)
         for u in sorted(MODULES) for p, s in FAST]


@pytest.mark.cocotb
@pytest.mark.parametrize("unit, preset_name, simulator", SHORT)
def test_array_regression(unit, preset_name, simulator):
    run_cocotb(unit, preset(preset_name), simulator, MODULES[unit], seed=1,
               extra_env={"DSTAR_TILES": "6"})


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)])
@pytest.mark.parametrize("unit", sorted(MODULES))
def test_weights_broadcast(unit, simulator):
    """``weight_hop = rows``, ``act_hop = cols``: the weights broadcast down each column and the
    row operands along each row (no forwarding register, no skew), with the select+Booth
    datapath on the MPU; every drain beat checked (Icarus in ``make test``, a short build;
    Verilator, a build of its own, in ``make regress``)."""
    extra = dict(digit_product="select", digits="booth") if unit == "mpu" else {}
    run_cocotb(unit, preset("tiny", weight_hop=4, act_hop=4, **extra), simulator, MODULES[unit],
               seed=7,
               extra_env={"DSTAR_TILES": "6"}, tag="broadcast")


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("seed", [2, 3, 4])
@pytest.mark.parametrize("preset_name, simulator", FAST + SLOW)
@pytest.mark.parametrize("unit", sorted(MODULES))
def test_array_regression_long(unit, preset_name, simulator, seed):
    run_cocotb(unit, preset(preset_name), simulator, MODULES[unit], seed=seed,
               extra_env={"DSTAR_TILES": "40"}, tag="long")


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
@pytest.mark.parametrize("overrides", [dict(digits="booth", digit_product="select"),
                                       dict(digits="booth", digit_product="select", acc_width=14,
                                            overflow_detect=True),
                                       dict(digit_product="select")])
def test_mpu_datapath_levers(simulator, overrides):
    """Issue 15's PE levers in the MPU (the fast tier runs Booth through the QPU → MPU chain)."""
    run_cocotb("mpu", preset("tiny", **overrides), simulator, "dstar_rtl.tb.test_mpu", seed=6,
               extra_env={"DSTAR_TILES": "20"}, tag="levers")


def random_config(rng: random.Random):
    """A random legal small configuration (illegal draws are retried)."""
    while True:
        n = rng.choice([2, 3, 4, 5, 8])
        sort_n = rng.choice([4, 8, 16])
        params = dict(rows=n, cols=n, lanes=rng.choice([1, 2, 4]), sort_n=sort_n,
                      pe_stages=rng.choice([0, 1, 2]), max_reduction=rng.choice([4, 16, 64]),
                      drop_zero_columns=rng.random() < 0.8,
                      thr=rng.choice([(1, 7, 31), (2, 9, 40), (3, 15, 63)]),
                      weight_width=rng.choice([4, 6, 8]))
        if rng.random() < 0.2:
            params.update(alignment="horner", max_reduction=sort_n // 4)
        if rng.random() < 0.2:
            params.update(overflow_detect=True, acc_width=rng.choice([12, 16, 20]))
        params.update(digits=rng.choice(["slice", "booth"]),
                      digit_product=rng.choice(["select", "multiply"]))
        try:
            return preset("tiny", **params)
        except ConfigError:
            continue


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("index", range(6))
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_random_configurations(simulator, index):
    seed = int(os.environ.get("DSTAR_SEED", "20261130")) + index
    cfg = random_config(random.Random(seed))
    print(f"random configuration seed {seed}: {cfg.to_dict()}")
    run_cocotb("mpu", cfg, simulator, "dstar_rtl.tb.test_mpu", seed=seed, tag="random")
