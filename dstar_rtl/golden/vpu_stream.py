"""The VPU's command stream in golden terms: which operands each operation reads, the packed
command and beats a testbench sends, and the output the golden functions expect.

Operands per operation (lane fields of :func:`golden.layouts.vpu_in_layout`)
-----------------------------------------------------------------------------
==============  ==========================================  =================  =========
operation       operands                                    result ``y``       ``param``
==============  ==========================================  =================  =========
softmax         a = logit s, mask                           P (0..2**pb - 1)   0
softmax_mx      a = logit s, mask                           P (0..2**pb - 1)   row max (W bits)
layernorm       a = x                                       y                  eps_q
modulate        a = x, b = shift, c = scale                 y                  0
gelu            a = x                                       y                  0
gated_residual  a = x, b = gate, c = y                      x + gate·y         0
acc_requant     a = Y, b = acc, c = bias, m, sh             y (and ``Y``)      0
diff_delta      a = x, b = x̂                                Δx                 0
xhat_update     a = x̂, b = dequant(q)                       x̂                  0
kv_amax         a = v                                       e (lane 0, 1 beat) 1 = continue
kv_quant        a = v                                       w (INT8)           e
==============  ==========================================  =================  =========

A row of ``n`` elements is ``ceil(n / vpu_lanes)`` beats, element ``k·vpu_lanes + l`` in lane
``l``; lanes past the end are sent as 0 and come back as 0. A LayerNorm row longer than
``max_reduction`` (up to ``ln_row_max``) is sent twice (:func:`golden.vpu.layernorm_passes`).
Values and the saturation flags of ``y`` and ``Y`` are compared element by element (the golden
functions' counts carry per-element flags, :class:`golden.vpu.Saturated`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil

import numpy as np

from dstar_rtl.golden import vpu as gv
from dstar_rtl.golden.config import Config
from dstar_rtl.golden.layouts import (
    VPU_OPS,
    pack,
    unpack,
    vpu_cmd_layout,
    vpu_in_layout,
    vpu_out_layout,
)

__all__ = ["VPURow", "make_row", "row_max", "max_param", "cmd_word", "in_words", "out_beats",
           "check_output", "random_rows", "EDGE_KINDS"]

_FIELDS = ("a", "b", "c", "m", "sh", "mask")


@dataclass
class VPURow:
    """One VPU command with its operands (int64 arrays of length ``n``) and golden result."""

    op: str
    n: int
    param: int
    operands: dict
    y: np.ndarray                   # expected results (length n; 1 for kv_amax)
    Y: np.ndarray | None = None     # acc_requant's running sums
    sat: np.ndarray | None = None   # per-element saturation flags of y (bool, like y)
    Ysat: np.ndarray | None = None  # per-element saturation flags of Y (bool, like y)
    note: str = field(default="", compare=False)


def row_max(cfg: Config, param: int) -> int:
    """``softmax_mx``'s row max from its ``param`` (``act_width``-bit two's complement)."""
    W = cfg.act_width
    v = int(param) & ((1 << W) - 1)
    return v - (1 << W) if v >> (W - 1) else v


def max_param(cfg: Config, mx: int) -> int:
    """``softmax_mx``'s ``param`` for the row max ``mx`` (inverse of :func:`row_max`)."""
    return int(mx) & ((1 << cfg.act_width) - 1)


