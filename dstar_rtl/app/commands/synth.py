"""``dstar synth`` and ``dstar estimate``: the resources of one unit and configuration.

- ``synth UNIT --preset P [--set k=v ...] --target generic|ecp5|ice40|asic [--nodsp] [--liberty
  FILE.lib[.gz]] [--booth] [--parts] [--memories macro|ff] [--json OUT] [--reuse] [--timeout S]``
  synthesizes with :func:`flows.synth.synthesize`:
  one fresh Yosys process per call (ABC results depend on what ran before in a session), in
  ``build/fpga/<unit>-<preset>-<hash>/<target>``. It prints a summary (generic: cells, flip-flops,
  ``stat -tech cmos`` transistors, the largest cell types, and with ``--liberty`` the cell area;
  FPGA: LUTs, flip-flops, carries, DSP blocks, block and LUT RAM; ASIC: the library's cell area
  split into combinational and sequential, per module with ``--parts``, the RAM bits left out as
  macros and the critical-path estimate) and with ``--json`` writes the whole result. Progress lines
  (start, end, seconds) go to stderr.
- ``estimate UNIT --preset P [--set k=v ...] [--json OUT]`` prints :func:`flows.estimate.estimate`:
  the analytic estimate of ECP5 LUTs and flip-flops (with and without DSP blocks), DSP and RAM
  blocks, generic transistors and the peak operations per cycle, from the configuration alone.

Bad input (an unknown unit or target, ``--liberty`` with an FPGA target or a missing library,
``--target asic`` without ``--liberty``, ``--booth``/``--parts``/``--memories`` without it,
``--nodsp`` with the generic target, a ``--timeout`` that is not positive, an impossible
configuration, a ``--json`` that is a folder or the library) is one line ``dstar: error: ...``
and exit status 2 before anything runs. A Yosys failure is one line with the log's path and exit
status 1. A missing ``--json`` folder is created; the file appears only when the command
succeeds.
"""

from __future__ import annotations

import time
from pathlib import Path

from dstar_rtl.app.cli import UserError, WorkError
from dstar_rtl.app.options import (
    add_config_options,
    check_liberty,
    check_unit,
    config_from_args,
    resolve_liberty,
)
from dstar_rtl.gen.outputs import check_outputs, json_text, write_together
from dstar_rtl.gen.progress import say
from dstar_rtl.gen.units import UNITS

__all__ = ["register"]

_TARGETS = ("generic", "ecp5", "ice40", "asic")


def register(sub):
    p = sub.add_parser(
        "synth", help="synthesize a unit with Yosys: gates and transistors, or ECP5/iCE40 cells",
        description="Synthesize one unit and configuration in a fresh Yosys process and print "
                    "its resources.")
    p.add_argument("unit", choices=sorted(UNITS), help="which unit")
    add_config_options(p)
    p.add_argument("--target", choices=_TARGETS, default="ecp5",
                   help="generic gates (stat -tech cmos), ECP5 (synth_ecp5), iCE40 "
                        "(synth_ice40) or asic (standard cells of --liberty); default: ecp5")
    p.add_argument("--nodsp", action="store_true",
                   help="FPGA targets: map multipliers to LUTs instead of DSP blocks")
    p.add_argument("--liberty", type=Path, metavar="FILE.lib",
                   help="asic target (required): the standard-cell library (.lib or .lib.gz); "
                        "generic target: also map to it and report its cell area")
    p.add_argument("--booth", action="store_true",
                   help="asic target: synth -booth (Booth-encoded multipliers)")
    p.add_argument("--parts", action="store_true",
                   help="asic target: keep the hierarchy and report the area of every module")
    p.add_argument("--memories", choices=("macro", "ff"), default=None,
                   help="asic target: RAMs left out as macros (their bits reported; default) "
                        "or mapped to flip-flops")
    p.add_argument("--json", type=Path, metavar="OUT", help="write the full result as JSON")
    p.add_argument("--reuse", action="store_true",
                   help="return the stored result of an earlier run on identical RTLIL, script "
                        "and Yosys version instead of running Yosys again")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="stop Yosys after this many seconds")
    p.set_defaults(func=run_synth)

    q = sub.add_parser(
        "estimate", help="analytic resource and peak-throughput estimate (no synthesis)",
        description="Estimate ECP5 LUTs and flip-flops, DSP and RAM blocks, generic transistors "
                    "and peak operations per cycle from the configuration alone, with a model "
                    "calibrated against Yosys (dstar measure estimate --calibrate).")
    from dstar_rtl.flows.estimate import UNITS as MODELLED
    q.add_argument("unit", choices=sorted(MODELLED), help="which unit")
    add_config_options(q)
    q.add_argument("--json", type=Path, metavar="OUT", help="write the estimate as JSON")
    q.set_defaults(func=run_estimate)


