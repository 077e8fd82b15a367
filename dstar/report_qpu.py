"""QPU area report: the quantization unit against the MPU it feeds, and where its area goes.

``dstar measure qpu-area`` writes ``reports/qpu_area.json`` (every figure, tool version,
configuration hash and step time), ``reports/qpu_area.md`` (the same as tables) and
``reports/qpu_area.png`` (the per-submodule breakdown as bars). Every figure is measured by Yosys
in a fresh process (:mod:`fpga.synth`); nothing is typed in.

1. For each preset (default ``fpga`` and ``tiny``): the QPU flattened for ECP5 without and with
   DSP blocks (``synth_ecp5 [-nodsp]``) and for generic gates (cells, FFs, CMOS transistor
   estimate), and the MPU of the same preset, the same three ways. The MPU runs always use
   ``reuse=True``: the results ``dstar measure arrays`` stored for byte-identical RTLIL,
   script and Yosys are taken as they are (marked). The QPU's share of QPU + MPU follows in LUTs,
   FFs and transistors.
2. The per-submodule breakdown of the QPU from ``stat`` per module, i.e. Amaranth's
   ``dstar_qpu.front``, ``.chunker``, ``.sorter``, ``.packer``, ``.recon_fifo`` and the top
   module's own logic (digit store, statistics counters, configuration registers). Generic
   gates: :func:`fpga.synth.synthesize`'s generic flow keeps the hierarchy (plain ``synth``, no
   ``-flatten``), so its own ``stat.json``/``stat_tx.json`` already hold every module and no
   further run is needed. ECP5: one more run, ``synth_ecp5 -noflatten -nodsp``; without
   flattening Yosys cannot optimize across module boundaries, so its total differs from the
   flat one (both are reported). In that run the flip-flops of the digit store and of the
   counters are counted in the netlist by name (drivers of ``slot*`` and ``counters*``).
3. Paper scale (``--no-paper`` skips it): the QPU of the ``paper`` preset (T = 64 rows, sort_n
   64) for generic gates (with its per-module breakdown, from the same run), and one PE of the
   ``paper`` preset; the QPU's share is estimated against rows × cols × one PE (the array's PEs
   only: no MPU weight buffers, skew registers or front end, so the real share of a core is
   smaller still).

``--reuse`` reuses stored QPU and paper results of byte-identical inputs (the MPU always may).
``--markdown-only`` re-renders the Markdown and the plot from ``qpu_area.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

from fpga.synth import (
    BUILD_ROOT,
    SynthError,
    _cached,
    _histogram,
    _run,
    resources,
    synthesize,
    yosys_version,
)
from gen.paths import ROOT, relative_paths
from gen.progress import Step, say
from gen.tables import md_table, tool_seconds
from golden.config import preset
from sim.runner import source_digest

TOP = "dstar_qpu"
VARIANTS = (("ecp5", True), ("ecp5", False), ("generic", False))
# Submodules in pipeline order; "top" is dstar_qpu's own logic.
MODULES = ("front", "chunker", "sorter", "packer", "recon_fifo", "top")
MODULE_NAMES = {
    "front": "front: max, bins, quantize/slice",
    "chunker": "chunk assembler",
    "sorter": "bitonic sorter",
    "packer": "packer",
    "recon_fifo": "reconstruction FIFO",
    "top": "top: digit store, counters, config",
}


def _label(target: str, nodsp: bool) -> str:
    return f"{target}-nodsp" if target == "ecp5" and nodsp else target


# ------------------------------------------------------------------------- elaboration memo
class _MemoRTLIL:
    """Elaborate each (unit, configuration) once per process. :func:`fpga.synth.synthesize`
    imports ``gen.generate.to_rtlil`` at call time, so patching the module attribute serves it
    the memoized text (elaboration is deterministic; this only saves minutes of Amaranth)."""

    def __init__(self):
        self.memo = {}

    def __enter__(self):
        import gen.generate as gg
        self.gg, self.orig = gg, gg.to_rtlil

        def to_rtlil(unit, cfg):
            key = (unit, cfg.name, cfg.hash())
            if key not in self.memo:
                self.memo[key] = self.orig(unit, cfg)
            return self.memo[key]

        gg.to_rtlil = to_rtlil
        return self

    def __exit__(self, *exc):
        self.gg.to_rtlil = self.orig
        return False


# ------------------------------------------------------------------ hierarchical synthesis
def hier_script(top: str, nodsp: bool = True) -> str:
    """Yosys script of the unflattened ECP5 flow; writes ``stat.json`` and the flip-flop counts
    of the digit store (``slot_ff.txt``) and of the counters (``counter_ff.txt``)."""
    ff = f"{top}/t:TRELLIS_FF"
    return "\n".join([
        "read_rtlil design.il",
        f"hierarchy -check -top {top}",
        f"synth_ecp5 -top {top} -noflatten{' -nodsp' if nodsp else ''}",
        "delete t:$scopeinfo",
        "tee -q -o stat.json stat -json",
        f"tee -q -o slot_ff.txt select -count {top}/w:slot* %ci1:+[Q] {ff} %i",
        f"tee -q -o counter_ff.txt select -count {top}/w:counters* %ci1:+[Q] {ff} %i",
    ]) + "\n"


def _short(module: str, top: str) -> str:
    name = module.lstrip("\\")
    return "top" if name == top else name.removeprefix(top + ".")


def _tx(v):
    m = re.match(r"(\d+)", str(v if v is not None else ""))
    return int(m.group(1)) if m else None


def _count(path: Path):
    m = re.search(r"(\d+) objects", path.read_text()) if path.exists() else None
    return int(m.group(1)) if m else None


def parse_hier(workdir: Path, target: str, top: str = TOP) -> dict:
    """Per-module resources of an unflattened run in ``workdir`` (an ECP5 run of
    :func:`synthesize_hier` or a generic run of :func:`fpga.synth.synthesize`): ``{modules:
    {short name: {resources, cells, num_cells}}, total: {...}}``. Module instances are not
    counted as cells, and each module's transistors are its own (Yosys's figure for a parent
    includes its children's, which are subtracted)."""
    stats = json.loads((workdir / "stat.json").read_text())["modules"]
    inst = {m.lstrip("\\") for m in stats}
    mods, children = {}, {}
    for m, s in stats.items():
        hist = {k: v for k, v in _histogram(s).items() if k.lstrip("\\") not in inst}
        children[m] = {k: v for k, v in s.get("num_cells_by_type", {}).items()
                       if k.lstrip("\\") in inst}
        res = resources(target, hist)
        mods[_short(m, top)] = dict(resources=res, cells=hist, num_cells=sum(hist.values()))
    if target == "generic":
        tx = {m: _tx(s.get("estimated_num_transistors"))
              for m, s in json.loads((workdir / "stat_tx.json").read_text())["modules"].items()}
        for m in stats:
            sub = sum(n * (tx.get("\\" + c.lstrip("\\")) or tx.get(c) or 0)
                      for c, n in children[m].items())
            own = tx.get(m)
            if own is not None and sub and own >= sub:
                own -= sub
            mods[_short(m, top)]["resources"]["transistors"] = own
    top_r = mods.get("top", {}).get("resources", {})
    top_r["digit_store_ff"] = _count(workdir / "slot_ff.txt")
    top_r["counter_ff"] = _count(workdir / "counter_ff.txt")
    total = {}
    for r in mods.values():
        for k, v in r["resources"].items():
            if isinstance(v, (int, float)) and k not in ("digit_store_ff", "counter_ff"):
                total[k] = total.get(k, 0) + v
    ordered = {k: mods[k] for k in MODULES if k in mods}
    ordered.update({k: v for k, v in mods.items() if k not in ordered})
    return dict(modules=ordered, total=total)


