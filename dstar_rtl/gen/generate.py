"""Elaboration to Verilog: Amaranth → RTLIL → Yosys ``proc; flatten; opt_clean`` → Verilog.

Running the netlist through Yosys turns Amaranth's ``always @*`` processes into plain logic, so
Icarus sees no X at time 0, and strips the ``src`` attributes (absolute paths) with ``-noattr``,
so the same configuration gives byte-identical output on any machine. A manifest JSON beside the
Verilog records the configuration and its hash, the tool versions, the port list and the bit
layout of every record port (every stream payload and struct-shaped port, from the unit's
signature, and the layouts the unit declares besides: :func:`gen.units.stream_layouts`).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import amaranth
from amaranth.back import rtlil

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.golden.config import Config

from .units import build_unit, stream_layouts, top_name
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
    text = data_json(man, indent=2, sort_keys=True) + "\n"
    return {out: verilog, manifest_path(out): text}, man


def generate(unit: str, cfg: Config, out: Path, flatten: bool = True) -> dict:
    """Write ``out`` (Verilog) and ``out`` with suffix ``.json`` (manifest); returns the manifest.

    Both files are written together (:func:`gen.outputs.write_together`) after the whole flow
    succeeded, so a failure leaves neither.
    """
    from .outputs import write_together

    files, man = render(unit, cfg, out, flatten)
    write_together(files, record_command=False)   # the manifest: same configuration, same bytes
    return man
