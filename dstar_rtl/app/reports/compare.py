"""The whole DSTAR core against the whole INT8 core (issue 27): ``dstar measure compare`` →
``reports/compare.{json,md,png}``.

``fpga`` (measured on the RTL): the trained digits DiT sampled end to end on both generated
cores (:func:`bench.sample.run_samples`, every step checked bit for bit against the
integer golden; the same labels and seeds), each core's buffers as deep as the whole model needs
on it (nothing streams; the INT8 core keeps no ``x̂``/``Y``, so those have one row). Cycles per
image from the RTL; quality against the float sampler (PSNR with a 95 % Student-t interval over
the samples, classifier agreement); each core's Nangate45 cell area by part, RAMs left out as
macros and listed by bits, with an SRAM estimate (:mod:`flows.core_parts`); ECP5 LUTs
with every multiplier in LUTs (``synth_ecp5 -nodsp``: a DSP block counted at the LUTs it
replaces); the cycle model of :mod:`perf.perf_model` on the same program against the RTL's cycles.

``paper`` (model): the areas of the 64×64 cores from the part-area model fitted on Nangate45
syntheses of smaller cores of the ``paper`` family and checked on one it was not fitted on; the
cycles per image of the projection's model (:mod:`perf.chip_model`) for
:data:`PAPER_MODEL` with our measured workload statistics (the paper's when ours are missing).

Ratios: ``per_um2`` is DSTAR's images per second per µm² of cells over INT8's,
``(int8 cycles / dstar cycles) · (int8 µm² / dstar µm²)``; ``per_um2_with_sram`` adds each
core's SRAM estimate to its cells; ``per_lut`` the same with ECP5 LUTs; ``qpu_share`` the QPU's
area over the QPU's and the MPU's.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from dstar_rtl.app.markdown import render
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.app.options import check_liberty, resolve_liberty
from dstar_rtl.app.quantities import StepTime
from dstar_rtl.app.reports.compare_result import (
    Compare,
    FpgaComparison,
    PaperComparison,
)
from dstar_rtl.app.results import Provenance, build
from dstar_rtl.flows.core_parts import (
    ASIC_OPTIONS,
    CHECK_SIZE,
    FIT_SIZES,
    MPU_PARTS,
    QPU_PARTS,
    SRAM_SOURCE,
    SRAM_UM2_PER_BIT,
    core_area,
    family_config,
    fit_parts,
)
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import png_writer
from dstar_rtl.gen.paths import ROOT
from dstar_rtl.gen.progress import Step
from dstar_rtl.gen.tables import md_table
from dstar_rtl.golden.config import preset
from dstar_rtl.sim.sources import digest, elaboration_sources

OUT = ROOT / "reports"
DATAPATHS = ("dstar", "int8")
PRESETS = ("fpga", "paper")
PAPER_MODEL = "DiT-XL/2 512"

__all__ = ["MEASUREMENT", "fpga_config", "ratios", "PAPER_MODEL"]


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


# ----------------------------------------------------------------------------- fpga
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
                 rtl_steps: list, perf_model: Path) -> dict:
    """The cycle model (``reports/perf_model.json``'s ``fpga`` calibration; the INT8 core's
    quantizer by :func:`perf.chip_model.int8_timing`) on the first two steps of the
    first sample against the RTL's cycles of those steps."""
    from dstar_rtl.app.reports.projection_inputs import load_calibration
    from dstar_rtl.models.dit_int_model import IntDiT
    from dstar_rtl.perf.chip_model import int8_timing
    from dstar_rtl.perf.perf_model import Timing, model_program
    from dstar_rtl.program.executor import CoreExecutor
    from dstar_rtl.program.isa import core_for
    from dstar_rtl.program.model import compile_model
    from dstar_rtl.program.sampling import CoreSampler

    t = Timing(**load_calibration(perf_model)["fpga"])
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


