"""The generator's catalogue of units: every fact about a unit in one place.

Each :class:`Unit` names its component (how to build it from a :class:`~golden.config.Config`),
its Verilog top module (``dstar_<unit>``), what it contains (the VPU, the core: the C header's
extra sections), the port numbers of its host link if it has one, and the payload layouts of its
record ports. Those layouts come from the
component's wiring signature, i.e. from exactly the shapes the RTL is built with
(:func:`record_ports`): every stream's payload, every struct-shaped port and, for a unit behind
a host link, the words of the link's ports. A unit declares only what its signature cannot
know (:attr:`Unit.extra_layouts`): the core's command formats per opcode (its command stream is
128 plain bits) and its buffer rows. :func:`gen.generate.manifest` and :mod:`gen.export` read
the layouts from here.
"""

from __future__ import annotations

import gc
import re
import warnings
from dataclasses import dataclass
from math import prod
from typing import Callable

from amaranth.hdl import Shape, UnusedElaboratable
from amaranth.lib import data, stream, wiring

from dstar_rtl.golden.config import Config

__all__ = ["Unit", "UNITS", "unit_info", "build_unit", "top_name", "inspect_unit",
           "record_ports", "stream_layouts", "layout_doc"]


# ---------------------------------------------------------------------------- constructors
def _pe(cfg):
    """One slice PE as the array builds it: with ``weight_hop > 1`` (``act_hop > 1``) the PE of a
    row (column) that does not register the weights (the row operand): ``w_out`` (``a_out``) a
    wire."""
    from dstar_rtl.rtl.pe import SlicePE
    return SlicePE(cfg, register_w=cfg.weight_hop == 1, register_a=cfg.act_hop == 1)


def _baseline_pe(cfg):
    from dstar_rtl.rtl.pe import Int8PE
    return Int8PE(cfg, register_w=cfg.weight_hop == 1, register_a=cfg.act_hop == 1)


def _mpu(cfg):
    from dstar_rtl.rtl.mpu import MPU
    return MPU(cfg)


def _baseline(cfg):
    from dstar_rtl.rtl.baseline import Baseline
    return Baseline(cfg)


def _qpu(cfg):
    from dstar_rtl.rtl.qpu import QPU
    return QPU(cfg)


def _qpu_mpu(cfg):
    from dstar_rtl.rtl.chain import QuantizedMatmul
    return QuantizedMatmul(cfg)


def _vpu(cfg):
    from dstar_rtl.rtl.vpu import VPU
    return VPU(cfg)


def _uart_vpu(cfg):
    # The UART bit time is not a Config field: the generated unit uses the module's simulation
    # default (rtl.uart_vpu.SIM_CYCLES_PER_BIT); a board top passes clock / baud itself.
    from dstar_rtl.rtl.uart_vpu import SIM_CYCLES_PER_BIT, UartVPU
    return UartVPU(cfg, cycles_per_bit=SIM_CYCLES_PER_BIT)


def _core(cfg):
    # Buffer depths: those cfg sets, the others from the core preset of the same name (or the
    # default CoreConfig for a configuration that is not a preset).
    from dstar_rtl.program.isa import check_core, core_for
    from dstar_rtl.rtl.core import Core
    check_core(cfg)
    return Core(cfg, core=core_for(cfg))


def _uart_core(cfg):
    from dstar_rtl.program.isa import check_core, core_for
    from dstar_rtl.rtl.uart_core import UartCore
    from dstar_rtl.rtl.uart_vpu import SIM_CYCLES_PER_BIT
    check_core(cfg)
    return UartCore(cfg, core=core_for(cfg), cycles_per_bit=SIM_CYCLES_PER_BIT)


# ---------------------------------------------------------------------------- layouts
def layout_doc(fields) -> list:
    """A golden field list ``[(name, width, dims, signed)]`` as the manifest's layout:
    ``[{name, offset, element_width, dims, signed}]``, offsets from bit 0."""
    out, off = [], 0
    for name, width, dims, is_signed in fields:
        out.append(dict(name=name, offset=off, element_width=width, dims=list(dims),
                        signed=is_signed))
        off += width * prod(dims)
    return out


def _core_commands(cfg) -> dict:
    """The core's command word (program.isa.cmd_bits), one layout per opcode (header fields
    first)."""
    from dstar_rtl.program import isa
    head = isa.header_layout()
    return {op: layout_doc(head + isa.cmd_layout(cfg, op)) for op in isa.OPCODES}


