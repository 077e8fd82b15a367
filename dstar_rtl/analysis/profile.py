"""Profile FMDQ and SAR on the trained digits DiT (``dstar profile``).

For every point of a sweep (FMDQ alone, then SAR over thresholds × cache intervals) and every seed,
the float DiT and the quantized DiT (:class:`models.dit.QuantizedDiT`) sample from the same start
noise and label (``label = seed % classes``), and the run records:

- FMDQ: element-weighted average activation bits and the precision mix (share of sub-channels at
  0, 2, 4, 6, 8 bits) per layer type (``x_embed``, ``qkv``, ``proj``, ``fc1``, ``fc2``, ``final``);
- SAR: kept fraction of the score matrix, attention work removed (MACs not done / dense MACs over
  all steps) and the P-cache footprint;
- quality: PSNR of the quantized sample against the float one (peak to peak 2), whether
  :func:`models.digits.classify` assigns each sample to its label (float and quantized) and
  whether the quantized sample gets the float sample's class.

Each quantity is reported as its mean over seeds with a two-sided 95 % confidence interval from
Student's t distribution with ``n - 1`` degrees of freedom (``mean ± t·s/√n``); for the 0/1
classification outcomes that is the t interval of a proportion, wide for few seeds. Intervals of
shares and accuracies are clipped to [0, 1].

SAR masks are calibrated (:func:`golden.sar.profile_mask`) on float runs of separate calibration
seeds, never on the evaluated seeds; with ``cfg.base_offset`` set (every preset) the layers run
at the per-layer bases profiled on the first calibration seed's float run
(:func:`analysis.calibration.calibrate`), as the core does. The quantized DiT runs with
``schedule=False``: the same integer numerics without building the QPU group schedule (the
slowest part, which only feeds hardware counters such as lane fill that this profile does not
report);
``tests/test_differential.py`` and ``tests/test_digits.py`` check the outputs agree bit for bit.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass

import numpy as np

from dstar_rtl.golden.config import VARIANTS, Config
from dstar_rtl.golden.fmdq_stats import PRECISION_BINS, LayerStats
from dstar_rtl.golden.sar import profile_mask
from dstar_rtl.models.dit import DiT, QuantizedDiT, TracingDiT, attention_layer_names, ddim_sample

__all__ = ["LAYER_TYPES", "layer_type", "mean_ci", "Sweep", "run_profile", "LayerBaseDiT",
           "ThresholdSweep", "meets_rule", "screens", "select_point", "run_sweep",
           "load_operating_point", "clopper_pearson", "qmax", "SWEEP_NAMES"]

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


class LayerBaseDiT(QuantizedDiT):
    """:class:`~models.dit.QuantizedDiT` with a static base per layer.

    ``bases`` maps names of :func:`models.dit.linear_layer_names` to ``B``; the split qkv layers
    (``<name>[qk]``, ``<name>[v]``) take their fused layer's base; a layer not in ``bases`` (or
    ``bases=None``) takes ``cfg.base_log2``. The hardware sets ``B`` per layer through the QPU's
    configuration word (``qpu_config_layout``), so this is a configuration the chip can run.
    """

    def __init__(self, spec=None, cfg: Config | None = None, masks=None, bases=None, **kw):
        super().__init__(spec, cfg, masks, **kw)
        self.bases = dict(bases or {})

    def linear(self, name, x, W, b, host=False):
        if not host and name not in self.layers:
            self.base_log2 = self.bases.get(name.split("[")[0])
        return super().linear(name, x, W, b, host)


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


def _one_run(spec, params, cfg, masks, steps, seed, sar, x_float, bases=None):
    from dstar_rtl.models.digits import classify, psnr

    label = seed % spec.classes
    qm = LayerBaseDiT(spec, cfg, masks, params=params, sar=sar, schedule=False, bases=bases)
    xq, _ = ddim_sample(qm, steps, seed, label)
    summ = LayerStats.summarize(qm.stats.values())
    sub = sum(summ["hist"].values())
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
        mix={f"b{bb}": summ["hist"][f"b{bb}"] / sub if sub else 0.0 for bb in PRECISION_BINS},
        share_saturated=summ["saturated"] / sub if sub else 0.0,
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
    from dstar_rtl.models.digits import (
        classifier_holdout_accuracy,
        classify,
        load_trained,
        training_metadata,
    )

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
    # The configuration's per-layer bases (cfg.base_offset), from the first calibration seed.
    from dstar_rtl.analysis.calibration import calibrate as calibrate_run
    bases = calibrate_run(spec, params, cfg, sweep.steps, sweep.calib_seeds[0], sar=False).bases
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
            r = _one_run(spec, params, pcfg, masks, sweep.steps, s, pt["sar"], floats[s], bases)
            per_seed.append(r)
            log(f"[{k}/{total}] {pt['name']} seed {s}: PSNR {r['psnr_db']:.1f} dB, "
                f"{r['avg_bits']:.2f} bits, work removed {r['attention_work_removed']:.2f}, "
                f"{time.time() - t0:.1f} s")
        runs.append(dict(pt, summary=_summarise(per_seed), per_seed=per_seed))
    return dict(
        model=spec.to_dict(), training=training_metadata(weights), config=cfg.to_dict(),
        steps=sweep.steps, seeds=seeds, labels=[s % spec.classes for s in seeds],
        calib_seeds=list(sweep.calib_seeds), base_log2=bases, ci_method=CI_METHOD,
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


# ---------------------------------------------------------------- FMDQ threshold and base sweep
#
# ``dstar profile --sweep``: fewer bits at the same quality. Every point of a grid of FMDQ
# thresholds (thr2, thr4, thr6) × offsets of the profiled per-layer static base, plus today's
# point (the preset's thresholds and base), is sampled on a few seeds (the screen: mean PSNR
# and agreement at the targets); the screened points are confirmed in order of bits at the full
# seed count against the rule (PSNR interval's lower bound), and the first confirmed one is the
# operating point. Every run is the integer model the core runs (IntDiT, SAR on, the masks and
# profiled bases of one float calibration run: analysis.calibration, as dstar sample). Runs are
# deterministic and cached, so a confirmation at the sweep's step count only adds the seeds the
# sweep did not run.

SWEEP_NAMES = ("profile_sweep.json", "profile_sweep.md", "profile_sweep.png")
RULE_TEXT = ("the lower bound of the 95% t interval of PSNR against float >= {psnr:g} dB and the "
             "observed classifier agreement with the float samples >= {agree:g} (with one seed, "
             "no interval: the mean PSNR)")
SCREEN_TEXT = ("the sweep's screen: mean PSNR >= {psnr:g} dB and observed agreement >= "
               "{agree:g} on the sweep's seeds")
RULE_WHY = ("PSNR uses the interval's lower bound so that the chosen point holds the PSNR target "
            "with 95% confidence over seeds, not only on the seeds drawn. Agreement uses the "
            "observed fraction: it is a 0/1 outcome per sample, and no interval from a handful of "
            "samples can have a lower bound at 0.99 (5 of 5 agreeing gives an exact binomial "
            "interval of [0.48, 1]), so with fewer than 100 samples '>= 99%' means every "
            "quantized sample keeps its float sample's class. The sweep itself, with fewer "
            "seeds (a t interval from 2 seeds has t = 12.7), only screens on the means; the rule "
            "is applied at the confirmation's seed count.")


def qmax(b: int) -> int:
    """Largest magnitude a ``b``-bit FMDQ value holds (``2**(b-1) - 1``): a threshold above it
    clips the sub-channel's largest values to ±qmax (saturation), one below it wastes bits."""
    return (1 << (b - 1)) - 1


