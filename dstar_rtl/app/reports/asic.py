"""ASIC cell area of the units on a standard-cell library (Nangate45 by default).

``dstar measure asic [--liberty FILE] [--jobs 2] [--reuse]`` synthesizes, one fresh
Yosys process per configuration (``flows.synth.synthesize(..., "asic")``: ``synth``,
``dfflibmap``, ``abc -liberty``, ``stat -liberty``), in parallel over ``--jobs`` processes:

- ``pe`` and ``baseline_pe`` (``tiny``, ``fpga``), flattened, with and without ``synth -booth``;
- ``mpu`` and ``baseline`` (``tiny``, ``fpga``) with their hierarchy kept (area of the PEs, the
  array's skew and drain chain, the front end), the weight memory left out as a macro (its bits
  listed apart); the baseline also with ``-booth``;
- ``qpu`` and ``vpu`` (``tiny``) by part, RAMs left out as macros, ROM tables as logic.

It writes ``reports/asic_area.json`` (the typed result :class:`AsicReport`) and
``reports/asic_area.md`` through the one measurement runner (:data:`MEASUREMENT`). The INT8
baseline is taken at
its best (the smaller area of the runs with and without ``-booth``) for the DSTAR/INT8 ratios.
Without ``--liberty`` it uses ``../shared/pdk/nangate45/nangate45_typ.lib.gz`` beside the
project, and stops with a one-line message when that file is absent. The library is never
copied into the repository: the report records its file name and sha256.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.app.options import check_liberty, resolve_liberty
from dstar_rtl.bench.asic import LEVERS, RUNS, collect, run_key, synthesize_runs
from dstar_rtl.flows.liberty import NANGATE
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.paths import ROOT
from dstar_rtl.gen.progress import say
from dstar_rtl.gen.tables import md_table
from dstar_rtl.results.asic import (
    AsicReport,
    AsicUnit,
    Best,
    LeverRatio,
    Ratio,
    Worktree,
)
from dstar_rtl.results.base import build
from dstar_rtl.results.quantities import Library


def _f(v, nd=0):
    return "–" if v is None else f"{v:,.{nd}f}"


def render(rep: AsicReport) -> str:
    """``reports/asic_area.md`` from its result."""
    lib = rep.liberty
    u = rep.units
    md = ["# ASIC cell area (standard cells)", "",
          f"Library **{lib.name}** (`{lib.file}`, sha256 `{lib.sha256}`), "
          f"Yosys {rep.yosys}; `dstar measure asic` (`flows/synth.py`, target "
          "`asic`): `synth` (flattened for single PEs, hierarchy kept for the units broken "
          "down by part), `dfflibmap -liberty`, `abc -liberty`, `stat -liberty`; one fresh "
          "Yosys process per configuration. Areas in µm² (the library's unit); *sequential* "
          "is the area of the library's `ff`/`latch` cells, *combinational* the rest; they sum "
          "to the total. RAMs (memories with a write port: the arrays' weight buffers, the "
          "VPU's and QPU's buffers) are **left out as macros**: their bits are listed, their "
          "area is in no total; ROM tables are synthesized as logic.", "",
          "*Delay* is the critical path of the mapped netlist in ns, computed by "
          "`flows/liberty.py` from the library's NLDM tables (clock-to-Q, cell delays at the "
          "actual fan-out load, setup): no wire load, ideal clock and inputs, the netlist as "
          "ABC maps it for area (no buffer trees, so high-fan-out enables and broadcasts weigh "
          "in the arrays; a placed, buffered design is faster). It is not ABC's own `stime` "
          "figure: the WebAssembly Yosys loses ABC's standard output, and Yosys `sta` has only "
          "unit delays. For the single PEs it is a logic-depth figure worth comparing; for the "
          "units by part the path is a few cells driving one net with hundreds of loads, far "
          "outside the library's tables (extrapolated), so it says *that net needs a buffer "
          "tree*, not what clock the unit reaches.", "",
          "## Single PEs (flattened)", ""]
    rows = []
    for unit, label in (("pe", "SlicePE (DSTAR)"), ("baseline_pe", "Int8PE (baseline)")):
        for name in ("tiny", "fpga"):
            for booth, lv in ((b, lv) for lv in LEVERS for b in (False, True)):
                k = run_key(unit, name, booth, lv)
                if k not in u:
                    continue
                s = u[k]
                b = rep.best.get(f"{unit}-{name}")
                bst = b is not None and b.key == k
                rows.append([f"{label} `{name}`" + (" `-booth`" if booth else "")
                             + (f" {lv}" if lv else "")
                             + (" **best**" if bst else ""), _f(s.area, 1),
                             _f(s.combinational, 1), _f(s.sequential, 1), _f(s.ff),
                             _f(s.cells), f"{s.delay_ns:.2f}", s.levels])
    md += [md_table(["unit", "area µm²", "comb.", "seq.", "FF", "cells", "delay ns (unbuffered)",
                   "levels"],
                  rows), ""]
    md += ["## Arrays and units by part (hierarchy kept)", ""]
    for k, s in u.items():
        if s.parts is None:
            continue
        mem = ", ".join(f"`{m.name}` {m.size}×{m.width} = {m.bits:,} bits"
                        for m in s.memories) or "none"
        md += [f"### `{k}`", "",
               md_table(["part", "modules", "area µm²", "share", "comb.", "seq.", "FF"],
                        [[p, v.modules, _f(v.area, 1), f"{100 * v.area / s.area:.1f} %",
                          _f(v.combinational, 1), _f(v.sequential, 1), _f(v.ff)]
                         for p, v in sorted(s.parts.items(), key=lambda kv: -kv[1].area)]
                        + [["**total**", "", f"**{_f(s.area, 1)}**", "",
                            _f(s.combinational, 1), _f(s.sequential, 1), _f(s.ff)]]),
               "", f"RAMs left out as macros: {mem}. ROM bits as logic: {s.rom_bits:,}. "
               f"Critical path (unbuffered, see above) {s.delay_ns:.2f} ns over "
               f"{s.levels} cells; "
               f"Yosys {s.seconds:,.0f} s.", ""]
    if rep.levers:
        md += ["## The slice PE's levers, each on its own (flattened PE)", "",
               "`select`: digit products as selects of the weight's multiples, negations as "
               "carry-ins (`digit_product`); `booth`: radix-4 Booth digits {-2..2} from the "
               "QPU (`digits`); both bit-exact against the same golden. `acc26`: a 26-bit "
               "saturating accumulator with the sticky overflow flag (`acc_width=26, "
               "overflow_detect=True`) instead of the derived width: exact while the flag stays "
               "clear, which a workload must show. `bcast`: the weights broadcast down each "
               "column (`weight_hop = rows`), so the PE has no forwarding register for them and "
               "their control; `xbcast`: also the row operands along each row (`act_hop = cols`"
               ": no forwarding register and no skew in the array). Both apply to the INT8 side "
               "too. Against the INT8 PE at its best. *Same design as*: the lever's "
               "overrides equal that run's configuration (today's default already has them), "
               "so it is that synthesis, not a new one.", "",
               md_table(["lever", "preset", "DSTAR µm²", "INT8 best µm²", "DSTAR / INT8", "FF",
                       "delay ns", "same design as"],
                      [[v.lever, v.preset, _f(v.dstar, 1), _f(v.int8_best, 1),
                        f"{v.ratio:.3f}", v.ff, f"{v.delay_ns:.2f}", v.same_design_as or ""]
                       for v in rep.levers.values()]), ""]
    md += ["## DSTAR / INT8 area ratios", "",
           "Both sides at their best: INT8 the smaller of the runs with and without `-booth`, "
           "DSTAR the smallest of its lever settings (with `acc26` exact while its flag stays "
           "clear); the arrays without their weight memories.", "",
           md_table(["", "DSTAR µm²", "DSTAR levers", "INT8 best µm²", "DSTAR / INT8"],
                  [[k, _f(v.dstar, 1), v.dstar_lever or "default",
                    _f(v.int8_best, 1), f"{v.ratio:.3f}"]
                   for k, v in rep.ratios.items()]), ""]
    if rep.failed:
        md += ["## Runs that failed", ""] + [f"- `{k}`: {v}" for k, v in rep.failed.items()]
        md += [""]
    wt = rep.worktree
    md += [f"Generated {rep.provenance.date} from commit `{(wt.commit or '?')[:12]}`"
           + (f" with uncommitted changes to {', '.join(f'`{m}`' for m in wt.modified)}"
              if wt.modified else "") + " (config hashes in the JSON).", ""]
    return "\n".join(md)


def _worktree() -> dict:
    """The commit and the uncommitted changes to the sources elaboration reads."""
    import subprocess

    def git(*a):
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True,
                                  timeout=30).stdout.rstrip("\n")
        except (OSError, subprocess.SubprocessError):
            return ""
    return dict(commit=git("rev-parse", "HEAD").strip(),
                modified=[ln[3:] for ln in git("status", "--porcelain", "--", "dstar_rtl/rtl",
                                                 "dstar_rtl/golden", "dstar_rtl/gen").splitlines()])


@dataclass(frozen=True)
class AsicOptions:
    """What ``dstar measure asic`` synthesizes (checked at construction)."""

    liberty: Path | None = option(None, f"the library (default: {NANGATE})")
    jobs: int = option(2, "Yosys processes at once")
    reuse: bool = option(False, "take stored results of identical runs")
    only: tuple[str, ...] = option((), "only these units", metavar="UNIT",
                                   choices=sorted({r[0] for r in RUNS}))

    def __post_init__(self):
        if self.jobs < 1:
            raise UserError(f"--jobs must be at least 1, not {self.jobs}")
        check_liberty(resolve_liberty(self.liberty))


def measure(opts: AsicOptions, previous=None) -> AsicReport:
    """Every run of :data:`RUNS` (or of ``--only``'s units) on the library, designs that equal
    another run's synthesized once (progress on stderr)."""
    from dstar_rtl.flows.synth import yosys_version

    liberty = resolve_liberty(opts.liberty)
    info = check_liberty(liberty)
    runs = [r for r in RUNS if not opts.only or r[0] in opts.only]
    say(f"{len(runs)} configurations on {info['name']} ({liberty.name}), {opts.jobs} jobs")
    results, failed = synthesize_runs(runs, liberty, jobs=opts.jobs, reuse=opts.reuse, say=say)
    figures = collect(results)
    return AsicReport(run_provenance("asic", {k: u["config_hash"]
                                                for k, u in figures["units"].items()}),
                      liberty=Library.from_flow(info), yosys=yosys_version(),
                      units=build(dict[str, AsicUnit], figures["units"], "asic units"),
                      best=build(dict[str, Best], figures["best"], "asic best"),
                      ratios=build(dict[str, Ratio], figures["ratios"], "asic ratios"),
                      levers=build(dict[str, LeverRatio], figures["levers"], "asic levers"),
                      failed=failed, worktree=build(Worktree, _worktree(), "worktree"))


def _failed(rep: AsicReport) -> str | None:
    """After the report is written: the runs that failed, as the command's error."""
    if rep.failed:
        return f"{len(rep.failed)} runs failed; they are listed in asic_area.md"
    return None


MEASUREMENT = Measurement(
    name="asic", stem="asic_area",
    summary="Standard-cell area of the PEs, arrays, QPU and VPU (with the slice PE's levers and "
            "the DSTAR/INT8 ratios at their best) on a Liberty library, Nangate45 by default.",
    options=AsicOptions, result=AsicReport, measure=measure, render=render, failure=_failed)