# ------------------------------------------------------------------------------------ helpers
def _n(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.1f}"
    return f"{v:,}"


def _cell_name(t: str) -> str:
    return t[2:-1] if t.startswith("$_") and t.endswith("_") else t


# -------------------------------------------------------------------------------------- synth
def run_synth(args):
    from dstar_rtl.flows.synth import SynthError, synthesize

    cfg = config_from_args(args)
    target = args.target
    if args.nodsp and target == "generic":
        raise UserError("--nodsp maps multipliers to FPGA fabric: it needs --target ecp5 or "
                        "ice40, not generic")
    if target == "asic":
        if args.nodsp:
            raise UserError("--nodsp maps multipliers to FPGA fabric: it needs --target ecp5 or "
                            "ice40, not asic")
        if args.liberty is None:
            raise UserError("--target asic needs --liberty FILE (the standard-cell library)")
    elif args.booth or args.parts or args.memories is not None:
        raise UserError(f"--booth, --parts and --memories are options of --target asic, "
                        f"not {target}")
    if args.liberty is not None:
        if target not in ("generic", "asic"):
            raise UserError(f"--liberty maps to a standard-cell library: it needs --target "
                            f"generic or asic, not {target}")
        check_liberty(resolve_liberty(args.liberty))
    if args.timeout is not None and not args.timeout > 0:
        raise UserError(f"--timeout must be a positive number of seconds, not {args.timeout:g}")
    check_outputs(args.json, inputs=[args.liberty])
    check_unit(args.unit, cfg)  # the unit's own parameter checks, before anything runs

    extra = {}
    if target == "asic":
        extra = dict(booth=args.booth, parts=args.parts, memories=args.memories or "macro")
    what = (f"{args.unit} (preset {cfg.name}, config {cfg.hash()}) for {target}"
            f"{' -nodsp' if args.nodsp else ''}{' -booth' if args.booth else ''}"
            f"{' + liberty' if args.liberty else ''}")
    t0 = time.perf_counter()
    say(f"start synth {what}: elaboration, then one Yosys process")
    try:
        res = synthesize(args.unit, cfg, target, nodsp=args.nodsp, liberty=args.liberty,
                         timeout=args.timeout, reuse=args.reuse, **extra)
    except SynthError as exc:
        say(f"end   synth {args.unit}: failed")
        raise WorkError(str(exc)) from None
    dt = time.perf_counter() - t0
    how = (f"reused the result of an earlier run ({res['seconds']} s)" if res.get("reused")
           else f"Yosys {res['seconds']} s, elaboration {res.get('elaboration_seconds')} s")
    say(f"end   synth {args.unit}: {dt:.1f} s ({how})")

    res = dict(res, config=cfg.to_dict())
    _print_synth(res, cfg)
    if args.json is not None:
        write_together({args.json: json_text(res)})
        print(f"wrote {args.json}")
    return 0