@dataclass(frozen=True)
class ThresholdSweep:
    """What ``dstar profile --sweep`` sweeps and how it confirms (see the section comment).

    ``thr2 × thr4 × thr6`` must each give a legal ``Config.thr`` (strictly increasing, below 127);
    ``base_offsets`` are added to the per-layer base profiled on the float calibration run of
    ``calib_seed`` at ``confirm_steps`` (:func:`analysis.calibration.calibrate`, which also gives
    the SAR masks) and clipped to ``[0, B_max]``. The sweep samples
    ``seeds`` seeds at ``steps`` DDIM steps; at most ``max_confirm`` candidates are confirmed with
    ``confirm_seeds`` seeds at ``confirm_steps``; ``workers`` processes sample in parallel.
    """

    thr2: tuple = (1, 2, 3)
    thr4: tuple = (7, 11)
    thr6: tuple = (31, 47)
    base_offsets: tuple = (-3, -2, -1, 0)
    seeds: int = 2
    steps: int = 20
    confirm_seeds: int = 5
    confirm_steps: int = 20
    calib_seed: int = 1000
    min_psnr_db: float = 40.0
    min_agreement: float = 0.99
    max_confirm: int = 6
    workers: int = 2

    @classmethod
    def quick(cls, **kw):
        """A seconds-long sweep for tests: four grid points plus today's, 1 step, 1 seed."""
        return cls(**{**dict(thr2=(1, 3), thr4=(7,), thr6=(31,), base_offsets=(-1, 0), seeds=1,
                             steps=1, confirm_seeds=2, confirm_steps=2,
                             max_confirm=2, workers=1), **kw})

    def thresholds(self) -> list:
        return [(a, b, c) for a in self.thr2 for b in self.thr4 for c in self.thr6]

    def check(self, cfg: Config) -> None:
        """Refuse, before any work, a sweep that cannot run (one-line :class:`ValueError`)."""
        from dstar_rtl.golden.config import ConfigError

        def ints(name):
            v = getattr(self, name)
            if not v or any(not isinstance(x, int) or isinstance(x, bool) for x in v):
                raise ValueError(f"{name} must be a non-empty list of integers, not {v!r}")
            if len(set(v)) != len(v):
                raise ValueError(f"{name} lists a value twice: {list(v)}")
        for name in ("thr2", "thr4", "thr6", "base_offsets"):
            ints(name)
        for t in self.thresholds():
            try:
                cfg.replace(thr=t)
            except ConfigError as exc:
                raise ValueError(f"threshold point thr={list(t)} of the grid: {exc}") from None
        for o in self.base_offsets:
            try:
                cfg.replace(base_offset=o)
            except ConfigError as exc:
                raise ValueError(f"base_offsets: {exc}") from None
        for name, lo in (("seeds", 1), ("steps", 1), ("confirm_seeds", 2), ("confirm_steps", 1),
                         ("max_confirm", 1), ("workers", 1)):
            v = getattr(self, name)
            if not isinstance(v, int) or v < lo:
                why = " for a confidence interval" if name == "confirm_seeds" else ""
                raise ValueError(f"{name} must be an integer >= {lo}{why}, not {v!r}")
        if not 0 < self.min_agreement <= 1:
            raise ValueError(f"min_agreement must be in (0, 1], not {self.min_agreement!r}")
        if not math.isfinite(self.min_psnr_db):
            raise ValueError(f"min_psnr_db must be a finite number, not {self.min_psnr_db!r}")

    def points(self, cfg: Config) -> list:
        """The sweep points: the grid, then today's (the preset's thresholds and base) and,
        when it differs, the preset's ``initial`` variant's (a reference the report confirms
        too)."""
        pts = [dict(name=f"thr {t[0]},{t[1]},{t[2]} base {o:+d}", thr=list(t), base="profiled",
                    base_offset=o)
               for t in self.thresholds() for o in self.base_offsets]
        thr = ",".join(map(str, cfg.thr))
        if cfg.base_offset is None:
            pts.append(dict(name=f"today: thr {thr} base {cfg.base_log2}", thr=list(cfg.thr),
                            base="preset", base_offset=None, today=True))
        else:
            pts.append(dict(name=f"today: thr {thr} base {cfg.base_offset:+d}", thr=list(cfg.thr),
                            base="profiled", base_offset=cfg.base_offset, today=True))
        init = VARIANTS["initial"]
        if (tuple(init["thr"]), init["base_offset"]) != (cfg.thr, cfg.base_offset):
            pts.append(dict(name=f"initial: thr {','.join(map(str, init['thr']))} base "
                                 f"{cfg.base_log2}", thr=list(init["thr"]), base="preset",
                            base_offset=None, initial=True))
        return pts


