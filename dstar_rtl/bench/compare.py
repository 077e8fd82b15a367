"""The whole DSTAR core against the whole INT8 core, measured (``dstar measure compare``:
:mod:`app.reports.compare` types and renders it, and adds the ``paper`` projection).

``fpga`` (:func:`measure_fpga`, on the RTL): the trained digits DiT sampled end to end on both
generated cores (:func:`bench.sample.run_samples`, every step checked bit for bit against the
integer golden; the same labels and seeds), each core's buffers as deep as the whole model needs
on it (:func:`fpga_config`: nothing streams; the INT8 core keeps no ``x̂``/``Y``, so those have
one row). Cycles per image from the RTL; quality against the float sampler (PSNR with a 95 %
Student-t interval over the samples, classifier agreement); each core's Nangate45 cell area by
part, RAMs left out as macros and listed by bits, with an SRAM estimate
(:mod:`flows.core_parts`); ECP5 LUTs with every multiplier in LUTs (``synth_ecp5 -nodsp``: a DSP
block counted at the LUTs it replaces); the cycle model of :mod:`perf.perf_model` on the same
program against the RTL's cycles.

``paper`` (:func:`paper_area_models`): the areas of the 64×64 cores from the part-area model
fitted on Nangate45 syntheses of smaller cores of the ``paper`` family and checked on one it was
not fitted on.

Ratios (:func:`ratios`): ``per_um2`` is DSTAR's images per second per µm² of cells over INT8's,
``(int8 cycles / dstar cycles) · (int8 µm² / dstar µm²)``; ``per_um2_with_sram`` adds each
core's SRAM estimate to its cells; ``per_lut`` the same with ECP5 LUTs.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dstar_rtl.flows.core_parts import (
    ASIC_OPTIONS,
    CHECK_SIZE,
    FIT_SIZES,
    MPU_PARTS,
    QPU_PARTS,
    core_area,
    family_config,
    fit_parts,
)
from dstar_rtl.gen.progress import Step
from dstar_rtl.golden.config import preset

__all__ = ["DATAPATHS", "fpga_config", "ratios", "measure_fpga", "paper_area_models"]

DATAPATHS = ("dstar", "int8")


def fpga_config(datapath: str, spec, params):
    """The ``fpga`` core of ``datapath`` with every buffer as deep as the whole model needs on it
    (at least one row)."""
    from dstar_rtl.models.dit_int_model import IntDiT
    from dstar_rtl.program.model import resident_depths

    cfg = preset("fpga", datapath=datapath)
    need = resident_depths(IntDiT(spec, params, cfg))
    return dataclasses.replace(cfg, **{k: max(1, v) for k, v in need.items()})


def ratios(d: dict, i: dict) -> dict:
    """DSTAR over INT8 throughput per area, from ``{cycles, um2, sram_um2[, lut4]}`` of each."""
    speed = i["cycles"] / d["cycles"]
    out = dict(speedup=round(speed, 4),
               per_um2=round(speed * i["um2"] / d["um2"], 4),
               per_um2_with_sram=round(speed * (i["um2"] + i["sram_um2"])
                                       / (d["um2"] + d["sram_um2"]), 4))
    if "lut4" in d:
        out["per_lut"] = round(speed * i["lut4"] / d["lut4"], 4)
    return out


def _quality(rec: dict) -> dict:
    from dstar_rtl.analysis.profile import mean_ci

    ps = [s["psnr_db"] for s in rec["samples"]]
    ci = mean_ci(ps)
    agree = rec.get("classifier_agreement", {})
    r = lambda v: None if v is None else round(v, 2)   # noqa: E731  (one sample: no interval)
    return dict(psnr_db=dict(mean=r(ci["mean"]), lo=r(ci["lo"]), hi=r(ci["hi"]), n=ci["n"],
                             per_sample=ps),
                classifier_with_float=agree.get("with_float"),
                classifier_with_label=agree.get("with_label"), samples=len(ps))


def _model_check(cfg, spec, params, cal, steps: int, label: int, seed: int,
                 rtl_steps: list, calibration: dict) -> dict:
    """The cycle model (``calibration``: the ``fpga`` :class:`perf.perf_model.Timing`'s
    fields, measured on the RTL; the INT8 core's quantizer by :func:`perf.chip_model.
    int8_timing`) on the first two steps of the first sample against the RTL's cycles of those
    steps."""
    from dstar_rtl.models.dit_int_model import IntDiT
    from dstar_rtl.perf.chip_model import int8_timing
    from dstar_rtl.perf.perf_model import Timing, model_program
    from dstar_rtl.program.executor import CoreExecutor
    from dstar_rtl.program.isa import core_for
    from dstar_rtl.program.model import compile_model
    from dstar_rtl.program.sampling import CoreSampler

    t = Timing(**calibration)
    if cfg.datapath == "int8":
        t = int8_timing(t, preset("fpga"), cfg)
    prog = compile_model(IntDiT(spec, params, cfg, cal.masks, base_log2=cal.bases),
                         core_for(cfg))
    host = CoreSampler(prog, [IntDiT(spec, params, cfg, cal.masks, base_log2=cal.bases)], steps)
    ex = CoreExecutor(cfg, core_for(cfg))
    runs = [(prog.init, prog.init_words)]
    ex.run(*runs[0])
    start = host.start(seed, label)
    host.started(ex.run(start, []))
    runs.append((start, []))
    for _ in range(2):
        cmds, words = host.step_program()
        host.finish_step(ex.run(cmds, words))
        runs.append((cmds, words))
    model = model_program(t, cfg, runs)[2:]
    out = []
    for s, m in zip(rtl_steps, model):
        c = s["core_counters"]
        out.append(dict(cache_step=s["cache_step"], rtl=s["cycles"], model=m["cycles"],
                        error=round(m["cycles"] / s["cycles"] - 1, 4),
                        busy={e: dict(rtl=c[f"busy_{e}"], model=m["busy"][e])
                              for e in ("H", "Q", "M", "V")}))
    return dict(steps=out)


def measure_fpga(liberty: str, log: list, *, calibration: dict, simulator: str = "verilator",
                 steps: int = 20, labels=tuple(range(10)), seed: int = 0, jobs: int = 2,
                 reuse: bool = False) -> dict:
    """Both ``fpga`` cores (module docstring) on the trained digits DiT: ``steps`` DDIM steps, one
    sample per label of ``labels`` (seed ``seed + k``) on ``simulator`` (``jobs`` at once), the
    cores synthesized (``reuse``: stored identical runs), the cycle model at ``calibration``
    checked against the RTL. ``log``: the steps' times are appended to it."""
    from dstar_rtl.analysis.calibration import CALIBRATION_SEED_OFFSET, calibrate
    from dstar_rtl.bench.sample import run_samples
    from dstar_rtl.flows.synth import synthesize
    from dstar_rtl.models.digits import load_trained

    spec, params = load_trained()
    out, recs = {}, {}
    for dp in DATAPATHS:            # the simulations first, then the syntheses
        cfg = fpga_config(dp, spec, params)
        with Step(log, f"sample the digits DiT on the {dp} fpga core ({simulator})"):
            recs[dp] = run_samples(spec, params, cfg, backend=simulator, steps=steps,
                                   labels=labels, guidance=1.0, seed=seed,
                                   jobs=jobs)["record"]
        if not recs[dp]["core"]["bit_exact"]:
            raise RuntimeError(f"the {dp} core's samples are not checked at every step")
    for dp in DATAPATHS:
        cfg, rec = fpga_config(dp, spec, params), recs[dp]
        with Step(log, f"Nangate45 synthesis of the {dp} fpga core by part"):
            area = core_area(synthesize("core", cfg, "asic", liberty=liberty, **ASIC_OPTIONS,
                                        reuse=reuse))
        with Step(log, f"ECP5 synthesis of the {dp} fpga core without DSP blocks"):
            ecp5 = synthesize("core", cfg, "ecp5", nodsp=True, abc9=False,
                              reuse=reuse)["resources"]
        cal = calibrate(spec, params, cfg, steps, seed + CALIBRATION_SEED_OFFSET)
        with Step(log, f"cycle model against the RTL on the {dp} core"):
            check = _model_check(cfg, spec, params, cal, steps, labels[0],
                                 seed, rec["samples"][0]["per_step"], calibration)
        bits = [st["average_bits"] for s in rec["samples"] for st in s["per_step"]]
        out[dp] = dict(config=cfg.to_dict(), config_hash=cfg.hash(),
                       cycles_per_image=rec["core"]["cycles_per_image"],
                       cycles_per_step=rec["core"]["cycles_per_step"],
                       average_bits=round(float(np.mean(bits)), 4),
                       quality=_quality(rec), area=area,
                       ecp5={k: ecp5.get(k, 0) for k in ("lut4", "ff", "carry", "dsp")},
                       model_check=check, sample_seconds=rec["seconds"])
    d, i = out["dstar"], out["int8"]
    side = {k: dict(cycles=v["cycles_per_image"], um2=v["area"]["cells_um2"],
                    sram_um2=v["area"]["sram_um2"], lut4=v["ecp5"]["lut4"])
            for k, v in out.items()}
    r = ratios(side["dstar"], side["int8"])
    return dict(dstar_um2=d["area"]["cells_um2"], int8_um2=i["area"]["cells_um2"],
                dstar_cycles_per_image=d["cycles_per_image"],
                int8_cycles_per_image=i["cycles_per_image"], **r,
                qpu_share=d["area"]["qpu_share"], steps=steps, labels=labels,
                seed=seed, simulator=simulator, cores=out)


def paper_area_models(liberty: str, log: list, *, reuse: bool = False) -> dict:
    """Each datapath's ``paper``-family part-area model: the cores at :data:`flows.core_parts.
    FIT_SIZES` and :data:`~flows.core_parts.CHECK_SIZE` synthesized on ``liberty`` by part, the
    parts and the SRAM fitted (:func:`flows.core_parts.fit_parts`), the QPU's share of the
    predicted QPU and MPU. ``log``: the steps' times are appended to it."""
    from dstar_rtl.flows.synth import synthesize

    models = {}
    for dp in DATAPATHS:
        areas, srams, runs = {}, {}, {}
        for T in sorted({*FIT_SIZES, CHECK_SIZE}):
            with Step(log, f"Nangate45 synthesis of the {dp} core at T = {T} (paper family)"):
                a = core_area(synthesize("core", family_config(T, dp), "asic", liberty=liberty,
                                         **ASIC_OPTIONS, reuse=reuse))
            areas[T], runs[T] = a["parts"], dict(cells_um2=a["cells_um2"], ff=a["ff"],
                                                 sram_um2=a["sram_um2"], seconds=a["seconds"])
            srams[T] = {"SRAM": a["sram_um2"]}
        fit = fit_parts(areas)
        sram = fit_parts(srams)
        qpu = sum(fit["predicted"]["parts"].get(p, 0.0) for p in QPU_PARTS)
        mpu = sum(fit["predicted"]["parts"].get(p, 0.0) for p in MPU_PARTS)
        models[dp] = dict(fit=fit, sram=dict(predicted=sram["predicted"]["total"],
                                             check=sram["check"]),
                          synthesized=runs, qpu_share=round(qpu / (qpu + mpu), 4) if qpu else 0)
    return models
