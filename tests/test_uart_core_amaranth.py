"""The core behind the UART host link (rtl/uart_core.py) in Amaranth's simulator, driven by the
host driver's own code (:class:`sim.host_driver.HostDriver` over
:class:`sim.amaranth_uart.AmaranthUartTransport`): a program's LOADs and STOREs through every
link port, bit-exact against the ISA executor, and the status reply's user bits (done, error)."""

import numpy as np
from amaranth.sim import Simulator

from dstar_rtl.golden.config import preset
from dstar_rtl.program import isa
from dstar_rtl.program.executor import CoreExecutor
from dstar_rtl.rtl.uart_core import UartCore
from dstar_rtl.sim.amaranth_uart import AmaranthUartTransport
from dstar_rtl.sim.host_driver import HostDriver

CFG = preset("tiny")
CPB = 4                      # the shortest bit time the UART accepts: the fewest cycles


def _cmd(op, buf, addr, count):
    args = dict(buf=isa.BUFFERS.index(buf), addr=addr, count=count)
    return isa.Cmd(op, {**args, "zero": 0} if op == "LOAD" else args)


def test_program_over_the_uart_matches_the_executor():
    core = isa.core_for(CFG)
    top = UartCore(CFG, core=core, cycles_per_bit=CPB, rx_depth=64)
    rng = np.random.default_rng(5)
    per_row = isa.host_words_per_row(CFG, "ABUF")
    host = [int(w) for w in rng.integers(0, 1 << isa.HOST_WORD, 3 * per_row)]
    prog = [_cmd("LOAD", "ABUF", 5, 3), _cmd("STORE", "ABUF", 6, 2),
            _cmd("STORE", "ABUF", 0, 1), isa.Cmd("END", {})]
    expected = CoreExecutor(CFG, core).run(prog, host)
    bad = [_cmd("LOAD", "ABUF", core.abuf_rows - 1, 2), isa.Cmd("END", {})]
    tr = AmaranthUartTransport(top, CPB)
    seen = {}

    async def bench(ctx):
        tr.bind(ctx)
        await ctx.tick().repeat(4)
        drv = HostDriver(tr)
        st = await drv.sync()
        seen["idle"] = st
        seen["words"] = await drv.run_core(CFG, prog, host)
        seen["done"] = await drv.status()
        await drv.send_words(0, [isa.encode(CFG, c) for c in bad], isa.CMD_BITS)
        seen["error"] = await drv.status()

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(tr.receiver, background=True)
    sim.add_testbench(bench)
    sim.run()
    assert seen["idle"].link_ok and seen["idle"].user == 0, seen["idle"]
    assert seen["words"] == expected and len(expected) == 3 * per_row
    st = seen["done"]
    assert st.link_ok and st.user & 1 and not st.user >> 2, st     # done, no error code
    st = seen["error"]
    assert isa.ERRORS[st.user >> 2] == "address" and not st.user & 1, st
    assert tr.framing_errors == 0