def point_bases(point: dict, profiled: dict, cfg: Config) -> dict:
    """``{layer: B}`` of a sweep point."""
    from dstar_rtl.analysis.calibration import layer_bases

    if point["base"] == "preset":
        return {n: cfg.base_log2 for n in profiled}
    return layer_bases(profiled, point["base_offset"], cfg)


def _check_buildable(spec, params, cfg: Config, points) -> None:
    """Every point builds the integer model (every layer's requantization shifts and the
    attention's in range; else the point would be refused mid-sweep): one-line
    :class:`ValueError` naming the point."""
    from dstar_rtl.models.dit_int_model import IntDiT

    seen = {}
    for pt in points:
        key = tuple(sorted(pt["base_log2"].items()))
        if key not in seen:
            try:
                IntDiT(spec, params, cfg, base_log2=dict(pt["base_log2"]), schedule=False)
                seen[key] = None
            except ValueError as exc:
                seen[key] = str(exc)
        if seen[key]:
            raise ValueError(f"sweep point {pt['name']!r}: {seen[key]}")


def clopper_pearson(k: int, n: int, level: float = 0.95) -> dict:
    """Exact binomial interval of ``k`` successes in ``n``."""
    from scipy.stats import beta

    if n == 0:
        return dict(lo=None, hi=None)
    a = (1 - level) / 2
    lo = float(beta.ppf(a, k, n - k + 1)) if k > 0 else 0.0
    hi = float(beta.ppf(1 - a, k + 1, n - k)) if k < n else 1.0
    return dict(lo=lo, hi=hi)


