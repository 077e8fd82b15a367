"""The reports of ``dstar profile`` and ``dstar profile --sweep``: ``profile.md``/``.png`` and
``profile_sweep.md``/``.png`` from their typed results (:mod:`results.profile`),
and the files each command writes together.

The renderers read their own result as plain data (:func:`results.base.plain`) after it has been
loaded and checked as its type; a typed rewrite of their tables is the next step of issue 48's
one renderer.
"""

from __future__ import annotations

import math
from pathlib import Path

from dstar_rtl.analysis.profile import (
    LAYER_TYPES,
    PRECISION_BINS,
    SWEEP_NAMES,
    _by_bits,
    _fmt,
    meets_rule,
)
from dstar_rtl.app.markdown import render
from dstar_rtl.gen.outputs import png_writer
from dstar_rtl.results.base import plain
from dstar_rtl.results.profile import Profile, ProfileSweep

__all__ = ["markdown", "plot", "report_names", "report_files", "sweep_markdown", "sweep_plot",
           "sweep_report_names", "sweep_report_files", "pareto_front"]


def markdown(result: Profile) -> str:
    """``profile.md``: the report as readable Markdown tables."""
    return _markdown(plain(result))


def plot(result: Profile):
    """``profile.png`` as a writer: PSNR against attention work removed, one line per SAR
    interval (error bars: the CI); average bits per layer type for FMDQ alone."""
    return png_writer(_plot(plain(result)))


def report_names(out_dir) -> list:
    """The report files in ``out_dir``: ``profile.json``, ``profile.md``, ``profile.png``."""
    return [Path(out_dir) / n for n in ("profile.json", "profile.md", "profile.png")]


def report_files(result: Profile, out_dir) -> dict:
    """``{path: content}`` of the report files, for the caller to write together."""
    js, md, png = report_names(out_dir)
    return {js: result.to_json(), md: markdown(result), png: plot(result)}


def sweep_markdown(result: ProfileSweep) -> str:
    """``profile_sweep.md``: rule, every point, confirmations, the operating point."""
    return _sweep_markdown(plain(result))


def sweep_plot(result: ProfileSweep):
    """``profile_sweep.png`` as a writer (bits against PSNR, the Pareto front, the chosen
    point)."""
    return png_writer(_sweep_plot(plain(result)))


def sweep_report_names(out_dir) -> list:
    """``profile_sweep.json``, ``profile_sweep.md``, ``profile_sweep.png`` in ``out_dir``."""
    return [Path(out_dir) / n for n in SWEEP_NAMES]


def sweep_report_files(result: ProfileSweep, out_dir) -> dict:
    """``{path: content}`` of the sweep report, for the caller to write together."""
    js, md, png = sweep_report_names(out_dir)
    return {js: result.to_json(), md: sweep_markdown(result), png: sweep_plot(result)}


def _markdown(rep: dict) -> str:
    """The report as readable Markdown tables (``app/templates/profile.md``)."""
    runs = []
    for r in rep["runs"]:
        s = r["summary"]
        runs.append(f"| {r['name']} | {_fmt(s['attention_kept_fraction'])} "
                    f"| {_fmt(s['attention_work_removed'])} | {_fmt(s['avg_bits'])} "
                    f"| {_fmt(s['psnr_db'], 1)} | {_fmt(s['quant_correct'])} "
                    f"| {_fmt(s['agrees_with_float'])} |")
    base = rep["runs"][0]["summary"]["layer_types"]
    layers = [f"| {t} | {_fmt(base[t]['avg_bits'])} | " + " | ".join(
        f"{base[t][f'share_b{b}']['mean']:.3f}" for b in PRECISION_BINS) + " |"
        for t in LAYER_TYPES]
    return render("profile", rep=rep, tr=rep["training"], runs=runs, layers=layers,
                  float_acc=_fmt(rep["float"]["class_accuracy"]))


