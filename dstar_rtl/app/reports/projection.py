"""``dstar measure projection`` → ``reports/projection.{json,md,png}``: the paper-scale
projection of :mod:`perf.chip_model` on every model under each workload, every byte
charged, with its energy per image (:mod:`perf.chip_energy`, when ``dstar power``'s
and ``dstar measure compare``'s reports are there) and the levers on FMDQ's state
(:mod:`app.reports.state_levers`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.markdown import render
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.app.reports import state_levers
from dstar_rtl.bench.projection import LEVER_MODEL, run
from dstar_rtl.bench.projection_inputs import OPERATING_POINT, load_calibration
from dstar_rtl.gen.outputs import png_writer
from dstar_rtl.gen.tables import md_table
from dstar_rtl.models.published import PAPER_CHIP
from dstar_rtl.perf.gpu_bound import A100
from dstar_rtl.results.base import build, plain
from dstar_rtl.results.projection import Projection

__all__ = ["LEVER_MODEL", "MEASUREMENT", "run", "markdown", "plot"]


def _workload_tables(rows, has_e: bool) -> dict:
    """The tables of one workload's section of ``reports/projection.md``."""
    speed, traffic, util, pieces, shares = [], [], [], [], []
    kinds = ("weights", "activations", "state", "restream", "operands", "pcache")
    for r in rows:
        d = r.dstar
        cs = d.cache
        speed.append([r.model, r.steps, f"{r.dense_gmacs_per_step:.0f}",
                      f"{d.per_image_s:.3f}", f"{r.int8.per_image_s:.3f}",
                      f"{r.speedup:.2f}×", f"{r.gpu.per_image_s:.3f}",
                      f"{r.a100_over_dstar:.2f}×",
                      f"{1e3 * cs.linear_s:.1f} / {1e3 * cs.attention_s:.1f} / "
                      f"{1e3 * cs.vector_s:.1f}", f"{1e3 * d.reuse.total_s:.1f}",
                      f"{r.pcache_bytes / 2**20:.1f} MiB", r.pcache_location,
                      f"{1e3 * r.pcache_traffic_s_per_step:.2f}"])
        hb = {s: getattr(r, s).cache.hbm_bytes for s in ("dstar", "int8")}
        row = [r.model, *(f"{hb['dstar'][k] / 1e9:.2f} / {hb['int8'][k] / 1e9:.2f}"
                          for k in kinds),
               f"{d.state_bytes / 1e9:.2f}", f"{d.hbm_used_bytes / 1e9:.1f}",
               "yes" if d.fits_hbm else "**no**"]
        if has_e:
            e = r.energy
            row += [f"{e.dstar.energy_j:.3g}", f"{e.int8.energy_j:.3g}",
                    f"{e.dstar_over_int8:.2f}", f"{e.a100.energy_j:.3g}",
                    f"{e.a100_over_dstar_7nm:.2f}"]
        traffic.append(row)
        u = []
        for side in (r.dstar, r.int8):
            u += [side.pe_utilization[part].utilization for part in ("ffn", "attention")]
            u += [side.attention_bound, side.attention_bound_any_drain]
        util.append([r.model, *("–" if v is None else f"{100 * v:.1f} %" for v in u)])
        pc = r.dstar.reduction_pieces
        pieces.append([r.model, ", ".join(f"{k} {v}" for k, v in pc.items() if v > 1)
                       or "none split"])
        p = r.dstar.attention_parts_cycles
        tot = sum(p.values()) or 1
        shares.append([r.model, *(f"{100 * p[k] / tot:.0f} %"
                                  for k in ("kv", "qk", "softmax", "p_quant", "pv"))])
    return dict(
        stats=rows[0].workload,
        speed=md_table(["model", "steps", "dense GMAC/step", "DSTAR s/image", "INT8 s/image",
                        "speed-up", "A100 bound s/image", "A100 bound / DSTAR",
                        "cache step: linear / attn / vector ms", "reuse step ms", "P cache",
                        "lives in", "P-cache traffic ms/step"], speed, align="lrrrrrrrlrrlr"),
        traffic=md_table(["model", "weights", "activations", "state", "GEMM re-fetch", "K, V",
                          "P cache", "state GB", "HBM used GB", "fits"]
                         + (["DSTAR J", "INT8 J", "DSTAR/INT8", "A100 J", "A100/DSTAR at 7 nm"]
                            if has_e else []),
                         traffic, align="l" + "r" * 8 + "l" + "r" * (5 if has_e else 0)),
        util=md_table(["model", "DSTAR FFN", "DSTAR attention", "bound", "any drain",
                       "INT8 FFN", "INT8 attention", "bound", "any drain"], util),
        pieces=md_table(["model", "pieces"], pieces, left=2),
        shares=md_table(["model", "K, V to INT8 weights", "QKᵀ", "softmax",
                         "P into the P cache", "P·V"], shares))