def measure_fpga(args, liberty: str, steps: list) -> dict:
    from dstar_rtl.analysis.calibration import CALIBRATION_SEED_OFFSET, calibrate
    from dstar_rtl.bench.sample import run_samples
    from dstar_rtl.flows.synth import synthesize
    from dstar_rtl.models.digits import load_trained

    spec, params = load_trained()
    out, recs = {}, {}
    for dp in DATAPATHS:            # the simulations first, then the syntheses
        cfg = fpga_config(dp, spec, params)
        with Step(steps, f"sample the digits DiT on the {dp} fpga core ({args.simulator})"):
            recs[dp] = run_samples(spec, params, cfg, backend=args.simulator, steps=args.steps,
                                   labels=args.labels, guidance=1.0, seed=args.seed,
                                   jobs=args.jobs)["record"]
        if not recs[dp]["core"]["bit_exact"]:
            raise RuntimeError(f"the {dp} core's samples are not checked at every step")
    for dp in DATAPATHS:
        cfg, rec = fpga_config(dp, spec, params), recs[dp]
        with Step(steps, f"Nangate45 synthesis of the {dp} fpga core by part"):
            area = core_area(synthesize("core", cfg, "asic", liberty=liberty, **ASIC_OPTIONS,
                                        reuse=args.reuse))
        with Step(steps, f"ECP5 synthesis of the {dp} fpga core without DSP blocks"):
            ecp5 = synthesize("core", cfg, "ecp5", nodsp=True, abc9=False,
                              reuse=args.reuse)["resources"]
        cal = calibrate(spec, params, cfg, args.steps, args.seed + CALIBRATION_SEED_OFFSET)
        with Step(steps, f"cycle model against the RTL on the {dp} core"):
            check = _model_check(cfg, spec, params, cal, args.steps, args.labels[0],
                                 args.seed, rec["samples"][0]["per_step"], args.perf_model)
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
                qpu_share=d["area"]["qpu_share"], steps=args.steps, labels=args.labels,
                seed=args.seed, simulator=args.simulator, cores=out)


def kept_fpga(previous) -> FpgaComparison:
    """The ``fpga`` object of the stored result (``previous()``), for a run that measures only
    ``paper``: refused (:class:`UserError`) unless both cores were measured at the
    configurations the defaults build today (their hashes). The object records when it was
    measured (``measured``)."""
    from dstar_rtl.models.digits import load_trained

    old = previous()
    if old is None:
        raise UserError("--presets without fpga keeps the fpga object of the stored "
                        "compare.json, which has none; run with --presets fpga paper")
    f = old.fpga
    spec, params = load_trained()
    for dp in DATAPATHS:
        now = fpga_config(dp, spec, params).hash()
        if f.cores[dp].config_hash != now:
            raise UserError(f"the {dp} fpga core of the stored compare.json was measured at "
                            f"configuration {f.cores[dp].config_hash}, today's is {now}; run "
                            f"with --presets fpga paper")
    return dataclasses.replace(f, measured=f.measured or old.provenance.date)


