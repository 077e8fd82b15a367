"""Energy of a gate-level simulation from its toggles and the library's power data.

Inputs: the flattened mapped netlist of the ASIC flow (``netlist.json``), the library
(:func:`flows.liberty.read_liberty`) and a value-change dump of the netlist's simulation from
:mod:`flows.gate`'s sources (nets named ``n<bit>``; read with ``pyvcd``'s tokenizer,
:func:`toggles_from_vcd`). :func:`energy` then charges, per cell and by *part* (the instance
path the cell was flattened from, :func:`flows.gate.part_of`):

- **internal** energy: each output pin's transitions times the mean of its ``internal_power``
  groups' ``rise_power`` and ``fall_power`` at the related input's transition and the output's
  load (the groups' ``when`` conditions are not evaluated: their mean is taken), plus each input
  pin's transitions times its own ``internal_power`` (a flip-flop's clock and data pins); a
  sequential cell's unconnected complementary output switches with the connected one;
- **switching** energy: ``½·C·V²`` per transition of each net, ``C`` the sum of its sinks' pin
  capacitances (no wire load: pre-layout), charged to the part of the net's driver (``inputs``
  for the unit's input ports, the clock included: an ideal clock net, no clock tree);
- **leakage**: each cell's ``cell_leakage_power`` over the simulated time.

Every ``internal_power`` table is read no further than its largest index (``bounded``, the
default; :func:`bounded_library`): the area-mapped netlists have no buffer trees, so a net with
thousands of sinks gets a computed transition far past the tables (hundreds of ns against
Nangate45's 0.2 ns), where bilinear extrapolation would charge each toggle hundreds of times
its characterized energy. Bounded, a cell draws what it would behind a buffer tree, the
buffers themselves left out.

Transitions and loads come from :func:`flows.liberty.net_timing` (each net's transition from its
driver's tables, propagated from ideal inputs). The RAMs (``$mem_v2`` cells) are left out here:
their energy is a per-access figure (not counted here). Zero-delay simulation: glitches are not
counted, which underestimates deep arithmetic (multipliers) most.

Units: energies in fJ for a library in fF, V and nW (the usual, and Nangate45's); other units are
scaled.
"""

from __future__ import annotations

import io
import re
from collections import defaultdict
from pathlib import Path

from vcd.reader import TokenKind, tokenize

from .gate import part_of
from .liberty import net_timing

__all__ = ["toggles_from_vcd", "toggles_from_coverage", "energy", "clock_energy", "bounded_library",
           "PARTS_INPUTS"]

#: The part the unit's input ports (and their switching energy) are charged to.
PARTS_INPUTS = "inputs"

_CAP = {"ff": 1.0, "pf": 1e3, "nf": 1e6}
_POWER = {"pw": 1e-3, "nw": 1.0, "uw": 1e3, "mw": 1e6, "w": 1e9}
_TIME = {"ps": 1e-3, "ns": 1.0, "us": 1e3}


def _scale(unit: str, table: dict, what: str) -> float:
    u = unit.strip().strip('"').lower()
    num = "".join(ch for ch in u if ch.isdigit() or ch == ".") or "1"
    name = u[len(num):] if u.startswith(num) else u.lstrip("0123456789.")
    if name not in table:
        raise ValueError(f"{what} unit {unit!r} is not one of {sorted(table)}")
    return float(num) * table[name]


class _ScopeNames(io.RawIOBase):
    """A VCD file with Verilator's ``$rootio`` scope renamed ``_rootio`` (same length), which
    the tokenizer refuses as a scope identifier."""

    def __init__(self, path):
        self._fh = open(path, "rb")
        self._header = True
        self._pending = b""

    def readable(self):
        return True

    def readinto(self, buf):
        if not self._pending:
            if self._header:
                line = self._fh.readline()
                if b"$enddefinitions" in line or not line:
                    self._header = False
                self._pending = line.replace(b"$rootio", b"_rootio")
            else:
                self._pending = self._fh.read(1 << 20)
            if not self._pending:
                return 0
        n = min(len(buf), len(self._pending))
        buf[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self):
        self._fh.close()
        super().close()


