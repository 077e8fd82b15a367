"""Issue-3 report: area, Fmax and simulation speed of the arrays, measured end to end.

``dstar measure arrays`` writes ``reports/arrays.json`` (every figure, tool version,
configuration hash and step time) and ``reports/arrays.md`` (the same as tables):

1. Synthesis of one PE, the MPU and the INT8 baseline of the ``fpga`` preset with Yosys for
   ECP5 without and with DSP blocks (``synth_ecp5 [-nodsp]``) and for generic gates
   (``synth; stat -tech cmos``), one fresh Yosys process per run (:mod:`flows.synth`).
2. Simulation speed of the MPU under cocotb with Verilator and Icarus (``tb/test_mpu_speed.py``:
   a long gap-free golden workload, checked beat for beat; best of ``--speed-repeats`` runs),
   with a clean build in a private build directory, timed separately.
3. nextpnr-ecp5 place and route of the MPU (and with ``--pnr-baseline`` the baseline), with and
   without DSPs, on the ULX3S's LFE5U-85F, out of context, at a ``--freq`` constraint with a
   fixed seed (:mod:`flows.pnr`). A variant that does not fit the part is reported with
   nextpnr's message. This is the slow step (about 17 minutes for the MPU on 2 busy cores).

Nothing is copied from earlier runs unless ``--reuse`` is given, which takes a stored synthesis
or place-and-route result only for byte-identical inputs and the same tool version (marked in
the reports). A progress line is printed as each step starts and ends, and the reports are
rewritten after each phase. ``--markdown-only`` re-renders ``arrays.md`` from ``arrays.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from dstar_rtl.app.options import Parser
from dstar_rtl.flows.pnr import PnrError, nextpnr_version, place_and_route
from dstar_rtl.flows.synth import BUILD_ROOT, SynthError, synthesize, yosys_version
from dstar_rtl.gen.errors import UserError, WorkError
from dstar_rtl.gen.outputs import check_output_dir, json_text, read_json, write_together
from dstar_rtl.gen.paths import ROOT
from dstar_rtl.gen.progress import Step, say, seconds
from dstar_rtl.gen.tables import md_table, tool_seconds
from dstar_rtl.golden.config import PRESETS, preset
from dstar_rtl.sim.runner import source_digest

UNITS = ("pe", "mpu", "baseline")
UNIT_NAMES = {"pe": "one PE", "mpu": "MPU", "baseline": "INT8 baseline"}
VARIANTS = (("ecp5", True), ("ecp5", False), ("generic", False))



def _label(target: str, nodsp: bool) -> str:
    return f"{target}-nodsp" if target == "ecp5" and nodsp else target


# ----------------------------------------------------------------------------------- steps
def run_synthesis(cfg, units, steps, reuse):
    out = {}
    for unit in units:
        out[unit] = {}
        for target, nodsp in VARIANTS:
            label = _label(target, nodsp)
            try:
                with Step(steps, f"synth {unit} {label}"):
                    r = synthesize(unit, cfg, target, nodsp=nodsp, reuse=reuse)
            except SynthError as exc:
                out[unit][label] = dict(error=str(exc))
                continue
            r.pop("script", None)
            if r.get("reused"):
                steps[-1]["status"] = "reused (identical RTLIL, script and Yosys)"
            out[unit][label] = r
            say(f"      {unit} {label}: " + ", ".join(f"{k}={v}" for k, v in
                                                     r["resources"].items()))
    return out


def run_pnr(cfg, synth, units, steps, freq, seed, reuse):
    out = {}
    for unit in units:
        for target, nodsp in VARIANTS[:2]:
            label = _label(target, nodsp)
            s = synth.get(unit, {}).get(label, {})
            key = f"{unit}-{label}"
            if "netlist" not in s:
                out[key] = dict(error=f"no {label} netlist (synthesis failed)")
                continue
            wd = BUILD_ROOT / f"{unit}-{cfg.name}-{cfg.hash()}" / f"pnr-{label}"
            try:
                with Step(steps, f"nextpnr {unit} {label}"):
                    r = place_and_route(s["netlist"], workdir=wd, freq_mhz=freq, seed=seed,
                                        reuse=reuse)
            except PnrError as exc:
                out[key] = dict(error=str(exc), unit=unit, variant=label)
                continue
            r.update(unit=unit, variant=label)
            if r.get("reused"):
                steps[-1]["status"] = "reused (identical netlist, arguments and nextpnr)"
            out[key] = r
            say(f"      {unit} {label}: Fmax {r['fmax_mhz']} MHz "
                 f"({'PASS' if r['timing_pass'] else 'FAIL'} at {freq:g} MHz)")
    return out


def run_sim_speed(cfg, simulators, steps, tiles, channels, seed, reuse, repeats):
    import shutil

    import dstar_rtl.sim.runner as runner

    # A private build root (``sim.runner`` reads BUILD_ROOT at call time): the builds are clean
    # and timed, and no concurrent test run shares or rebuilds them mid-measurement.
    runner.BUILD_ROOT = BUILD_ROOT / "sim"
    if not reuse:
        shutil.rmtree(runner.unit_dir("mpu", cfg), ignore_errors=True)
    out = {}
    try:
        with Step(steps, "generate mpu Verilog"):
            runner.ensure_verilog("mpu", cfg)
    except Exception as exc:  # noqa: BLE001 - reported, and the simulators are skipped
        return {s: dict(error=f"Verilog generation failed: {exc}") for s in simulators}
    for simulator in simulators:
        res = {}
        try:
            before = _stamp(cfg, simulator)
            with Step(steps, f"{simulator} build mpu"):
                runner.build("mpu", cfg, simulator, optimize=True)
            res["build_s"] = steps[-1]["seconds"]
            # sim.runner rewrites the stamp only when it rebuilds the model.
            res["build_cached"] = before is not None and before == _stamp(cfg, simulator)
            runs = []
            for k in range(repeats):
                jpath = BUILD_ROOT / f"speed-{cfg.name}-{cfg.hash()}-{simulator}-{k}.json"
                jpath.parent.mkdir(parents=True, exist_ok=True)
                jpath.unlink(missing_ok=True)
                with Step(steps, f"{simulator} speed run {k + 1}/{repeats} mpu ({tiles} tiles)"):
                    sr = runner.run_cocotb("mpu", cfg, simulator, "dstar_rtl.tb.test_mpu_speed",
                                           seed=seed,
                                           tag=f"speed{k}", optimize=True,
                                           extra_env={"DSTAR_SPEED_JSON": str(jpath),
                                                      "DSTAR_SPEED_TILES": str(tiles),
                                                      "DSTAR_SPEED_CHANNELS": str(channels)})
                run = json.loads(jpath.read_text())
                run.update(process_s=steps[-1]["seconds"], log=str(sr.test_dir / "sim.log"),
                           load_avg_1min=steps[-1]["load_avg_1min"])
                runs.append(run)
                say(f"      {simulator}: {run['cycles']} cycles in {run['wall_s']:.2f} s = "
                     f"{run['cycles_per_s']:.0f} cycles/s")
            # The best of the repeats: the machine is shared, and load only ever slows a run.
            best = max(runs, key=lambda r: r["cycles_per_s"])
            res.update(best)
            res["runs"] = runs
            res["cycles_per_s_all"] = [round(r["cycles_per_s"]) for r in runs]
        except (AssertionError, OSError, ValueError, RuntimeError) as exc:
            res["error"] = str(exc)
            say(f"      {simulator}: {exc}")
        out[simulator] = res
    return out


def _stamp(cfg, simulator):
    """The simulator build's stamp file (content, mtime), or ``None``."""
    from dstar_rtl.sim.runner import unit_dir

    f = unit_dir("mpu", cfg) / f"{simulator}-opt" / ".built"
    try:
        return f.read_text(), f.stat().st_mtime_ns
    except OSError:
        return None


