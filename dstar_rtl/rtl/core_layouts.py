"""Amaranth views of the core's command words and buffer rows (from :mod:`program.isa`)."""

from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.layouts import VPU_OPS
from dstar_rtl.program import isa

from .layouts import to_layout
from .params import check_int, check_shape

__all__ = ["cmd_layout", "row_layout", "row_width", "OP", "BUF", "VOP", "MemRead", "MemWrite"]

#: Opcode, buffer and VPU-operation numbers by name.
OP = {name: i for i, name in enumerate(isa.OPCODES)}
BUF = {name: i for i, name in enumerate(isa.BUFFERS)}


def VOP(name: str) -> int:
    """The VPU operation code of ``name``."""
    return VPU_OPS.index(name)


def cmd_layout(cfg, op: str) -> data.StructLayout:
    """The whole command (:func:`program.isa.cmd_bits`) of opcode ``op`` as a struct (header
    fields first)."""
    fields = isa.header_layout() + isa.cmd_layout(cfg, op)
    lay = to_layout(fields)
    pad = isa.cmd_bits(cfg) - lay.size
    if pad:
        fields = fields + [("_pad", pad, (), False)]
    return to_layout(fields)


def row_layout(cfg, buf: str) -> data.StructLayout:
    return to_layout(isa.row_layout(cfg, buf))


def row_width(cfg, buf: str) -> int:
    return isa.row_width(cfg, buf)



class _MemPort(wiring.Signature):
    """What :class:`MemRead` and :class:`MemWrite` share: ``en``, ``addr`` (``range(depth)``)
    and ``data`` (``shape``, flowing ``data_flow``), the depth and the row shape, and structural
    equality (two ports of the same kind, depth and shape are interchangeable)."""

    def __init__(self, depth: int, shape, data_flow):
        self._depth = check_int("depth", depth, lo=1)
        self._shape = check_shape("shape", shape)
        super().__init__({"en": Out(1), "addr": Out(range(depth)), "data": data_flow(shape)})

    @property
    def depth(self) -> int:
        return self._depth

    @property
    def shape(self):
        return self._shape

    def __eq__(self, other):
        return (type(other) is type(self) and other.depth == self.depth
                and other.shape == self.shape)

    def __hash__(self):
        return hash((type(self), self._depth))

    def __repr__(self):
        return f"{type(self).__name__}({self._depth}, {self._shape!r})"


class MemRead(_MemPort):
    """A memory read port from the user's side: ``en``, ``addr`` Out (``range(depth)``);
    ``data`` In (``shape``), valid the cycle after ``en`` and held while ``en`` is low."""

    def __init__(self, depth: int, shape):
        super().__init__(depth, shape, In)


class MemWrite(_MemPort):
    """A memory write port from the user's side: ``en``, ``addr`` (``range(depth)``), ``data``
    (``shape``), all Out; the row is written at the clock edge while ``en`` is high."""

    def __init__(self, depth: int, shape):
        super().__init__(depth, shape, Out)
