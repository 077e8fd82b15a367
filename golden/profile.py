"""Profile FMDQ and SAR on the trained digits DiT (``dstar profile``).

For every point of a sweep (FMDQ alone, then SAR over thresholds × cache intervals) and every seed,
the float DiT and the quantized DiT (:class:`golden.dit.QuantizedDiT`) sample from the same start
noise and label (``label = seed % classes``), and the run records:

- FMDQ: element-weighted average activation bits and the precision mix (share of sub-channels at
  0, 2, 4, 6, 8 bits) per layer type (``x_embed``, ``qkv``, ``proj``, ``fc1``, ``fc2``, ``final``);
- SAR: kept fraction of the score matrix, attention work removed (MACs not done / dense MACs over
  all steps) and the P-cache footprint;
- quality: PSNR of the quantized sample against the float one (peak to peak 2), whether
  :func:`golden.digits.classify` assigns each sample to its label (float and quantized) and
  whether the quantized sample gets the float sample's class.

Each quantity is reported as its mean over seeds with a two-sided 95 % confidence interval from
Student's t distribution with ``n - 1`` degrees of freedom (``mean ± t·s/√n``); for the 0/1
classification outcomes that is the t interval of a proportion, wide for few seeds. Intervals of
shares and accuracies are clipped to [0, 1].

SAR masks are calibrated (:func:`golden.sar.profile_mask`) on float runs of separate calibration
seeds, never on the evaluated seeds. The quantized DiT runs with ``schedule=False``: the same
integer numerics without building the QPU group schedule (the slowest part, which only feeds
hardware counters such as lane fill that this profile does not report);
``tests/test_differential.py`` and ``tests/test_digits.py`` check the outputs agree bit for bit.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass

import numpy as np

from .config import Config
from .dit import DiT, QuantizedDiT, TracingDiT, attention_layer_names, ddim_sample
from .fmdq_stats import PRECISION_BINS, LayerStats
from .sar import profile_mask

__all__ = ["LAYER_TYPES", "layer_type", "mean_ci", "Sweep", "run_profile", "markdown", "plot",
           "write_markdown", "write_plot", "report_names", "report_files"]

LAYER_TYPES = ("x_embed", "qkv", "proj", "fc1", "fc2", "final")
CI_METHOD = ("95% two-sided Student t interval over seeds (n-1 dof): mean ± t·s/sqrt(n), "
             "clipped to [0, 1] for shares and accuracies")


def layer_type(name: str) -> str:
    """``blocks.2.attn.qkv[v]`` → ``qkv``; ``final.linear`` → ``final``."""
    if name == "x_embed":
        return "x_embed"
    if name.startswith("final"):
        return "final"
    for t in ("qkv", "proj", "fc1", "fc2"):
        if f".{t}" in name:
            return t
    raise ValueError(f"unknown layer {name!r}")


def mean_ci(values, level: float = 0.95, bounds=None) -> dict:
    """Mean and Student-t confidence interval of ``values`` (None entries dropped); ``bounds``
    ``(lo, hi)`` clips the interval to the quantity's range (shares and accuracies: [0, 1])."""
    from scipy.stats import t as student_t

    v = np.array([x for x in values if x is not None], dtype=np.float64)
    n = len(v)
    if n == 0:
        return dict(mean=None, lo=None, hi=None, n=0)
    m = float(v.mean())
    if n == 1:
        return dict(mean=m, lo=None, hi=None, n=1)
    half = float(student_t.ppf(0.5 + level / 2, n - 1) * v.std(ddof=1) / math.sqrt(n))
    lo, hi = m - half, m + half
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return dict(mean=m, lo=lo, hi=hi, n=n)