def _core_rows(cfg) -> dict:
    """The row of every core buffer (what a LOAD or STORE moves, as host words)."""
    from dstar_rtl.program import isa
    return {b: layout_doc(isa.row_layout(cfg, b)) for b in isa.BUFFERS}


def _core_extra(cfg) -> dict:
    return {"cmd": _core_commands(cfg), "rows": _core_rows(cfg)}


def _uart_core_extra(cfg) -> dict:
    from dstar_rtl.rtl.uart_core import CORE_CMD_PORT
    return {f"link_in{CORE_CMD_PORT}": _core_commands(cfg), "rows": _core_rows(cfg)}


def _uart_vpu_link() -> list:
    from dstar_rtl.rtl import uart_vpu as uv
    return [("VPU_CMD", uv.VPU_CMD_PORT, "input port of VPU commands"),
            ("VPU_IN", uv.VPU_IN_PORT, "input port of VPU operands"),
            ("VPU_OUT", uv.VPU_OUT_PORT, "output port of VPU results")]


def _uart_core_link() -> list:
    from dstar_rtl.rtl import uart_core as uc
    return [("CORE_CMD", uc.CORE_CMD_PORT, "input port of commands"),
            ("CORE_HOST", uc.CORE_HOST_PORT, "input port of LOAD words"),
            ("CORE_OUT", uc.CORE_OUT_PORT, "output port of STORE words")]


# ---------------------------------------------------------------------------- the catalogue
@dataclass(frozen=True)
class Unit:
    """One unit of the generator.

    ``build(cfg)`` constructs the component; ``description`` says what it is; ``has_vpu`` and
    ``has_core``: the design contains the VPU (its header carries the VPU operation codes) or
    the core (the instruction set); ``extra_layouts(cfg)``, if given, returns layouts that
    replace or add to those of the signature (:func:`stream_layouts`); ``link_ports()``, for a
    unit behind the host link, returns ``[(name, port number, what)]`` of the link's ports."""

    name: str
    build: Callable
    description: str
    has_vpu: bool = False
    has_core: bool = False
    extra_layouts: Callable | None = None
    link_ports: Callable | None = None

    @property
    def top(self) -> str:
        """The Verilog top module."""
        return f"dstar_{self.name}"


UNITS = {u.name: u for u in (
    Unit("pe", _pe, "one 2-bit-slice PE"),
    Unit("mpu", _mpu, "the mixed-precision systolic array with its weight front end"),
    Unit("baseline", _baseline, "the INT8xINT8 output-stationary baseline array"),
    Unit("baseline_pe", _baseline_pe, "one INT8xINT8 PE of the baseline array"),
    Unit("qpu", _qpu, "the quantization unit: max, bins, quantize/slice, bitonic sort, pack"),
    Unit("qpu_mpu", _qpu_mpu, "the QPU streaming groups straight into the MPU"),
    Unit("vpu", _vpu, "the vector unit: softmax, LayerNorm, modulation, GELU, residual, "
         "requantize", has_vpu=True),
    Unit("uart_vpu", _uart_vpu, "the VPU behind the UART host link (simulation bit time)",
         has_vpu=True, link_ports=_uart_vpu_link),
    Unit("core", _core, "the DSTAR core: MPU, QPU, VPU, buffers and the command controller",
         has_core=True, extra_layouts=_core_extra),
    Unit("uart_core", _uart_core, "the core behind the UART host link (simulation bit time)",
         has_core=True, extra_layouts=_uart_core_extra, link_ports=_uart_core_link),
)}


def unit_info(unit: str) -> Unit:
    """The :class:`Unit` named ``unit``; raises ValueError naming the units."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {sorted(UNITS)}, not {unit!r}")
    return UNITS[unit]


def top_name(unit: str) -> str:
    """The Verilog top module of ``unit`` (:attr:`Unit.top`)."""
    return unit_info(unit).top


def build_unit(unit: str, cfg: Config):
    return unit_info(unit).build(cfg)


def inspect_unit(unit: str, cfg: Config, fn: Callable):
    """``fn(component)`` for a component of ``unit`` built only to be looked at (its signature,
    its parameters), never elaborated. The component is dropped before this returns, with
    Amaranth's "created but never used" warning ignored for it and the elaboratables it made in
    its constructor; ``fn``'s result must not hold on to it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        comp = build_unit(unit, cfg)
        try:
            return fn(comp)
        finally:
            del comp
            gc.collect()