def _print_synth(res, cfg):
    r = res["resources"]
    target = res["target"]
    mode = ""
    if target in ("ecp5", "ice40"):
        mode = " (multipliers in LUTs)" if res["nodsp"] else " (DSP blocks allowed)"
    print(f"synth {res['unit']}, preset {cfg.name} (config {cfg.hash()}), target {target}{mode}, "
          f"Yosys {res['tools']['yosys']}{' [reused]' if res.get('reused') else ''}")
    rows = []
    if target == "asic":
        _print_asic(res)
        return
    if target == "generic":
        rows += [("cells", _n(r["cells"]), ""),
                 ("flip-flops", _n(r["ff"]),
                  f"{_n(r['memory_bits'])} of them memory bits (no RAM macros in generic gates)"
                  if r.get("memory_bits") else ""),
                 ("transistors", _n(res.get("transistors")),
                  "stat -tech cmos after dfflegalize"
                  + ("" if res.get("transistors_complete") else "; a lower bound: some cell "
                                                                "types have no price"))]
        if "area" in r:
            rows.append(("area", _n(r["area"]),
                         f"library units, µm² for the usual libraries; "
                         f"{Path(res['liberty']).name}; "
                         f"sequential {_n(r.get('sequential_area'))}"))
    else:
        prims = {"ecp5": ("CCU2C", "MULT18X18D", "DP16KD", "TRELLIS_DPR16X4"),
                 "ice40": ("SB_CARRY", "SB_MAC16", "SB_RAM40_4K", None)}[target]
        lut_note = (f"LUT4 {_n(r['lut4'])} + 2 x CCU2C {_n(r['carry'])}" if target == "ecp5"
                    else "SB_LUT4")
        rows += [("LUT total", _n(r["lut_total"]), lut_note),
                 ("flip-flops", _n(r["ff"]), ""),
                 ("carry", _n(r["carry"]), prims[0]),
                 ("DSP", _n(r["dsp"]), prims[1]),
                 ("block RAM", _n(r["bram"]), prims[2])]
        if prims[3]:
            rows.append(("LUT RAM", _n(r["lutram"]), prims[3]))
        if "widemux" in r:
            rows.append(("wide muxes", _n(r["widemux"]), "PFUMX + L6MUX21"))
        rows.append(("cells", _n(r["cells"]), ""))
    width = max(len(v) for _, v, _ in rows)
    for name, v, note in rows:
        print(f"  {name:<12s} {v:>{width}s}" + (f"  ({note})" if note else ""))
    top = sorted(res["cells"].items(), key=lambda kv: -kv[1])[:8]
    print("  largest cell types: " + ", ".join(f"{_cell_name(k)} {_n(v)}" for k, v in top))
    print(f"work directory: {res['workdir']}")


def _print_asic(res):
    r, lib, t = res["resources"], res["liberty"], res["timing"]
    print(f"  library {lib['name']} ({lib['file']}, sha256 {lib['sha256'][:16]}...), "
          f"{lib['cells']} cells{'; synth -booth' if res.get('booth') else ''}")
    print(f"  {'':<28s} {'area':>12s} {'comb.':>12s} {'seq.':>12s} {'cells':>8s} {'FF':>6s}")
    rows = [("total", r["area"], r["combinational_area"], r["sequential_area"], r["cells"],
             r["ff"])]
    for name, m in sorted(res.get("modules", {}).items()):
        rows.append(("  " + name, m["area"], m["combinational"], m["sequential"],
                     sum(m["cells"].values()), m["ff"]))
    for name, a, c, s, n, ff in rows:
        print(f"  {name:<28s} {_n(a):>12s} {_n(c):>12s} {_n(s):>12s} {_n(n):>8s} {_n(ff):>6s}")
    print("  (µm² for the usual libraries: the library's area unit; combinational + sequential "
          "= total)")
    mem = res["memories"]
    if r["ram_bits"] or r["rom_bits"]:
        print(f"  memories ({mem['mode']}): RAM {_n(r['ram_bits'])} bits, ROM {_n(r['rom_bits'])} "
              f"bits; {mem['note']}")
    print(f"  critical path: {t['delay']:.3f} ({t['unit']}) over {t['levels']} cells, "
          f"{t['start']} -> {t['end']} (NLDM tables, no wire load; not ABC's own report)")
    top = sorted(res["cells"].items(), key=lambda kv: -kv[1])[:8]
    print("  largest cell types: " + ", ".join(f"{k} {_n(v)}" for k, v in top))
    print(f"work directory: {res['workdir']}")