# -------------------------------------------------------------------------------- markdown
def _ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "–"


def markdown(data: dict) -> str:
    cfg = data["config"]
    md = [f"# Array area, Fmax and simulation speed (`{data['preset']}` preset)", "",
          f"Generated by `dstar measure arrays` on {data['date']} "
          f"({data['host']['cpus']} CPUs, load average {data['host']['load_avg_start']} at "
          f"start). Every figure is measured by the tools below; nothing is typed in (figures "
          f"marked * were reused by `--reuse` from an earlier run on byte-identical inputs).", "",
          f"Configuration `{data['preset']}` hash `{data['config_hash']}`"
          + (f", RTL source digest `{data['source_digest'][:16]}`" if "source_digest" in data
             else "") + f": {cfg['rows']}×"
          f"{cfg['cols']} array, {cfg['lanes']} lanes, sorter {cfg['sort_n']}, max reduction "
          f"{cfg['max_reduction']}, {cfg['weight_width']}-bit weights, {cfg['act_width']}-bit "
          f"activations, pe_stages {cfg['pe_stages']}, alignment {cfg['alignment']}.", ""]
    syn = data.get("synthesis", {})
    if syn:
        md += ["## ECP5 (Yosys `synth_ecp5`)", "",
               "LUT total = LUT4 + 2 × CCU2C (a CCU2C carry cell holds two LUT4s; nextpnr "
               "counts both as TRELLIS_COMB). FF counts every flip-flop type. `-nodsp` maps "
               "the multipliers to fabric.", ""]
        rows = []
        for unit, by in syn.items():
            for label in ("ecp5-nodsp", "ecp5"):
                r = by.get(label, {})
                if "error" in r:
                    rows.append([UNIT_NAMES[unit], label, f"failed: {r['error']}"] + [""] * 9)
                    continue
                x = r.get("resources", {})
                rows.append([UNIT_NAMES[unit], "no DSP" if label == "ecp5-nodsp" else "DSP",
                             x.get("lut_total"), x.get("lut4"), x.get("carry"), x.get("widemux"),
                             x.get("ff"), x.get("dsp"), x.get("bram"), x.get("lutram"),
                             r.get("num_cells"), tool_seconds(r)])
        md += [md_table(["unit", "multipliers", "LUT total", "LUT4", "CCU2C", "PFUMX+L6MUX21",
                       "FF", "MULT18X18D", "DP16KD", "DPR16X4", "cells", "Yosys s"], rows, 2), ""]
        mpu, base = syn.get("mpu", {}), syn.get("baseline", {})
        if mpu and base:
            g = lambda d, lab, k: d.get(lab, {}).get("resources", {}).get(k)  # noqa: E731
            lut = _ratio(g(mpu, "ecp5-nodsp", "lut_total"), g(base, "ecp5-nodsp", "lut_total"))
            ff = _ratio(g(mpu, "ecp5-nodsp", "ff"), g(base, "ecp5-nodsp", "ff"))
            tr = _ratio(g(mpu, "generic", "transistors"), g(base, "generic", "transistors"))
            md += [f"MPU / baseline: {lut} LUTs and {ff} FFs without DSPs; {tr} "
                   f"transistors (generic).", ""]
        md += ["## Generic gates (Yosys `synth`; `stat -tech cmos`)", "",
               "Cells are Yosys's internal gates after ABC. Transistors: Yosys's CMOS "
               "estimate after `dfflegalize` turns enable/reset flip-flops into plain "
               "`$_DFF_P_` plus gates (Yosys prices only plain flip-flops). Generic gates "
               "have no RAM macro, so memories become flip-flops and multiplexers here: "
               "\"memory bits\" is their size, counted before `memory_map`, and is part of "
               "the FF, cell and transistor figures."]
        rams = [UNIT_NAMES[u] for u, by in syn.items()
                if by.get("ecp5-nodsp", {}).get("resources", {}).get("bram")]
        if rams:
            md[-1] += (f" This concerns the {' and '.join(rams)}, whose memory Yosys maps to "
                       f"DP16KD block RAM on ECP5.")
        md.append("")
        rows = []
        for unit, by in syn.items():
            r = by.get("generic", {})
            if "error" in r:
                rows.append([UNIT_NAMES[unit], f"failed: {r['error']}", "", "", "", "", ""])
                continue
            cells = r.get("cells", {})
            top = ", ".join(f"{k.strip('$_')} {v:,}" for k, v in
                            sorted(cells.items(), key=lambda kv: -kv[1])[:4])
            tx = r.get("transistors")
            rows.append([UNIT_NAMES[unit], r.get("num_cells"), r["resources"].get("ff"),
                         r["resources"].get("memory_bits"),
                         f"{tx:,}" + ("" if r.get("transistors_complete") else "+")
                         if tx is not None else "–", top, tool_seconds(r)])
        md += [md_table(["unit", "cells", "FF", "memory bits (in FF)", "transistors",
                       "largest cell classes", "Yosys s"], rows), ""]
    pnr = data.get("pnr", {})
    if pnr:
        p = data["pnr_settings"]
        md += [f"## Place and route (nextpnr-ecp5, LFE5U-{p['device'].upper().rstrip('K')}F "
               f"{p['package']}, out of context)", "",
               f"Constraint `--freq {p['freq_mhz']:g}` on `clk`, seed {p['seed']}, "
               f"`--timing-allow-fail`. Out of context: no I/O buffers or global clock "
               f"network, ports left inside the fabric (a unit has more ports than the "
               f"package has pins).", ""]
        rows = []
        for key, r in pnr.items():
            name = UNIT_NAMES.get(r.get("unit", key), key)
            var = "no DSP" if key.endswith("nodsp") else "DSP"
            if "error" in r:
                msg = r["error"].split("; log:")[0]
                need = syn.get(r.get("unit"), {}).get(r.get("variant"), {}).get(
                    "resources", {}).get("dsp")
                have = next((x["utilisation"]["MULT18X18D"]["available"] for x in pnr.values()
                             if "MULT18X18D" in x.get("utilisation", {})), None)
                if "MULT18X18D" in msg and need and have:
                    msg = f"needs {need:,} MULT18X18D, the part has {have:,} ({msg})"
                rows.append([name, var, f"does not place: {msg}"] + [""] * 7)
                continue
            u = r["utilisation"]
            use = lambda b: (f"{u[b]['used']:,} / {u[b]['available']:,} "  # noqa: E731
                             f"({100 * u[b]['used'] / u[b]['available']:.0f} %)") if b in u else "–"
            cp = r.get("critical_path") or {}
            rows.append([name, var, f"{r['fmax_mhz']:.1f}" if r["fmax_mhz"] else "–",
                         "PASS" if r["timing_pass"] else "FAIL", use("TRELLIS_COMB"),
                         use("TRELLIS_FF"), use("MULT18X18D"),
                         f"{cp.get('delay_ns', 0):.2f} ({cp.get('logic_ns', 0):.2f} logic, "
                         f"{cp.get('routing_ns', 0):.2f} routing, {cp.get('logic_levels', 0)} "
                         f"levels)" if cp else "–",
                         ", ".join(cp.get("rtl_sources", [])) or "–", tool_seconds(r)])
        md += [md_table(["unit", "multipliers", "Fmax MHz", f"@{p['freq_mhz']:g} MHz",
                       "TRELLIS_COMB", "TRELLIS_FF", "MULT18X18D", "critical path ns",
                       "critical path through", "nextpnr s"], rows, 2), ""]
        notes = []
        for key, r in pnr.items():
            cp = r.get("critical_path")
            if not cp:
                continue
            name = UNIT_NAMES.get(r.get("unit", key), key)
            var = "no DSP" if key.endswith("nodsp") else "DSP"
            hop = cp.get("worst_hop") or {}
            notes.append(
                f"- {name} ({var}): from `{cp['start']}` to `{cp['end']}`; longest hop "
                f"{hop.get('delay_ns', 0):.2f} ns from `{hop.get('from_cell')}` at tile "
                f"{tuple(hop.get('from_loc') or ())} to tile {tuple(hop.get('to_loc') or ())}.")
        if notes:
            md += ["Critical paths (nextpnr names; Yosys merges equivalent registers, so a "
                   "start cell may stand for several RTL registers):", ""] + notes + [""]
    sim = data.get("sim_speed", {})
    if sim:
        md += ["## Simulation speed of the MPU (cocotb, `tb/test_mpu_speed.py`)", "",
               "A gap-free golden workload (reset, weight load, stream, drain), checked beat "
               "for beat after the timed region. Cycles/s = simulated clock cycles / wall "
               "seconds of the timed region (simulator and Python testbench together), the best "
               "of the repeated runs (the machine is shared; load only slows a run). The "
               "build is timed separately, from scratch in a private build directory unless "
               "`--reuse` (then \"cached\" marks a model `sim.runner` found current).", ""]
        rows = []
        for s, r in sim.items():
            if "error" in r:
                rows.append([s, f"failed: {r['error']}", "", "", "", "", "", "", ""])
                continue
            rows.append([f"{r['simulator']} {r['simulator_version']}",
                         f"{r['tiles']} × {r['channels']} ch", r["input_beats"], r["cycles"],
                         f"{r['wall_s']:.2f}", f"{r['cycles_per_s']:,.0f}",
                         ", ".join(f"{x:,}" for x in r.get("cycles_per_s_all", [])),
                         f"{r['build_s']:.1f}" + (" (cached)" if r.get("build_cached") else ""),
                         "yes" if r.get("checked") else "no"])
        md += [md_table(["simulator", "workload", "input beats", "cycles", "wall s", "cycles/s",
                       "all runs, cycles/s", "build s", "checked"], rows), ""]
    md += ["## Tools and step times", "",
           md_table(["tool", "version"], [[k, v] for k, v in data["tools"].items()], 2), "",
           md_table(["step", "seconds", "load avg", "status"],
                  [[s["step"], f"{s['seconds']:.1f}", f"{s['load_avg_1min']:.2f}", s["status"]]
                   for s in data["steps"]], 1), "",
           ("Reused steps (`--reuse`) take no time here; their tool seconds, marked * in the "
            "tables above, are those of the run that produced them. " if any(
                s["status"].startswith("reused") for s in data["steps"]) else "")
           + f"Total {data['total_seconds']:.0f} s. Work directories (logs, netlists, nextpnr "
           f"reports): `{os.path.relpath(BUILD_ROOT, ROOT)}/`.", ""]
    return "\n".join(md)