def calibrate(spec, params, cfg: Config, steps: int, seeds, thr: float) -> dict:
    """SAR masks from float runs of ``seeds`` (importance averaged over seeds and steps)."""
    probs = {n: [] for n in attention_layer_names(spec)}
    for s in seeds:
        m = TracingDiT(spec, params=params)
        ddim_sample(m, steps, int(s), int(s) % spec.classes)
        for n in probs:
            probs[n].append(np.stack(m.records[f"{n}.attn"]))
    return {n: profile_mask(np.stack(p), cfg.tile, thr) for n, p in probs.items()}


def _type_stats(stats: dict) -> dict:
    out = {}
    for t in LAYER_TYPES:
        group = [s for n, s in stats.items() if layer_type(n) == t]
        bits = sum(s.bits for s in group)
        el = sum(s.elements for s in group)
        sub = sum(s.subchannels for s in group)
        d = dict(avg_bits=bits / el if el else 0.0)
        for bb in PRECISION_BINS:
            d[f"share_b{bb}"] = sum(s.hist[bb] for s in group) / sub if sub else 0.0
        out[t] = d
    return out


def _one_run(spec, params, cfg, masks, steps, seed, sar, x_float):
    from .digits import classify, psnr

    label = seed % spec.classes
    qm = QuantizedDiT(spec, cfg, masks, params=params, sar=sar, schedule=False)
    xq, _ = ddim_sample(qm, steps, seed, label)
    summ = LayerStats.summarize(qm.stats.values())
    dense = sum(a.stats.dense_macs for a in qm.attn.values())
    done = sum(a.stats.done_macs for a in qm.attn.values())
    p = psnr(xq, x_float)
    return dict(
        seed=seed, label=label, psnr_db=None if math.isinf(p) else p,
        quant_correct=float(classify(xq)[0] == label),
        agrees_with_float=float(classify(xq)[0] == classify(x_float)[0]), avg_bits=summ["avg_bits"],
        attention_work_removed=1.0 - done / dense if dense else 0.0,
        attention_kept_fraction=(float(np.mean([a.stats.kept_fraction for a in qm.attn.values()]))
                                 if qm.attn else 1.0),
        pcache_bytes=sum(a.footprint_bytes for a in qm.attn.values()),
        layer_types=_type_stats(qm.stats))


@dataclass(frozen=True)
class Sweep:
    """What ``dstar profile`` sweeps: SAR thresholds × intervals, plus FMDQ alone.

    The default thresholds are the ``fpga`` preset's 1e-3 and three scaled to this model: with
    N = 64 tokens and Bs = 8 a block of uniform attention has importance Bs / N = 0.125, so the
    paper's range (1e-4 to 2e-3, meant for long sequences) keeps every block here.
    """

    sar_thr: tuple = (1e-3, 2e-2, 5e-2, 1e-1)
    sar_interval: tuple = (1, 2, 4)
    seeds: int = 5
    steps: int = 20
    calib_seeds: tuple = (1000, 1001, 1002, 1003)

    @classmethod
    def quick(cls):
        return cls(sar_thr=(1e-3,), sar_interval=(2,), seeds=2, steps=4, calib_seeds=(1000,))


def _summarise(per_seed: list) -> dict:
    unit = (0.0, 1.0)
    keys = dict(psnr_db=None, quant_correct=unit, agrees_with_float=unit, avg_bits=(0.0, 8.0),
                attention_work_removed=unit, attention_kept_fraction=unit, pcache_bytes=None)
    out = {k: mean_ci([r[k] for r in per_seed], bounds=b) for k, b in keys.items()}
    out["layer_types"] = {t: {k: mean_ci([r["layer_types"][t][k] for r in per_seed],
                                         bounds=(0.0, 8.0) if k == "avg_bits" else unit)
                              for k in per_seed[0]["layer_types"][t]} for t in LAYER_TYPES}
    return out