def _sweep_summary(runs: list) -> dict:
    unit = (0.0, 1.0)
    agree = [r["agrees_with_float"] for r in runs]
    k = int(round(sum(agree)))
    return dict(
        avg_bits=mean_ci([r["avg_bits"] for r in runs], bounds=(0.0, 8.0)),
        psnr_db=mean_ci([r["psnr_db"] for r in runs]),
        agrees_with_float=mean_ci(agree, bounds=unit),
        agreement_count=[k, len(agree)], agreement_exact=clopper_pearson(k, len(agree)),
        quant_correct=mean_ci([r["quant_correct"] for r in runs], bounds=unit),
        share_saturated=mean_ci([r["share_saturated"] for r in runs], bounds=unit),
        mix={b: float(np.mean([r["mix"][b] for r in runs])) for b in runs[0]["mix"]},
        layer_types={t: {k2: float(np.mean([r["layer_types"][t][k2] for r in runs]))
                         for k2 in runs[0]["layer_types"][t]} for t in LAYER_TYPES})


def psnr_bound(summary: dict) -> float:
    """The PSNR the rule compares: the interval's lower bound, the mean with one seed, +inf
    when every quantized sample equals its float sample."""
    p = summary["psnr_db"]
    if p["n"] == 0:
        return math.inf
    return p["lo"] if p["lo"] is not None else p["mean"]


def meets_rule(summary: dict, min_psnr_db: float = 40.0, min_agreement: float = 0.99) -> bool:
    """The operating-point rule (``RULE_TEXT``) on one point's summary."""
    return (psnr_bound(summary) >= min_psnr_db
            and summary["agrees_with_float"]["mean"] >= min_agreement)


def screens(summary: dict, min_psnr_db: float = 40.0, min_agreement: float = 0.99) -> bool:
    """The sweep's screen on one point's summary: the rule on the means."""
    m = summary["psnr_db"]["mean"]
    return ((m is None or m >= min_psnr_db)
            and summary["agrees_with_float"]["mean"] >= min_agreement)


def _by_bits(p):
    s = p["summary"]
    return (s["avg_bits"]["mean"], -psnr_bound(s), p["name"])


