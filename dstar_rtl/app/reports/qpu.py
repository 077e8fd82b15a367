"""QPU area report: the quantization unit against the MPU it feeds, and where its area goes.

``dstar measure qpu-area`` writes ``reports/qpu_area.json`` (every figure, tool version,
configuration hash and step time), ``reports/qpu_area.md`` (the same as tables) and
``reports/qpu_area.png`` (the per-submodule breakdown as bars). Every figure is measured by Yosys
in a fresh process (:mod:`flows.synth`); nothing is typed in.

The work is in three modules: :mod:`flows.qpu_area` runs the syntheses (per preset
the QPU
and the MPU flattened for ECP5 without and with DSP blocks and for generic gates, the QPU's
per-submodule breakdown, and at paper scale the QPU against rows × cols × one PE; ``--no-paper``
skips the last) and parses their per-module cell counts; :mod:`app.reports.qpu_area_plot` draws
the
figure; this module renders the Markdown and holds the command line.

``--reuse`` reuses stored QPU and paper results of byte-identical inputs (the MPU always may).
``--markdown-only`` re-renders the Markdown and the plot from ``qpu_area.json``.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.markdown import render
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.app.reports.qpu_area_plot import plot, plottable
from dstar_rtl.flows.qpu_area import (
    MODULE_NAMES,
    MODULES,
    gates,
    metric,
    run_paper,
    run_preset,
)
from dstar_rtl.flows.synth import BUILD_ROOT, yosys_version
from dstar_rtl.gen.paths import REPORTS, ROOT
from dstar_rtl.gen.progress import say
from dstar_rtl.gen.tables import md_table, tool_seconds
from dstar_rtl.golden.config import PRESETS
from dstar_rtl.results.arrays import UnitSynth
from dstar_rtl.results.base import build, plain
from dstar_rtl.results.qpu_area import Breakdown, QpuArea
from dstar_rtl.sim.runner import source_digest

__all__ = ["MEASUREMENT", "markdown", "figures", "rate_rows"]


# -------------------------------------------------------------------------------- markdown
def _pct(v):
    return "–" if v is None else f"{100 * v:.1f} %"


def _n(v):
    return "–" if v is None else f"{v:,}"


def _area_rows(p):
    rows = []
    for unit in ("qpu", "mpu"):
        for label in ("ecp5-nodsp", "ecp5"):
            r = p.get(unit, {}).get(label, {})
            if "error" in r:
                rows.append([unit.upper(), label, f"failed: {r['error']}"] + [""] * 6)
                continue
            x = r.get("resources", {})
            rows.append([unit.upper(), "no DSP" if label == "ecp5-nodsp" else "DSP",
                         _n(x.get("lut_total")), _n(x.get("lut4")), _n(x.get("carry")),
                         _n(x.get("ff")), _n(x.get("dsp")), _n(x.get("bram")),
                         _n(x.get("lutram")), tool_seconds(r)])
    return rows


def _generic_rows(p):
    rows = []
    for unit in ("qpu", "mpu"):
        r = p.get(unit, {}).get("generic", {})
        if "error" in r:
            rows.append([unit.upper(), f"failed: {r['error']}", "", "", "", ""])
            continue
        x = r.get("resources", {})
        tx = x.get("transistors")
        rows.append([unit.upper(), _n(gates(r)), _n(x.get("ff")),
                     _n(x.get("memory_bits")),
                     "–" if tx is None else f"{tx:,}" + ("" if r.get("transistors_complete")
                                                          else "+"), tool_seconds(r)])
    return rows


def _dsp_note(p) -> list:
    a = p.get("qpu", {}).get("ecp5-nodsp", {}).get("resources")
    b = p.get("qpu", {}).get("ecp5", {}).get("resources")
    if a and b and a == b:
        return ["The QPU has no multiplier that Yosys maps to a DSP block: its DSP run is "
                "identical to its no-DSP run.", ""]
    return []


def _breakdown_table(bd) -> str:
    """A table per submodule: the unflattened ECP5 run's columns (if any), then the generic's."""
    gen = bd.get("generic", {}).get("modules", {})
    ecp = bd.get("ecp5-nodsp", {}).get("modules", {})
    frac = lambda v, t: f" ({100 * v / t:.0f} %)" if v is not None and t else ""  # noqa: E731
    cols = []
    if ecp:
        cols += [("ECP5 LUT total", ecp, "lut_total", True), ("ECP5 FF", ecp, "ff", True),
                 ("ECP5 DPR16X4", ecp, "lutram", False)]
    if gen:
        cols += [("generic cells", gen, "num_cells", False), ("generic FF", gen, "ff", False),
                 ("transistors", gen, "transistors", True)]
    if not cols:
        return ""

    def get(mods, m, key):
        x = mods.get(m)
        if x is None:
            return None
        return x.get("num_cells") if key == "num_cells" else x["resources"].get(key)

    def total(mods, key):
        return sum(get(mods, m, key) or 0 for m in mods)

    rows = []
    for m in list(MODULES) + [k for k in {**gen, **ecp} if k not in MODULES]:
        if m not in gen and m not in ecp:
            continue
        rows.append([MODULE_NAMES.get(m, m)] + [
            _n(get(mods, m, key)) + (frac(get(mods, m, key), total(mods, key)) if pct else "")
            for _, mods, key, pct in cols])
    rows.append(["**total**"] + [_n(total(mods, key)) for _, mods, key, _ in cols])
    return md_table(["submodule"] + [c[0] for c in cols], rows)


def _top_note(bd):
    out = []
    for label, name in (("ecp5-nodsp", "ECP5"), ("generic", "generic")):
        r = bd.get(label, {}).get("modules", {}).get("top", {}).get("resources", {})
        if r.get("ff") is not None and r.get("digit_store_ff") is not None:
            out.append(f"{name}: {_n(r.get('digit_store_ff'))} digit-store and "
                       f"{_n(r.get('counter_ff'))} counter FFs of the top's {_n(r['ff'])}")
    return "; ".join(out)


def _dominant(bd):
    """The submodule with the most generic transistors and its fraction."""
    mods = bd.get("generic", {}).get("modules", {})
    vals = {m: x["resources"].get("transistors") or 0 for m, x in mods.items()}
    if not vals or not sum(vals.values()):
        return None
    m = max(vals, key=vals.get)
    return m, vals[m] / sum(vals.values())


def _flow_note(p) -> list:
    """A line naming the runs that took the abc fallback of fpga/synth.py."""
    runs = [f"{unit} {label}" for unit in ("qpu", "mpu") for label, r in p.get(unit, {}).items()
            if isinstance(r, dict) and r.get("flow", "flat") != "flat"]
    if not runs:
        return []
    return [f"LUTs of {', '.join(runs)} were mapped by `abc -lut 4`: Yosys 0.70's abc9 asserts "
            "on this design (`flows/synth.py`, docs/architecture.md §7).", ""]


def _share_table(p) -> str | None:
    rows = []
    for label, s in p.get("share", {}).items():
        for k, v in s.items():
            q, m = metric(p["qpu"][label], k), metric(p["mpu"][label], k)
            if q or m:
                rows.append([label, k, _n(q), _n(m), _pct(v)])
    return (md_table(["flow", "metric", "QPU", "MPU", "QPU / (QPU + MPU)"], rows, 2)
            if p.get("share") else None)


def _breakdown(bd) -> dict | None:
    if not bd:
        return None
    dom = _dominant(bd)
    return dict(table=_breakdown_table(bd), top=_top_note(bd),
                dominant=dom and f"{MODULE_NAMES.get(dom[0], dom[0])} ({dom[1]:.0%})",
                errors=[f"{k}: {v['error']}" for k, v in bd.items() if "error" in v])


def _paper(paper) -> dict | None:
    if not paper:
        return None
    rows = []
    for unit in ("qpu", "pe"):
        r = paper.get(unit, {})
        if "error" in r:
            rows.append([unit.upper(), f"failed: {r['error']}", "", "", "", ""])
            continue
        x = r.get("resources", {})
        rows.append([unit.upper(), _n(gates(r)), _n(x.get("ff")), _n(x.get("memory_bits")),
                     _n(x.get("transistors")), tool_seconds(r)])
    bd = paper.get("breakdown", {})
    dom = _dominant(bd) if bd.get("generic", {}).get("modules") else None
    return dict(data=paper, table=md_table(["unit", "cells", "FF", "memory bits", "transistors",
                                            "Yosys s"], rows),
                breakdown=_breakdown_table(bd) if bd.get("generic", {}).get("modules") else None,
                dominant=dom and f"{MODULE_NAMES.get(dom[0], dom[0])} ({dom[1]:.0%})")


def _markdown(data: dict) -> str:
    """``reports/qpu_area.md`` (``app/templates/qpu_area.md``) from the result as plain data."""
    presets = [dict(data=p, notes=_flow_note(p) + _dsp_note(p), share=_share_table(p),
                    breakdown=_breakdown(p.get("breakdown")),
                    area=md_table(["unit", "multipliers", "LUT total", "LUT4", "CCU2C", "FF",
                                   "MULT18X18D", "DP16KD", "DPR16X4", "Yosys s"],
                                  _area_rows(p), 2),
                    generic=md_table(["unit", "cells", "FF", "memory bits (in FF)",
                                      "transistors", "Yosys s"], _generic_rows(p)))
               for p in data.get("presets", {}).values()]
    rate = data.get("rate")
    steps = data.get("steps")
    return render(
        "qpu_area", data=data, presets=presets, paper=_paper(data.get("paper")),
        comparison=_comparison(data),
        arrays=", ".join(f"{p['config']['rows']}×{p['config']['cols']} (`{p['preset']}`)"
                         for p in data.get("presets", {}).values() if "config" in p),
        rate=rate and md_table(
            ["preset", "packing", "phase", "groups/cycle", "sub-ch/cycle", "MPU wait cycles",
             "groups"],
            [[r["preset"], r.get("packing") or f"sort, open {r.get('open_groups', 0)}, windows "
              f"{r.get('pack_windows', 1)}", r["phase"], f"{r['groups_per_cycle']:.3f}",
              f"{r['subchannels_per_cycle']:.3f}", _n(r["mpu_wait_cycles"]), _n(r["groups"])]
             for r in rate.values()], 3),
        steps=None if steps is None else md_table(
            ["step", "seconds", "load avg", "status"],
            [[s["step"], f"{s['seconds']:.1f}", f"{s['load_avg_1min']:.2f}", s["status"]]
             for s in steps], 1),
        tools=md_table(["tool", "version"], [[k, v] for k, v in data.get("tools", {}).items()],
                       2),
        work=os.path.relpath(BUILD_ROOT, ROOT))[:-1]


def rate_rows(path: Path) -> dict:
    """The rows of ``dstar measure qpu-rate``'s result (:class:`app.benches.qpu.QpuRate`, loaded
    as its type: a file of another kind or schema is a :class:`~gen.errors.UserError`), as this
    report stores them: ``{key: row}``."""
    from dstar_rtl.results.base import plain
    from dstar_rtl.results.qpu_rate import QpuRate

    return {r.key: plain(r) for r in QpuRate.load(path).rows}


def _comparison(data) -> list:
    """The lines of the comparison with the paper's 1.8 % of a core (the template says the
    rest)."""
    lines = []
    for p in data.get("presets", {}).values():
        s = p.get("share", {})
        lut = s.get("ecp5-nodsp", {}).get("lut_total")
        tx = s.get("generic", {}).get("transistors")
        if lut is not None or tx is not None:
            c = p.get("config", {})
            lines.append(f"- `{p['preset']}` ({c.get('rows')}×{c.get('cols')} array, sorter "
                         f"{c.get('sort_n')}): QPU = {_pct(lut)} of QPU + MPU in ECP5 LUTs "
                         f"(no DSP), {_pct(tx)} in generic transistors.")
    e = data.get("paper", {}).get("estimate")
    if e:
        lines.append(f"- `paper` (64×64, sorter 64), estimated: {e['share']:.2%} of QPU + "
                     f"{e['pes']:,} PEs in generic transistors.")
    return lines


# ------------------------------------------------------------------------------ measurement
def _data(result: QpuArea) -> dict:
    """The result as the renderers read it: plain data without the figures that are not
    there, and its date."""
    return dict(plain(result, present=True), date=result.provenance.date)


def markdown(result: QpuArea) -> str:
    """``reports/qpu_area.md`` from its result."""
    return _markdown(_data(result))


def figures(result: QpuArea) -> dict:
    """``qpu_area.png`` when the result holds a breakdown to plot."""
    data = _data(result)
    return {"qpu_area.png": lambda f: plot(data, f)} if plottable(data) else {}


@dataclass(frozen=True)
class QpuAreaOptions:
    """What ``dstar measure qpu-area`` synthesizes."""

    presets: tuple[str, ...] = option(("fpga", "tiny"), "presets to synthesize",
                                      choices=sorted(PRESETS))
    reuse: bool = option(False, "reuse stored QPU and paper results of byte-identical inputs "
                                "and the same Yosys (the MPU's always may be)")
    no_breakdown: bool = option(False, "skip the per-submodule runs")
    no_paper: bool = option(False, "skip the paper-scale estimate")


def measure(opts: QpuAreaOptions, previous=None) -> QpuArea:
    """Every preset's QPU and MPU, their breakdown, the paper-scale estimate (progress on
    stderr); the rate from ``dstar measure qpu-rate``'s result when it is there."""
    import amaranth

    rate_path = REPORTS / "qpu_rate.json"
    rate = rate_rows(rate_path) if rate_path.exists() else None   # bad input before any work
    steps = []
    t0 = time.perf_counter()
    tools = {"amaranth": amaranth.__version__, "yosys": yosys_version()}
    say(f"report_qpu: presets {list(opts.presets)}, yosys {tools['yosys']}, "
        f"amaranth {tools['amaranth']}")
    memo = {}  # (unit, preset, config hash) -> RTLIL text: each design elaborated once
    presets = {name: run_preset(name, steps, opts.reuse, breakdown=not opts.no_breakdown,
                                memo=memo) for name in opts.presets}
    paper = None if opts.no_paper else run_paper(steps, opts.reuse, memo=memo)
    data = dict(host=dict(cpus=os.cpu_count(), machine=platform.machine(),
                          python=platform.python_version(),
                          load_avg_start=round(os.getloadavg()[0], 2)),
                tools=tools, steps=steps, presets=presets, paper=paper, rate=rate,
                source_digest=source_digest(),
                total_seconds=round(time.perf_counter() - t0, 1))
    data["plot"] = "qpu_area.png" if plottable(data) else None
    prov = run_provenance("qpu-area", {n: p["config_hash"] for n, p in presets.items()})
    return build(QpuArea, dict(_known(data), provenance=plain(prov)), "the QPU area")


