"""``dstar measure perf``: the core's cycle model calibrated and validated on the RTL
(:mod:`bench.perf_validate` measures it) as the typed :class:`PerfModel`
(``reports/perf_model.{json,md,png}``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.markdown import render
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.bench.perf_validate import SECTIONS, _err, run
from dstar_rtl.gen.outputs import png_writer
from dstar_rtl.gen.progress import say
from dstar_rtl.gen.tables import md_table
from dstar_rtl.golden.config import PRESETS, preset
from dstar_rtl.results.base import build
from dstar_rtl.results.perf_model import PerfModel, PresetFit

__all__ = ["SECTIONS", "PerfModel", "PresetFit", "MEASUREMENT"]


def _errors_table(s: dict, keys) -> str:
    return md_table(["sections", "n", "max abs error", "mean abs error"],
                    [[k, s[k].n, f"{100 * s[k].max:.2f} %", f"{100 * s[k].mean:.2f} %"]
                     for k in keys if s.get(k)])


def _tables(rec: PresetFit) -> dict:
    """One preset's tables and figures for ``app/templates/perf_model.md``."""
    t, bs = rec.timing, rec.block_summary
    keys = sorted({k for b in rec.block_bytes for k in b})
    return dict(
        fit=rec, errors=_errors_table(rec.summary, ("load", "compute", "store", "step")),
        block_errors=_errors_table(bs, [k for k in bs if k not in ("matrix", "step")]
                                   + ["matrix", "step"]),
        bytes=md_table(["step", *keys], [[i, *(b.get(k, 0) for k in keys)]
                                         for i, b in enumerate(rec.block_bytes)], left=0)
        if rec.block_bytes else None,
        constants=", ".join(f"`{k}` = {getattr(t, k)}" for k in (
            "quant_fixed", "gemm_fixed", "replay_fixed", "replay_busy", "queue_release",
            "idle_latency", "signal_latency", "tile_period")),
        vrow=md_table(["operation / walk", "fixed", "lat", "cycles per row at nb = ..."],
                      [[f"`{k}`", f"{t.vrow_fixed[k]:g}", f"{t.vrow_lat.get(k, 0):g}",
                        ", ".join(f"{nb:g}: {c:g}" for nb, c in t.vrow_curve[k])]
                       for k in sorted(t.vrow_curve)], align="lrrl"),
        layers=md_table(["layer (N, cin → cout, drift)", "step", "RTL cycles", "model", "error",
                         "RTL busy Q / M", "model busy Q / M"],
                        [[f"{r.tokens}, {r.cin} → {r.cout}, {r.drift}", r.step,
                          str(r.rtl.cycles), str(r.model.cycles),
                          f"{100 * _err(r.model.cycles, r.rtl.cycles):+.2f} %",
                          f"{r.rtl.busy_Q} / {r.rtl.busy_M}",
                          f"{r.model.busy_Q} / {r.model.busy_M}"]
                         for r in rec.rows if r.section == "compute"], align="lrrrrll"))


def markdown(result: PerfModel) -> str:
    """``reports/perf_model.md`` from its result (``app/templates/perf_model.md``)."""
    return render("perf_model", presets=[_tables(p) for p in result.presets])


def plot(result: PerfModel):
    """Model against RTL cycles, every validated section of every preset: a PNG writer."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(5.5, 5))
    ax = fig.subplots()
    for rec, mk in zip(result.presets, "os^"):
        for rows, what in ((rec.rows, "layers"), (rec.block, "DiT block")):
            x = [r.rtl.cycles for r in rows]
            y = [r.model.cycles for r in rows]
            if x:
                ax.scatter(x, y, s=12, marker=mk, label=f"{rec.preset}: {what}")
    lo, hi = ax.get_xlim()
    ax.plot([lo, hi], [lo, hi], "k", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("RTL cycles (core counter)")
    ax.set_ylabel("model cycles")
    ax.set_title("Core cycle model against the RTL")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return png_writer(fig, dpi=120)


@dataclass(frozen=True)
class PerfOptions:
    """What ``dstar measure perf`` calibrates and validates."""

    preset: tuple[str, ...] = option(("tiny", "fpga"), "presets to calibrate and validate",
                                     choices=sorted(PRESETS))
    simulator: Literal["verilator", "icarus"] = option("verilator", "simulator of the RTL core")


def measure_perf(opts: PerfOptions, previous=None) -> PerfModel:
    """Every preset's calibration and validation on the RTL (progress on stderr)."""
    recs = []
    for p in opts.preset:
        say(f"[perf_validate] {p}: running calibration and validation programs on the RTL "
            f"core ({opts.simulator}; minutes)")
        rec = build(PresetFit, run(preset(p), opts.simulator), f"perf {p}")
        s, b = rec.summary, rec.block_summary
        say(f"[perf_validate] {p}: {rec.shapes} layer shapes, max error "
            f"{100 * s['step'].max:.2f} % per step, {100 * s['compute'].max:.2f} % per "
            f"compute section; DiT block {100 * b['step'].max:.2f} % per step")
        recs.append(rec)
    return PerfModel(run_provenance("perf", {r.preset: r.config_hash for r in recs}),
                     presets=tuple(recs))


MEASUREMENT = Measurement(
    name="perf", stem="perf_model",
    summary="The core's cycle model calibrated on the RTL core and validated on other layer "
            "shapes and the DiT block (minutes per preset).",
    options=PerfOptions, result=PerfModel, measure=measure_perf, render=markdown,
    figures=lambda r: {"perf_model.png": plot(r)})
