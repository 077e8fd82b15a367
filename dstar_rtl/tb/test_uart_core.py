"""cocotb test of ``dstar_uart_core`` (:class:`rtl.uart_core.UartCore`) end to end: the host
driver (:class:`sim.host_driver.HostDriver`, the code a board host runs over pyserial) loads a
differential layer's weights and runs it over several steps through the UART model; every
output, x̂ and Y is compared with golden.differential.DiffLinear bit for bit.

Environment: ``DSTAR_CONFIG``, ``DSTAR_CYCLES_PER_BIT`` (must match the build), ``DSTAR_STEPS``
(default 2).
"""

import cocotb
import numpy as np

from dstar_rtl.golden.differential import DiffLinear
from dstar_rtl.program import isa
from dstar_rtl.program.layer import LayerProgram
from dstar_rtl.rtl.uart_vpu import SIM_CYCLES_PER_BIT
from dstar_rtl.sim.host_driver import HostDriver

from .array_tb import config_from_env, env_int
from .streams import reset
from .uart_model import CocotbTransport, UartModel, start_fast_clock


@cocotb.test()
async def layer_over_the_uart(dut):
    cfg = config_from_env()
    model = UartModel(dut, env_int("DSTAR_CYCLES_PER_BIT", SIM_CYCLES_PER_BIT))
    start_fast_clock(dut)
    drv = HostDriver(CocotbTransport(model))
    await reset(dut, cycles=4)
    st = await drv.sync()
    assert st.link_ok and st.user == 0, st
    T = cfg.tile
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    N, cin, cout = 2 * T, 2 * T, 2 * T
    layer = DiffLinear(rng.integers(-127, 128, (cin, cout)), rng.uniform(0.002, 0.02, cout), cfg,
                       bias=rng.uniform(-1, 1, cout), name="uart")
    prog = LayerProgram(layer, N, isa.core_for(cfg))
    cmds, words = prog.init()
    assert await drv.run_core(cfg, cmds, words) == []
    x = rng.integers(-3000, 3000, (N, cin))
    for s in range(env_int("DSTAR_STEPS", 2)):
        cmds, words = prog.step(x)
        got = prog.parse(await drv.run_core(cfg, cmds, words))
        exp = prog.expected(x)
        for k in ("y", "xhat", "Y"):
            assert np.array_equal(got[k], exp[k]), f"step {s}: {k} differs"
        dut._log.info(f"step {s}: y, x̂, Y equal to golden")
        x = x + rng.integers(-80, 80, (N, cin))
    st = await drv.status()
    assert st.link_ok and st.user & 0b11100 == 0, st      # no core error
    assert model.framing_errors == 0