# ----------------------------------------------------------------------------- paper
def measure_paper(args, liberty: str, steps: list) -> dict:
    from dstar_rtl.app.reports.projection_inputs import load_calibration, workloads
    from dstar_rtl.flows.synth import synthesize
    from dstar_rtl.models.dit_shapes import MODELS
    from dstar_rtl.perf.chip_model import Chip, int8_timing, paper_timing, project_model

    models = {}
    for dp in DATAPATHS:
        areas, srams, runs = {}, {}, {}
        for T in sorted({*FIT_SIZES, CHECK_SIZE}):
            with Step(steps, f"Nangate45 synthesis of the {dp} core at T = {T} (paper family)"):
                a = core_area(synthesize("core", family_config(T, dp), "asic", liberty=liberty,
                                         **ASIC_OPTIONS, reuse=args.reuse))
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
    cfg = preset("paper")
    t, _notes = paper_timing(load_calibration(args.perf_model), cfg)
    wls, wl_notes = workloads(args.profile, args.bench)
    wl = wls[-1]
    r = project_model(MODELS[PAPER_MODEL], Chip(), t,
                      int8_timing(t, cfg, preset("paper", datapath="int8")), cfg, wl)
    freq = Chip().freq_hz
    cyc = {dp: r[dp]["per_image_s"] * freq for dp in DATAPATHS}
    side = {dp: dict(cycles=cyc[dp], um2=models[dp]["fit"]["predicted"]["total"],
                     sram_um2=models[dp]["sram"]["predicted"]) for dp in DATAPATHS}
    return dict(dstar_um2=side["dstar"]["um2"], int8_um2=side["int8"]["um2"],
                dstar_cycles_per_image=round(cyc["dstar"]),
                int8_cycles_per_image=round(cyc["int8"]),
                **ratios(side["dstar"], side["int8"]),
                qpu_share=models["dstar"]["qpu_share"], model=PAPER_MODEL,
                workload=dataclasses.asdict(wl), workload_notes=wl_notes,
                dstar_sram_um2=side["dstar"]["sram_um2"], int8_sram_um2=side["int8"]["sram_um2"],
                area_model=models, memory=dataclasses.asdict(Chip().memory))


# ----------------------------------------------------------------------------- report
def _x(v, nd=2):
    return "–" if v is None else f"{v:,.{nd}f}"


def verdict(fpga: FpgaComparison, paper: PaperComparison | None) -> str:
    """Which design wins per µm² of cells, and by how much, at each preset measured."""
    out = []
    for name, r in (("fpga", fpga), ("paper", paper)):
        if r is None:
            out.append(f"`{name}`: not measured in this run")
            continue
        win = "DSTAR" if r.per_um2 >= 1 else "INT8"
        f = r.per_um2 if r.per_um2 >= 1 else 1 / r.per_um2
        out.append(f"`{name}`: the {win} core wins per µm² of cells by {f:.2f}× "
                   f"(DSTAR/INT8 {r.per_um2:.2f}; {r.per_um2_with_sram:.2f} with its SRAM)")
    return "; ".join(out) + "."