def make_row(cfg: Config, op: str, param: int = 0, carry_amax: int = 0, note: str = "",
             **operands) -> VPURow:
    """Build a command and its golden result. ``carry_amax``: the running max |v| a continuing
    ``kv_amax`` (``param & 1``) starts from."""
    if op not in VPU_OPS:
        raise ValueError(f"op must be one of {VPU_OPS}, not {op!r}")
    ops = {k: np.asarray(v, np.int64).reshape(-1) for k, v in operands.items()}
    n = len(ops["a"])
    for k, v in ops.items():
        if k not in _FIELDS:
            raise ValueError(f"unknown operand {k!r}; operands are {_FIELDS}")
        if len(v) != n:
            raise ValueError(f"operand {k!r} has {len(v)} elements, a has {n}")
    a, b, c = ops.get("a"), ops.get("b"), ops.get("c")
    Y, nY = None, None
    if op == "softmax":
        y, ns = gv.softmax(a[None], ops["mask"].astype(bool)[None], cfg)
    elif op == "softmax_mx":
        y, ns = gv.softmax(a[None], ops["mask"].astype(bool)[None], cfg,
                           mx=np.array([[row_max(cfg, param)]]))
    elif op == "layernorm":
        y, ns = gv.layernorm(a[None], cfg, eps_q=param)
    elif op == "modulate":
        y, ns = gv.modulate(a, b, c, cfg)
    elif op == "gelu":
        y, ns = gv.gelu(a, cfg)
    elif op == "gated_residual":
        y, ns = gv.gated_residual(a, b, c, cfg)
    elif op == "acc_requant":
        r = gv.acc_requant(a, b, ops["m"], ops["sh"], c, cfg)
        y, ns, Y, nY = r.y, r.y_saturated, r.Y, r.Y_saturated
    elif op == "diff_delta":
        y, ns = gv.diff_delta(a, b, cfg), None
    elif op == "xhat_update":
        y, ns = gv.xhat_update(a, b, cfg)
    elif op == "kv_amax":
        start = int(carry_amax) if param & 1 else 0
        y, ns = np.array([gv.kv_shift(max(start, int(np.abs(a).max())))]), None
    else:
        y, ns = gv.kv_quant(a, param, cfg)
    y = np.asarray(y, np.int64).reshape(-1)
    return VPURow(op, n, int(param), ops, y,
                  None if Y is None else np.asarray(Y, np.int64).reshape(-1),
                  _flags(ns, len(y)), _flags(nY, len(y)), note)


def _flags(saturated, n: int) -> np.ndarray:
    """The per-element flags of a golden function's :class:`golden.vpu.Saturated` count (length
    ``n``; ``None``: an operation that never saturates)."""
    if saturated is None:
        return np.zeros(n, bool)
    return np.asarray(saturated.flags, bool).reshape(n)


def cmd_word(cfg: Config, row: VPURow) -> int:
    return pack(vpu_cmd_layout(cfg), dict(op=VPU_OPS.index(row.op), n=row.n, param=row.param))


def in_words(cfg: Config, row: VPURow) -> list:
    L = cfg.vpu_lanes
    nb = ceil(row.n / L)
    pad = nb * L - row.n
    cols = {k: np.concatenate([row.operands.get(k, np.zeros(row.n, np.int64)),
                               np.zeros(pad, np.int64)]).reshape(nb, L) for k in _FIELDS}
    lay = vpu_in_layout(cfg)
    words = [pack(lay, {k: cols[k][i] for k in _FIELDS}) for i in range(nb)]
    return words * (gv.layernorm_passes(cfg, row.n) if row.op == "layernorm" else 1)


def out_beats(cfg: Config, row: VPURow) -> int:
    """How many output beats the row produces."""
    return 1 if row.op == "kv_amax" else ceil(row.n / cfg.vpu_lanes)


def check_output(cfg: Config, row: VPURow, words, where: str = "") -> None:
    """Compare a row's output beats with the golden result; raise AssertionError naming the first
    difference."""
    tag = f"{where}{row.op} n={row.n}{' (' + row.note + ')' if row.note else ''}"
    nb = out_beats(cfg, row)
    if len(words) != nb:
        raise AssertionError(f"{tag}: {len(words)} output beats, expected {nb}")
    beats = [unpack(vpu_out_layout(cfg), w) for w in words]
    for i, bt in enumerate(beats):
        if bt["last"] != (i == nb - 1):
            raise AssertionError(f"{tag}: beat {i} has last={bt['last']}")
    got = {f: np.concatenate([np.asarray(bt[f], np.int64) for bt in beats])
           for f in ("y", "Y", "sat", "Ysat")}
    width = len(got["y"])
    for f, exp in (("y", row.y), ("Y", row.Y), ("sat", row.sat), ("Ysat", row.Ysat)):
        want = np.zeros(width, np.int64)                  # lanes past the end come back as 0
        if exp is not None:
            want[:len(exp)] = exp
        if not np.array_equal(got[f], want):
            i = int(np.flatnonzero(got[f] != want)[0])
            raise AssertionError(f"{tag}: {f}[{i}] = {int(got[f][i])}, golden {int(want[i])}")


# ---------------------------------------------------------------------------- random rows
EDGE_KINDS = ("random", "small", "extreme", "equal", "dominant", "masked")