def synthesize_hier(unit: str, cfg, *, nodsp: bool = True, reuse: bool = False,
                    timeout=None) -> dict:
    """Unflattened ECP5 synthesis of ``unit`` (top ``dstar_<unit>``) in
    ``build/fpga/<unit>-<preset>-<hash>/hier-ecp5[-nodsp]``; ``reuse`` as
    :func:`fpga.synth.synthesize`."""
    import shutil

    import amaranth

    from gen.generate import to_rtlil
    from gen.units import top_name

    top = top_name(unit)
    target = "ecp5"
    label = _label(target, nodsp)
    workdir = (BUILD_ROOT / f"{unit}-{cfg.name}-{cfg.hash()}" / f"hier-{label}").resolve()
    il = to_rtlil(unit, cfg)
    script = hier_script(top, nodsp)
    if reuse:
        cached = _cached(workdir, il, script)
        if cached is not None:
            return cached
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    (workdir / "design.il").write_text(il)
    t0 = time.perf_counter()
    _run(script, workdir, timeout)
    out = dict(unit=unit, preset=cfg.name, config_hash=cfg.hash(), target=target, nodsp=nodsp,
               top=top, **parse_hier(workdir, target, top),
               seconds=round(time.perf_counter() - t0, 2),
               tools={"yosys": yosys_version(), "amaranth": amaranth.__version__},
               workdir=str(workdir), log=str(workdir / "yosys.log"), script=script)
    (workdir / "result.json").write_text(json.dumps(out, indent=2) + "\n")
    return out


