"""The arrays' synthesis, place and route and simulation speed (``dstar measure arrays``:
:mod:`app.reports.arrays` types and renders them).

- :func:`run_synthesis`: one PE, the MPU and the INT8 baseline with Yosys for ECP5 without and
  with DSP blocks (``synth_ecp5 [-nodsp]``) and for generic gates (``synth; stat -tech cmos``),
  one fresh Yosys process per run (:mod:`flows.synth`);
- :func:`run_pnr`: nextpnr-ecp5 place and route of the units' ECP5 netlists, with and without
  DSPs, on the LFE5U-85F, out of context, at a constraint with a fixed seed (:mod:`flows.pnr`);
  a variant that does not fit the part is recorded with nextpnr's message;
- :func:`run_sim_speed`: the MPU under cocotb with Verilator and Icarus (``tb/test_mpu_speed.py``:
  a long gap-free golden workload, checked beat for beat; best of the repeats), with a clean
  build in a private build directory, timed separately.

Each step appends its time to ``steps`` (:class:`gen.progress.Step`); ``reuse`` takes a stored
result only for byte-identical inputs and the same tool version.
"""

from __future__ import annotations

import json

from dstar_rtl.flows.pnr import PnrError, place_and_route
from dstar_rtl.flows.synth import BUILD_ROOT, SynthError, synthesize
from dstar_rtl.gen.progress import Step, say

__all__ = ["UNITS", "UNIT_NAMES", "VARIANTS", "run_synthesis", "run_pnr", "run_sim_speed"]


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
