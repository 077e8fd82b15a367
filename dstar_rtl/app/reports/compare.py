"""The whole DSTAR core against the whole INT8 core (issue 27): ``dstar measure compare`` →
``reports/compare.{json,md,png}``, the typed :class:`~results.compare.Compare`.

``fpga`` is measured on the RTL and ``paper``'s areas come from the part-area model
(:mod:`bench.compare` states both); here ``paper`` adds the cycles per image of the projection's
model (:mod:`perf.chip_model`) for :data:`PAPER_MODEL` with our measured workload statistics
(the paper's when ours are missing). ``qpu_share`` is the QPU's area over the QPU's and the
MPU's.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.markdown import render
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.app.options import check_liberty, resolve_liberty
from dstar_rtl.bench.compare import DATAPATHS, fpga_config, measure_fpga, paper_area_models, ratios
from dstar_rtl.flows.core_parts import (
    CHECK_SIZE,
    FIT_SIZES,
    SRAM_SOURCE,
    SRAM_UM2_PER_BIT,
)
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import png_writer
from dstar_rtl.gen.paths import ROOT
from dstar_rtl.gen.tables import md_table
from dstar_rtl.golden.config import preset
from dstar_rtl.results.base import build
from dstar_rtl.results.compare import (
    Compare,
    FpgaComparison,
    PaperComparison,
)
from dstar_rtl.results.quantities import StepTime
from dstar_rtl.sim.sources import digest, elaboration_sources

OUT = ROOT / "reports"
PRESETS = ("fpga", "paper")
PAPER_MODEL = "DiT-XL/2 512"

__all__ = ["MEASUREMENT", "PAPER_MODEL"]


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
    from dstar_rtl.bench.projection_inputs import load_calibration, workloads
    from dstar_rtl.models.dit_shapes import MODELS
    from dstar_rtl.perf.chip_model import Chip, int8_timing, paper_timing, project_model

    models = paper_area_models(liberty, steps, reuse=args.reuse)
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
    from dstar_rtl.bench.projection_inputs import load_calibration

    kept = None if "fpga" in opts.presets else kept_fpga(previous)
    liberty = resolve_liberty(opts.liberty)
    info = check_liberty(liberty)
    steps: list = []
    t0 = time.perf_counter()
    # Each object records the RTL it measured (REPORT.md marks one measured on other sources).
    src = digest(elaboration_sources())
    fpga = kept or build(FpgaComparison, dict(measure_fpga(
        str(liberty), steps, calibration=load_calibration(opts.perf_model)["fpga"],
        simulator=opts.simulator, steps=opts.steps, labels=opts.labels, seed=opts.seed,
        jobs=opts.jobs, reuse=opts.reuse), rtl_sources=src), "compare fpga")
    paper = (build(PaperComparison, dict(measure_paper(opts, str(liberty), steps),
                                         rtl_sources=src), "compare paper")
             if "paper" in opts.presets else None)
    configs = {f"fpga {dp}": c.config_hash for dp, c in fpga.cores.items()}
    return Compare(run_provenance("compare", configs), liberty=info,
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
