"""cocotb regression of the core: a DiT block over denoising steps bit-exact in both simulators
(``tiny`` in ``make test``; ``fpga`` and more steps in ``make regress``)."""

import pytest

from golden.config import preset
from sim.runner import run_cocotb


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_core_tiny(simulator):
    run_cocotb("core", preset("tiny"), simulator, "test_core", seed=1,
               extra_env={"DSTAR_STEPS": "4"})


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_core_fpga(simulator):
    run_cocotb("core", preset("fpga"), simulator, "test_core", seed=2,
               extra_env={"DSTAR_STEPS": "4"}, tag="fpga")


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_core_tiny_long(simulator):
    run_cocotb("core", preset("tiny"), simulator, "test_core", seed=3,
               extra_env={"DSTAR_STEPS": "8", "DSTAR_WORKLOAD_SEED": "7"}, tag="long")
