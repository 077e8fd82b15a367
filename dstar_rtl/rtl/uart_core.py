"""The core behind the UART host link: a top a host drives with :class:`sim.host_driver.HostDriver`
(over pyserial on a board, over the cocotb UART model in simulation)."""

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from dstar_rtl.golden.config import Config
from dstar_rtl.program import isa

from .core import Core
from .host_link import HostLink, LinkedTop
from .params import check_config

__all__ = ["UartCore", "CORE_CMD_PORT", "CORE_HOST_PORT", "CORE_OUT_PORT"]

# Host-link port numbers.
CORE_CMD_PORT = 0     # input: commands (program.isa.cmd_bits: 128 bits at the presets)
CORE_HOST_PORT = 1    # input: 32-bit host words for LOAD
CORE_OUT_PORT = 0     # output: 32-bit host words from STORE


class UartCore(LinkedTop):
    """:class:`~rtl.host_link.HostLink` + :class:`~rtl.core.Core`: input port 0 is the core's
    ``cmd``, input port 1 its ``host_in``, output port 0 its ``host_out``; the status reply's
    ``user_status`` is ``{bit 0: done, bit 1: busy, bits 2..4: error code}``.

    The host must send each LOAD's words right after the LOAD command (the link delivers bytes in
    order and a stalled port stalls it; :meth:`sim.host_driver.HostDriver.run_core` does this).

    Parameters: ``cfg`` and, keyword-only, ``core`` (:class:`program.isa.CoreConfig`),
    ``cycles_per_bit`` (an integer >= 4, default 16), ``rx_depth`` (link receive FIFO, bytes;
    :class:`~rtl.host_link.HostLink` checks both).

    Members: ``rx``/``tx`` (UART pins), ``link_error``, ``overrun``, ``frame_error`` (the link's
    sticky flags), ``core_error`` (the core's error code), ``done``.
    """

    core_error: Out(range(len(isa.ERRORS)))
    done: Out(1)

    def __init__(self, cfg: Config, *, core: isa.CoreConfig, cycles_per_bit: int = 16,
                 rx_depth: int = 256):
        check_config(cfg)
        self._cfg = cfg
        self._core = Core(cfg, core=core)
        c = self._core.signature.members
        self._link = HostLink([c["cmd"].signature.members["payload"].shape,
                               c["host_in"].signature.members["payload"].shape],
                              [c["host_out"].signature.members["payload"].shape],
                              cycles_per_bit=cycles_per_bit, rx_depth=rx_depth)
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self._core
        st = core.status
        link = self.wire_link(m, Cat(st.done, st.busy, st.error))
        wiring.connect(m, link.in_streams[CORE_CMD_PORT], core.cmd)
        wiring.connect(m, link.in_streams[CORE_HOST_PORT], core.host_in)
        wiring.connect(m, core.host_out, link.out_streams[CORE_OUT_PORT])
        m.d.comb += [self.core_error.eq(st.error), self.done.eq(st.done)]
        return m