def markdown(rec: Projection) -> str:
    """``reports/projection.md`` from its result (``app/templates/projection.md``)."""
    has_e = rec.rows[0].energy is not None
    names = dict.fromkeys(r.workload.name for r in rec.rows)
    workloads = [dict(name=wl, **_workload_tables([r for r in rec.rows if r.workload.name == wl],
                                                  has_e)) for wl in names]
    return render("projection", r=rec, c=rec.chip, sram=rec.chip.memory.on_chip_bytes(
                      rec.chip.cores), a100=A100, paper_vs_a100=PAPER_CHIP["latency_vs_a100"],
                  has_e=has_e, workloads=workloads,
                  levers="\n".join(state_levers.markdown(rec.levers, rec.lever_model)))


def plot(rec: Projection):
    """The speed-ups per model and workload: a PNG writer."""
    from matplotlib.figure import Figure
    names = list(dict.fromkeys(r.model for r in rec.rows))
    wls = list(dict.fromkeys(r.workload.name for r in rec.rows))
    fig = Figure(figsize=(9, 4))
    ax = fig.subplots()
    w = 0.8 / len(wls)
    for i, wl in enumerate(wls):
        sp = [next(r.speedup for r in rec.rows if r.model == n and r.workload.name == wl)
              for n in names]
        ax.bar([k + i * w for k in range(len(names))], sp, w, label=wl)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([k + w * (len(wls) - 1) / 2 for k in range(len(names))])
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("speed-up over the INT8 core (same chip)")
    ax.set_title("Projected DSTAR latency per image (RTL-calibrated core model)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return png_writer(fig, dpi=120)


@dataclass(frozen=True)
class ProjectionOptions:
    """The measured inputs of ``dstar measure projection`` (the calibration is checked at
    construction; the others are optional and checked when read)."""

    perf_model: Path = option(Path("reports/perf_model.json"),
                              "calibrated timings (dstar measure perf)")
    profile: Path = option(Path("reports/profile.json"),
                           "our workload statistics (dstar profile), if present")
    bench: Path = option(Path("reports/bench.json"), "our lane fill (dstar bench), if present")
    operating_point: Path = option(OPERATING_POINT,
                                   "the operating point whose average bits our workload takes "
                                   "(dstar profile --sweep), if present")
    energy: Path = option(Path("reports/energy.json"),
                          "the fpga cores' gate-level energies (dstar power), for the energy "
                          "per image, if present")
    compare: Path = option(Path("reports/compare.json"),
                           "the part areas of the paper core (dstar measure compare), for the "
                           "energy per image, if present")
    no_levers: bool = option(False, "leave out the levers on the state (about 20 s of the run)")

    def __post_init__(self):
        load_calibration(self.perf_model)


def measure(opts: ProjectionOptions, previous=None) -> Projection:
    """Every model under each workload (progress on stderr)."""
    rec = run(opts.perf_model, opts.profile, opts.bench, opts.energy, opts.compare,
              levers=not opts.no_levers, operating_point=opts.operating_point)
    prov = run_provenance("projection", {"paper": rec["config_hash"]})
    return build(Projection, dict(rec, provenance=plain(prov)), "the projection")


MEASUREMENT = Measurement(
    name="projection", stem="projection",
    summary="DSTAR's latency and energy per image projected on the paper's chip, every byte "
            "charged, against the same chip with INT8 cores and an A100 bound; the levers on "
            "FMDQ's state (about 35 s).",
    options=ProjectionOptions, result=Projection, measure=measure, render=markdown,
    figures=lambda r: {"projection.png": plot(r)})