# ----------------------------------------------------------------------------------- steps
def _synth(steps, name, fn):
    """Run one synthesis step; returns its result (without the script) or ``{error}``."""
    try:
        with Step(steps, name):
            r = fn()
    except SynthError as exc:
        return dict(error=str(exc))
    r.pop("script", None)
    if r.get("reused"):
        steps[-1]["status"] = "reused (identical RTLIL, script and Yosys)"
    return r


def _brief(r) -> str:
    if "error" in r:
        return f"failed: {r['error']}"
    keys = ("lut_total", "ff", "dsp", "bram", "lutram", "cells", "transistors", "memory_bits")
    return ", ".join(f"{k}={r['resources'][k]:,}" for k in keys
                     if r["resources"].get(k) is not None)


def _share(q, m):
    return round(q / (q + m), 4) if q is not None and m is not None and q + m else None


def _metric(r: dict, key: str):
    """``r["resources"][key]``; generic ``cells`` without submodule instances."""
    return _gates(r) if key == "cells" else r.get("resources", {}).get(key)


def shares(qpu: dict, mpu: dict) -> dict:
    """The QPU's share of QPU + MPU for each variant: ``{label: {metric: share}}``."""
    out = {}
    for target, nodsp in VARIANTS:
        label = _label(target, nodsp)
        q, m = qpu.get(label, {}), mpu.get(label, {})
        if "resources" not in q or "resources" not in m:
            continue
        keys = (("transistors", "ff", "cells") if target == "generic"
                else ("lut_total", "ff", "dsp", "bram"))
        out[label] = {k: _share(_metric(q, k), _metric(m, k)) for k in keys}
    return out


def run_preset(name, steps, reuse, breakdown=True) -> dict:
    cfg = preset(name)
    out = dict(preset=name, config_hash=cfg.hash(), config=cfg.to_dict(), qpu={}, mpu={})
    for unit, unit_reuse in (("qpu", reuse), ("mpu", True)):
        for target, nodsp in VARIANTS:
            label = _label(target, nodsp)
            r = _synth(steps, f"synth {unit} {name} {label}",
                       lambda: synthesize(unit, cfg, target, nodsp=nodsp, reuse=unit_reuse))
            out[unit][label] = r
            say(f"      {unit} {name} {label}: {_brief(r)}")
    out["share"] = shares(out["qpu"], out["mpu"])
    say(f"      QPU share of QPU+MPU ({name}): " + "; ".join(
        f"{lab} " + ", ".join(f"{k} {v:.1%}" for k, v in s.items() if v is not None)
        for lab, s in out["share"].items()))
    if breakdown:
        out["breakdown"] = bd = {"generic": _generic_breakdown(out["qpu"]["generic"])}
        _say_breakdown(name, "generic", bd["generic"])
        bd["ecp5-nodsp"] = _synth(steps, f"unflattened synth qpu {name} ecp5-nodsp",
                                  lambda: synthesize_hier("qpu", cfg, nodsp=True, reuse=reuse))
        _say_breakdown(name, "ecp5-nodsp", bd["ecp5-nodsp"])
    return out


