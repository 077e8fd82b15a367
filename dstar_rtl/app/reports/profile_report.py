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
    """The report as readable Markdown tables."""
    fl = rep["float"]["class_accuracy"]
    tr = rep["training"]
    lines = [
        "# FMDQ and SAR on the trained digits DiT", "",
        f"Model: {tr['parameters']} parameters, {rep['model']['depth']} blocks, hidden "
        f"{rep['model']['hidden']}, trained {tr['steps']} steps "
        f"(final loss {tr['final_loss']:.4f}). "
        f"Preset `{rep['config']['name']}`, {rep['steps']} DDIM steps, seeds {rep['seeds']} "
        f"(label = seed mod {rep['model']['classes']}), SAR masks calibrated on seeds "
        f"{rep['calib_seeds']}.", "",
        f"Confidence intervals: {rep['ci_method']}.", "",
        f"Classifier ({rep['classifier']['kind']}) held-out accuracy on real digits: "
        f"{rep['classifier']['holdout_accuracy']:.3f}. Float samples classified as their label: "
        f"{_fmt(fl)}.", "",
        "| point | SAR kept | attention work removed | avg bits | PSNR vs float (dB) "
        "| quantized accuracy | same class as float |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rep["runs"]:
        s = r["summary"]
        lines.append(f"| {r['name']} | {_fmt(s['attention_kept_fraction'])} "
                     f"| {_fmt(s['attention_work_removed'])} | {_fmt(s['avg_bits'])} "
                     f"| {_fmt(s['psnr_db'], 1)} | {_fmt(s['quant_correct'])} "
                     f"| {_fmt(s['agrees_with_float'])} |")
    base = rep["runs"][0]["summary"]["layer_types"]
    lines += ["", f"Per layer type ({rep['runs'][0]['name']}): average bits and the share of "
              "sub-channels at each precision (means over seeds).", "",
              "| layer | avg bits | 0 b | 2 b | 4 b | 6 b | 8 b |", "|---|---|---|---|---|---|---|"]
    for t in LAYER_TYPES:
        d = base[t]
        lines.append(f"| {t} | {_fmt(d['avg_bits'])} | " + " | ".join(
            f"{d[f'share_b{b}']['mean']:.3f}" for b in PRECISION_BINS) + " |")
    lines += ["", f"Run time: {rep['seconds']:.0f} s.", ""]
    return "\n".join(lines)


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
    """The sweep report as Markdown: rule, every point, confirmations, the operating point."""
    tr = rep["training"]
    r = rep["rule"]
    lines = [
        "# FMDQ thresholds and static base: fewer bits at the same quality", "",
        f"Model: {tr['parameters']} parameters, trained {tr['steps']} steps. Preset "
        f"`{rep['config']['name']}`. Sweep: thr2 {rep['grid']['thr2']} × thr4 "
        f"{rep['grid']['thr4']} × thr6 {rep['grid']['thr6']} × base offsets "
        f"{rep['grid']['base_offsets']} of the profiled per-layer base, plus today's point; "
        f"{rep['steps']} DDIM steps, seeds {rep['seeds']} (label = seed mod "
        f"{rep['model']['classes']}). Confirmation: {rep['confirm_steps']} steps, seeds "
        f"{rep['confirm_seeds']}, at most {rep['max_confirm']} candidates in order of bits.", "",
        "Every sample runs the integer model the core runs (`IntDiT`, bit-exact with the RTL "
        "core), SAR on with the calibration run's masks and the configuration's "
        f"interval ({rep['config']['sar_interval']}), against the float model from the same "
        "seed. Bits: the mean FMDQ precision over every sub-channel the model quantizes (the "
        "linear layers, attention's Q and P; a zero sub-channel counts 0 bits); the core's "
        "counters also count the zero channels that pad the patch embedding's input.", "",
        f"Rule: {r['text']}; {r['screen']}. {r['why']}", "",
        f"Confidence intervals: {rep['ci_method']}; agreement also as k/n with the exact "
        "(Clopper-Pearson) binomial interval.", "",
        "Profiled base (`--profile-base` rule on the float calibration run of seed "
        f"{rep['calib_seed']}, {rep['confirm_steps']} steps, which also gives the SAR masks): "
        + ", ".join(
            f"{n} {b}" for n, b in rep["profiled_base_log2"].items()) + ".", "",
        f"**{rep['message']}.**", "",
        f"## Sweep ({rep['steps']} steps, {len(rep['seeds'])} seeds)", "",
        "| point | thr | base | avg bits | mix 0/2/4/6/8 b | saturated | PSNR vs float (dB) "
        "| agreement with float | screen | confirmation |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in rep["points"]:
        s = p["summary"]
        base = (f"preset {rep['config']['base_log2']}" if p["base"] == "preset"
                else f"profiled {p['base_offset']:+d}")
        conf = "—" if p["confirm"] is None else (
            "confirmed" if p["confirm"]["passes"] else "refuted")
        mark = "**" if p["name"] == rep["chosen"] else ""
        lines.append(
            f"| {mark}{p['name']}{mark} | {','.join(map(str, p['thr']))} | {base} "
            f"| {_fmt(s['avg_bits'])} | {_mix_fmt(s['mix'])} | {s['share_saturated']['mean']:.4f} "
            f"| {_fmt(s['psnr_db'], 1)} | {_agree_fmt(s)} | {'passes' if p['screen'] else 'fails'} "
            f"| {conf} |")
    lines += ["", f"## Confirmation ({rep['confirm_steps']} steps, {len(rep['confirm_seeds'])} "
              "seeds)", "",
              "| point | avg bits | mix 0/2/4/6/8 b | PSNR vs float (dB) | agreement with float "
              "| quantized accuracy | rule |", "|---|---|---|---|---|---|---|"]
    rows = [(p["name"], p["confirm"]["summary"], p["confirm"]["passes"])
            for p in sorted((p for p in rep["points"] if p["confirm"] is not None),
                            key=_by_bits)]
    for key in ("reference", "initial"):
        if rep.get(key) is not None:
            ref = rep[key]["summary"]
            rows.append((rep[key]["name"], ref, meets_rule(ref, r["min_psnr_db"],
                                                           r["min_agreement"])))
    for name, s, ok in rows:
        lines.append(f"| {name} | {_fmt(s['avg_bits'])} | {_mix_fmt(s['mix'])} "
                     f"| {_fmt(s['psnr_db'], 1)} | {_agree_fmt(s)} | {_fmt(s['quant_correct'])} "
                     f"| {'meets' if ok else 'misses'} |")
    op = rep["operating_point"]
    if op is not None:
        lt = op["summary"]["layer_types"]
        lines += ["", "## Operating point", "",
                  f"`{op['name']}`: `thr = {tuple(op['thr'])}`, static base per layer "
                  "(`base_log2`, the QPU configuration word of each layer; `qkv[qk]` and "
                  "`qkv[v]` share their layer's):", "",
                  "| layer | base_log2 |", "|---|---|"]
        lines += [f"| {n} | {b} |" for n, b in op["base_log2"].items()]
        lines += ["", "Per layer type (means over the confirmation seeds):", "",
                  "| layer | avg bits | 0 b | 2 b | 4 b | 6 b | 8 b |",
                  "|---|---|---|---|---|---|---|"]
        for t in LAYER_TYPES:
            d = lt[t]
            lines.append(f"| {t} | {d['avg_bits']:.2f} | " + " | ".join(
                f"{d[f'share_b{b}']:.3f}" for b in PRECISION_BINS) + " |")
        lines += ["", "Read it with `analysis.profile.load_operating_point()`; run it with "
                  "`preset(..., thr=op['thr'], base_offset=op['base_offset'])` (or the model's "
                  "`IntDiT(..., base_log2=op['base_log2'])`)."]
    lines += ["", f"Run time: {rep['seconds']:.0f} s.", ""]
    return "\n".join(lines)


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


