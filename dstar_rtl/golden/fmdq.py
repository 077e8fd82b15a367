"""FMDQ numerics (numerics §2.1, 2.2): what values result, per sub-channel.

A *sub-channel* is the T integers ``u`` of one tile of tokens and one input channel of a difference
``Δx`` in fixed-point units (``2**-act_frac``). The quantizer picks a precision ``b`` in
{2, 4, 6, 8} (0 for an all-zero sub-channel), a power-of-two exponent ``e`` and the integers ``q``
whose value is ``q · 2**e · s0`` with ``s0 = 2**-B``. All arithmetic is exact integer arithmetic on
int64 arrays (every width involved is below 40 bits).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dstar_rtl.golden.config import PRECISIONS, Config

__all__ = ["rnd", "rnd_int", "Quantized", "quantize_subchannels", "quantize_tile_matrix",
           "dequant", "fpot", "to_fixed", "from_fixed", "requant_params", "requantize"]


def rnd(v, r):
    """``v / 2**r`` rounded half away from zero (``r >= 0``), elementwise on integers.

    ``r`` may be a scalar or an array broadcasting against ``v``.
    """
    v = np.asarray(v, dtype=np.int64)
    r = np.asarray(r, dtype=np.int64)
    if np.any(r < 0):
        raise ValueError("rnd: shift must be >= 0")
    half = np.where(r > 0, np.left_shift(np.int64(1), np.maximum(r - 1, 0)), 0)
    mag = (np.abs(v) + half) >> r
    return np.where(v < 0, -mag, mag)


def rnd_int(v: int, r: int) -> int:
    """Scalar :func:`rnd` on Python integers (any size)."""
    if r < 0:
        raise ValueError("rnd: shift must be >= 0")
    if r == 0:
        return int(v)
    mag = (abs(int(v)) + (1 << (r - 1))) >> r
    return -mag if v < 0 else mag


@dataclass
class Quantized:
    """FMDQ result of a batch of sub-channels (leading axis: sub-channel, last axis: the T values).

    Attributes
    ----------
    q: int64 array, shape (S, T): quantized integers, ``|q| <= 2**(b-1) - 1``.
    b: int64 array (S,): precision in bits, 0 for an all-zero sub-channel (``M == 0``).
    e: int64 array (S,): PoT exponent.
    M: int64 array (S,): ``rnd(max|u|, r0)``.
    saturated: bool array (S,): some value was changed by the clip.
    r0: the shift of the static base used (``act_frac - B``).
    """

    q: np.ndarray
    b: np.ndarray
    e: np.ndarray
    M: np.ndarray
    saturated: np.ndarray
    r0: int

    @property
    def fpot(self):
        return fpot(self.b, self.e)


def fpot(b, e):
    """``FPoT = e + b - 2``: the exponent of the most significant slice (numerics §2.2 step 5)."""
    return np.asarray(e) + np.asarray(b) - 2


def quantize_subchannels(u, cfg: Config, base_log2: int | None = None,
                         r0: int | None = None) -> Quantized:
    """Quantize sub-channels ``u`` of shape (S, T) (numerics §2.2 steps 1-4).

    ``base_log2`` overrides the configuration's default ``B`` (the runtime configuration port);
    it must not exceed ``cfg.B_max``. ``r0`` sets the shift directly instead (attention
    probabilities use ``r0 = 0``, numerics §2.6).
    """
    if r0 is None:
        B = cfg.base_log2 if base_log2 is None else int(base_log2)
        if not 0 <= B <= cfg.B_max:
            raise ValueError(f"base_log2 must be in [0, {cfg.B_max}], not {B}")
        r0 = cfg.act_frac - B
    u = np.asarray(u, dtype=np.int64)
    if u.ndim != 2:
        raise ValueError(f"u must have shape (subchannels, T), not {u.shape}")
    lim = 1 << (cfg.dx_width - 1)
    if u.size and (u.min() < -lim or u.max() >= lim):
        raise ValueError(f"u exceeds the {cfg.dx_width}-bit difference range")
    amax = np.abs(u).max(axis=1) if u.shape[1] else np.zeros(len(u), np.int64)
    M = rnd(amax, r0)
    thr = cfg.thresholds
    b = np.full(len(u), 8, dtype=np.int64)
    for bb in reversed(PRECISIONS[:-1]):
        b = np.where(M <= thr[bb], bb, b)
    b = np.where(M == 0, 0, b)
    # PoT exponent: smallest e >= 1 with rnd(max|u|, r0 + e) <= 127, capped at e_max.
    e = np.zeros(len(u), dtype=np.int64)
    need = M > thr[8]
    for ee in range(1, cfg.e_max + 1):
        fits = rnd(amax, r0 + ee) <= thr[8]
        e = np.where(need & (e == 0) & fits, ee, e)
    e = np.where(need & (e == 0), cfg.e_max, e)
    qmax = np.where(b > 0, (np.int64(1) << np.maximum(b - 1, 1)) - 1, 0)
    raw = rnd(u, (r0 + e)[:, None])
    q = np.clip(raw, -qmax[:, None], qmax[:, None])
    q = np.where((b == 0)[:, None], 0, q)
    saturated = np.any((q != raw) & (b > 0)[:, None], axis=1)
    return Quantized(q=q, b=b, e=e, M=M, saturated=saturated, r0=r0)


def dequant(qz: Quantized):
    """Reconstruction in fixed-point units: ``q · 2**(e + r0)`` (an exact shift)."""
    return qz.q << (qz.e + qz.r0)[:, None]


def quantize_tile_matrix(dx, cfg: Config, base_log2: int | None = None, r0: int | None = None):
    """Quantize a (tokens, channels) difference, zero-padding tokens to a multiple of T
    (``base_log2`` and ``r0`` as in :func:`quantize_subchannels`).

    Returns ``(qz, tiles)`` where ``qz`` holds sub-channels in (tile, channel) order and
    ``tiles`` is the number of token tiles; ``qz.q.reshape(tiles, C, T)``.
    """
    dx = np.asarray(dx, dtype=np.int64)
    N, C = dx.shape
    T = cfg.tile
    tiles = max(1, -(-N // T))
    pad = np.zeros((tiles * T, C), dtype=np.int64)
    pad[:N] = dx
    u = pad.reshape(tiles, T, C).transpose(0, 2, 1).reshape(tiles * C, T)
    return quantize_subchannels(u, cfg, base_log2, r0), tiles


def to_fixed(x, width: int, frac: int):
    """Float → signed fixed point (round half away from zero, saturate).
    Returns (ints, n_saturated)."""
    x = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("to_fixed: input holds NaN or Inf")
    s = x * float(1 << frac)
    r = np.sign(s) * np.floor(np.abs(s) + 0.5)
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    sat = int(np.count_nonzero((r < lo) | (r > hi)))
    return np.clip(r, lo, hi).astype(np.int64), sat


def from_fixed(v, frac: int):
    return np.asarray(v, dtype=np.float64) / float(1 << frac)


def requant_params(s: float, mult_width: int = 16):
    """The one requantization rule of numerics §2.1: ``(m, sh)`` with
    ``2**(mw-1) <= s · 2**sh < 2**mw`` and ``m = round(s · 2**sh)`` half away from zero."""
    s = float(s)
    if not np.isfinite(s) or s < 0:
        raise ValueError(f"requantization scale must be finite and >= 0, not {s}")
    if s == 0:
        return 0, 0
    mant, ex = np.frexp(s)  # s = mant · 2**ex, 0.5 <= mant < 1
    sh = mult_width - int(ex)  # s · 2**sh = mant · 2**mw in [2**(mw-1), 2**mw)
    m = int(np.floor(mant * (1 << mult_width) + 0.5))
    if m == 1 << mult_width:
        m, sh = 1 << (mult_width - 1), sh - 1
    return m, sh


def requantize(Y, m, sh, bias=0, out_width: int = 16, sh_max: int = 47):
    """``y = sat(rnd(Y · m + b · 2**sh, sh))`` per channel; returns ``(y, saturated_count)``.

    ``m``, ``sh`` and ``bias`` broadcast along the last axis of ``Y``. Python integers are used
    for the product so no width limit applies in the model.
    """
    Y = np.asarray(Y, dtype=object)
    m = np.broadcast_to(np.asarray(m, dtype=object), Y.shape)
    sh = np.broadcast_to(np.asarray(sh, dtype=np.int64), Y.shape)
    b = np.broadcast_to(np.asarray(bias, dtype=object), Y.shape)
    if sh.size and (sh.min() < 0 or sh.max() > sh_max):
        raise ValueError(f"requantization shift outside [0, {sh_max}]: "
                         f"{int(sh.min())}..{int(sh.max())}")
    div = np.vectorize(lambda s: 1 << int(s), otypes=[object])(sh) if sh.size else sh.astype(object)
    half = div // 2
    v = Y * m + b * div
    mag = (np.abs(v) + half) // div
    v = np.where(v < 0, -mag, mag)
    lo, hi = -(1 << (out_width - 1)), (1 << (out_width - 1)) - 1
    sat = int(np.count_nonzero((v < lo) | (v > hi)))
    return np.clip(v, lo, hi).astype(np.int64), sat