def _generic_breakdown(r: dict) -> dict:
    """Per-module figures of a generic :func:`fpga.synth.synthesize` run, from its workdir."""
    if "error" in r:
        return dict(error=r["error"])
    try:
        return dict(parse_hier(Path(r["workdir"]), "generic"), workdir=r["workdir"],
                    seconds=r.get("seconds"), reused=r.get("reused", False))
    except (OSError, ValueError, KeyError) as exc:
        return dict(error=f"cannot read the per-module stats in {r['workdir']}: {exc}")


def _say_breakdown(name, label, r):
    if "error" in r:
        say(f"      {name} {label} breakdown failed: {r['error']}")
    for mod, x in r.get("modules", {}).items():
        say(f"      {name} {label} {mod}: " + ", ".join(
            f"{k}={v:,}" for k, v in x["resources"].items()
            if k in ("lut_total", "ff", "transistors", "digit_store_ff", "counter_ff")
            and v is not None) + f", cells={x['num_cells']:,}")


def run_paper(steps, reuse) -> dict:
    cfg = preset("paper")
    out = dict(preset="paper", config_hash=cfg.hash(), config=cfg.to_dict())
    out["qpu"] = _synth(steps, "synth qpu paper generic",
                        lambda: synthesize("qpu", cfg, "generic", reuse=reuse))
    say(f"      qpu paper generic: {_brief(out['qpu'])}")
    out["pe"] = _synth(steps, "synth pe paper generic",
                       lambda: synthesize("pe", cfg, "generic", reuse=reuse))
    say(f"      pe paper generic: {_brief(out['pe'])}")
    q = out["qpu"].get("resources", {}).get("transistors")
    pe = out["pe"].get("resources", {}).get("transistors")
    if q and pe:
        n = cfg.rows * cfg.cols
        out["estimate"] = dict(pes=n, pe_transistors=pe, array_transistors=n * pe,
                               qpu_transistors=q, qpu_over_array=round(q / (n * pe), 5),
                               share=round(q / (q + n * pe), 5))
        say(f"      paper scale: QPU {q:,} tx vs {n} x PE {pe:,} = {n * pe:,} tx: "
             f"share {out['estimate']['share']:.2%}")
    out["breakdown"] = {"generic": _generic_breakdown(out["qpu"])}
    _say_breakdown("paper", "generic", out["breakdown"]["generic"])
    return out