def toggles_from_vcd(path: str | Path, top: str, ports: dict) -> tuple[dict, float]:
    """``({bit: transitions}, duration)`` of the nets of module ``top`` in a VCD of a
    :mod:`flows.gate` netlist: the one-bit wires ``n<bit>`` and the ports (``ports``: ``{name:
    {"bits"}}``, bit ``i`` of the value is ``bits[i]``). A transition is a change between 0 and 1
    after the first value (changes from or to ``x``/``z`` are not counted). ``duration``: the
    last time stamp in ns."""
    scale = 1.0
    scope, ids, ports_ids, wires = [], {}, {}, set()
    counts = defaultdict(int)
    last, t_end = {}, 0
    with io.BufferedReader(_ScopeNames(path), 1 << 20) as fh:
        for tok in tokenize(fh):
            k = tok.kind
            if k is TokenKind.CHANGE_SCALAR:
                bits = ids.get(tok.data.id_code)
                if bits is None:
                    continue
                v = tok.data.value
                v = 1 if v == "1" else 0 if v == "0" else None
                old = last.get(tok.data.id_code)
                last[tok.data.id_code] = v
                if old is not None and v is not None and old != v:
                    counts[bits[0]] += 1
            elif k is TokenKind.CHANGE_VECTOR:
                bits = ids.get(tok.data.id_code)
                if bits is None:
                    continue
                v = tok.data.value if isinstance(tok.data.value, int) else None
                old = last.get(tok.data.id_code)
                last[tok.data.id_code] = v
                if old is not None and v is not None:
                    x, i = old ^ v, 0
                    while x:
                        if x & 1 and i < len(bits) and not isinstance(bits[i], str):
                            counts[bits[i]] += 1
                        x >>= 1
                        i += 1
            elif k is TokenKind.CHANGE_TIME:
                t_end = tok.data
            elif k is TokenKind.VAR:
                if scope != [top]:
                    continue
                ref = tok.data.reference
                if ref.startswith("n") and ref[1:].isdigit():
                    ids[tok.data.id_code] = [int(ref[1:])]
                    wires.add(int(ref[1:]))
                elif ref in ports:
                    ports_ids[tok.data.id_code] = ports[ref]["bits"]
            elif k is TokenKind.SCOPE:
                scope.append(tok.data.ident)
            elif k is TokenKind.UPSCOPE:
                scope.pop()
            elif k is TokenKind.ENDDEFINITIONS:
                # A port bit is also a wire n<bit>: count it from the wire where there is one.
                for code, bits in ports_ids.items():
                    if code not in ids:
                        ids[code] = [b if b not in wires else "-" for b in bits]
            elif k is TokenKind.TIMESCALE:
                ts = tok.data
                scale = ts.magnitude.value * _TIME[ts.unit.value]
    return dict(counts), t_end * scale


_MANGLED = re.compile(r"__0([0-9A-F]{2})")
_POINT = re.compile(r"^(?P<name>[^\[:]+)(?:\[(?P<idx>\d+)\])?:[01]->[01]$")


def toggles_from_coverage(path: str | Path, top: str, ports: dict) -> dict:
    """``{bit: transitions}`` of the nets of module ``top`` from Verilator's toggle coverage
    (``--coverage-toggle``; ``coverage.dat``, one point per bit and direction, the names
    Verilator-encoded: ``__05F`` for ``_``): the one-bit wires ``n<bit>`` and the ports
    (``ports``: ``{name: {"bits"}}``). Counts both directions from the start of the run; a
    run's first value (from ``x``) is not a transition in a two-state simulator."""
    page = f"v_toggle/{top}"
    counts, port_counts = defaultdict(int), defaultdict(int)
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.startswith(b"C '"):
                continue
            body, _, count = raw.rstrip(b"\n").rpartition(b"' ")
            fields = {}
            for item in body[3:].split(b"\x01"):
                key, _, val = item.partition(b"\x02")
                if key:
                    fields[key.decode()] = val.decode(errors="replace")
            if fields.get("page") != page:
                continue
            m = _POINT.match(_MANGLED.sub(lambda x: chr(int(x.group(1), 16)), fields["o"]))
            if not m:
                continue
            name, idx = m.group("name"), m.group("idx")
            if name.startswith("n") and name[1:].isdigit() and idx is None:
                counts[int(name[1:])] += int(count)
            elif name in ports:
                bits = ports[name]["bits"]
                b = bits[int(idx or 0)] if int(idx or 0) < len(bits) else None
                if b is not None and not isinstance(b, str):
                    port_counts[b] += int(count)
    # A port bit is also a wire n<bit>: count it once, from the wire where there is one.
    for b, n in port_counts.items():
        counts.setdefault(b, n)
    return dict(counts)


