"""The synthesis runs behind ``dstar measure qpu-area`` (:mod:`app.reports.qpu`) and the parsing
of their per-module cell counts. Every figure is measured by Yosys in a fresh process
(:mod:`flows.synth`); nothing is typed in.

1. For each preset (:func:`run_preset`): the QPU flattened for ECP5 without and with DSP blocks
   (``synth_ecp5 [-nodsp]``) and for generic gates (cells, FFs, CMOS transistor estimate), and
   the MPU of the same preset, the same three ways. The MPU runs always use ``reuse=True``: the
   results ``dstar measure arrays`` stored for byte-identical RTLIL, script and Yosys are taken
   as they are (marked). The QPU's share of QPU + MPU follows in LUTs, FFs and transistors
   (:func:`shares`).
2. The per-submodule breakdown of the QPU from ``stat`` per module (:func:`parse_hier`), i.e.
   Amaranth's ``dstar_qpu.front``, ``.chunker``, ``.sorter``, ``.packer``, ``.recon_fifo`` and
   the top module's own logic (digit store, statistics counters, configuration registers).
   Generic gates: :func:`flows.synth.synthesize`'s generic flow keeps the hierarchy (plain
   ``synth``, no ``-flatten``), so its own ``stat.json``/``stat_tx.json`` already hold every
   module and no further run is needed. ECP5: one more run, ``synth_ecp5 -noflatten -nodsp``
   (:func:`synthesize_hier`); without flattening Yosys cannot optimize across module
   boundaries, so its total differs from the flat one (both are reported). In that run the
   flip-flops of the digit store and of the counters are counted in the netlist by name
   (drivers of ``slot*`` and ``counters*``).
3. Paper scale (:func:`run_paper`): the QPU of the ``paper`` preset (T = 64 rows, sort_n 64)
   for generic gates (with its per-module breakdown, from the same run), and one PE of the
   ``paper`` preset; the QPU's share is estimated against rows × cols × one PE.

Each (unit, configuration) is elaborated once per report (:func:`elaborate` into a plain dict
the caller holds) and its RTLIL text handed to every run of it (``synthesize(..., rtlil=...)``);
elaboration is deterministic, so this only saves minutes of Amaranth, and the stored runs of
byte-identical text are reused as before.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from dstar_rtl.flows.synth import (
    BUILD_ROOT,
    SynthError,
    cached_result,
    cell_histogram,
    resources,
    run_yosys,
    synthesize,
    yosys_version,
)
from dstar_rtl.gen.outputs import data_json
from dstar_rtl.gen.progress import Step, say
from dstar_rtl.golden.config import preset

__all__ = ["MODULES", "MODULE_NAMES", "TOP", "VARIANTS", "elaborate", "gates", "hier_script",
           "metric", "parse_hier", "run_paper", "run_preset", "shares", "synthesize_hier",
           "variant_label"]

TOP = "dstar_qpu"
VARIANTS = (("ecp5", True), ("ecp5", False), ("generic", False))
# Submodules in pipeline order; "top" is dstar_qpu's own logic.
MODULES = ("front", "chunker", "sorter", "packer", "recon_fifo", "top")
MODULE_NAMES = {
    "front": "front: max, bins, quantize/slice",
    "chunker": "chunk assembler",
    "sorter": "bitonic sorter",
    "packer": "packer (exponent bins, or the sorted chunks' packer)",
    "recon_fifo": "reconstruction FIFO",
    "top": "top: counters, config (and the sorted chunks' column store)",
}


def variant_label(target: str, nodsp: bool) -> str:
    """``ecp5-nodsp``, ``ecp5`` or ``generic``: the key of a run in the report."""
    return f"{target}-nodsp" if target == "ecp5" and nodsp else target


# ------------------------------------------------------------------------- elaboration memo
def elaborate(memo: dict | None, unit: str, cfg) -> tuple[str, float]:
    """``(RTLIL text, seconds)`` of ``unit`` of ``cfg``: elaborated once per ``memo`` (a plain
    dict keyed by unit, preset name and configuration hash; ``None``: no memo), ``seconds``
    being the elaboration's wall time, 0 when the text came from the memo."""
    from dstar_rtl.gen.generate import to_rtlil

    key = (unit, cfg.name, cfg.hash())
    if memo is not None and key in memo:
        return memo[key], 0.0
    t0 = time.perf_counter()
    il = to_rtlil(unit, cfg)
    seconds = time.perf_counter() - t0
    if memo is not None:
        memo[key] = il
    return il, seconds