# -------------------------------------------------------------------------------- the plot
def plot(data: dict, path: Path) -> bool:
    """Bars: each submodule's share of the (hierarchical) QPU in LUTs, FFs and transistors, one
    bar per preset. Returns False when there is no breakdown to plot."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = (("ecp5-nodsp", "lut_total", "ECP5 LUTs (no DSP)"), ("ecp5-nodsp", "ff", "ECP5 FFs"),
               ("generic", "transistors", "generic transistors"))
    sets = [(p["preset"], p["breakdown"]) for p in list(data.get("presets", {}).values())
            + [data.get("paper", {})] if p.get("breakdown")]
    if not sets:
        return False
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.8), sharey=True)
    width = 0.8 / len(sets)
    for ax, (label, key, title) in zip(axes, metrics):
        for i, (pname, bd) in enumerate(sets):
            mods = bd.get(label, {}).get("modules")
            if not mods:
                continue
            total = sum(mods[m]["resources"].get(key) or 0 for m in mods) or 1
            vals = [100 * (mods.get(m, {}).get("resources", {}).get(key) or 0) / total
                    for m in MODULES]
            ys = [j + (i - (len(sets) - 1) / 2) * width for j in range(len(MODULES))]
            bars = ax.barh(ys, vals, height=width, label=f"{pname} (total {total:,})")
            ax.bar_label(bars, fmt="%.0f%%", fontsize=7, padding=2)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("% of the QPU")
        ax.set_xlim(0, 100)
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_yticks(range(len(MODULES)), [MODULE_NAMES[m] for m in MODULES], fontsize=8)
    axes[0].invert_yaxis()
    fig.suptitle("QPU area by submodule (Yosys stat per module)", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


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
        rows.append([unit.upper(), _n(_gates(r)), _n(x.get("ff")),
                     _n(x.get("memory_bits")),
                     "–" if tx is None else f"{tx:,}" + ("" if r.get("transistors_complete")
                                                          else "+"), tool_seconds(r)])
    return rows


def _gates(r):
    """Cells of a generic run without submodule instances (cell types not starting with $)."""
    cells = r.get("cells")
    return sum(v for k, v in cells.items() if k.startswith("$")) if cells else r.get("num_cells")


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
            "on this design (`fpga/synth.py`, docs/architecture.md §7).", ""]


def markdown(data: dict) -> str:
    md = ["# QPU area against the MPU, by submodule, and at paper scale", "",
          f"Generated by `dstar measure qpu-area` on {data.get('date', '?')} "
          f"({data.get('host', {}).get('cpus', '?')} CPUs, load average "
          f"{data.get('host', {}).get('load_avg_start', '?')} at start). Every figure is "
          f"measured by Yosys {data.get('tools', {}).get('yosys', '')}; nothing is typed in "
          f"(figures marked * were reused from an earlier run on byte-identical RTLIL, script and "
          f"Yosys: the MPU results always may be, being those of `dstar.report_arrays`).", ""]
    if "source_digest" in data:
        md += [f"RTL source digest `{data['source_digest'][:16]}`.", ""]
    for p in data.get("presets", {}).values():
        c = p.get("config", {})
        md += [f"## `{p['preset']}` preset (hash `{p['config_hash']}`)", "",
               f"{c.get('rows')}×{c.get('cols')} array (T = {c.get('rows')} rows per "
               f"sub-channel), {c.get('lanes')} lanes, sorter {c.get('sort_n')}, max reduction "
               f"{c.get('max_reduction')}.", "",
               "### ECP5 (Yosys `synth_ecp5`, flattened)", "",
               "LUT total = LUT4 + 2 × CCU2C. `-nodsp` maps multipliers to fabric.", "",
               md_table(["unit", "multipliers", "LUT total", "LUT4", "CCU2C", "FF", "MULT18X18D",
                       "DP16KD", "DPR16X4", "Yosys s"], _area_rows(p), 2), "",
               *_flow_note(p),
               *_dsp_note(p),
               "### Generic gates (Yosys `synth`; `stat -tech cmos`)", "",
               "`fpga.synth`'s generic flow keeps the module hierarchy (no `-flatten`; ABC "
               "maps each module). Cells: gates and flip-flops, without the submodule "
               "instances. Memories become flip-flops here (memory bits are part of FF and "
               "transistors).", "",
               md_table(["unit", "cells", "FF", "memory bits (in FF)", "transistors", "Yosys s"],
                      _generic_rows(p)), ""]
        sh = p.get("share", {})
        if sh:
            rows = []
            for label, s in sh.items():
                for k, v in s.items():
                    q = _metric(p["qpu"][label], k)
                    m = _metric(p["mpu"][label], k)
                    if not q and not m:
                        continue
                    rows.append([label, k, _n(q), _n(m), _pct(v)])
            md += ["### QPU share of QPU + MPU", "",
                   md_table(["flow", "metric", "QPU", "MPU", "QPU / (QPU + MPU)"], rows, 2), ""]
        bd = p.get("breakdown")
        if bd:
            md += ["### QPU by submodule", "",
                   "Each module's own cells (instances of submodules not counted; \"top\" is "
                   "`dstar_qpu`'s own logic). ECP5 columns: a separate `synth_ecp5 -noflatten "
                   "-nodsp` run, whose total exceeds the flattened one above by the "
                   "cross-module optimizations flattening allows. Generic columns: the generic "
                   "run above, which keeps the hierarchy, so they sum to its totals. "
                   "Percentages are of the column's total.", "",
                   _breakdown_table(bd), ""]
            note = _top_note(bd)
            if note:
                md += [f"Top module's flip-flops by name: {note}.", ""]
            dom = _dominant(bd)
            if dom:
                md += [f"Largest in transistors: {MODULE_NAMES.get(dom[0], dom[0])} "
                       f"({dom[1]:.0%}).", ""]
            errs = [f"{k}: {v['error']}" for k, v in bd.items() if "error" in v]
            if errs:
                md += ["Failed: " + "; ".join(errs), ""]
    paper = data.get("paper")
    if paper:
        c = paper.get("config", {})
        md += [f"## Paper scale (`paper` preset, hash `{paper.get('config_hash')}`), generic "
               f"gates", "",
               f"The QPU of the `paper` preset (T = {c.get('rows')}, sort_n {c.get('sort_n')}, "
               f"max reduction {c.get('max_reduction')}) and one PE of the same preset, "
               f"generic synthesis as above.", ""]
        rows = []
        for unit in ("qpu", "pe"):
            r = paper.get(unit, {})
            if "error" in r:
                rows.append([unit.upper(), f"failed: {r['error']}", "", "", "", ""])
                continue
            x = r.get("resources", {})
            rows.append([unit.upper(), _n(_gates(r)), _n(x.get("ff")),
                         _n(x.get("memory_bits")), _n(x.get("transistors")), tool_seconds(r)])
        md += [md_table(["unit", "cells", "FF", "memory bits", "transistors", "Yosys s"], rows), ""]
        e = paper.get("estimate")
        if e:
            md += [f"Estimate: QPU {e['qpu_transistors']:,} transistors against "
                   f"{e['pes']:,} PEs × {e['pe_transistors']:,} = {e['array_transistors']:,} "
                   f"(the PEs alone: no MPU weight buffers, skew registers or front end) gives "
                   f"QPU / (QPU + PEs) = **{e['share']:.2%}** (QPU / PEs = "
                   f"{e['qpu_over_array']:.2%}).", ""]
        if paper.get("breakdown", {}).get("generic", {}).get("modules"):
            md += ["Paper-scale QPU by submodule (from the same generic run):", "",
                   _breakdown_table(paper["breakdown"]), ""]
            dom = _dominant(paper["breakdown"])
            if dom:
                md += [f"Largest in transistors: {MODULE_NAMES.get(dom[0], dom[0])} "
                       f"({dom[1]:.0%}).", ""]
    md += _comparison(data)
    rate = data.get("rate")
    if rate:
        md += ["## Rate (from `reports/qpu_rate.json`, measured by `dstar measure qpu-rate`)", "",
               md_table(["preset", "open groups", "windows", "phase", "groups/cycle",
                       "sub-ch/cycle", "MPU wait cycles", "groups"],
                      [[r["preset"], str(r.get("open_groups", 0)), str(r.get("pack_windows", 1)),
                        r["phase"],
                        f"{r['groups_per_cycle']:.3f}", f"{r['subchannels_per_cycle']:.3f}",
                        _n(r["mpu_wait_cycles"]), _n(r["groups"])] for r in rate.values()], 4),
               ""]
    if data.get("plot"):
        md += [f"![QPU area by submodule]({data['plot']})", ""]
    if data.get("steps") is not None:
        md += ["## Tools and step times", "",
               md_table(["tool", "version"], [[k, v] for k, v in data.get("tools", {}).items()], 2),
               "",
               md_table(["step", "seconds", "load avg", "status"],
                      [[s["step"], f"{s['seconds']:.1f}", f"{s['load_avg_1min']:.2f}",
                        s["status"]] for s in data["steps"]], 1), "",
               f"Total {data.get('total_seconds', 0):.0f} s. Work directories: "
               f"`{os.path.relpath(BUILD_ROOT, ROOT)}/qpu-*/`.", ""]
    return "\n".join(md)


def _comparison(data) -> list:
    """The honest comparison with the paper's 1.8 % of a core."""
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
    if not lines:
        return []
    arrays = ", ".join(f"{p['config']['rows']}×{p['config']['cols']} (`{p['preset']}`)"
                       for p in data.get("presets", {}).values() if "config" in p)
    return ["## Against the paper's 1.8 % of a core", "",
            "The paper reports the QPU at 1.8 % of a core whose array is 64×64. The arrays "
            f"here are {arrays or 'smaller'}: up to 256 times fewer PEs, while the QPU shrinks "
            "much less (its size follows T = rows, sort_n and the lanes, not the array's "
            "columns), so its share here is far larger than the paper's and says little about "
            "the paper's figure. At "
            "paper scale the share is estimated against the PEs alone (rows × cols × one PE): "
            "it leaves out the MPU's buffers, skew registers and front end and the core's VPU "
            "and SRAM, so it overstates the QPU's share of a core. Yosys's generic transistor "
            "count is a rough CMOS estimate (memories as flip-flops), not a layout area.", "",
            *lines, ""]