# ------------------------------------------------------------------------------------ main
def main(argv=None, prog=None) -> int:
    ap = Parser(prog=prog or "dstar measure arrays", description=__doc__.split("\n\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="fpga", choices=sorted(PRESETS),
                    help="configuration preset (default fpga)")
    ap.add_argument("--units", nargs="+", default=list(UNITS), choices=UNITS,
                    help="units to measure (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports", help="report directory")
    ap.add_argument("--freq", type=float, default=100.0, help="nextpnr constraint, MHz")
    ap.add_argument("--seed", type=int, default=1, help="nextpnr seed and cocotb seed")
    ap.add_argument("--pnr-units", nargs="*", default=["mpu"], choices=UNITS,
                    help="units to place and route (default: mpu)")
    ap.add_argument("--pnr-baseline", action="store_true", help="also place and route the "
                    "baseline (same as adding it to --pnr-units)")
    ap.add_argument("--no-synth", action="store_true", help="skip synthesis (and so P&R)")
    ap.add_argument("--no-pnr", action="store_true", help="skip place and route")
    ap.add_argument("--no-sim", action="store_true", help="skip the simulation speed runs")
    ap.add_argument("--simulators", nargs="+", default=["verilator", "icarus"],
                    choices=["verilator", "icarus"],
                    help="simulators of the speed runs (default: verilator icarus)")
    ap.add_argument("--tiles", type=int, default=40, help="speed workload tiles (default 40)")
    ap.add_argument("--channels", type=int, default=256,
                    help="speed workload input channels (capped at max_reduction; default 256)")
    ap.add_argument("--speed-repeats", type=int, default=3, help="speed runs per simulator; "
                    "the best is reported (default 3)")
    ap.add_argument("--reuse", action="store_true", help="reuse stored synthesis/P&R results "
                    "of byte-identical inputs and the same tool versions")
    ap.add_argument("--markdown-only", action="store_true", help="only rewrite arrays.md "
                    "from an existing arrays.json (no tool runs)")
    args = ap.parse_args(argv)
    check_output_dir(args.out)
    jpath, mpath = args.out / "arrays.json", args.out / "arrays.md"
    if args.markdown_only:
        data = read_json(jpath, "--markdown-only")
        write_together({mpath: markdown(data)})
        say(f"wrote {mpath} from {jpath}")
        return 0
    for name in ("tiles", "channels", "speed_repeats"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1, "
                            f"not {getattr(args, name)}")
    if not args.freq > 0:
        raise UserError(f"--freq must be positive, not {args.freq:g}")

    import amaranth
    import cocotb

    cfg = preset(args.preset)
    steps = []
    data = dict(preset=cfg.name, config_hash=cfg.hash(), config=cfg.to_dict(),
                date=time.strftime("%Y-%m-%d %H:%M %Z"),
                host=dict(cpus=os.cpu_count(), machine=platform.machine(),
                          python=platform.python_version(),
                          load_avg_start=round(os.getloadavg()[0], 2)),
                tools={"amaranth": amaranth.__version__, "yosys": yosys_version(),
                       "nextpnr-ecp5": nextpnr_version(), "cocotb": cocotb.__version__},
                steps=steps)
    data["source_digest"] = source_digest()  # RTL + generator sources the figures are of
    say(f"report_arrays: preset {cfg.name} ({cfg.hash()}), units {args.units}, "
         f"yosys {data['tools']['yosys']}, nextpnr {data['tools']['nextpnr-ecp5']}")

    def write():
        data["total_seconds"] = round(seconds(), 1)
        write_together({jpath: json_text(data),
                        mpath: markdown(data)})

    # Simulation speed before place and route: the slowest step comes last, and each phase
    # rewrites the reports so an interrupted run still leaves what it measured.
    if not args.no_synth:
        data["synthesis"] = run_synthesis(cfg, args.units, steps, args.reuse)
        write()
    if not args.no_sim and "mpu" in args.units:
        data["sim_speed"] = run_sim_speed(cfg, args.simulators, steps, args.tiles,
                                          args.channels, args.seed, args.reuse,
                                          args.speed_repeats)
        for s, r in data["sim_speed"].items():
            if "simulator_version" in r:
                data["tools"][s] = r["simulator_version"]
        write()
    pnr_units = [u for u in args.units
                 if u in args.pnr_units or (u == "baseline" and args.pnr_baseline)]
    if not args.no_synth and not args.no_pnr and pnr_units:
        data["pnr_settings"] = dict(device="85k", package="CABGA381", freq_mhz=args.freq,
                                    seed=args.seed, out_of_context=True)
        data["pnr"] = {}
        for unit in pnr_units:
            data["pnr"].update(run_pnr(cfg, data["synthesis"], [unit], steps, args.freq,
                                       args.seed, args.reuse))
            write()
    write()
    say(f"wrote {jpath} and {mpath}")
    failed = [s for s in steps if s["status"] != "ok" and not s["status"].startswith("reused")]
    if failed and not all(s["step"].startswith("nextpnr") for s in failed):
        names = ", ".join(s["step"] for s in failed[:3]) + (", ..." if len(failed) > 3 else "")
        raise WorkError(f"{len(failed)} step(s) failed ({names}); their errors are in {mpath}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
