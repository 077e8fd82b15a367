"""cocotb tests of ``dstar_uart_vpu`` (:class:`rtl.uart_vpu.UartVPU`) end to end: the host driver
(:class:`sim.host_driver.HostDriver`, the same code a board host runs over pyserial) talks to the
generated Verilog through the UART model of :mod:`tb.uart_model`; every row is checked bit for
bit against golden (:func:`golden.vpu_stream.check_output`).

Environment: ``DSTAR_CONFIG`` (the configuration), ``DSTAR_CYCLES_PER_BIT`` (default
:data:`rtl.uart_vpu.SIM_CYCLES_PER_BIT`, must match the build), ``DSTAR_UART_N`` (row length of
the fixed-length test, default 5), ``DSTAR_UART_RANDOM`` (random rows per operation, lengths up
to ``max_reduction``; default 3). The fast tier runs the fixed-length and error tests
(``testcase=``), the long tier the random rows.
"""

import cocotb
import numpy as np

from dstar_rtl.golden.layouts import VPU_OPS, layout_width, pack, vpu_cmd_layout
from dstar_rtl.golden.vpu_stream import bench_rows, check_output, random_rows
from dstar_rtl.rtl.uart_vpu import SIM_CYCLES_PER_BIT, VPU_CMD_PORT
from dstar_rtl.sim.host_driver import HostDriver, encode_frame

from .array_tb import config_from_env, env_int
from .streams import reset
from .uart_model import CocotbTransport, UartModel, start_fast_clock


class UartTB:
    """Clock, reset, the UART model and a :class:`HostDriver` on it."""

    def __init__(self, dut):
        self.dut = dut
        self.cfg = config_from_env()
        self.cpb = env_int("DSTAR_CYCLES_PER_BIT", SIM_CYCLES_PER_BIT)
        self.model = UartModel(dut, self.cpb)          # drives rx idle (high) first
        start_fast_clock(dut)
        self.drv = HostDriver(CocotbTransport(self.model))

    async def start(self):
        # The receiver's synchronizer has no reset: the first test starts at time 0 with rx
        # still undriven on the first edge, so reset lasts until rx (driven high) has passed it.
        await reset(self.dut, cycles=4)
        st = await self.drv.sync()
        assert st.link_ok and st.user == 0, st
        return st

    async def run_rows(self, rows, where=""):
        outputs = await self.drv.run_vpu_rows(self.cfg, rows)
        for i, (row, words) in enumerate(zip(rows, outputs)):
            check_output(self.cfg, row, words, where=f"{where}row {i}: ")

    def check_clean(self):
        assert self.model.framing_errors == 0
        assert int(self.dut.overrun.value) == 0 and int(self.dut.frame_error.value) == 0


@cocotb.test()
async def every_operation_over_the_uart(dut):
    """One row of every operation (length ``DSTAR_UART_N``, partial last beat), sent back to back
    under the driver's flow control; then the link and the VPU report no error."""
    tb = UartTB(dut)
    await tb.start()
    n = env_int("DSTAR_UART_N", 5)
    rows = [bench_rows(tb.cfg, op, n, 1, seed=cocotb.RANDOM_SEED + k)[0]
            for k, op in enumerate(VPU_OPS)]
    await tb.run_rows(rows)
    st = await tb.drv.status()
    assert st.link_ok and st.user & 1 == 0, st
    tb.check_clean()
    assert int(dut.vpu_error.value) == 0 and int(dut.link_error.value) == 0


@cocotb.test()
async def random_rows_over_the_uart(dut):
    """``DSTAR_UART_RANDOM`` random and edge rows of every operation."""
    count = env_int("DSTAR_UART_RANDOM", 3)
    tb = UartTB(dut)
    await tb.start()
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    for op in VPU_OPS:
        await tb.run_rows(random_rows(tb.cfg, op, rng, count), where=f"{op} ")
    st = await tb.drv.status()
    assert st.link_ok and st.user & 1 == 0, st
    tb.check_clean()


@cocotb.test()
async def errors_are_reported_and_the_link_recovers(dut):
    """An unknown port sets the link's ``error`` (rule 2) and rows after it are exact; a command
    the VPU refuses shows in the status reply's user byte; a break in the middle of a frame, then
    :meth:`HostDriver.sync`, leaves the link ready for exact rows."""
    tb = UartTB(dut)
    await tb.start()
    cfg = tb.cfg
    rows = [bench_rows(cfg, op, 5, 1, seed=k)[0] for k, op in enumerate(("gelu", "softmax"))]

    tb.model.send(encode_frame(9, [0x12, 0x34], 8))             # port 9 does not exist
    await tb.run_rows(rows[:1], where="after unknown port: ")
    st = await tb.drv.status()
    assert st.error and not st.overrun and not st.frame_error and st.user & 1 == 0, st
    assert int(dut.link_error.value) == 1

    wc = layout_width(vpu_cmd_layout(cfg))
    bad = pack(vpu_cmd_layout(cfg), dict(op=VPU_OPS.index("gelu"), n=0, param=0))
    await tb.drv.send_words(VPU_CMD_PORT, [bad], wc)
    await tb.run_rows(rows[1:], where="after a refused command: ")
    st = await tb.drv.status()
    assert st.user & 1 == 1 and int(dut.vpu_error.value) == 1, st

    # Half a command frame, then a break: the partial word is dropped, the link waits for a frame.
    tb.model.send(encode_frame(VPU_CMD_PORT, [0x5A5A], wc)[:6])
    await tb.drv.sync()
    await tb.run_rows(rows, where="after a break: ")
    tb.check_clean()