def _known(data: dict) -> dict:
    """``data`` with only what the typed result keeps of each run (not its work folder, log,
    netlist or script)."""
    def run(r):
        return {k: v for k, v in r.items() if k in UnitSynth.__dataclass_fields__}

    def bd(b):
        return {k: v for k, v in b.items() if k in Breakdown.__dataclass_fields__}
    out = dict(data)
    out["presets"] = {n: dict(p, qpu={k: run(v) for k, v in p["qpu"].items()},
                              mpu={k: run(v) for k, v in p["mpu"].items()},
                              **({"breakdown": {k: bd(v) for k, v in p["breakdown"].items()}}
                                 if p.get("breakdown") else {}))
                      for n, p in data["presets"].items()}
    if data["paper"] is not None:
        pp = data["paper"]
        out["paper"] = dict(pp, qpu=run(pp["qpu"]), pe=run(pp["pe"]),
                            breakdown={k: bd(v) for k, v in pp.get("breakdown", {}).items()})
    return out


def failure(result: QpuArea) -> str | None:
    """The steps that failed, or ``None``."""
    failed = [s for s in result.steps
              if s.status != "ok" and not s.status.startswith("reused")]
    if failed:
        return (f"{len(failed)} of {len(result.steps)} steps failed (listed in qpu_area.md); "
                f"the first: {failed[0].step}: {failed[0].status}")
    return None


MEASUREMENT = Measurement(
    name="qpu-area", stem="qpu_area",
    summary="The QPU's area against the MPU it feeds at each preset, by submodule, and at "
            "paper scale (Yosys; about 3 minutes).",
    options=QpuAreaOptions, result=QpuArea, measure=measure, render=markdown,
    figures=figures, failure=failure)