# ----------------------------------------------------------------------------------- estimate
def run_estimate(args):
    from dstar_rtl.flows.estimate import estimate

    cfg = config_from_args(args)
    check_outputs(args.json)
    check_unit(args.unit, cfg)  # the configurations the RTL refuses, the estimate refuses too
    est = estimate(args.unit, cfg)
    _print_estimate(est, cfg)
    if args.json is not None:
        write_together({args.json: json_text(dict(est, config=cfg.to_dict()))})
        print(f"wrote {args.json}")
    return 0


def _print_estimate(est, cfg):
    pk = est["peak"]
    print(f"estimate {est['unit']}, preset {cfg.name} (config {cfg.hash()}): analytic model, "
          f"no synthesis")
    extra = (f" ({_n(pk['int8_mac_equivalent'])} INT8-MAC equivalents)"
             if "int8_mac_equivalent" in pk else "")
    print(f"  peak: {_n(pk['ops_per_cycle'])} {pk['op']} per cycle{extra}")
    print(f"  {'':<13s} {'LUT total':>10s} {'FF':>9s} {'DSP':>6s} {'BRAM':>6s} {'LUT RAM':>8s}")
    for label, key in (("ECP5", "ecp5"), ("ECP5 -nodsp", "ecp5_nodsp")):
        e = est[key]
        print(f"  {label:<13s} {_n(e['lut_total']):>10s} {_n(e['ff']):>9s} {_n(e['dsp']):>6s} "
              f"{_n(e['bram']):>6s} {_n(e['lutram']):>8s}")
    g = est["generic"]
    print(f"  generic CMOS transistors {'>= ' if g.get('lower_bound') else ''}"
          f"{_n(g['transistors'])}"
          + (f" (memories as flip-flops: {_n(g['memory_bits'])} bits)" if g["memory_bits"]
             else ""))
    print(f"  {'part':<48s} {'count':>6s} {'LUT':>9s} {'LUT-nodsp':>10s} {'FF':>8s} "
          f"{'DSP':>5s} {'transistors':>12s}")
    for p in est["parts"]:
        print(f"  {p['name']:<48s} {_n(p['count']):>6s} {_n(p['lut']):>9s} "
              f"{_n(p['lut_nodsp']):>10s} {_n(p['ff']):>8s} {_n(p['dsp']):>5s} "
              f"{_n(p['transistors']):>12s}")
    m = est["model"]

    def pct(d):
        return ", ".join(f"{k} {100 * v:.0f} %" for k, v in d.items() if v is not None)
    print(f"  model: fitted to {m['runs']} syntheses with Yosys {m['yosys']} "
          f"({m['calibrated']}); largest error on {m['held_out']} held-out configurations: "
          f"{pct(m['max_held_out_error'])}")
    print(f"  (fitted runs: {pct(m['max_calibration_error'])}; the tests allow "
          f"{pct(m['tolerance'])})")
    if "core" in m:
        c = m["core"]
        errs = "; ".join(f"{name} " + ", ".join(f"{k} {100 * v:+.1f} %" for k, v in e.items())
                         for name, e in c["error_vs_measured"].items())
        print(f"  core control: {c['control']}; against the measured cores (the points of that "
              f"line, not held out): {errs}; transistors: {c['transistors']}")