def _vals(rng, n, width, kind, frac):
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    if kind == "extreme":
        return rng.choice(np.array([lo, hi, lo + 1, hi - 1, 0, -1, 1]), n)
    if kind == "small":
        return rng.integers(-(1 << max(frac - 2, 1)), 1 << max(frac - 2, 1), n)
    if kind == "equal":
        return np.full(n, int(rng.integers(lo, hi + 1)))
    if kind == "dominant":
        v = rng.integers(-(1 << frac), 1 << frac, n)
        v[rng.integers(0, n)] = int(rng.integers(hi // 2, hi + 1))
        return v
    # "random": typical activations, a few units, and some full-range values
    v = np.clip(np.round(rng.normal(0, 2.0 * (1 << frac), n)), lo, hi).astype(np.int64)
    wide = rng.random(n) < 0.1
    v[wide] = rng.integers(lo, hi + 1, int(wide.sum()))
    return v


def random_rows(cfg: Config, op: str, rng: np.random.Generator, count: int,
                kinds=EDGE_KINDS) -> list:
    """``count`` rows of ``op`` with random lengths (1 .. max_reduction for row operations, up to
    ``cfg.ln_max`` for LayerNorm, 1 .. 4·vpu_lanes otherwise) cycling through ``kinds`` of
    values."""
    W, F, A = cfg.act_width, cfg.act_frac, cfg.acc_bits
    rows, amax = [], 0
    for i in range(count):
        kind = kinds[i % len(kinds)]
        row_op = op in ("softmax", "softmax_mx", "layernorm", "kv_amax")
        hi_n = (cfg.ln_max if op == "layernorm" else cfg.max_reduction) if row_op \
            else 4 * cfg.vpu_lanes
        n = int(rng.integers(1, hi_n + 1)) if i % 3 else int(rng.choice([1, hi_n,
                                                                          cfg.vpu_lanes]))
        x = _vals(rng, n, W, kind if kind != "masked" else "random", F)
        p = dict(a=x)
        param = 0
        if op in ("softmax", "softmax_mx"):
            if kind == "masked":
                mask = np.zeros(n, np.int64) if i % 2 else (rng.random(n) < 0.3).astype(np.int64)
            else:
                mask = (rng.random(n) < 0.8).astype(np.int64)
            p["mask"] = mask
            if op == "softmax_mx":      # the kept max, or (every third row) a larger bound
                hi = (1 << (W - 1)) - 1
                mx = int(x[mask > 0].max()) if mask.any() else int(rng.integers(-hi, hi))
                if i % 3 == 2:
                    mx = int(rng.integers(mx, min(hi, mx + (1 << F)) + 1))
                param = max_param(cfg, mx)
        elif op == "layernorm":
            eps = 0.0 if kind == "equal" and i % 2 else 1e-6
            param = gv.layernorm_eps_int(n, eps, cfg)
        elif op in ("modulate", "gated_residual"):
            p["b"] = _vals(rng, n, W, kind, F)
            p["c"] = _vals(rng, n, W, "small" if kind == "random" else kind, F)
        elif op == "acc_requant":
            big = kind in ("extreme", "dominant")
            p["a"] = _vals(rng, n, A, "extreme" if big else "random", F + 8)
            p["b"] = _vals(rng, n, A, "extreme" if big else "random", F + 6)
            p["c"] = _vals(rng, n, W, kind if kind != "masked" else "random", F)
            p["m"] = rng.integers(1 << (cfg.mult_width - 1), 1 << cfg.mult_width, n)
            p["sh"] = rng.integers(0, cfg.sh_max + 1, n) if big else rng.integers(10, 30, n)
        elif op == "diff_delta":
            p["b"] = _vals(rng, n, cfg.xhat_width, kind if kind != "masked" else "random", F)
        elif op == "xhat_update":
            p["a"] = _vals(rng, n, cfg.xhat_width, kind if kind != "masked" else "random", F)
            p["b"] = _vals(rng, n, cfg.recon_width, kind if kind != "masked" else "small", F)
        elif op == "kv_amax":
            param = int(i % 4 == 3)
        elif op == "kv_quant":
            param = int(rng.integers(0, W + 1))
        row = make_row(cfg, op, param=param, carry_amax=amax, note=kind, **p)
        if op == "kv_amax":
            amax = max(amax if param else 0, int(np.abs(x).max()))
        rows.append(row)
    return rows


def bench_rows(cfg: Config, op: str, n: int, count: int, seed: int = 0) -> list:
    """``count`` rows of ``op``, all of length ``n``, typical random values (for cycle
    measurements: every row of a run has the same shape)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(count):
        r = random_rows(cfg, op, rng, 1, kinds=("random",))[0]
        ops = {k: v[:n] if len(v) >= n else np.resize(v, n) for k, v in r.operands.items()}
        param = r.param
        if op == "layernorm":
            param = gv.layernorm_eps_int(n, 1e-6, cfg)
        rows.append(make_row(cfg, op, param=param, **ops))
    return rows