class _Bounded:
    """A library table looked up with each variable at most its largest index."""

    def __init__(self, table):
        self.table = table
        self.top = {k: max(i) for k, i in zip(getattr(table, "keys", []) or [],
                                              getattr(table, "idx", []) or []) if k and i}

    def __call__(self, **point):
        return self.table(**{k: min(v, self.top[k]) if k in self.top else v
                             for k, v in point.items()})


def bounded_library(lib: dict) -> dict:
    """``lib`` (:func:`flows.liberty.read_liberty`) with every ``internal_power`` table
    (``rise``/``fall`` of each pin's ``power`` groups) bounded above by its largest index: no
    extrapolation past the characterized transitions and loads (below the smallest it still
    extrapolates, towards an unloaded output). Timing tables are left as they are."""
    cells = {}
    for name, c in lib["cells"].items():
        pins = {pin: dict(d, power=[dict(g, **{k: _Bounded(g[k]) if g.get(k) else g.get(k)
                                               for k in ("rise", "fall")})
                                    for g in d["power"]])
                for pin, d in c["pins"].items()}
        cells[name] = dict(c, pins=pins)
    return dict(lib, cells=cells)


def _mean_power(groups, **point) -> float:
    vals = [(g["rise"](**point) if g["rise"] else 0.0) + (g["fall"](**point) if g["fall"] else 0.0)
            for g in groups]
    return sum(vals) / (2 * len(vals)) if vals else 0.0


def energy(netlist: dict, lib: dict, toggles: dict, duration_ns: float,
           top: str | None = None, bounded: bool = True) -> dict:
    """Energy of a run with ``toggles`` (:func:`toggles_from_coverage` or
    :func:`toggles_from_vcd`) over ``duration_ns``, by part
    (module docstring): ``{"parts": {part: {"internal", "switching", "leakage", "cells",
    "sequential"}}, "total": {...}, "unit": "fJ", "voltage", "unknown_cells": {type: count}}``;
    ``sequential`` is the part of ``internal`` spent in flip-flops and latches (their clock pins
    included)."""
    if bounded:
        lib = bounded_library(lib)
    nt = net_timing(netlist, lib, top)
    mod, load, trans = nt["module"], nt["load"], nt["transition"]
    cap = _scale(lib.get("capacitive_load_unit") or "1ff", _CAP, "capacitive_load")
    leak = _scale(lib.get("leakage_power_unit") or "1nW", _POWER, "leakage_power")
    V = lib["voltage"]
    parts = defaultdict(lambda: dict(internal=0.0, switching=0.0, leakage=0.0, cells=0,
                                     sequential=0.0))
    driver_part, unknown = {}, defaultdict(int)
    for name, c in mod["cells"].items():
        lc = lib["cells"].get(c["type"])
        part = part_of(name)
        conn = c["connections"]
        if lc is None:
            unknown[c["type"]] += 1
            for pin, bits in conn.items():
                if c.get("port_directions", {}).get(pin) == "output":
                    for b in bits:
                        driver_part[b] = part
            continue
        p = parts[part]
        p["cells"] += 1
        p["leakage"] += lc["leakage"] * leak * duration_ns * 1e-3      # nW·ns = 1e-3 fJ
        before = p["internal"]
        outs = [pin for pin, d in lc["pins"].items() if d["direction"] == "output"]
        connected = [pin for pin in outs if conn.get(pin)]
        for pin in outs:
            bits = conn.get(pin) or (conn[connected[0]] if lc["sequential"] and connected
                                     else [])
            for b in bits:
                if isinstance(b, str):
                    continue
                if pin in conn:
                    driver_part[b] = part
                n = toggles.get(b, 0)
                if not n:
                    continue
                groups = lc["pins"][pin]["power"]
                by_rel = defaultdict(list)
                for g in groups:
                    by_rel[g["related"]].append(g)
                vals = []
                for rel, gs in by_rel.items():
                    rb = conn.get(rel, [None])[0] if rel else None
                    tin = trans.get(rb, 0.0) if rb is not None else 0.0
                    vals.append(_mean_power(gs, input_transition_time=tin,
                                            total_output_net_capacitance=load.get(b, 0.0)))
                # Table energies are in capacitance unit · V² (fJ for fF and V).
                p["internal"] += n * (sum(vals) / len(vals) if vals else 0.0) * cap
        for pin, d in lc["pins"].items():
            if d["direction"] == "output" or not d["power"]:
                continue
            for b in conn.get(pin, []):
                if isinstance(b, str):
                    continue
                n = toggles.get(b, 0)
                if n:
                    p["internal"] += n * cap * _mean_power(
                        d["power"], input_transition_time=trans.get(b, 0.0))
        if lc["sequential"]:
            p["sequential"] += p["internal"] - before
    for pname, port in mod["ports"].items():
        if port["direction"] in ("input", "inout"):
            for b in port["bits"]:
                if not isinstance(b, str):
                    driver_part[b] = PARTS_INPUTS
    for b, n in toggles.items():
        c_b = load.get(b, 0.0)
        if n and c_b:
            parts[driver_part.get(b, PARTS_INPUTS)]["switching"] += 0.5 * c_b * cap * V * V * n
    total = {k: sum(p[k] for p in parts.values()) for k in ("internal", "switching", "leakage",
                                                           "cells", "sequential")}
    return {"parts": {k: dict(v) for k, v in sorted(parts.items())}, "total": total,
            "unit": "fJ", "voltage": V, "duration_ns": duration_ns,
            "unknown_cells": dict(unknown)}


