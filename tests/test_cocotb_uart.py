"""The VPU and the core over the simulated UART host link, end to end (``tb/test_uart_vpu.py``,
``tb/test_uart_core.py``): the host driver's own code through a cocotb UART model into the
generated ``dstar_uart_vpu`` / ``dstar_uart_core``, bit-exact against golden, on Verilator and
Icarus.

The generated units run the UART at :data:`rtl.uart_vpu.SIM_CYCLES_PER_BIT` (4) cycles per bit, so
the fast tier's runs are short enough for the runner's default Verilator build (``-O0``: it
compiles in a fraction of an ``-O2`` build's time and runs a few thousand cycles per second).
"""

import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.sim.runner import run_cocotb

SIMULATORS = ["verilator", "icarus"]
# The random rows (a quarter of a million cycles) run in the long tier only.
FAST_CASES = ["every_operation_over_the_uart", "errors_are_reported_and_the_link_recovers"]


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_uart_vpu(simulator):
    run_cocotb("uart_vpu", preset("tiny"), simulator, "dstar_rtl.tb.test_uart_vpu", seed=1,
               testcase=FAST_CASES)


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("seed", [2, 3])
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_uart_vpu_random_rows(simulator, seed):
    """Random and edge rows of every operation, lengths up to max_reduction."""
    run_cocotb("uart_vpu", preset("tiny"), simulator, "dstar_rtl.tb.test_uart_vpu", seed=seed,
               testcase=["random_rows_over_the_uart"], extra_env={"DSTAR_UART_RANDOM": "3"},
               tag="random")


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_uart_core_layer(simulator):
    """A differential layer through the simulated UART into the generated core: two steps on
    Verilator (the state carried over the link), one on Icarus, about ten times slower per cycle
    (two in make regress)."""
    run_cocotb("uart_core", preset("tiny"), simulator, "dstar_rtl.tb.test_uart_core", seed=1,
               extra_env={"DSTAR_STEPS": "2" if simulator == "verilator" else "1"})


@pytest.mark.slow
@pytest.mark.cocotb
def test_uart_core_layer_two_steps_on_icarus():
    """The second step of the layer on Icarus too (``make regress``)."""
    run_cocotb("uart_core", preset("tiny"), "icarus", "dstar_rtl.tb.test_uart_core", seed=1,
               extra_env={"DSTAR_STEPS": "2"}, tag="long")
