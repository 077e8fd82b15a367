"""The VPU behind the UART host link: a top a host drives with :class:`sim.host_driver.HostDriver`
(over pyserial on a board, over the cocotb UART model in simulation)."""

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.layouts import vpu_cmd_layout, vpu_in_layout, vpu_out_layout

from .host_link import HostLink, LinkedTop
from .layouts import to_layout
from .params import check_config
from .vpu import VPU

__all__ = ["UartVPU", "SIM_CYCLES_PER_BIT", "VPU_CMD_PORT", "VPU_IN_PORT", "VPU_OUT_PORT"]

# UART bit time of the generated `uart_vpu` and `uart_core` units (gen/units.py): the shortest
# the receiver takes (rtl.uart.MIN_CYCLES_PER_BIT), so that a simulated byte costs 40 cycles. A
# board top passes its clock frequency / baud rate instead (217 for 115200 baud at 25 MHz).
SIM_CYCLES_PER_BIT = 4

# Host-link port numbers.
VPU_CMD_PORT = 0      # input: VPU commands (vpu_cmd_layout)
VPU_IN_PORT = 1       # input: VPU operand beats (vpu_in_layout)
VPU_OUT_PORT = 0      # output: VPU result beats (vpu_out_layout)


class UartVPU(LinkedTop):
    """:class:`~rtl.host_link.HostLink` + :class:`~rtl.vpu.VPU`: input port 0 is the VPU's
    ``cmd``, input port 1 its ``i``, output port 0 its ``o``; the status reply's ``user_status``
    is ``{bit 0: VPU error, bit 1: VPU busy}``.

    Parameters
    ----------
    cfg : Config
    cycles_per_bit : int, >= 4, default :data:`SIM_CYCLES_PER_BIT`
        Clock cycles per UART bit.
    rx_depth : int, default 256
        The link's receive FIFO in bytes (see :class:`~rtl.host_link.HostLink`).

    Members
    -------
    rx : In(1), tx : Out(1): the UART pins.
    link_error, overrun, frame_error : Out(1), the link's sticky flags.
    vpu_error : Out(1), the VPU's sticky ``error`` (a refused command).

    Latency and throughput: the link's line rate (``10·cycles_per_bit`` cycles per byte each
    way) limits everything; the VPU's own cycles per row are negligible beside it
    (docs/architecture.md, section 10).
    """

    vpu_error: Out(1)

    def __init__(self, cfg: Config, *, cycles_per_bit: int = SIM_CYCLES_PER_BIT,
                 rx_depth: int = 256):
        check_config(cfg)
        self._cfg = cfg
        self._vpu = VPU(cfg)
        self._link = HostLink([to_layout(vpu_cmd_layout(cfg)), to_layout(vpu_in_layout(cfg))],
                              [to_layout(vpu_out_layout(cfg))], cycles_per_bit=cycles_per_bit,
                              rx_depth=rx_depth)
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.vpu = vpu = self._vpu
        link = self.wire_link(m, Cat(vpu.error, vpu.busy))
        wiring.connect(m, link.in_streams[VPU_CMD_PORT], vpu.cmd)
        wiring.connect(m, link.in_streams[VPU_IN_PORT], vpu.i)
        wiring.connect(m, vpu.o, link.out_streams[VPU_OUT_PORT])
        m.d.comb += self.vpu_error.eq(vpu.error)
        return m