def _plot(rep: dict):
    """A matplotlib figure. Left: PSNR against attention work removed, one line per SAR interval
    (error bars: the CI). Right: average bits per layer type for FMDQ alone."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4))
    a1, a2 = fig.subplots(1, 2)
    sar = [r for r in rep["runs"] if r["sar"]]
    for iv in sorted({r["sar_interval"] for r in sar}):
        pts = sorted((r for r in sar if r["sar_interval"] == iv),
                     key=lambda r: r["summary"]["attention_work_removed"]["mean"])
        xs = [r["summary"]["attention_work_removed"]["mean"] for r in pts]
        ps = [r["summary"]["psnr_db"] for r in pts]
        ys = [p["mean"] for p in ps]
        err = [[(p["mean"] - p["lo"]) if p["lo"] is not None else 0 for p in ps],
               [(p["hi"] - p["mean"]) if p["hi"] is not None else 0 for p in ps]]
        a1.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=f"interval {iv}")
    base = rep["runs"][0]["summary"]["psnr_db"]
    if base["mean"] is not None:
        a1.axhline(base["mean"], color="gray", ls="--", label="FMDQ only")
    a1.set_xlabel("attention work removed")
    a1.set_ylabel("PSNR vs float (dB)")
    a1.set_title("SAR: quality vs work removed (95% t CI)")
    a1.legend()
    lt = rep["runs"][0]["summary"]["layer_types"]
    means = [lt[t]["avg_bits"]["mean"] for t in LAYER_TYPES]
    lo = [m - (lt[t]["avg_bits"]["lo"] if lt[t]["avg_bits"]["lo"] is not None else m)
          for m, t in zip(means, LAYER_TYPES)]
    a2.bar(LAYER_TYPES, means, yerr=lo, capsize=3)
    a2.set_ylabel("average activation bits")
    a2.set_title("FMDQ bits per layer type")
    fig.tight_layout()
    return fig


def _agree_fmt(s: dict) -> str:
    k, n = s["agreement_count"]
    ex = s["agreement_exact"]
    return f"{k}/{n} (exact 95% [{ex['lo']:.2f}, {ex['hi']:.2f}])" if n else "n/a"


def _mix_fmt(mix: dict) -> str:
    return " / ".join(f"{mix[f'b{b}']:.2f}" for b in PRECISION_BINS)


def _sweep_markdown(rep: dict) -> str:
    """The sweep report as Markdown (``app/templates/profile_sweep.md``): rule, every point,
    confirmations, the operating point."""
    r = rep["rule"]
    points = []
    for p in rep["points"]:
        s = p["summary"]
        base = (f"preset {rep['config']['base_log2']}" if p["base"] == "preset"
                else f"profiled {p['base_offset']:+d}")
        conf = "—" if p["confirm"] is None else (
            "confirmed" if p["confirm"]["passes"] else "refuted")
        mark = "**" if p["name"] == rep["chosen"] else ""
        points.append(
            f"| {mark}{p['name']}{mark} | {','.join(map(str, p['thr']))} | {base} "
            f"| {_fmt(s['avg_bits'])} | {_mix_fmt(s['mix'])} | {s['share_saturated']['mean']:.4f} "
            f"| {_fmt(s['psnr_db'], 1)} | {_agree_fmt(s)} | {'passes' if p['screen'] else 'fails'} "
            f"| {conf} |")
    rows = [(p["name"], p["confirm"]["summary"], p["confirm"]["passes"])
            for p in sorted((p for p in rep["points"] if p["confirm"] is not None),
                            key=_by_bits)]
    for key in ("reference", "initial"):
        if rep.get(key) is not None:
            ref = rep[key]["summary"]
            rows.append((rep[key]["name"], ref, meets_rule(ref, r["min_psnr_db"],
                                                           r["min_agreement"])))
    confirmed = [f"| {name} | {_fmt(s['avg_bits'])} | {_mix_fmt(s['mix'])} "
                 f"| {_fmt(s['psnr_db'], 1)} | {_agree_fmt(s)} | {_fmt(s['quant_correct'])} "
                 f"| {'meets' if ok else 'misses'} |" for name, s, ok in rows]
    op = rep["operating_point"]
    op_layers = [] if op is None else [
        f"| {t} | {op['summary']['layer_types'][t]['avg_bits']:.2f} | " + " | ".join(
            f"{op['summary']['layer_types'][t][f'share_b{b}']:.3f}" for b in PRECISION_BINS)
        + " |" for t in LAYER_TYPES]
    return render("profile_sweep", rep=rep, tr=rep["training"], rule=r, points=points,
                  confirmed=confirmed, op=op, op_layers=op_layers,
                  op_thr=None if op is None else tuple(op["thr"]),
                  profiled=", ".join(f"{n} {b}" for n, b in rep["profiled_base_log2"].items()))


def pareto_front(points: list) -> list:
    """Points no other point beats on both fewer mean bits and higher mean PSNR, by bits
    (:func:`bench.sweep.figures.pareto_front` on ``(bits, -PSNR)``; no PSNR counts as
    infinite)."""
    from dstar_rtl.bench.sweep.figures import pareto_front as front

    def key(p):
        s = p["summary"]
        m = s["psnr_db"]["mean"]
        return s["avg_bits"]["mean"], (math.inf if m is None else m)
    return sorted((points[i] for i in front([key(p) for p in points])), key=key)


def _sweep_plot(rep: dict):
    """Bits against PSNR for every sweep point (error bars: the PSNR interval), the Pareto
    front, the PSNR target, today's point and the chosen one (sweep and confirmation)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5))
    ax = fig.subplots()
    pts = [p for p in rep["points"] if p["summary"]["psnr_db"]["mean"] is not None]

    def xy(s):
        p = s["psnr_db"]
        lo = p["mean"] - p["lo"] if p["lo"] is not None else 0.0
        hi = p["hi"] - p["mean"] if p["hi"] is not None else 0.0
        return s["avg_bits"]["mean"], p["mean"], lo, hi

    groups = {}
    for p in pts:
        groups.setdefault("preset base" if p["base"] == "preset"
                          else f"base {p['base_offset']:+d}", []).append(p)
    for g, ps in sorted(groups.items()):
        v = [xy(p["summary"]) for p in ps]
        ax.errorbar([a[0] for a in v], [a[1] for a in v], yerr=[[a[2] for a in v],
                    [a[3] for a in v]], fmt="o", ms=4, capsize=2, elinewidth=0.6, alpha=0.6,
                    label=g)
    front = [xy(p["summary"]) for p in pareto_front(pts)]
    ax.plot([a[0] for a in front], [a[1] for a in front], "k-", lw=1, label="Pareto front")
    ax.axhline(rep["rule"]["min_psnr_db"], color="red", ls="--", lw=1,
               label=f"{rep['rule']['min_psnr_db']:g} dB")
    ref = xy(rep["reference"]["summary"])
    n, nc = len(rep["seeds"]), len(rep["confirm_seeds"])
    ax.errorbar([ref[0]], [ref[1]], yerr=[[ref[2]], [ref[3]]], fmt="s", mfc="none", mec="k",
                ecolor="k", ms=10, capsize=3, label=f"today, {nc} seeds")
    if rep["operating_point"] is not None:
        chosen = next(p for p in rep["points"] if p["name"] == rep["chosen"])
        c = xy(chosen["summary"])
        ax.plot(c[0], c[1], "*", color="gold", mec="k", ms=12, label=f"chosen, sweep ({n} seeds)")
        cc = xy(rep["operating_point"]["summary"])
        ax.errorbar([cc[0]], [cc[1]], yerr=[[cc[2]], [cc[3]]], fmt="*", color="red", ecolor="k",
                    mec="k", ms=18, capsize=3, label=f"chosen, confirmed ({nc} seeds)")
    means = [p["summary"]["psnr_db"]["mean"] for p in pts]
    if means:   # the means set the view; 2-seed intervals run far beyond it (clipped)
        ax.set_ylim(min(min(means), rep["rule"]["min_psnr_db"]) - 6, max(means) + 6)
    ax.set_xlabel("average activation bits")
    ax.set_ylabel("PSNR vs float (dB)")
    ax.set_title(f"FMDQ thresholds × static base, {rep['steps']} DDIM steps (95% t CI over "
                 "seeds)")
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    fig.tight_layout()
    return fig


