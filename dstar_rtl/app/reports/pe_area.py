"""Issue-28 report: the DSTAR PE against the INT8 PE in standard cells, lever by lever.

``dstar measure pe-area [--presets fpga paper] [--liberty FILE.lib]`` writes
``reports/pe_area.json`` (the typed result :class:`PeArea`) and ``reports/pe_area.md`` through
the one measurement runner (:data:`MEASUREMENT`): one PE of each preset's default
configuration synthesized alone on the standard-cell library (:func:`flows.synth.synthesize`,
``asic`` target, the whole-core comparison's options :data:`flows.core_parts.ASIC_OPTIONS`
without the hierarchy), then the same PE with each lever of :data:`DSTAR_LEVERS` alone, and the
INT8 PE (``baseline_pe``) of the INT8 core's configuration (``datapath="int8"``) with each of
:data:`INT8_LEVERS`. A PE synthesized alone is the array's
PE as :mod:`gen.units` builds it: with the presets' broadcast operands (``weight_hop``,
``act_hop`` > 1) its operands arrive as wires, as in every PE of the array but the few that
register them.

Each row gives the cells' area (combinational and sequential), flip-flops, the critical path
(:func:`flows.liberty.critical_path`: NLDM tables, no wire load), and the PE's rate on a workload:
values per cycle ``lanes × fill / (bits / 2)`` for DSTAR (a 2-bit digit per lane and cycle;
``bits`` the average activation bits, ``fill`` the lane utilization) and 1 for INT8, so that
``µm² per value/cycle`` sets area against throughput and ``PE per µm² vs INT8`` is the INT8 PE's
µm² per value/cycle over the row's. The workload per preset (:func:`workload`): ``paper`` the
whole-core comparison's (``reports/compare.json``: the projection's ``ours``), ``fpga`` the
bench's (``reports/bench.json``: trained digits DiT). A lever that changes ``lanes`` keeps the
preset's measured fill: the fill at another width is not measured (an upper bound for 8 lanes).
A narrower saturating accumulator (``overflow_detect``) is exact only while its sticky flag stays
clear; the report says so beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.measurement import Measurement, check_among, option
from dstar_rtl.app.options import check_liberty, resolve_liberty
from dstar_rtl.bench.pe_area import DSTAR_LEVERS, INT8_LEVERS, levers, measure
from dstar_rtl.flows.synth import yosys_version
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.paths import REPORTS
from dstar_rtl.gen.tables import md_table
from dstar_rtl.results.base import build
from dstar_rtl.results.pe_area import PeArea, PeRow, PresetPes
from dstar_rtl.results.quantities import Library

__all__ = ["DSTAR_LEVERS", "INT8_LEVERS", "workload", "levers", "measure", "unused_int8_levers",
           "markdown", "PeArea", "PeAreaOptions", "PeRow", "MEASUREMENT"]

PRESETS = ("fpga", "paper")

def workload(name: str, out: Path) -> dict:
    """``{bits, fill, source}`` of the preset's workload (module docstring); a missing report is
    a :class:`UserError` naming the command that writes it."""
    if name == "paper":
        path = out / "compare.json"
        if not path.is_file():
            raise UserError(f"{path} not found; run `dstar measure compare` first")
        from dstar_rtl.results.compare import Compare

        paper = Compare.load(path).paper
        if paper is None:
            raise UserError(f"{path} holds no paper comparison; run `dstar measure compare` "
                            f"with paper")
        w = paper.workload
        return dict(bits=w.bits, fill=w.fill,
                    source=f"reports/compare.json, paper workload {w.name!r}")
    path = out / "bench.json"
    if not path.is_file():
        raise UserError(f"{path} not found; run `dstar measure bench` (make bench) first")
    from dstar_rtl.results.bench import Bench

    t = Bench.load(path).totals.all
    return dict(bits=round(t.mean_act_bits, 3), fill=round(t.lane_util, 4),
                source="reports/bench.json, trained digits DiT (make bench)")


def _row(rows, kind: str, lever: str) -> PeRow:
    return next(r for r in rows if r.kind == kind and r.lever == lever)


def unused_int8_levers(rows) -> list:
    """INT8 rows smaller than the INT8 default whose critical path is no longer than the DSTAR
    default's: optimizations a clock-matched INT8 baseline could take and its default does
    not."""
    ref, d = _row(rows, "int8", "default"), _row(rows, "dstar", "default")
    return [r for r in rows
            if r.kind == "int8" and r.area_um2 < ref.area_um2
            and r.critical_ns and d.critical_ns and r.critical_ns <= d.critical_ns]


def markdown(rec: PeArea) -> str:
    """``reports/pe_area.md`` from its result."""
    md = ["# The DSTAR PE against the INT8 PE in standard cells, lever by lever", "",
          f"Generated {rec.provenance.date} by `{rec.provenance.command}`; Yosys {rec.yosys}, "
          f"library {rec.liberty.name} (sha256 `{rec.liberty.sha256[:16]}`), `synth -booth` "
          "as in the whole-core comparison. One PE alone per row (as the array builds it: the "
          "presets broadcast their operands, so they arrive as wires); each lever alone from "
          "the preset's default, INT8's from the INT8 core's (`datapath = \"int8\"`, no PE "
          "stage). Rate: values per cycle = lanes × fill / (bits / 2) for DSTAR, "
          "1 for INT8; *per µm² vs INT8* is the INT8 default's µm² per value/cycle over the "
          "row's. Critical path from the library's NLDM tables, no wire load.", ""]
    for name, p in rec.presets.items():
        wl = p.workload
        md += [f"## `{name}`", "",
               f"Workload: {wl.bits:g} average bits, lane fill {wl.fill:g} ({wl.source}). "
               "Rows with other lanes keep this fill (not measured at their width).", ""]
        head = ["PE", "lever", "µm²", "vs default", "comb.", "seq.", "FF", "acc bits",
                "critical ns", "values/cycle", "µm² per value/cycle", "per µm² vs INT8"]
        body = []
        for row in p.rows:
            vs = f"{100 * row.area_vs_default:+.1f} %" if row.area_vs_default is not None else ""
            body.append([row.kind.upper() if row.kind == "int8" else "DSTAR",
                         row.lever, f"{row.area_um2:,.1f}", vs,
                         f"{row.comb_um2:,.1f}", f"{row.seq_um2:,.1f}", row.ff, row.acc_bits,
                         f"{row.critical_ns:.2f}" if row.critical_ns else "–",
                         f"{row.values_per_cycle:.2f}", f"{row.um2_per_value:,.1f}",
                         f"{row.per_um2_vs_int8:.2f}×"])
        md += [md_table(head, body), ""]
        unused = unused_int8_levers(p.rows)
        if unused:
            names = "; ".join(f"{r.lever} ({r.area_um2:,.1f} µm², {r.critical_ns:.2f} ns)"
                              for r in unused)
            md += ["INT8 levers that make its PE smaller without a longer critical path than "
                   f"the DSTAR default's, which the INT8 core's default does not take: {names}.",
                   ""]
    md += ["A saturating accumulator narrower than the derived width (numerics §2.1) is exact "
           "only while its sticky overflow flag stays clear: the flag, not this table, says "
           "whether a model fits it.", ""]
    return "\n".join(md)


@dataclass(frozen=True)
class PeAreaOptions:
    """What ``dstar measure pe-area`` measures (checked at construction)."""

    presets: tuple[str, ...] = option(PRESETS, "presets to measure", choices=PRESETS)
    liberty: Path | None = option(None, "standard-cell library (default: the Nangate45 library "
                                        "beside the project)")
    reuse: bool = option(False, "reuse stored synthesis results of identical designs and "
                                "scripts")
    inputs: Path = option(REPORTS, "folder of bench.json and compare.json, whose workloads the "
                                   "rates come from", metavar="DIR")

    def __post_init__(self):
        check_among("--presets", self.presets, PRESETS)
        for name in self.presets:       # the workloads it reads, before any synthesis
            workload(name, Path(self.inputs))
        check_liberty(resolve_liberty(self.liberty))


def measure_pes(opts: PeAreaOptions, previous=None) -> PeArea:
    """Every lever's PE for each preset of ``opts`` (progress on stderr)."""
    liberty = resolve_liberty(opts.liberty)
    info = check_liberty(liberty)
    presets = {}
    for name in opts.presets:
        m = measure(name, str(liberty), opts.reuse, workload(name, Path(opts.inputs)))
        presets[name] = build(PresetPes, dict(workload=m["workload"],
                                              rows=list(m["rows"].values())), f"pe-area {name}")
    return PeArea(run_provenance("pe-area", {f"{n}/{r.kind}/{r.lever}": r.config_hash
                                                for n, p in presets.items() for r in p.rows}),
                  yosys=yosys_version(), liberty=Library.from_flow(info), presets=presets)


MEASUREMENT = Measurement(
    name="pe-area", stem="pe_area",
    summary="The DSTAR PE against the INT8 PE in standard cells, lever by lever: area, critical "
            "path and area per value and cycle on each preset's workload.",
    options=PeAreaOptions, result=PeArea, measure=measure_pes, render=markdown)
