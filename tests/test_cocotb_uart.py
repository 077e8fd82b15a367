"""The VPU over the simulated UART host link, end to end (``tb/test_uart_vpu.py``): the host
driver's own code through a cocotb UART model into the generated ``dstar_uart_vpu``, bit-exact
against golden, on Verilator and Icarus."""

import pytest

from golden.config import preset
from sim.runner import run_cocotb

SIMULATORS = ["verilator", "icarus"]

# A UART test runs hundreds of thousands of cycles: Verilator's model at -O0 (the runner's
# default, right for short runs) does about 3,000 cycles/s here, at -O2 about 37,000; Icarus about
# 18,000. So Verilator builds this unit optimized (a longer build, once per source state).
OPTIMIZE = {"verilator": True, "icarus": False}


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_uart_vpu(simulator):
    run_cocotb("uart_vpu", preset("tiny"), simulator, "test_uart_vpu", seed=1,
               optimize=OPTIMIZE[simulator])


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("seed", [2, 3])
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_uart_vpu_random_rows(simulator, seed):
    """Random and edge rows of every operation, lengths up to max_reduction (0.8-1.1 million
    cycles: about 20 s on Verilator, 100 s on Icarus)."""
    run_cocotb("uart_vpu", preset("tiny"), simulator, "test_uart_vpu", seed=seed,
               testcase=["random_rows_over_the_uart"], extra_env={"DSTAR_UART_RANDOM": "3"},
               tag="random", optimize=OPTIMIZE[simulator])


@pytest.mark.cocotb
def test_uart_core_layer():
    """A differential layer over two steps through the simulated UART into the generated core
    (Verilator in ``make test``; Icarus in ``make regress``)."""
    run_cocotb("uart_core", preset("tiny"), "verilator", "test_uart_core", seed=1,
               optimize=True)


@pytest.mark.slow
@pytest.mark.cocotb
def test_uart_core_layer_icarus():
    run_cocotb("uart_core", preset("tiny"), "icarus", "test_uart_core", seed=2)
