"""Gate-level simulation sources of a unit mapped to a standard-cell library.

The ASIC flow (:func:`flows.synth.synthesize` with ``target="asic"``) leaves in its work
directory the flattened mapped netlist (``netlist.json``: library cells, the RAMs as ``$mem_v2``
cells) and the library (``cells.lib``). :func:`gate_sources` turns them into what a simulator
runs, in ``<workdir>/gate/``:

- ``cells_sim.v``: one Verilog module per library cell, made by Yosys from the cells'
  ``function``, ``ff`` and ``latch`` groups (``read_liberty`` without ``-lib``);
- ``gate.v``: the netlist, written by Yosys from it renamed so that every
  net bit is a one-bit wire ``n<bit>`` and every cell ``c<k>`` (the top's ports keep their names,
  so the unit's cocotb testbench drives it unchanged); the RAMs stay behavioural (``$mem_v2``
  as Verilog arrays): their energy is a per-access figure, not a gate count (issue 30, not
  built yet);
- ``gate.json``: the top's name, its ports (name, direction, bits) and the digest the folder
  was made from.

A waveform or toggle count of the simulation (:mod:`flows.power`) names the nets ``n<bit>``, so
transitions map back to ``netlist.json``'s bits (whose cells keep their flattened names, and so
their part, :func:`part_of`) without guessing at a simulator's name mangling.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.gen.yosys import run_yosys, yosys_version

__all__ = ["GateSources", "gate_sources", "part_of", "GATE_OPTIONS"]

#: The ``asic`` synthesis options of every gate-level netlist (the power runs and the whole-core
#: areas): the hierarchy kept so each cell knows its part, Yosys's Booth multipliers.
GATE_OPTIONS = dict(parts=True, booth=True)

#: The prefix ``flatten`` gives a cell of a submodule instance: ``$flatten\array.\pe_0_1.``.
_FLAT = re.compile(r"^\$flatten((?:\\[^.]+\.)+)")


def part_of(cell_name: str) -> str:
    """The instance path a flattened cell came from (``array.pe_0_1``), ``top`` for the top's
    own cells."""
    m = _FLAT.match(cell_name)
    if not m:
        return "top"
    return ".".join(p.lstrip("\\") for p in m.group(1).split(".") if p)


class GateSources:
    """The files of :func:`gate_sources` (``verilog``: cell models first, then the netlist), the
    top's name (``top``), its ports (``ports``: ``{name: {"direction", "bits"}}``) and the
    sources' ``digest``."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.verilog = [self.folder / "cells_sim.v", self.folder / "gate.v"]
        meta = json.loads((self.folder / "gate.json").read_text())
        self.top, self.ports, self.digest = meta["top"], meta["ports"], meta["digest"]


def _renamed(netlist: dict) -> tuple[dict, dict]:
    """``(netlist for Yosys, gate.json content)`` of a flattened ``write_json`` netlist."""
    mods = netlist["modules"]
    tops = [m for m, d in mods.items() if d.get("attributes", {}).get("top")]
    top = tops[0] if tops else next(iter(mods))
    mod = mods[top]
    bits = set()
    for p in mod["ports"].values():
        bits.update(b for b in p["bits"] if not isinstance(b, str))
    cells = {}
    for k, (_name, c) in enumerate(sorted(mod["cells"].items())):
        for bs in c["connections"].values():
            bits.update(b for b in bs if not isinstance(b, str))
        cells[f"c{k}"] = dict({key: c[key] for key in ("type", "parameters", "port_directions",
                                                        "connections") if key in c},
                              hide_name=0)
    nets = {name: {"hide_name": 0, "bits": p["bits"]} for name, p in mod["ports"].items()}
    for b in sorted(bits):
        nets.setdefault(f"n{b}", {"hide_name": 0, "bits": [b]})
    out = {"creator": netlist.get("creator", ""),
           "modules": {top: {"attributes": {"top": "00000000000000000000000000000001"},
                             "ports": mod["ports"], "cells": cells, "netnames": nets}}}
    ports = {n: {"direction": p["direction"], "bits": p["bits"]} for n, p in mod["ports"].items()}
    return out, {"top": top, "ports": ports}


def gate_sources(workdir: str | Path, reuse: bool = True) -> GateSources:
    """The gate-level sources of the ASIC run in ``workdir`` (module docstring), made once per
    netlist, library and Yosys version (``reuse``) in ``workdir/gate``."""
    workdir = Path(workdir)
    net_path, lib_path = workdir / "netlist.json", workdir / "cells.lib"
    for p in (net_path, lib_path):
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found: run the asic synthesis "
                                    f"(dstar synth --target asic) first")
    h = hashlib.sha256()
    for p in (net_path, lib_path):
        h.update(hashlib.sha256(p.read_bytes()).digest())
    h.update(yosys_version().encode())
    digest = h.hexdigest()[:16]
    folder = workdir / "gate"
    stamp = folder / "gate.json"
    if reuse and stamp.is_file():
        try:
            if json.loads(stamp.read_text()).get("digest") == digest:
                return GateSources(folder)
        except ValueError:
            pass
    folder.mkdir(parents=True, exist_ok=True)
    lib_text = lib_path.read_text(errors="replace")
    renamed, meta = _renamed(json.loads(net_path.read_text()))
    models = run_yosys("read_liberty -ignore_miss_func cells.lib\n"
                       "write_verilog -noattr cells_sim.v\n",
                       {"cells.lib": lib_text}, ["cells_sim.v"])
    gate = run_yosys("read_liberty -lib cells.lib\nread_json renamed.json\n"
                     f"hierarchy -top {meta['top']}\nwrite_verilog -noattr gate.v\n",
                     {"cells.lib": lib_text, "renamed.json": data_json(renamed)}, ["gate.v"])
    (folder / "cells_sim.v").write_text(models["cells_sim.v"])
    (folder / "gate.v").write_text(gate["gate.v"])
    stamp.write_text(data_json(dict(meta, digest=digest)))
    return GateSources(folder)