def select_point(points: list, min_psnr_db: float = 40.0, min_agreement: float = 0.99):
    """The operating point of a finished sweep, or None.

    The candidates are the points that pass the sweep's screen (``point["screen"]``), in
    order of mean bits (ties: the higher PSNR bound, then the name). Candidates whose
    confirmation failed (``point["confirm"]["passes"]`` false) are skipped; the first candidate
    with a passing confirmation is the operating point, and an unconfirmed one before it means
    there is none yet. So the operating point has the fewest bits of all the points that meet
    the rule and were not refuted at the full seed count."""
    for p in sorted((p for p in points if p.get("screen")), key=_by_bits):
        conf = p.get("confirm")
        if conf is None:
            return None
        if conf["passes"] and meets_rule(conf["summary"], min_psnr_db, min_agreement):
            return p
    return None


def _int_run(spec, params, cfg, masks, steps, seed, x_float, bases):
    """One sample of the integer model the core runs (:class:`models.dit_int_model.IntDiT`,
    SAR on with ``masks``, per-layer ``bases``; without the group schedule: the same integers)
    against the float sample ``x_float``: quality and the QPU's precision counters of every
    quantization the model makes (:meth:`~models.dit_int_model.ModelStep.quant_counters`: the
    linear layers, attention's Q and P; the core's own count adds the zero channels that pad the
    patch embedding's input, which lowers its mean a little)."""
    from dstar_rtl.models.digits import classify, psnr
    from dstar_rtl.models.dit_int_model import IntDiT, average_bits, ddim_sample_int

    label = seed % spec.classes
    m = IntDiT(spec, params, cfg, masks, base_log2=bases, schedule=False)
    total = []
    types = {t: [] for t in LAYER_TYPES}

    def on_step(i, t, done):
        total.append(done[0].quant_counters())
        for name, c in done[0].layer_counters().items():
            types[layer_type(name)].append(c)
    xq, _ = ddim_sample_int(m, steps, seed, label, on_step=on_step)
    p = psnr(xq, x_float)

    def shares(cs) -> dict:
        n = sum(c["subchannels"] for c in cs)
        return {bb: sum(c["subchannels_zero" if bb == 0 else f"subchannels_b{bb}"]
                        for c in cs) / n if n else 0.0 for bb in PRECISION_BINS}
    sub = sum(c["subchannels"] for c in total)
    return dict(
        seed=seed, label=label, psnr_db=None if math.isinf(p) else p,
        quant_correct=float(classify(xq)[0] == label),
        agrees_with_float=float(classify(xq)[0] == classify(x_float)[0]),
        avg_bits=average_bits(total),
        mix={f"b{bb}": v for bb, v in shares(total).items()},
        share_saturated=sum(c["saturated"] for c in total) / sub if sub else 0.0,
        layer_types={t: dict(avg_bits=average_bits(cs),
                             **{f"share_b{bb}": v for bb, v in shares(cs).items()})
                     for t, cs in types.items()})


def _init_worker(weights):
    from threadpoolctl import threadpool_limits

    from dstar_rtl.models.digits import load_trained

    threadpool_limits(1)
    _WORKER["model"] = load_trained(weights)


_WORKER = {}


def _worker_run(cfg, masks, steps, seed, x_float, bases):
    spec, params = _WORKER["model"]
    return _int_run(spec, params, cfg, masks, steps, seed, x_float, bases)


class _Sampler:
    """Quantized runs, in this process or over a process pool, cached by (point, steps, seed)
    (a run is deterministic: a confirmation reuses the sweep's runs at the same steps)."""

    def __init__(self, spec, params, weights, workers, masks):
        self.spec, self.params, self.masks = spec, params, masks
        self.pool = None
        if workers > 1:
            from concurrent.futures import ProcessPoolExecutor
            self.pool = ProcessPoolExecutor(workers, initializer=_init_worker,
                                            initargs=(weights,))
        self.cache = {}
        self.floats = {}

    def float_sample(self, steps, seed):
        if (steps, seed) not in self.floats:
            self.floats[steps, seed], _ = ddim_sample(DiT(self.spec, params=self.params), steps,
                                                      seed, seed % self.spec.classes)
        return self.floats[steps, seed]

    def submit(self, cfg, point, steps, seeds) -> list:
        """Start the runs of ``point``; returns the keys to :meth:`collect`."""
        keys = []
        for s in seeds:
            key = (point["name"], steps, s)
            keys.append(key)
            if key in self.cache:
                continue
            pcfg = cfg.replace(thr=tuple(point["thr"]))
            args = (pcfg, self.masks, steps, s, self.float_sample(steps, s), point["base_log2"])
            if self.pool is None:
                self.cache[key] = _int_run(self.spec, self.params, *args)
            else:
                self.cache[key] = self.pool.submit(_worker_run, *args)
        return keys

    def collect(self, keys) -> list:
        out = []
        for k in keys:
            r = self.cache[k]
            if not isinstance(r, dict):
                r = self.cache[k] = r.result()
            out.append(r)
        return out

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