def clock_energy(netlist: dict, lib: dict, clock_bit: int, clock_ns: float,
                 top: str | None = None, bounded: bool = True) -> dict:
    """Energy of one clock cycle in which nothing but the clock moves: what :func:`energy` gives
    for the clock net's two transitions and no other (the clock pins' internal energy at the
    ideal clock's zero transition, the clock net's ``½·C·V²`` charged to ``inputs``, every
    cell's leakage over ``clock_ns``), by part, computed directly (no timing propagation: a
    quiet cycle needs none). What a unit costs per cycle while it holds still (no clock
    gating); a run's energy less ``cycles`` times this is what its data moved."""
    if bounded:
        lib = bounded_library(lib)
    mods = netlist["modules"]
    if top is None:
        tops = [m for m, d in mods.items() if d.get("attributes", {}).get("top")]
        top = tops[0] if tops else next(iter(mods))
    cap = _scale(lib.get("capacitive_load_unit") or "1ff", _CAP, "capacitive_load")
    leak = _scale(lib.get("leakage_power_unit") or "1nW", _POWER, "leakage_power")
    V = lib["voltage"]
    parts = defaultdict(lambda: dict(internal=0.0, switching=0.0, leakage=0.0, cells=0,
                                     sequential=0.0))
    unknown, load = defaultdict(int), 0.0
    for name, c in mods[top]["cells"].items():
        lc = lib["cells"].get(c["type"])
        if lc is None:
            unknown[c["type"]] += 1
            continue
        p = parts[part_of(name)]
        p["cells"] += 1
        p["leakage"] += lc["leakage"] * leak * clock_ns * 1e-3
        for pin, bits in c["connections"].items():
            d = lc["pins"].get(pin)
            if d is None or d["direction"] == "output":
                continue
            n = sum(1 for b in bits if b == clock_bit)
            if not n:
                continue
            load += n * d["capacitance"]
            if d["power"]:
                e = 2 * n * cap * _mean_power(d["power"], input_transition_time=0.0)
                p["internal"] += e
                if lc["sequential"]:
                    p["sequential"] += e
    if load:
        parts[PARTS_INPUTS]["switching"] += 0.5 * load * cap * V * V * 2
    total = {k: sum(p[k] for p in parts.values()) for k in ("internal", "switching", "leakage",
                                                           "cells", "sequential")}
    return {"parts": {k: dict(v) for k, v in sorted(parts.items())}, "total": total,
            "unit": "fJ", "voltage": V, "duration_ns": clock_ns, "unknown_cells": dict(unknown)}
