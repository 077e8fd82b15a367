"""cocotb regression of the VPU on Verilator and Icarus (tiny in ``make test``, where the fpga VPU
runs in Amaranth's simulator, tests/test_vpu_amaranth.py; fpga, more rows and seeds in
``make regress``)."""

import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.sim.runner import run_cocotb

FAST = [("tiny", "verilator"), ("tiny", "icarus"), ("fpga", "verilator"), ("fpga", "icarus")]


@pytest.mark.cocotb
@pytest.mark.parametrize("preset_name, simulator",
                         [p if p[0] == "tiny" else pytest.param(*p, marks=pytest.mark.slow)
                          for p in FAST])
def test_vpu_regression(preset_name, simulator):
    run_cocotb("vpu", preset(preset_name), simulator, "dstar_rtl.tb.test_vpu", seed=1,
               extra_env={"DSTAR_ROWS": "4"})


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("seed", [2, 3])
@pytest.mark.parametrize("preset_name, simulator", FAST)
def test_vpu_regression_long(preset_name, simulator, seed):
    run_cocotb("vpu", preset(preset_name), simulator, "dstar_rtl.tb.test_vpu", seed=seed,
               extra_env={"DSTAR_ROWS": "24"}, tag="long")


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_vpu_odd_lanes(simulator):
    run_cocotb("vpu", preset("tiny", vpu_lanes=3, max_reduction=20, ln_row_max=50), simulator,
               "dstar_rtl.tb.test_vpu", seed=5, tag="cfg")
