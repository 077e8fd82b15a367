"""The synthesis runs behind the resource estimate's calibration (``dstar measure estimate``,
:mod:`app.benches.estimate_calibration`): each calibration part synthesized alone for each target
(:func:`synth_run`, stored runs reused), the fit and its held-out check (:func:`calibrate`)."""

from __future__ import annotations

import time

from amaranth.back import rtlil

from dstar_rtl.flows.estimate_coef import CALIBRATION, MEASURED_VARIANT, TARGETS
from dstar_rtl.flows.estimate_fit import (
    CALIBRATION_RUNS,
    COMPONENTS,
    VALIDATION_RUNS,
    calibration,
    stored_records,
)
from dstar_rtl.flows.synth import (
    SynthError,
    cached_result,
    synth_script,
    synthesize,
    synthesize_rtlil,
    yosys_version,
)
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import data_json
from dstar_rtl.gen.paths import FPGA_BUILD
from dstar_rtl.gen.progress import say
from dstar_rtl.golden.config import Config, preset
from dstar_rtl.golden.vpu import vpu_tables
from dstar_rtl.rtl.chunker import chunk_side_layout, descriptor_layout
from dstar_rtl.rtl.pe import Int8PE
from dstar_rtl.rtl.sorter import BitonicSorter
from dstar_rtl.rtl.vpu_lane import VPULane

__all__ = ["CALIBRATION_BUILD", "component", "synth_run", "measure", "calibrate"]


CALIBRATION_BUILD = "estimate-calibration"


def component(kind: str, cfg: Config):
    """The RTL of a component synthesized alone for the fit (one of
    :data:`flows.estimate_fit.COMPONENTS`)."""
    if kind == "int8pe":
        return Int8PE(cfg)
    if kind == "sorter":
        return BitonicSorter(cfg.sort_n, key_width=cfg.exp_width + 1,
                             payload_shape=descriptor_layout(cfg),
                             side_shape=chunk_side_layout(cfg))
    if kind == "vpu_lane":
        return VPULane(cfg, tables=vpu_tables(cfg))
    raise ValueError(f"component must be one of {list(COMPONENTS)}, not {kind!r}")


def synth_run(kind: str, cfg: Config, target: str, nodsp: bool) -> dict:
    """Synthesize a unit (:func:`flows.synth.synthesize`) or a component alone, reusing a stored
    result of identical RTLIL, script and Yosys."""
    if kind not in COMPONENTS:
        return synthesize(kind, cfg, target, nodsp=nodsp, reuse=True)
    top = f"cal_{kind}"
    il = rtlil.convert(component(kind, cfg), name=top)
    tag = target + ("-nodsp" if nodsp else "")
    workdir = (FPGA_BUILD / CALIBRATION_BUILD / f"{kind}-{cfg.hash()}" / tag).resolve()
    cached = cached_result(workdir, il, synth_script(top, target, nodsp=nodsp))
    if cached is not None:
        return cached
    out = synthesize_rtlil(il, top, target, nodsp=nodsp, workdir=workdir)
    (workdir / "result.json").write_text(data_json(out, indent=2) + "\n")
    return out


def measure(runs) -> list:
    """Synthesize every run of ``runs`` (``(label, kind, preset, overrides)``) for every
    target: ``[{label, kind, preset, overrides, measured {target: value}, seconds {...}}]``;
    a target whose synthesis failed has no measurement."""
    out = []
    for label, kind, pname, ov in runs:
        cfg = preset(pname, MEASURED_VARIANT, **ov)
        rec = dict(label=label, kind=kind, preset=pname, overrides=ov, measured={}, seconds={})
        done = {}
        for tname, (target, nodsp, key) in TARGETS.items():
            tag = f"{target}{' -nodsp' if nodsp else ''}"
            if (target, nodsp) not in done:
                t0 = time.perf_counter()
                say(f"synth {label}: {tag} ...")
                try:
                    r = synth_run(kind, cfg, target, nodsp)
                except SynthError as exc:  # left out of the fit, and said so
                    say(f"synth {label}: {tag} failed: {exc}")
                    r = None
                done[target, nodsp] = r
                rec["seconds"][tag] = ("failed" if r is None else "reused" if r.get("reused")
                                       else round(time.perf_counter() - t0, 1))
            r = done[target, nodsp]
            if r is not None:
                rec["measured"][tname] = r["transistors"] if key == "transistors" else \
                    r["resources"][key]
        out.append(rec)
    return out


def calibrate(remeasure: bool = True, missing: bool = False) -> tuple[dict, list, list]:
    """Measure the fitted and the held-out runs (``remeasure=False``: take the measurements
    stored in :data:`flows.estimate_coef.CALIBRATION`, after a change of the model alone;
    ``missing``: synthesize only the runs that have no stored measurement and take the others
    as stored), fit the fitted runs, and measure the error on both: ``(calibration, fitted
    records, held-out records)``. Raises :class:`~gen.errors.UserError` when the stored
    measurements cannot serve (none for a run, or another Yosys version)."""
    every = CALIBRATION_RUNS + VALIDATION_RUNS
    if missing:
        yosys, date = yosys_version(), time.strftime("%Y-%m-%d")
        if yosys != CALIBRATION["yosys"]:
            raise UserError(f"the stored measurements are of Yosys {CALIBRATION['yosys']}, "
                            f"this is {yosys}: run --calibrate without --missing")
        todo = [r for r in every if not CALIBRATION["measured"].get(r[0])]
        say(f"measuring the {len(todo)} runs with no stored measurement (Yosys {yosys}); "
            f"the other {len(every) - len(todo)} as stored")
        new = {r["label"]: r["measured"] for r in measure(todo)}
        fitted, held = stored_records(CALIBRATION_RUNS), stored_records(VALIDATION_RUNS)
        for r in fitted + held:
            r["measured"] = new.get(r["label"], r["measured"])
    elif remeasure:
        yosys, date = yosys_version(), time.strftime("%Y-%m-%d")
        say(f"calibrating against Yosys {yosys}: {len(CALIBRATION_RUNS)} configurations to fit, "
            f"{len(VALIDATION_RUNS)} held out")
        fitted, held = measure(CALIBRATION_RUNS), measure(VALIDATION_RUNS)
    else:
        yosys, date = CALIBRATION["yosys"], CALIBRATION["date"]
        say(f"fitting the measurements stored on {date} (Yosys {yosys})")
        fitted, held = stored_records(CALIBRATION_RUNS), stored_records(VALIDATION_RUNS)
        absent = [r["label"] for r in fitted + held if not r["measured"]]
        if absent:
            raise UserError(f"no stored measurement of {absent}: run --calibrate --missing")
    return calibration(yosys, date, fitted, held), fitted, held
