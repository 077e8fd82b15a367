"""cocotb tests of a reset in the middle of traffic for the VPU and the core (issue 14, section
3), tiny preset, on Verilator and Icarus; they reuse the units' regression builds. The arrays'
and the QPU's reset tests are in their own test modules (tests/test_cocotb_arrays.py,
tests/test_cocotb_qpu.py)."""

import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.sim.runner import run_cocotb

MODULES = {"vpu": "dstar_rtl.tb.test_vpu_reset", "core": "dstar_rtl.tb.test_core_reset"}


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
@pytest.mark.parametrize("unit", sorted(MODULES))
def test_reset_mid_stream(unit, simulator):
    run_cocotb(unit, preset("tiny"), simulator, MODULES[unit], seed=1)
