"""Area, Fmax and simulation speed of the arrays, measured end to end.

``dstar measure arrays`` writes ``reports/arrays.json`` (the typed result :class:`Arrays`: every
figure, tool version, configuration hash and step time) and ``reports/arrays.md`` (the same as
tables) through the one measurement runner (:data:`MEASUREMENT`):

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
the reports). A progress line is printed as each step starts and ends; a step that failed
(but a variant that does not place) exits 1 once the result is written.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Literal

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.markdown import render
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.bench.arrays import (
    UNIT_NAMES,
    UNITS,
    run_pnr,
    run_sim_speed,
    run_synthesis,
)
from dstar_rtl.flows.pnr import nextpnr_version
from dstar_rtl.flows.synth import BUILD_ROOT, yosys_version
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.paths import ROOT
from dstar_rtl.gen.progress import say, seconds
from dstar_rtl.gen.tables import md_table, tool_seconds
from dstar_rtl.golden.config import PRESETS, preset
from dstar_rtl.results.arrays import ArrayPnr, Arrays, PnrSettings, SimSpeed, UnitSynth
from dstar_rtl.results.quantities import Resources, StepTime
from dstar_rtl.sim.runner import source_digest


# -------------------------------------------------------------------------------- markdown
def _ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "–"


def _seconds(run) -> str:
    return tool_seconds(dict(seconds=run.seconds, reused=run.reused))


def _ecp5_table(syn) -> str:
    rows = []
    for unit, by in syn.items():
        for label in ("ecp5-nodsp", "ecp5"):
            r = by.get(label) or UnitSynth()
            if r.error is not None:
                rows.append([UNIT_NAMES[unit], label, f"failed: {r.error}"] + [""] * 9)
                continue
            x = r.resources or Resources()
            rows.append([UNIT_NAMES[unit], "no DSP" if label == "ecp5-nodsp" else "DSP",
                         x.lut_total, x.lut4, x.carry, x.widemux, x.ff, x.dsp, x.bram,
                         x.lutram, r.num_cells, _seconds(r)])
    return md_table(["unit", "multipliers", "LUT total", "LUT4", "CCU2C", "PFUMX+L6MUX21", "FF",
                     "MULT18X18D", "DP16KD", "DPR16X4", "cells", "Yosys s"], rows, 2)


def _ratios(syn) -> dict | None:
    mpu, base = syn.get("mpu", {}), syn.get("baseline", {})
    if not (mpu and base):
        return None

    def g(d, lab, k):
        r = d.get(lab)
        if r is None or r.resources is None:
            return None
        return r.transistors if k == "transistors" else getattr(r.resources, k)
    return dict(lut=_ratio(g(mpu, "ecp5-nodsp", "lut_total"), g(base, "ecp5-nodsp", "lut_total")),
                ff=_ratio(g(mpu, "ecp5-nodsp", "ff"), g(base, "ecp5-nodsp", "ff")),
                tr=_ratio(g(mpu, "generic", "transistors"), g(base, "generic", "transistors")))


def _generic_table(syn) -> str:
    rows = []
    for unit, by in syn.items():
        r = by.get("generic") or UnitSynth()
        if r.error is not None:
            rows.append([UNIT_NAMES[unit], f"failed: {r.error}", "", "", "", "", ""])
            continue
        top = ", ".join(f"{k.strip('$_')} {v:,}" for k, v in
                        sorted(r.cells.items(), key=lambda kv: -kv[1])[:4])
        tx, x = r.transistors, r.resources or Resources()
        rows.append([UNIT_NAMES[unit], r.num_cells, x.ff, x.memory_bits,
                     f"{tx:,}" + ("" if r.transistors_complete else "+")
                     if tx is not None else "–", top, _seconds(r)])
    return md_table(["unit", "cells", "FF", "memory bits (in FF)", "transistors",
                     "largest cell classes", "Yosys s"], rows)


def _pnr_table(pnr, syn, freq) -> str:
    rows = []
    for key, r in pnr.items():
        name = UNIT_NAMES.get(r.unit or key, key)
        var = "no DSP" if key.endswith("nodsp") else "DSP"
        if r.error is not None:
            msg = r.error.split("; log:")[0]
            s = syn.get(r.unit, {}).get(r.variant)
            need = s.resources.dsp if s is not None and s.resources else None
            have = next((x.utilisation["MULT18X18D"]["available"] for x in pnr.values()
                         if "MULT18X18D" in x.utilisation), None)
            if "MULT18X18D" in msg and need and have:
                msg = f"needs {need:,} MULT18X18D, the part has {have:,} ({msg})"
            rows.append([name, var, f"does not place: {msg}"] + [""] * 7)
            continue
        u = r.utilisation
        use = lambda b: (f"{u[b]['used']:,} / {u[b]['available']:,} "  # noqa: E731
                         f"({100 * u[b]['used'] / u[b]['available']:.0f} %)") if b in u else "–"
        cp = r.critical_path
        rows.append([name, var, f"{r.fmax_mhz:.1f}" if r.fmax_mhz else "–",
                     "PASS" if r.timing_pass else "FAIL", use("TRELLIS_COMB"), use("TRELLIS_FF"),
                     use("MULT18X18D"),
                     f"{cp.delay_ns or 0:.2f} ({cp.logic_ns or 0:.2f} logic, "
                     f"{cp.routing_ns or 0:.2f} routing, {cp.logic_levels or 0} levels)"
                     if cp else "–", ", ".join(cp.rtl_sources) if cp and cp.rtl_sources else "–",
                     _seconds(r)])
    return md_table(["unit", "multipliers", "Fmax MHz", f"@{freq:g} MHz", "TRELLIS_COMB",
                     "TRELLIS_FF", "MULT18X18D", "critical path ns", "critical path through",
                     "nextpnr s"], rows, 2)


def _paths(pnr) -> list:
    notes = []
    for key, r in pnr.items():
        cp = r.critical_path
        if not cp:
            continue
        hop = cp.worst_hop
        notes.append(
            f"- {UNIT_NAMES.get(r.unit or key, key)} "
            f"({'no DSP' if key.endswith('nodsp') else 'DSP'}): from `{cp.start}` to "
            f"`{cp.end}`; longest hop {hop.delay_ns if hop else 0:.2f} ns from "
            f"`{hop.from_cell if hop else None}` at tile "
            f"{tuple(hop.from_loc or ()) if hop else ()} to tile "
            f"{tuple(hop.to_loc or ()) if hop else ()}.")
    return notes


def _speed_table(sim) -> str:
    rows = []
    for s, r in sim.items():
        if r.error is not None:
            rows.append([s, f"failed: {r.error}", "", "", "", "", "", "", ""])
            continue
        rows.append([f"{r.simulator} {r.simulator_version}", f"{r.tiles} × {r.channels} ch",
                     r.input_beats, r.cycles, f"{r.wall_s:.2f}", f"{r.cycles_per_s:,.0f}",
                     ", ".join(f"{round(x.cycles_per_s):,}" for x in r.runs),
                     f"{r.build_s:.1f}" + (" (cached)" if r.build_cached else ""),
                     "yes" if r.checked else "no"])
    return md_table(["simulator", "workload", "input beats", "cycles", "wall s", "cycles/s",
                     "all runs, cycles/s", "build s", "checked"], rows)


def markdown(data: Arrays) -> str:
    """``reports/arrays.md`` (``app/templates/arrays.md``) from its result."""
    syn, pnr = data.synthesis, data.pnr
    return render(
        "arrays", r=data, c=data.config,
        ecp5=syn and _ecp5_table(syn), ratios=syn and _ratios(syn),
        generic=syn and _generic_table(syn),
        rams=[UNIT_NAMES[u] for u, by in syn.items() if by.get("ecp5-nodsp")
              and by["ecp5-nodsp"].resources and by["ecp5-nodsp"].resources.bram],
        pnr=pnr and _pnr_table(pnr, syn, data.pnr_settings.freq_mhz), paths=pnr and _paths(pnr),
        speed=data.sim_speed and _speed_table(data.sim_speed),
        tools=md_table(["tool", "version"], [[k, v] for k, v in data.tools.items()], 2),
        steps=md_table(["step", "seconds", "load avg", "status"],
                       [[s.step, f"{s.seconds:.1f}", f"{s.load_avg_1min:.2f}", s.status]
                        for s in data.steps], 1),
        reused=any(s.status.startswith("reused") for s in data.steps),
        work=os.path.relpath(BUILD_ROOT, ROOT))[:-1]


# ------------------------------------------------------------------------------ measurement
@dataclass(frozen=True)
class ArraysOptions:
    """What ``dstar measure arrays`` measures (checked at construction)."""

    preset: str = option("fpga", "configuration preset", choices=sorted(PRESETS))
    units: tuple[Literal["pe", "mpu", "baseline"], ...] = option(UNITS, "units to measure")
    freq: float = option(100.0, "nextpnr constraint, MHz")
    seed: int = option(1, "nextpnr seed and cocotb seed")
    pnr_units: tuple[Literal["pe", "mpu", "baseline"], ...] = option(
        ("mpu",), "units to place and route")
    pnr_baseline: bool = option(False, "also place and route the baseline (same as adding it "
                                       "to --pnr-units)")
    no_synth: bool = option(False, "skip synthesis (and so place and route)")
    no_pnr: bool = option(False, "skip place and route")
    no_sim: bool = option(False, "skip the simulation speed runs")
    simulators: tuple[Literal["verilator", "icarus"], ...] = option(
        ("verilator", "icarus"), "simulators of the speed runs")
    tiles: int = option(40, "speed workload tiles")
    channels: int = option(256, "speed workload input channels (capped at max_reduction)")
    speed_repeats: int = option(3, "speed runs per simulator; the best is reported")
    reuse: bool = option(False, "reuse stored synthesis/P&R results of byte-identical inputs "
                                "and the same tool versions")

    def __post_init__(self):
        for name in ("tiles", "channels", "speed_repeats"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} must be at least 1, "
                                f"not {getattr(self, name)}")
        if not self.freq > 0:
            raise UserError(f"--freq must be positive, not {self.freq:g}")


def measure(opts: ArraysOptions, previous=None) -> Arrays:
    """Synthesis, the MPU's simulation speed, then place and route (the slowest step last);
    progress on stderr."""
    import amaranth
    import cocotb

    cfg = preset(opts.preset)
    steps = []
    tools = {"amaranth": amaranth.__version__, "yosys": yosys_version(),
             "nextpnr-ecp5": nextpnr_version(), "cocotb": cocotb.__version__}
    host = dict(cpus=os.cpu_count(), machine=platform.machine(),
                python=platform.python_version(), load_avg_start=round(os.getloadavg()[0], 2))
    say(f"report_arrays: preset {cfg.name} ({cfg.hash()}), units {list(opts.units)}, "
        f"yosys {tools['yosys']}, nextpnr {tools['nextpnr-ecp5']}")
    synth, sim, pnr, settings = {}, {}, {}, None
    if not opts.no_synth:
        synth = run_synthesis(cfg, opts.units, steps, opts.reuse)
    if not opts.no_sim and "mpu" in opts.units:
        sim = run_sim_speed(cfg, opts.simulators, steps, opts.tiles, opts.channels, opts.seed,
                            opts.reuse, opts.speed_repeats)
        for s, r in sim.items():
            if "simulator_version" in r:
                tools[s] = r["simulator_version"]
    pnr_units = [u for u in opts.units
                 if u in opts.pnr_units or (u == "baseline" and opts.pnr_baseline)]
    if not opts.no_synth and not opts.no_pnr and pnr_units:
        settings = PnrSettings(device="85k", package="CABGA381", freq_mhz=opts.freq,
                               seed=opts.seed)
        for unit in pnr_units:
            pnr.update(run_pnr(cfg, synth, [unit], steps, opts.freq, opts.seed, opts.reuse))
    return Arrays(
        run_provenance("arrays", {cfg.name: cfg.hash()}), preset=cfg.name,
        config_hash=cfg.hash(), config=cfg.to_dict(), host=host, tools=tools,
        steps=tuple(StepTime(**s) for s in steps), total_seconds=round(seconds(), 1),
        source_digest=source_digest(),
        synthesis={u: {v: UnitSynth.from_flow(r) for v, r in by.items()}
                   for u, by in synth.items()},
        pnr_settings=settings, pnr={k: ArrayPnr.from_flow(r) for k, r in pnr.items()},
        sim_speed={s: SimSpeed.from_run(r) for s, r in sim.items()})


def failure(result: Arrays) -> str | None:
    """The steps that failed (but place and route alone, whose failures are figures: a
    variant that does not fit the part), or ``None``."""
    failed = [s for s in result.steps
              if s.status != "ok" and not s.status.startswith("reused")]
    if failed and not all(s.step.startswith("nextpnr") for s in failed):
        names = ", ".join(s.step for s in failed[:3]) + (", ..." if len(failed) > 3 else "")
        return f"{len(failed)} step(s) failed ({names}); their errors are in arrays.md"
    return None


MEASUREMENT = Measurement(
    name="arrays", stem="arrays",
    summary="Area, Fmax and simulation speed of one PE, the MPU and the INT8 array: ECP5 and "
            "generic synthesis, the MPU's cocotb speed on Verilator and Icarus, nextpnr place "
            "and route (about 20 minutes).",
    options=ArraysOptions, result=Arrays, measure=measure, render=markdown, failure=failure)