# ---------------------------------------------------------------------------- record ports
def _flatten(layout, prefix=(), base=0):
    """(path, offset, element width, dims, signed) of every leaf of a ``data.Layout``; nested
    structs (the PE's ``ctrl``) are walked, arrays give their dimensions outermost first."""
    for name, fld in layout:
        path, off, shape, dims = (*prefix, str(name)), base + fld.offset, fld.shape, []
        while isinstance(shape, data.ArrayLayout):
            dims.append(shape.length)
            shape = shape.elem_shape
        if isinstance(shape, (data.StructLayout, data.UnionLayout)) and not dims:
            yield from _flatten(shape, path, off)
            continue
        s = Shape.cast(shape)  # an array of structs is given as opaque elements
        yield path, off, s.width, tuple(dims), s.signed and not isinstance(shape, data.Layout)


def _stream_payload(member):
    """The payload shape of a stream member of a signature, else None."""
    if not member.is_signature:
        return None
    sig = member.signature
    if isinstance(sig, wiring.FlippedSignature):
        sig = sig.flip()
    return sig.members["payload"].shape if isinstance(sig, stream.Signature) else None


def record_ports(comp) -> list:
    """Every record port of the component ``comp``, from its wiring signature, in signature
    order.

    Returns a list of dicts ``{name, kind, direction, verilog, link_port, width, signed,
    fields}`` where ``kind`` is ``"stream"`` (the layout is the payload's) or ``"record"`` (a
    struct-shaped port), ``direction`` is ``"in"``/``"out"`` from the unit's side, ``signed``
    is the payload's signedness when it is a plain shape, and ``fields`` is a list of ``{path,
    offset, width, dims, count, signed}`` (``width`` per element; empty for a plain payload).
    A component with a host link (a ``link`` attribute that is a
    :class:`~rtl.host_link.HostLink`) adds the link's word formats as ``link_in<k>`` /
    ``link_out<k>`` (kind ``"link"``): they are not Verilog ports but the words its UART frames
    carry.
    """
    out = []

    def add(name, kind, direction, verilog, shape, link_port=None):
        # A stream's payload may be a plain shape (a width, no fields); a plain port counts only
        # when it is a struct.
        is_layout = isinstance(shape, data.Layout)
        s = Shape.cast(shape)
        out.append(dict(name=name, kind=kind, direction=direction, verilog=verilog,
                        link_port=link_port, width=s.width, signed=s.signed and not is_layout,
                        fields=[dict(path=p, offset=o, width=w, dims=d, count=prod(d), signed=sg)
                                for p, o, w, d, sg in (_flatten(shape) if is_layout else ())]))

    for name, member in comp.signature.members.items():
        direction = "in" if member.flow == wiring.In else "out"
        payload = _stream_payload(member)
        if payload is not None:
            add(name, "stream", direction, f"{name}__payload", payload)
        elif member.is_port and isinstance(member.shape, data.Layout):
            add(name, "record", direction, name, member.shape)
    from dstar_rtl.rtl.host_link import HostLink
    link = getattr(comp, "link", None)
    if isinstance(link, HostLink):
        for name, member in link.signature.members.items():
            m = re.fullmatch(r"(in|out)_(\d+)", name)
            payload = _stream_payload(member)
            if m and payload is not None:
                add(f"link_{m[1]}{m[2]}", "link", m[1], None, payload, link_port=int(m[2]))
    return out


def _port_doc(port) -> list:
    """A record port as the manifest's layout; a plain payload is one field, ``word``."""
    if not port["fields"]:
        return [dict(name="word", offset=0, element_width=port["width"], dims=[],
                     signed=port["signed"])]
    return [dict(name=".".join(f["path"]), offset=f["offset"], element_width=f["width"],
                 dims=list(f["dims"]), signed=f["signed"]) for f in port["fields"]]


def stream_layouts(unit: str, cfg: Config) -> dict:
    """The manifest's ``streams``: ``{port: layout}`` for every record port of the unit
    (:func:`record_ports`; a nested field is named by its dotted path), then the unit's
    :attr:`~Unit.extra_layouts` (a layout may be ``{variant: layout}``, as the core's command
    per opcode)."""
    info = unit_info(unit)
    ports = inspect_unit(unit, cfg, record_ports)
    out = {p["name"]: _port_doc(p) for p in ports}
    if info.extra_layouts is not None:
        out.update(info.extra_layouts(cfg))
    return out