def run_profile(cfg: Config, sweep: Sweep = Sweep(), weights=None, log=print) -> dict:
    """Run the sweep on the trained digits DiT; returns the JSON-serialisable report."""
    from .digits import classifier_holdout_accuracy, classify, load_trained, training_metadata

    t_start = time.time()
    spec, params = load_trained(weights)
    seeds = list(range(sweep.seeds))
    floats = {}
    for s in seeds:
        floats[s], _ = ddim_sample(DiT(spec, params=params), sweep.steps, s, s % spec.classes)
    float_correct = [float(classify(floats[s])[0] == s % spec.classes) for s in seeds]
    points = [dict(name="fmdq only", sar=False, sar_thr=None, sar_interval=None)]
    points += [dict(name=f"sar thr={thr:g} interval={iv}", sar=True, sar_thr=thr, sar_interval=iv)
               for thr in sweep.sar_thr for iv in sweep.sar_interval]
    masks_by_thr = {thr: calibrate(spec, params, cfg, sweep.steps, sweep.calib_seeds, thr)
                    for thr in sweep.sar_thr}
    total = len(points) * len(seeds)
    k = 0
    runs = []
    for pt in points:
        pcfg = cfg.replace(sar_interval=pt["sar_interval"]) if pt["sar"] else cfg
        if pt["sar"]:
            pcfg = pcfg.replace(sar_thr=pt["sar_thr"])
        masks = masks_by_thr[pt["sar_thr"]] if pt["sar"] else None
        per_seed = []
        for s in seeds:
            k += 1
            t0 = time.time()
            r = _one_run(spec, params, pcfg, masks, sweep.steps, s, pt["sar"], floats[s])
            per_seed.append(r)
            log(f"[{k}/{total}] {pt['name']} seed {s}: PSNR {r['psnr_db']:.1f} dB, "
                f"{r['avg_bits']:.2f} bits, work removed {r['attention_work_removed']:.2f}, "
                f"{time.time() - t0:.1f} s")
        runs.append(dict(pt, summary=_summarise(per_seed), per_seed=per_seed))
    return dict(
        model=spec.to_dict(), training=training_metadata(weights), config=cfg.to_dict(),
        steps=sweep.steps, seeds=seeds, labels=[s % spec.classes for s in seeds],
        calib_seeds=list(sweep.calib_seeds), ci_method=CI_METHOD,
        classifier=dict(kind="sklearn SVC(C=10, gamma='scale') on 16x16 digits",
                        holdout_accuracy=classifier_holdout_accuracy()),
        float=dict(class_accuracy=mean_ci(float_correct, bounds=(0.0, 1.0)),
                   per_seed_correct=float_correct),
        runs=runs, seconds=round(time.time() - t_start, 1))


def _fmt(ci: dict, digits: int = 2) -> str:
    if ci["mean"] is None:
        return "n/a"
    if ci["lo"] is None:
        return f"{ci['mean']:.{digits}f}"
    return f"{ci['mean']:.{digits}f} [{ci['lo']:.{digits}f}, {ci['hi']:.{digits}f}]"


def write_markdown(rep: dict, path) -> None:
    """Write :func:`markdown` of ``rep`` to ``path``."""
    with open(path, "w") as f:
        f.write(markdown(rep))


def markdown(rep: dict) -> str:
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


def write_plot(rep: dict, path) -> None:
    """Write :func:`plot` of ``rep`` to ``path`` (a file name or a binary file object) as PNG."""
    plot(rep).savefig(path, format="png", dpi=100)


def plot(rep: dict):
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


def report_names(out_dir) -> list:
    """The report files in ``out_dir``: ``profile.json``, ``profile.md``, ``profile.png``."""
    from pathlib import Path

    return [Path(out_dir) / n for n in ("profile.json", "profile.md", "profile.png")]


def report_files(rep: dict, out_dir) -> dict:
    """``{path: content}`` of the report files (text, or a writer of the PNG to a binary file
    object), for the caller to write together."""
    fig = plot(rep)
    js, md, png = report_names(out_dir)
    return {js: json.dumps(rep, indent=1) + "\n", md: markdown(rep),
            png: lambda f: fig.savefig(f, format="png", dpi=100)}
