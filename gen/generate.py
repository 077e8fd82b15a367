"""Elaboration to Verilog: Amaranth → RTLIL → Yosys ``proc; flatten; opt_clean`` → Verilog.

Running the netlist through Yosys turns Amaranth's ``always @*`` processes into plain logic, so
Icarus sees no X at time 0, and strips the ``src`` attributes (absolute paths) with ``-noattr``,
so the same configuration gives byte-identical output on any machine. A manifest JSON beside the
Verilog records the configuration and its hash, the tool versions, the port list and the bit
layout of every stream payload.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import amaranth
from amaranth.back import rtlil

from golden import layouts as gl
from golden.config import Config

from .units import build_unit, top_name
from .yosys import run_yosys, yosys_version

__all__ = ["to_rtlil", "to_verilog", "generate", "render", "manifest_path", "parse_ports",
           "manifest"]

_PORT_RE = re.compile(r"^\s*(input|output|inout)\s+(?:signed\s+)?(?:\[(\d+):(\d+)\]\s*)?(\w+)\s*;",
                      re.M)


def to_rtlil(unit: str, cfg: Config) -> str:
    return rtlil.convert(build_unit(unit, cfg), name=top_name(unit))


def to_verilog(il_text: str, top: str, flatten: bool = True) -> str:
    script = "\n".join([
        "read_rtlil design.il",
        f"hierarchy -top {top}",
        "proc",
        "flatten" if flatten else "",
        "opt_clean -purge",
        "write_verilog -noattr out.v",
    ])
    return run_yosys(script, {"design.il": il_text}, ["out.v"])["out.v"]


def parse_ports(verilog: str, top: str) -> list:
    """Ports of module ``top``: [{name, direction, width}] in the header's order."""
    head = re.search(rf"^module {re.escape(top)}\((.*?)\);(.*?)^endmodule", verilog, re.M | re.S)
    if not head:
        raise ValueError(f"module {top} not found in the generated Verilog")
    names = [n.strip() for n in head.group(1).split(",") if n.strip()]
    decls = {name: (d, hi, lo) for d, hi, lo, name in _PORT_RE.findall(head.group(2))}
    out = []
    for name in names:
        d, hi, lo = decls[name]
        out.append(dict(name=name, direction=d, width=(int(hi) - int(lo) + 1) if hi else 1))
    return out


def _layout_doc(fields) -> list:
    out, off = [], 0
    for name, width, dims, is_signed in fields:
        n = 1
        for d in dims:
            n *= d
        out.append(dict(name=name, offset=off, element_width=width, dims=list(dims),
                        signed=is_signed))
        off += width * n
    return out


def stream_layouts(unit: str, cfg: Config) -> dict:
    qpu = dict(subch=_layout_doc(gl.subchannel_layout(cfg)),
               config=_layout_doc(gl.qpu_config_layout(cfg)),
               recon=_layout_doc(gl.recon_layout(cfg)),
               counters=_layout_doc(gl.counters_layout()))
    if unit == "qpu":
        return dict(qpu, groups=_layout_doc(gl.group_layout(cfg)))
    if unit == "qpu_mpu":
        return dict(qpu, wload=_layout_doc(gl.weight_load_layout(cfg)),
                    drain=_layout_doc(gl.drain_layout(cfg)))
    if unit == "mpu":
        return dict(groups=_layout_doc(gl.group_layout(cfg)),
                    wload=_layout_doc(gl.weight_load_layout(cfg)),
                    drain=_layout_doc(gl.drain_layout(cfg)))
    if unit == "baseline":
        return dict(groups=_layout_doc(gl.baseline_group_layout(cfg)),
                    wload=_layout_doc(gl.weight_load_layout(cfg)),
                    drain=_layout_doc(gl.drain_layout(cfg, baseline=True)))
    if unit == "vpu":
        return dict(cmd=_layout_doc(gl.vpu_cmd_layout(cfg)), i=_layout_doc(gl.vpu_in_layout(cfg)),
                    o=_layout_doc(gl.vpu_out_layout(cfg)))
    if unit == "core":
        from golden import core_isa as isa
        head = isa.header_layout()
        return {"cmd": {op: _layout_doc(head + isa.cmd_layout(cfg, op)) for op in isa.OPCODES},
                "host_in": [dict(name="word", offset=0, element_width=isa.HOST_WORD, dims=[],
                                 signed=False)],
                "rows": {b: _layout_doc(isa.row_layout(cfg, b)) for b in isa.BUFFERS}}
    return {}


def manifest(unit: str, cfg: Config, verilog: str) -> dict:
    import numpy
    top = top_name(unit)
    return {
        "unit": unit,
        "top": top,
        "preset": cfg.name,
        "config": cfg.to_dict(),
        "config_hash": cfg.hash(),
        "tools": {"amaranth": amaranth.__version__, "yosys": yosys_version(),
                  "numpy": numpy.__version__},
        "verilog_sha256": hashlib.sha256(verilog.encode()).hexdigest(),
        "ports": parse_ports(verilog, top),
        "streams": stream_layouts(unit, cfg),
    }


def manifest_path(out) -> Path:
    """Where the manifest of the Verilog file ``out`` goes: ``out`` with suffix ``.json``."""
    return Path(out).with_suffix(".json")


def render(unit: str, cfg: Config, out, flatten: bool = True) -> tuple:
    """Elaborate ``unit`` and return ``({out: Verilog, manifest_path(out): manifest JSON},
    manifest)`` without writing anything. Raises :class:`gen.yosys.YosysError` when Yosys fails.
    """
    out = Path(out)
    if manifest_path(out) == out:
        raise ValueError(f"the Verilog {out} would be overwritten by its manifest: name the "
                         f"Verilog file *.v")
    verilog = to_verilog(to_rtlil(unit, cfg), top_name(unit), flatten)
    man = manifest(unit, cfg, verilog)
    text = json.dumps(man, indent=2, sort_keys=True) + "\n"
    return {out: verilog, manifest_path(out): text}, man


def generate(unit: str, cfg: Config, out: Path, flatten: bool = True) -> dict:
    """Write ``out`` (Verilog) and ``out`` with suffix ``.json`` (manifest); returns the manifest.

    Both files are written together (:func:`gen.outputs.write_together`) after the whole flow
    succeeded, so a failure leaves neither.
    """
    from .outputs import write_together

    files, man = render(unit, cfg, out, flatten)
    write_together(files)
    return man
