"""Accuracy of the integer VPU (:mod:`golden.vpu`) against its float references (numerics §2.7).

Every error is in LSBs of the function's output (``2**-act_frac`` for the activation format,
``2**-p_base_log2`` for ``P``, one INT8 step for K/V) and is taken against the float reference
clipped to the output range (saturation is part of the format, not an error). Three things:

* :func:`hard_bounds` — per-element bounds derived from the table parameters (interpolation,
  seed and Newton errors, rounding), valid for every input; property tests assert them on random
  inputs. Some depend on the reference value itself (LayerNorm, requantization), so they are
  functions of it.
* :func:`measure` — max and mean absolute error of each function over a fixed suite of random and
  edge inputs: all equal, very large, very small, one dominant entry, SAR rows whose only kept
  block is the diagonal, saturation. GELU is measured exhaustively over all ``2**act_width``
  inputs (``act_width <= 20``).
* :func:`bounds` — the documented bounds of :func:`measure`'s metrics; ``check`` lists the
  violations. ``python -m dstar_rtl.analysis.vpu_accuracy [preset]`` prints the table.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from dstar_rtl.golden.config import Config, preset
from dstar_rtl.golden.fmdq import requant_params
from dstar_rtl.golden.sar import expand_mask
from dstar_rtl.golden.vpu import (
    acc_requant,
    acc_requant_ref,
    diff_delta,
    gated_residual,
    gated_residual_ref,
    gelu,
    gelu_ref,
    kv_int8,
    kv_int8_ref,
    layernorm,
    layernorm_ref,
    modulate,
    modulate_ref,
    softmax,
    softmax_ref,
    vpu_tables,
    xhat_update,
)

__all__ = ["hard_bounds", "measure", "bounds", "check", "report", "softmax_cases",
           "layernorm_cases", "gelu_max_curvature"]

METRICS = ("softmax", "softmax_rowsum", "layernorm", "layernorm_mean", "layernorm_var",
           "modulate", "gelu", "gated_residual", "acc_requant", "diff", "kv_int8",
           "recip_core_rel", "rsqrt_core_rel")


# ============================================================================ analytic bounds
def gelu_max_curvature(A: float = 4.0) -> float:
    """``max |gelu''(x)|`` of the tanh form on ``[-A, 0]`` (numerically, on a fine grid)."""
    x = np.linspace(-A, 0.0, 200001)
    k = math.sqrt(2.0 / math.pi)
    u = k * (x + 0.044715 * x ** 3)
    du = k * (1 + 3 * 0.044715 * x ** 2)
    d2u = k * 6 * 0.044715 * x
    th = np.tanh(u)
    s2 = 1 - th ** 2
    # g = x/2 (1 + th); g' = (1 + th)/2 + x/2 s2 u'; g'' = s2 u' + x/2 (s2 u'' - 2 th s2 u'^2)
    g2 = s2 * du + 0.5 * x * (s2 * d2u - 2 * th * s2 * du ** 2)
    return float(np.abs(g2).max())


def hard_bounds(cfg: Config) -> dict:
    """Per-element error bounds valid for every input (output LSBs), from the table parameters.

    ``softmax``: ``0.5 + 2**pb·(2η + κ + ε_r + 2**-Qr)·(1 + 1e-3) + 2**(pb-E)`` where
    ``η = 2**((0.5 + c)·2**-Z) - 1 + 2**-Et`` is the largest relative error of one exponential
    (``c`` covers the error of the 16-bit ``log2 e`` constant where the exponential matters),
    ``κ = n_max·2**-(E+1)`` the rounding of the small exponentials in the sum, ``ε_r`` the
    reciprocal core's relative error (measured over every input when the tables are built) and
    ``2**-Qr`` the truncation of the normalized sum.
    ``layernorm`` (a function of the reference ``r``): ``0.5 + |r|·(ε_s + 2**-(Qs+1) + 2**-Qs)``
    (rsqrt core, truncation of ``X``, rounding of ``eps``).
    ``gelu``: ``0.5 + 2**F·(h²/8·max|gelu''| + 2**-(G+1) + |gelu(-(A - 2**-F))|)``.
    ``modulate``, ``gated_residual``: 0.5 (exact products, one rounding).
    ``acc_requant`` (function of the unclipped reference ``r`` and bias ``b``):
    ``0.5 + |r - b|·2**-mult_width``.
    ``diff``: 0 (exact). ``kv_int8``: 0.5 INT8 steps. ``layernorm_mean``: 0.5 LSB (``Σ(n·x - S1)
    = 0`` exactly, so the mean of the output is the mean of the rounding errors).
    ``layernorm_var`` (eps = 0, real units): ``2δ + δ² + (1+δ)·2**-F + 2**-(2F+2)`` with
    ``δ = ε_s + 2**-(Qs+1)``.
    """
    T = vpu_tables(cfg)
    F, pb = cfg.act_frac, cfg.p_base_log2
    Z, Et, E, Qr, Qs = T.exp_lut_bits, T.exp_lut_frac, T.exp_frac, T.recip_frac, T.rsqrt_frac
    # Error of log2e_q, in 2**-Z units of the exponent, up to where exp(-d) drops below 2**-(E+1)
    d_max = (E + 1) * math.log(2) * (1 << F)          # nd (LSBs) beyond which ex is ~0
    c = d_max * abs(T.log2e_q - (1 << T.log2e_frac) / math.log(2)) / (1 << (F + T.log2e_frac - Z))
    eta = 2.0 ** ((0.5 + c) / (1 << Z)) - 1 + 2.0 ** -Et
    kappa = T.n_max * 2.0 ** -(E + 1)
    sm = 0.5 + (1 << pb) * (2 * eta + kappa + T.recip_rel_err + 2.0 ** -Qr) * 1.001 \
        + 2.0 ** (pb - E)
    delta = T.rsqrt_rel_err + 2.0 ** -(Qs + 1)
    h = 2.0 ** -T.gelu_seg_log2
    A = float(1 << T.gelu_range_log2)
    a_end = (1 << (F + T.gelu_range_log2)) - 1            # the clamp point, LSBs
    tail = abs(float(gelu_ref(np.array([-a_end]), cfg)[0])) / (1 << F)
    ge = 0.5 + (1 << F) * (h * h / 8 * gelu_max_curvature(A) + 2.0 ** -(T.gelu_frac + 1) + tail)
    ge += 1e-9
    mw = cfg.mult_width
    return {
        "softmax": sm,
        "layernorm": lambda r: 0.5 + np.abs(r) * (delta + 2.0 ** -Qs) + 1e-9,
        "layernorm_mean": 0.5,
        "layernorm_var": 2 * delta + delta ** 2 + (1 + delta) * 2.0 ** -F + 2.0 ** -(2 * F + 2),
        "gelu": ge,
        "modulate": 0.5,
        "gated_residual": 0.5,
        "acc_requant": lambda r, b: 0.5 + np.abs(np.asarray(r) - np.asarray(b)) * 2.0 ** -mw + 1e-9,
        "diff": 0.0,
        "kv_int8": 0.5,
        "recip_core_rel": T.recip_rel_err,
        "rsqrt_core_rel": T.rsqrt_rel_err,
    }


# ============================================================================ input suites
def _act(rng, real, cfg):
    """Real values → act-format ints (round half away from zero, saturate)."""
    v = np.asarray(real, np.float64) * (1 << cfg.act_frac)
    v = np.sign(v) * np.floor(np.abs(v) + 0.5)
    lim = 1 << (cfg.act_width - 1)
    return np.clip(v, -lim, lim - 1).astype(np.int64)


def softmax_cases(cfg: Config, rng, rows: int = 64, n: int | None = None):
    """``[(name, logits (rows, n), mask or None)]``: random and edge rows of length ``n``
    (default ``min(64, max_reduction)``)."""
    n = min(64, cfg.max_reduction) if n is None else n
    lo, hi = -(1 << (cfg.act_width - 1)), (1 << (cfg.act_width - 1)) - 1
    c = []
    for sc in (0.25, 1.0, 3.0, 10.0):
        c.append((f"random_normal_{sc}", _act(rng, rng.normal(0, sc, (rows, n)), cfg), None))
    c.append(("random_full_range", rng.integers(lo, hi + 1, (rows, n)), None))
    c.append(("all_equal", np.repeat(rng.integers(lo, hi + 1, (rows, 1)), n, axis=1), None))
    c.append(("all_equal_extremes", np.array([[lo] * n, [hi] * n, [0] * n]), None))
    c.append(("very_large", hi - rng.integers(0, 1 << (cfg.act_frac + 1), (rows, n)), None))
    c.append(("very_small", lo + rng.integers(0, 1 << (cfg.act_frac + 1), (rows, n)), None))
    c.append(("tiny_spread", rng.integers(-2, 3, (rows, n)), None))
    dom = _act(rng, rng.normal(0, 1, (rows, n)), cfg)
    gaps = np.array([0.5, 1, 2, 3, 5, 8, 12, 20, 127])
    idx = rng.integers(0, n, rows)
    dom[np.arange(rows), idx] = np.clip(dom.max(axis=1) + _act(rng, gaps[np.arange(rows) %
                                                                       len(gaps)], cfg), lo, hi)
    c.append(("one_dominant", dom, None))
    two = np.full((rows, n), lo)
    two[:, 0] = hi
    c.append(("one_max_rest_min", two, None))
    # Ties for the max, everything else far below.
    tie = np.full((rows, n), -(8 << cfg.act_frac))
    k = rng.integers(1, n + 1, rows)
    for r in range(rows):
        tie[r, rng.choice(n, k[r], replace=False)] = 0
    c.append(("tied_max", tie, None))
    # SAR masks: only the diagonal block kept, and random block masks with the diagonal.
    Bs = cfg.tile
    N = n
    nb = -(-N // Bs)
    diag = np.eye(nb, dtype=bool)[None]
    S = _act(rng, rng.normal(0, 3, (1, N, N)), cfg)
    c.append(("diagonal_block_only", S[0], expand_mask(diag, N, Bs)[0]))
    bm = rng.random((1, nb, nb)) < 0.3
    bm[:, np.arange(nb), np.arange(nb)] = True
    S = _act(rng, rng.normal(0, 3, (1, N, N)), cfg)
    c.append(("random_block_mask", S[0], expand_mask(bm, N, Bs)[0]))
    one = np.zeros((rows, n), bool)
    one[np.arange(rows), rng.integers(0, n, rows)] = True
    c.append(("single_kept", rng.integers(lo, hi + 1, (rows, n)), one))
    return c


def layernorm_cases(cfg: Config, rng, rows: int = 64):
    """``[(name, x (rows, n), eps)]``: random and edge rows of several lengths, up to the
    longest LayerNorm row (``cfg.ln_max``)."""
    lo, hi = -(1 << (cfg.act_width - 1)), (1 << (cfg.act_width - 1)) - 1
    nm = cfg.ln_max
    lens = sorted({min(nm, v) for v in (2, 7, 64, nm)})
    c = []
    for n in lens:
        for sc in (0.02, 1.0, 20.0):
            c.append((f"random_n{n}_{sc}", _act(rng, rng.normal(0.5, sc, (rows, n)), cfg), 1e-6))
        c.append((f"all_equal_n{n}", np.repeat(rng.integers(lo, hi + 1, (rows, 1)), n, 1), 1e-6))
        c.append((f"very_large_n{n}", rng.choice([lo, hi], (rows, n)), 1e-6))
        c.append((f"very_small_n{n}", rng.integers(-1, 2, (rows, n)), 1e-6))
        d = np.zeros((rows, n), np.int64)
        d[np.arange(rows), rng.integers(0, n, rows)] = rng.choice([lo, hi, 1, -1, 1000], rows)
        c.append((f"one_dominant_n{n}", d, 1e-6))
        c.append((f"random_full_range_n{n}_eps0", rng.integers(lo, hi + 1, (rows, n)), 0.0))
    return c


# ============================================================================ measurement
def _stat(err):
    err = np.abs(np.asarray(err, np.float64)).ravel()
    return (float(err.max()) if err.size else 0.0, float(err.mean()) if err.size else 0.0,
            int(err.size))


class _Acc:
    def __init__(self):
        self.d = {}

    def add(self, name, err, case):
        mx, mean, cnt = _stat(err)
        if cnt == 0:
            return
        r = self.d.setdefault(name, dict(max_abs=0.0, sum=0.0, count=0, worst=""))
        if mx >= r["max_abs"]:
            r["max_abs"], r["worst"] = mx, case
        r["sum"] += mean * cnt
        r["count"] += cnt

    def result(self):
        return {k: dict(max_abs=v["max_abs"], mean_abs=v["sum"] / v["count"], count=v["count"],
                        worst=v["worst"]) for k, v in self.d.items()}


def measure(cfg: Config | None = None, seed: int = 0, rows: int = 64) -> dict:
    """Max and mean absolute error of every VPU function over the suite (see the module doc).

    Returns ``{metric: {"max_abs", "mean_abs", "count", "worst"}}`` (``worst``: the case name of
    the largest error). Metrics: :data:`METRICS`; ``softmax_rowsum`` is ``|ΣP - 2**pb|`` per row,
    ``layernorm_mean`` ``|mean y|`` (LSBs) and ``layernorm_var`` ``|var y - 1|`` (real units, rows
    with ``eps = 0`` and a non-zero variance), the ``*_core_rel`` metrics the relative error of
    the Newton cores over every normalized input.
    """
    cfg = preset("tiny") if cfg is None else cfg
    rng = np.random.default_rng(seed)
    T = vpu_tables(cfg)
    W, F, pb = cfg.act_width, cfg.act_frac, cfg.p_base_log2
    lo, hi = -(1 << (W - 1)), (1 << (W - 1)) - 1
    pmax = (1 << pb) - 1
    acc = _Acc()

    for name, s, mask in softmax_cases(cfg, rng, rows):
        P, _ = softmax(s, mask, cfg)
        ref = np.clip(softmax_ref(s, mask, cfg), 0, pmax)
        kept = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask, s.shape)
        acc.add("softmax", (P - ref)[kept], name)
        acc.add("softmax_rowsum", P.sum(-1) - (1 << pb), name)

    for name, x, eps in layernorm_cases(cfg, rng, rows):
        y, _ = layernorm(x, cfg, eps)
        ref = np.clip(layernorm_ref(x, cfg, eps), lo, hi)
        acc.add("layernorm", y - ref, name)
        acc.add("layernorm_mean", y.mean(-1), name)
        if eps == 0.0:
            nz = x.std(-1) > 0
            yf = y[nz] / float(1 << F)
            acc.add("layernorm_var", yf.var(-1) - 1.0, name)

    # GELU: every input.
    if W <= 20:
        x = np.arange(lo, hi + 1, dtype=np.int64)
    else:
        x = np.concatenate([rng.integers(lo, hi + 1, 1 << 18), np.arange(-(8 << F), 8 << F)])
    y, _ = gelu(x, cfg)
    acc.add("gelu", y - np.clip(gelu_ref(x, cfg), lo, hi), "exhaustive")

    # Modulation and gated residual: random, realistic and saturating operands.
    shape = (rows, 64)
    ops = {
        "random_full_range": [rng.integers(lo, hi + 1, shape) for _ in range(3)],
        "realistic": [_act(rng, rng.normal(0, s_, shape), cfg) for s_ in (2.0, 0.3, 0.3)],
        "extremes": [rng.choice([lo, hi, 0, 1, -1], shape) for _ in range(3)],
    }
    for name, (a, b, c_) in ops.items():
        y, _ = modulate(a, b, c_, cfg)
        acc.add("modulate", y - np.clip(modulate_ref(a, b, c_, cfg), lo, hi), name)
        y, _ = gated_residual(a, b, c_, cfg)
        acc.add("gated_residual", y - np.clip(gated_residual_ref(a, b, c_, cfg), lo, hi), name)

    # Accumulate and requantize: realistic scales (s_w · 2**r0) and random ones.
    A = cfg.acc_bits
    alim = 1 << (A - 1)
    for name, logs in (("realistic_scale", rng.uniform(-12, -4, 64)),
                       ("random_scale", rng.uniform(-30, 0, 64))):
        s = 2.0 ** logs
        mm, ss = zip(*(requant_params(v, cfg.mult_width) for v in s))
        mm, ss = np.array(mm, np.int64), np.array(ss, np.int64)
        keep = (ss >= 0) & (ss <= cfg.sh_max)
        s, mm, ss = s[keep], mm[keep], ss[keep]
        ymax = np.minimum(alim - 1, np.floor(hi / s)).astype(np.int64)
        Y = (rng.uniform(-1, 1, (rows, len(s))) * ymax).astype(np.int64) // 2
        a2 = (rng.uniform(-1, 1, (rows, len(s))) * ymax).astype(np.int64) // 2
        b = rng.integers(-(1 << F), 1 << F, len(s))
        r = acc_requant(Y, a2, mm, ss, b, cfg)
        acc.add("acc_requant", r.y - np.clip(acc_requant_ref(Y, a2, s, b, cfg), lo, hi), name)

    # Differential pair: exact.
    x = rng.integers(lo, hi + 1, shape)
    xl = 1 << (cfg.xhat_width - 1)
    xh = rng.integers(-xl, xl, shape)
    acc.add("diff", diff_delta(x, xh, cfg) - (x.astype(np.float64) - xh), "random_full_range")
    rl = 1 << (cfg.recon_width - 1)
    rec = rng.integers(-rl, rl, shape) >> 2
    nx, _ = xhat_update(xh, rec, cfg)
    acc.add("diff", nx - np.clip(xh.astype(np.float64) + rec, -xl, xl - 1), "xhat_update")

    # K/V to INT8 per head, in INT8 steps.
    for name, v in (("random_normal", _act(rng, rng.normal(0, 2, (4, 16, 8)), cfg)),
                    ("full_range", rng.integers(lo, hi + 1, (4, 16, 8))),
                    ("small", rng.integers(-127, 128, (4, 16, 8)))):
        w, e = kv_int8(v, cfg)
        acc.add("kv_int8", w - kv_int8_ref(v, e), name)

    out = acc.result()
    for k, v in (("recip_core_rel", T.recip_rel_err), ("rsqrt_core_rel", T.rsqrt_rel_err)):
        out[k] = dict(max_abs=v, mean_abs=float("nan"), count=0, worst="exhaustive")
    return out


# ============================================================================ documented bounds
# Suite bounds (measure() with its default arguments), for the default act format (16, 8) and
# p_base_log2 = 7. max_abs is the analytic bound of hard_bounds() where one exists for the whole
# suite; otherwise (row sums, means) a documented bound with a margin over the measured value.
def bounds(cfg: Config | None = None) -> dict:
    """``{metric: {"max_abs", "mean_abs", "basis"}}``: the documented bounds of :func:`measure`.

    The max bounds are analytic (valid for any configuration); the mean bounds are measured with a
    margin for the default format (act 16/8, ``p_base_log2`` 7, ``mult_width`` 16) and are ``nan``
    (not documented) for other formats."""
    cfg = preset("tiny") if cfg is None else cfg
    hb = hard_bounds(cfg)
    T = vpu_tables(cfg)
    F = cfg.act_frac
    ymax_ln = math.sqrt(cfg.max_reduction - 1) * (1 << F)   # largest |LayerNorm output|, LSBs
    out = {
        "softmax": dict(max_abs=hb["softmax"], mean_abs=0.15, basis="analytic max; measured mean"),
        # Each entry rounds on its own: k tied entries of 2**pb/k can each be off by ~0.5, so the
        # only hard bound is 1 + n·max_err (1 for the saturation at 2**pb - 1); suite n <= 64.
        "softmax_rowsum": dict(max_abs=1 + min(64, cfg.max_reduction) * hb["softmax"],
                               mean_abs=3.0, basis="analytic 1 + n·max (n <= 64); measured mean"),
        "layernorm": dict(max_abs=float(hb["layernorm"](ymax_ln)), mean_abs=0.26,
                          basis="analytic max (|y| <= sqrt(n-1)); measured mean"),
        "layernorm_mean": dict(max_abs=0.5, mean_abs=0.1, basis="analytic max; measured mean"),
        "layernorm_var": dict(max_abs=hb["layernorm_var"], mean_abs=2.0 ** -(F + 1),
                              basis="analytic max; measured mean"),
        "modulate": dict(max_abs=0.5, mean_abs=0.26, basis="analytic (one rounding)"),
        "gelu": dict(max_abs=hb["gelu"], mean_abs=0.02 * 2.0 ** (F - 8) + 0.01,
                     basis="analytic max; measured mean (exhaustive)"),
        "gated_residual": dict(max_abs=0.5, mean_abs=0.26, basis="analytic (one rounding)"),
        "acc_requant": dict(max_abs=0.5 + 2.0 ** (cfg.act_width - 1 - cfg.mult_width),
                            mean_abs=0.3,
                            basis="analytic (suite keeps |Y·s| < 2**(W-1) LSB); measured mean"),
        "diff": dict(max_abs=0.0, mean_abs=0.0, basis="exact"),
        "kv_int8": dict(max_abs=0.5, mean_abs=0.26, basis="analytic (INT8 steps)"),
        "recip_core_rel": dict(max_abs=8e-5 if T.recip_lut_bits == 6 else T.recip_rel_err,
                               mean_abs=float("nan"), basis="exhaustive over every input"),
        "rsqrt_core_rel": dict(max_abs=5e-5 if T.rsqrt_lut_bits == 6 else T.rsqrt_rel_err,
                               mean_abs=float("nan"), basis="exhaustive over every input"),
    }
    if (cfg.act_width, cfg.act_frac, cfg.p_base_log2, cfg.mult_width) != (16, 8, 7, 16):
        for k, v in out.items():
            if "measured" in v["basis"]:
                v["mean_abs"] = float("nan")
    return out


def check(cfg: Config | None = None, measured: dict | None = None) -> list:
    """Violations of :func:`bounds` by :func:`measure` (empty when all hold)."""
    cfg = preset("tiny") if cfg is None else cfg
    m = measure(cfg) if measured is None else measured
    bad = []
    for k, b in bounds(cfg).items():
        r = m[k]
        if r["max_abs"] > b["max_abs"]:
            bad.append(f"{k}: max {r['max_abs']:.6g} > {b['max_abs']:.6g} ({r['worst']})")
        if not math.isnan(b["mean_abs"]) and r["mean_abs"] > b["mean_abs"]:
            bad.append(f"{k}: mean {r['mean_abs']:.6g} > {b['mean_abs']:.6g}")
    return bad


def report(cfg: Config | None = None) -> str:
    """The bounds table as Markdown."""
    cfg = preset("tiny") if cfg is None else cfg
    m, b = measure(cfg), bounds(cfg)
    lines = ["| function | unit | max measured | max bound | mean measured | mean bound "
             "| worst case |",
             "|---|---|---|---|---|---|---|"]
    units = dict(softmax="P LSB", softmax_rowsum="P LSB", layernorm_var="real",
                 kv_int8="INT8 step", recip_core_rel="relative", rsqrt_core_rel="relative")
    for k in METRICS:
        r, bb = m[k], b[k]
        lines.append(f"| {k} | {units.get(k, 'act LSB')} | {r['max_abs']:.4g} | "
                     f"{bb['max_abs']:.4g} | {r['mean_abs']:.4g} | {bb['mean_abs']:.4g} | "
                     f"{r['worst']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "tiny"
    cfg = preset(name)
    print(report(cfg))
    bad = check(cfg)
    print("violations:", bad or "none")