def _synthesize(unit, cfg, target, *, nodsp=False, reuse=False, memo=None) -> dict:
    """:func:`flows.synth.synthesize` on the memoized RTLIL; a fresh run's
    ``elaboration_seconds`` are those of the elaboration it caused (0 once memoized)."""
    il, seconds = elaborate(memo, unit, cfg)
    r = synthesize(unit, cfg, target, nodsp=nodsp, reuse=reuse, rtlil=il)
    if not r.get("reused"):
        r["elaboration_seconds"] = round(seconds + r.get("elaboration_seconds", 0.0), 2)
    return r


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
    :func:`synthesize_hier` or a generic run of :func:`flows.synth.synthesize`): ``{modules:
    {short name: {resources, cells, num_cells}}, total: {...}}``. Module instances are not
    counted as cells, and each module's transistors are its own (Yosys's figure for a parent
    includes its children's, which are subtracted)."""
    stats = json.loads((workdir / "stat.json").read_text())["modules"]
    inst = {m.lstrip("\\") for m in stats}
    mods, children = {}, {}
    for m, s in stats.items():
        hist = {k: v for k, v in cell_histogram(s).items() if k.lstrip("\\") not in inst}
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
                    timeout=None, rtlil: str | None = None) -> dict:
    """Unflattened ECP5 synthesis of ``unit`` (top ``dstar_<unit>``) in
    ``build/fpga/<unit>-<preset>-<hash>/hier-ecp5[-nodsp]``; ``reuse`` and ``rtlil`` (the
    already elaborated design) as :func:`flows.synth.synthesize`."""
    import shutil

    import amaranth

    from dstar_rtl.gen.units import top_name

    top = top_name(unit)
    target = "ecp5"
    label = variant_label(target, nodsp)
    workdir = (BUILD_ROOT / f"{unit}-{cfg.name}-{cfg.hash()}" / f"hier-{label}").resolve()
    il = elaborate(None, unit, cfg)[0] if rtlil is None else rtlil
    script = hier_script(top, nodsp)
    if reuse:
        cached = cached_result(workdir, il, script)
        if cached is not None:
            return cached
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    (workdir / "design.il").write_text(il)
    t0 = time.perf_counter()
    run_yosys(script, workdir, timeout)
    out = dict(unit=unit, preset=cfg.name, config_hash=cfg.hash(), target=target, nodsp=nodsp,
               top=top, **parse_hier(workdir, target, top),
               seconds=round(time.perf_counter() - t0, 2),
               tools={"yosys": yosys_version(), "amaranth": amaranth.__version__},
               workdir=str(workdir), log=str(workdir / "yosys.log"), script=script)
    (workdir / "result.json").write_text(data_json(out, indent=2) + "\n")
    return out


# ---------------------------------------------------------------------------------- shares
def gates(r):
    """Cells of a generic run without submodule instances (cell types not starting with $)."""
    cells = r.get("cells")
    return sum(v for k, v in cells.items() if k.startswith("$")) if cells else r.get("num_cells")


def metric(r: dict, key: str):
    """``r["resources"][key]``; generic ``cells`` without submodule instances."""
    return gates(r) if key == "cells" else r.get("resources", {}).get(key)


def _share(q, m):
    return round(q / (q + m), 4) if q is not None and m is not None and q + m else None


def shares(qpu: dict, mpu: dict) -> dict:
    """The QPU's share of QPU + MPU for each variant: ``{label: {metric: share}}``."""
    out = {}
    for target, nodsp in VARIANTS:
        label = variant_label(target, nodsp)
        q, m = qpu.get(label, {}), mpu.get(label, {})
        if "resources" not in q or "resources" not in m:
            continue
        keys = (("transistors", "ff", "cells") if target == "generic"
                else ("lut_total", "ff", "dsp", "bram"))
        out[label] = {k: _share(metric(q, k), metric(m, k)) for k in keys}
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


def run_preset(name, steps, reuse, breakdown=True, memo: dict | None = None) -> dict:
    """Items 1 and 2 of the module's description for preset ``name``; ``steps`` collects the
    step records, ``memo`` the elaborations (:func:`elaborate`)."""
    cfg = preset(name)
    out = dict(preset=name, config_hash=cfg.hash(), config=cfg.to_dict(), qpu={}, mpu={})
    for unit, unit_reuse in (("qpu", reuse), ("mpu", True)):
        for target, nodsp in VARIANTS:
            label = variant_label(target, nodsp)
            r = _synth(steps, f"synth {unit} {name} {label}",
                       lambda: _synthesize(unit, cfg, target, nodsp=nodsp, reuse=unit_reuse,
                                           memo=memo))
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
                                  lambda: synthesize_hier("qpu", cfg, nodsp=True, reuse=reuse,
                                                          rtlil=elaborate(memo, "qpu", cfg)[0]))
        _say_breakdown(name, "ecp5-nodsp", bd["ecp5-nodsp"])
    return out


def _generic_breakdown(r: dict) -> dict:
    """Per-module figures of a generic :func:`flows.synth.synthesize` run, from its workdir."""
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


def run_paper(steps, reuse, memo: dict | None = None) -> dict:
    """Item 3 of the module's description: the ``paper`` QPU and one PE, generic gates."""
    cfg = preset("paper")
    out = dict(preset="paper", config_hash=cfg.hash(), config=cfg.to_dict())
    out["qpu"] = _synth(steps, "synth qpu paper generic",
                        lambda: _synthesize("qpu", cfg, "generic", reuse=reuse, memo=memo))
    say(f"      qpu paper generic: {_brief(out['qpu'])}")
    out["pe"] = _synth(steps, "synth pe paper generic",
                       lambda: _synthesize("pe", cfg, "generic", reuse=reuse, memo=memo))
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