def _tables(rec: Compare) -> dict:
    """The tables of ``reports/compare.md`` (``app/templates/compare.md`` holds its prose)."""
    f, p = rec.fpga, rec.paper
    d, i = f.cores["dstar"], f.cores["int8"]
    dq, iq = d.quality, i.quality
    dp_, ip_ = d.area.parts, i.area.parts
    parts = sorted({*dp_, *ip_}, key=lambda k: -max(dp_.get(k, 0), ip_.get(k, 0)))

    def rams(c):
        big = [m for m in c.area.memories if m.bits >= 1024]
        return (", ".join(f"{m.name} {m.size}×{m.width}"
                          + (f" ({m.read_ports} read ports)" if m.read_ports > 1 else "")
                          for m in big)
                + f"; {len(c.area.memories) - len(big)} small queues.")
    out = dict(
        r=rec, f=f, p=p, sram_um2_per_bit=SRAM_UM2_PER_BIT, sram_source=SRAM_SOURCE,
        fit_sizes=FIT_SIZES, check_size=CHECK_SIZE,
        memories=[("DSTAR core", rams(d)), ("INT8 core", rams(i))],
        cores=md_table(["", "DSTAR core", "INT8 core", "DSTAR/INT8"], [
            ["cycles per image (RTL)", f"{d.cycles_per_image:,.0f}",
             f"{i.cycles_per_image:,.0f}", f"{d.cycles_per_image / i.cycles_per_image:.3f}"],
            ["average activation bits (core counters)", f"{d.average_bits:.2f}",
             f"{i.average_bits:.2f}", ""],
            ["Nangate45 cells, µm² (RAMs excluded)", _x(d.area.cells_um2, 0),
             _x(i.area.cells_um2, 0), f"{d.area.cells_um2 / i.area.cells_um2:.3f}"],
            ["flip-flops", f"{d.area.ff:,}", f"{i.area.ff:,}", ""],
            ["RAM bits", f"{d.area.ram_bits:,}", f"{i.area.ram_bits:,}", ""],
            ["SRAM estimate, µm²", _x(d.area.sram_um2, 0), _x(i.area.sram_um2, 0), ""],
            ["ECP5 LUT4 (no DSP blocks)", f"{d.ecp5['lut4']:,}", f"{i.ecp5['lut4']:,}",
             f"{d.ecp5['lut4'] / max(1, i.ecp5['lut4']):.3f}"],
            ["PSNR vs float, dB (95 % interval)",
             f"{dq.psnr_db.mean} [{dq.psnr_db.lo}, {dq.psnr_db.hi}]",
             f"{iq.psnr_db.mean} [{iq.psnr_db.lo}, {iq.psnr_db.hi}]", ""],
            ["classifier agrees with float", f"{dq.classifier_with_float}/{dq.samples}",
             f"{iq.classifier_with_float}/{iq.samples}", ""]]),
        ratios=md_table(["DSTAR/INT8", "throughput per µm² (cells)", "with SRAM",
                         "per ECP5 LUT", "QPU / (QPU + MPU)"],
                        [[f"{f.speedup:.3f}× speed", f"{f.per_um2:.3f}",
                          f"{f.per_um2_with_sram:.3f}", f"{f.per_lut:.3f}",
                          f"{100 * f.qpu_share:.1f} %"]]),
        parts=md_table(["part", "DSTAR core", "INT8 core"],
                       [[k, _x(dp_.get(k), 0), _x(ip_.get(k), 0)] for k in parts]),
        model_check=md_table(
            ["core", "step", "RTL cycles", "model", "error", "busy Q RTL / model",
             "busy M RTL / model", "busy V RTL / model"],
            [[dp, "cache" if s.cache_step else "reuse", f"{s.rtl:,}", f"{s.model:,}",
              f"{100 * s.error:+.2f} %"]
             + [f"{s.busy[e]['rtl']:,} / {s.busy[e]['model']:,}" for e in ("Q", "M", "V")]
             for dp in DATAPATHS for s in f.cores[dp].model_check.steps]))
    if p is not None:
        am = p.area_model
        out.update(
            paper_fit=md_table(["core", f"T = {CHECK_SIZE} synthesized", "model", "error",
                                "T = 64 cells, µm²", "T = 64 SRAM, µm²"],
                               [[dp, _x(am[dp].fit.check.synthesized, 0),
                                 _x(am[dp].fit.check.model, 0),
                                 f"{100 * am[dp].fit.check.error:+.2f} %",
                                 _x(am[dp].fit.predicted.total, 0),
                                 _x(am[dp].sram.predicted, 0)] for dp in DATAPATHS]),
            paper_ratios=md_table(["cycles per image DSTAR / INT8", "DSTAR/INT8 speed",
                                   "per µm² (cells)", "with SRAM", "QPU / (QPU + MPU)"],
                                  [[f"{p.dstar_cycles_per_image:,} / "
                                    f"{p.int8_cycles_per_image:,}",
                                    f"{p.speedup:.3f}× speed", f"{p.per_um2:.3f}",
                                    f"{p.per_um2_with_sram:.3f}",
                                    f"{100 * p.qpu_share:.1f} %"]]))
    return out


def markdown(rec: Compare) -> str:
    """``reports/compare.md`` from its result (``app/templates/compare.md``)."""
    return render("compare", **_tables(rec))