# ------------------------------------------------------------------------------------ main
def main(argv=None, prog=None) -> int:
    ap = argparse.ArgumentParser(prog=prog or 'dstar measure qpu-area',
                                 description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", nargs="+", default=["fpga", "tiny"])
    ap.add_argument("--out", type=Path, default=ROOT / "reports", help="report directory")
    ap.add_argument("--reuse", action="store_true", help="reuse stored QPU and paper results of "
                    "byte-identical inputs and the same Yosys (the MPU's always may be)")
    ap.add_argument("--no-breakdown", action="store_true", help="skip the per-submodule runs")
    ap.add_argument("--no-paper", action="store_true", help="skip the paper-scale estimate")
    ap.add_argument("--markdown-only", action="store_true",
                    help="only rewrite qpu_area.md and qpu_area.png from qpu_area.json")
    args = ap.parse_args(argv)
    jpath, mpath, ppath = (args.out / "qpu_area.json", args.out / "qpu_area.md",
                           args.out / "qpu_area.png")
    if args.markdown_only:
        data = json.loads(jpath.read_text())
        for p in data.get("presets", {}).values():
            p["share"] = shares(p.get("qpu", {}), p.get("mpu", {}))
        data["plot"] = ppath.name if plot(data, ppath) else None
        mpath.write_text(markdown(data))
        say(f"wrote {mpath} and {ppath} from {jpath}")
        return 0

    import amaranth

    steps = []
    t0 = time.perf_counter()
    data = dict(date=time.strftime("%Y-%m-%d %H:%M %Z"),
                host=dict(cpus=os.cpu_count(), machine=platform.machine(),
                          python=platform.python_version(),
                          load_avg_start=round(os.getloadavg()[0], 2)),
                tools={"amaranth": amaranth.__version__, "yosys": yosys_version()},
                steps=steps, presets={})
    data["source_digest"] = source_digest()  # RTL + generator sources the figures are of
    say(f"report_qpu: presets {args.presets}, yosys {data['tools']['yosys']}, "
         f"amaranth {data['tools']['amaranth']}")

    def write():
        data["total_seconds"] = round(time.perf_counter() - t0, 1)
        rate = args.out / "qpu_rate.json"
        if rate.exists():
            data["rate"] = json.loads(rate.read_text())
        args.out.mkdir(parents=True, exist_ok=True)
        data["plot"] = ppath.name if plot(data, ppath) else None
        jpath.write_text(json.dumps(relative_paths(data), indent=2, default=str) + "\n")
        mpath.write_text(markdown(data))

    with _MemoRTLIL():
        for name in args.presets:
            data["presets"][name] = run_preset(name, steps, args.reuse,
                                               breakdown=not args.no_breakdown)
            write()
        if not args.no_paper:
            data["paper"] = run_paper(steps, args.reuse)
            write()
    say(f"wrote {jpath}, {mpath} and {ppath}")
    failed = [s for s in steps if s["status"] != "ok" and not s["status"].startswith("reused")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