def run_sweep(cfg: Config, sweep: ThresholdSweep = ThresholdSweep(), weights=None,
              log=print) -> dict:
    """Run the threshold × base sweep on the trained digits DiT and choose the operating point.

    Returns the JSON-serialisable report: every point with its sweep summary and whether it
    meets the rule, the confirmations, today's point at the confirmation settings, the chosen
    ``operating_point`` (``thr`` and ``base_log2`` per layer, for the bench to read) or None and
    a ``message`` saying why.
    """
    from dstar_rtl.analysis.calibration import calibrate
    from dstar_rtl.models.digits import load_trained, training_metadata

    t_start = time.time()
    sweep.check(cfg)
    spec, params = load_trained(weights)
    cal = calibrate(spec, params, cfg.replace(base_offset=0), sweep.confirm_steps,
                    sweep.calib_seed)
    profiled = cal.profiled
    points = sweep.points(cfg)
    for pt in points:
        pt["base_log2"] = point_bases(pt, profiled, cfg)
    _check_buildable(spec, params, cfg, points)
    rule = dict(min_psnr_db=sweep.min_psnr_db, min_agreement=sweep.min_agreement)
    seeds = list(range(sweep.seeds))
    cseeds = list(range(sweep.confirm_seeds))
    sampler = _Sampler(spec, params, weights, sweep.workers, cal.masks)
    try:
        keys = [sampler.submit(cfg, pt, sweep.steps, seeds) for pt in points]
        for i, (pt, ks) in enumerate(zip(points, keys)):
            runs = sampler.collect(ks)
            pt["summary"] = s = _sweep_summary(runs)
            pt["screen"] = screens(s, **rule)
            pt["confirm"] = None
            pt["per_seed"] = [dict(seed=r["seed"], psnr_db=r["psnr_db"], avg_bits=r["avg_bits"],
                                   agrees_with_float=r["agrees_with_float"]) for r in runs]
            log(f"[{i + 1}/{len(points)}] {pt['name']}: {s['avg_bits']['mean']:.2f} bits, "
                f"PSNR {_fmt(s['psnr_db'], 1)} dB, agreement {s['agreement_count'][0]}/"
                f"{s['agreement_count'][1]}, {'passes' if pt['screen'] else 'fails'} the screen "
                f"({time.time() - t_start:.0f} s)")
        today = next(p for p in points if p.get("today"))
        ref_keys = sampler.submit(cfg, today, sweep.confirm_steps, cseeds)
        initial = next((p for p in points if p.get("initial")), None)
        init_keys = (sampler.submit(cfg, initial, sweep.confirm_steps, cseeds)
                     if initial is not None else None)
        candidates = sorted((p for p in points if p["screen"]), key=_by_bits)
        chosen = None
        for c in candidates[:sweep.max_confirm]:
            runs = sampler.collect(sampler.submit(cfg, c, sweep.confirm_steps, cseeds))
            s = _sweep_summary(runs)
            c["confirm"] = dict(summary=s, passes=meets_rule(s, **rule))
            log(f"confirm {c['name']} ({len(cseeds)} seeds, {sweep.confirm_steps} steps): "
                f"{s['avg_bits']['mean']:.2f} bits, PSNR {_fmt(s['psnr_db'], 1)} dB, agreement "
                f"{s['agreement_count'][0]}/{s['agreement_count'][1]}: "
                f"{'confirmed' if c['confirm']['passes'] else 'refuted'}")
            if c["confirm"]["passes"]:
                chosen = c
                break
        reference = _sweep_summary(sampler.collect(ref_keys))
        initial_ref = (None if initial is None else
                       dict(name=initial["name"], thr=list(initial["thr"]),
                            base_log2=dict(initial["base_log2"]),
                            summary=_sweep_summary(sampler.collect(init_keys))))
    finally:
        sampler.close()
    assert chosen is select_point(points, **rule)
    rule_text = RULE_TEXT.format(psnr=sweep.min_psnr_db, agree=sweep.min_agreement)
    screen_text = SCREEN_TEXT.format(psnr=sweep.min_psnr_db, agree=sweep.min_agreement)
    if chosen is not None:
        cs = chosen["confirm"]["summary"]
        message = (f"operating point {chosen['name']}: {cs['avg_bits']['mean']:.2f} bits at PSNR "
                   f"{_fmt(cs['psnr_db'], 1)} dB, agreement {cs['agreement_count'][0]}/"
                   f"{cs['agreement_count'][1]} (today {reference['avg_bits']['mean']:.2f} bits at "
                   f"{_fmt(reference['psnr_db'], 1)} dB)")
        op = dict(name=chosen["name"], thr=list(chosen["thr"]), base=chosen["base"],
                  base_offset=chosen["base_offset"], base_log2=dict(chosen["base_log2"]),
                  steps=sweep.confirm_steps, seeds=cseeds, summary=cs)
    else:
        op = None
        if not candidates:
            best = max(points, key=lambda p: (p["summary"]["psnr_db"]["mean"] or math.inf,
                                              -p["summary"]["avg_bits"]["mean"]))
            message = (f"no operating point: no point of the sweep passes the screen "
                       f"({screen_text}); the best mean PSNR is "
                       f"{best['summary']['psnr_db']['mean']:.1f} dB "
                       f"({best['name']}, agreement {best['summary']['agreement_count'][0]}/"
                       f"{best['summary']['agreement_count'][1]})")
        else:
            n = min(len(candidates), sweep.max_confirm)
            message = (f"no operating point: the {n} screened point(s) with the fewest bits "
                       f"failed the rule at {len(cseeds)} seeds and "
                       f"{sweep.confirm_steps} steps ({rule_text})")
    return dict(
        kind="fmdq threshold and base sweep", model=spec.to_dict(),
        training=training_metadata(weights), config=cfg.to_dict(),
        grid=dict(thr2=list(sweep.thr2), thr4=list(sweep.thr4), thr6=list(sweep.thr6),
                  base_offsets=list(sweep.base_offsets)),
        steps=sweep.steps, seeds=seeds, confirm_steps=sweep.confirm_steps, confirm_seeds=cseeds,
        calib_seed=sweep.calib_seed, max_confirm=sweep.max_confirm,
        profiled_base_log2=profiled, ci_method=CI_METHOD,
        rule=dict(rule, text=rule_text, screen=screen_text, why=RULE_WHY),
        points=points, reference=dict(name=today["name"], thr=list(today["thr"]),
                                      base_log2=dict(today["base_log2"]), summary=reference),
        initial=initial_ref,
        chosen=None if chosen is None else chosen["name"], operating_point=op, message=message,
        seconds=round(time.time() - t_start, 1))


def load_operating_point(path=None) -> dict:
    """The chosen operating point of a sweep report (default ``reports/profile_sweep.json``):
    ``{"thr": (thr2, thr4, thr6), "base_offset": o, "base_log2": {layer: B}, ...}``;
    ``preset(..., thr=op["thr"], base_offset=op["base_offset"])`` runs it (the bases calibrated
    again by :func:`analysis.calibration.calibrate`), or ``IntDiT(..., base_log2=op["base_log2"])``
    with these bases."""
    from pathlib import Path

    path = Path(path) if path is not None else \
        Path(__file__).resolve().parents[2] / "reports" / SWEEP_NAMES[0]
    rep = json.loads(path.read_text())
    op = rep.get("operating_point")
    if op is None:
        raise ValueError(f"{path}: the sweep found no operating point ({rep.get('message')})")
    return dict(op, thr=tuple(op["thr"]))
