"""Amaranth views of the core's command words and buffer rows (from :mod:`golden.core_isa`)."""

from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from golden import core_isa as isa
from golden.layouts import VPU_OPS

from .layouts import to_layout

__all__ = ["cmd_layout", "row_layout", "row_width", "OP", "BUF", "VOP", "MemRead", "MemWrite"]

#: Opcode, buffer and VPU-operation numbers by name.
OP = {name: i for i, name in enumerate(isa.OPCODES)}
BUF = {name: i for i, name in enumerate(isa.BUFFERS)}


def VOP(name: str) -> int:
    """The VPU operation code of ``name``."""
    return VPU_OPS.index(name)


def cmd_layout(cfg, op: str) -> data.StructLayout:
    """The whole 128-bit command of opcode ``op`` as a struct (header fields first)."""
    fields = isa.header_layout() + isa.cmd_layout(cfg, op)
    lay = to_layout(fields)
    pad = isa.CMD_BITS - lay.size
    if pad:
        fields = fields + [("_pad", pad, (), False)]
    return to_layout(fields)


def row_layout(cfg, buf: str) -> data.StructLayout:
    return to_layout(isa.row_layout(cfg, buf))


def row_width(cfg, buf: str) -> int:
    return isa.row_width(cfg, buf)




def MemRead(depth: int, shape) -> wiring.Signature:
    """A memory read port from the user's side: ``en``, ``addr``; ``data`` valid the next cycle
    (held while ``en`` is low)."""
    return wiring.Signature({"en": Out(1), "addr": Out(range(depth)), "data": In(shape)})


def MemWrite(depth: int, shape) -> wiring.Signature:
    """A memory write port from the user's side: ``en``, ``addr``, ``data``."""
    return wiring.Signature({"en": Out(1), "addr": Out(range(depth)), "data": Out(shape)})