def plot(rec: Compare):
    """Stacked Nangate45 area by part of the two ``fpga`` cores: a PNG writer."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    cores = rec.fpga.cores
    parts = sorted({k for c in cores.values() for k in c.area.parts},
                   key=lambda k: -max(c.area.parts.get(k, 0) for c in cores.values()))
    fig = Figure(figsize=(10, 5))
    ax = fig.subplots()
    bottom = [0.0, 0.0]
    for n, part in enumerate(parts):
        v = [cores[dp].area.parts.get(part, 0) / 1e3 for dp in DATAPATHS]
        ax.bar(["DSTAR core", "INT8 core"], v, bottom=bottom, label=part,
               color=colormaps["tab20"](n % 20))
        bottom = [b + x for b, x in zip(bottom, v)]
    ax.set_ylabel("Nangate45 cells, 1000 µm² (RAMs excluded)")
    ax.set_title("fpga cores by part")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return png_writer(fig)


@dataclass(frozen=True)
class CompareOptions:
    """What ``dstar measure compare`` measures (checked at construction; the stored result a
    ``paper``-only run keeps and the library are checked when the measurement starts, the
    library last: the default one, beside the project, is absent on a user's machine, and
    every other mistake is worth reporting first)."""

    presets: tuple[Literal["fpga", "paper"], ...] = option(
        PRESETS, "what to measure: fpga (the RTL cores), paper (the part-area model and the "
                 "projection). Without fpga, the fpga object of the stored compare.json is "
                 "kept if it was measured on today's configurations")
    steps: int = option(20, "DDIM steps")
    labels: tuple[int, ...] = option(tuple(range(10)), "one sample per label, seed + k")
    seed: int = option(0, "seed of the first sample")
    simulator: Literal["verilator", "icarus"] = option("verilator", "simulator of the cores")
    jobs: int = option(2, "simulations in parallel")
    reuse: bool = option(False, "reuse stored synthesis results of identical designs and "
                                "scripts")
    perf_model: Path = option(OUT / "perf_model.json", "the cycle model's calibration "
                                                       "(dstar measure perf)")
    profile: Path = option(OUT / "profile.json", "the workload's profile (dstar profile)")
    bench: Path = option(OUT / "bench.json", "the lane fill (dstar bench)")
    liberty: Path | None = option(None, "standard-cell library (default: the Nangate45 library "
                                        "beside the project)")

    def __post_init__(self):
        if self.steps < 2 or not self.labels or self.jobs < 1:
            raise UserError("--steps must be >= 2, --labels non-empty and --jobs >= 1")
        if any(not 0 <= v <= 9 for v in self.labels):
            raise UserError("--labels must be digits 0 .. 9")
        if not self.perf_model.is_file():
            raise UserError(f"{self.perf_model} not found; run `dstar measure perf` first")


def measure(opts: CompareOptions, previous=None) -> Compare:
    """Both presets asked for (progress on stderr)."""
    kept = None if "fpga" in opts.presets else kept_fpga(previous)
    liberty = resolve_liberty(opts.liberty)
    info = check_liberty(liberty)
    steps: list = []
    t0 = time.perf_counter()
    # Each object records the RTL it measured (REPORT.md marks one measured on other sources).
    src = digest(elaboration_sources())
    fpga = kept or build(FpgaComparison, dict(measure_fpga(opts, str(liberty), steps),
                                              rtl_sources=src), "compare fpga")
    paper = (build(PaperComparison, dict(measure_paper(opts, str(liberty), steps),
                                         rtl_sources=src), "compare paper")
             if "paper" in opts.presets else None)
    configs = {f"fpga {dp}": c.config_hash for dp, c in fpga.cores.items()}
    return Compare(Provenance.of_run("compare", configs), liberty=info,
                   sram=dict(um2_per_bit=round(SRAM_UM2_PER_BIT, 4), source=SRAM_SOURCE),
                   fpga=fpga, verdict=verdict(fpga, paper),
                   steps=tuple(StepTime(**s) for s in steps),
                   seconds=round(time.perf_counter() - t0, 1), paper=paper)


MEASUREMENT = Measurement(
    name="compare", stem="compare",
    summary="The whole DSTAR core against the whole INT8 core: the trained digits DiT sampled on "
            "both fpga cores on the RTL, their cell areas by part, and at paper the part-area "
            "model with the projection's cycles (about 75 minutes).",
    options=CompareOptions, result=Compare, measure=measure, render=markdown,
    figures=lambda r: {"compare.png": plot(r)})
