"""SAR, sparse attention reuse (numerics §2.6): mask profiling, cache and reuse steps, the
P-cache record and its footprint and traffic.

Shapes: scores and probabilities are (heads, N, N); a block mask is (heads, nb, nb) bool with
``nb = ceil(N / Bs)``. Probabilities enter the FMDQ quantizer as unsigned integers 0..127 in units
of ``2**-p_base_log2`` with ``r0 = 0``; a sub-channel is a tile of ``Bs`` queries × one key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.fmdq import quantize_subchannels, rnd

__all__ = ["block_importance", "profile_mask", "expand_mask", "masked_softmax", "p_to_int",
           "quantize_p", "PCacheRecord", "weight_operand", "SARAttention", "PRECISION_CODE_BITS",
           "is_cache_step"]

# Five precision classes (0, 2, 4, 6, 8 bits) need a 3-bit code; numerics §2.6 says "2-bit" but
# cannot encode b = 0 with it (docs/architecture.md records the choice).
PRECISION_CODE_BITS = 3


def _blocks(N, Bs):
    return -(-N // Bs)


def _pad_nn(a, Bs):
    N = a.shape[-1]
    nb = _blocks(N, Bs)
    P = nb * Bs - N
    if P == 0:
        return a
    pad = [(0, 0)] * (a.ndim - 2) + [(0, P), (0, P)]
    return np.pad(a, pad)


def block_importance(probs, Bs: int):
    """Importance of each block: mean over leading axes (samples, steps) of the block's probability
    mass divided by its number of real rows (``Bs`` except in a partial last block row).

    ``probs``: (..., heads, N, N). Returns (heads, nb, nb).
    """
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim < 3 or probs.shape[-1] != probs.shape[-2]:
        raise ValueError(f"probabilities must be (..., heads, N, N), not {probs.shape}")
    N = probs.shape[-1]
    nb = _blocks(N, Bs)
    p = _pad_nn(probs, Bs)
    lead = p.shape[:-3]
    H = p.shape[-3]
    mass = p.reshape(*lead, H, nb, Bs, nb, Bs).sum(axis=(-1, -3))
    rows = np.minimum(Bs, N - np.arange(nb) * Bs).astype(np.float64)
    imp = mass / rows[:, None]
    return imp.reshape(-1, H, nb, nb).mean(axis=0)


def profile_mask(probs, Bs: int, thr: float):
    """Static block mask: keep blocks of importance >= ``thr``; diagonal blocks always kept."""
    imp = block_importance(probs, Bs)
    mask = imp >= thr
    idx = np.arange(mask.shape[-1])
    mask[:, idx, idx] = True
    return mask


def expand_mask(mask, N: int, Bs: int):
    """Block mask (heads, nb, nb) → element mask (heads, N, N)."""
    m = np.repeat(np.repeat(mask, Bs, axis=-1), Bs, axis=-2)
    return m[..., :N, :N]


def masked_softmax(S, mask_el):
    """Row softmax over kept entries only; masked entries are exactly 0."""
    S = np.where(mask_el, S, -np.inf)
    mx = S.max(axis=-1, keepdims=True)
    ex = np.where(mask_el, np.exp(S - mx), 0.0)
    return ex / ex.sum(axis=-1, keepdims=True)


def p_to_int(P, p_base_log2: int = 7):
    """Probabilities → unsigned integers in units of ``2**-p_base_log2``, rounded half away from
    zero once and saturated at ``2**p_base_log2 - 1`` (127 by default)."""
    v = np.floor(np.asarray(P, dtype=np.float64) * (1 << p_base_log2) + 0.5)
    return np.clip(v, 0, (1 << p_base_log2) - 1).astype(np.int64)


@dataclass
class PCacheRecord:
    """Quantized probabilities of one head's kept blocks, and the record's size in bits.

    ``values``: (N, N) int64 of the quantized P (zeros in dropped blocks); ``b``: (nb, nb, Bs)
    precision per (query block, key block, key) sub-channel (0 in dropped blocks); ``bits``: the
    packed size of the record (per kept block and key: a precision code and Bs values of b bits).
    """

    values: np.ndarray
    b: np.ndarray
    bits: int
    subchannels: int

    @property
    def bytes(self) -> int:
        return -(-self.bits // 8)


def quantize_p(P_int, mask, cfg: Config) -> PCacheRecord:
    """FMDQ over the kept sub-channels of one head's ``P`` (N, N) under its block mask (nb, nb)."""
    Bs = cfg.tile
    N = P_int.shape[-1]
    nb = _blocks(N, Bs)
    p = _pad_nn(np.asarray(P_int, dtype=np.int64), Bs)
    # Sub-channel (qa, kb, key j): the Bs queries of block row qa at key column kb*Bs + j.
    sub = p.reshape(nb, Bs, nb, Bs).transpose(0, 2, 3, 1)  # (qa, kb, j, query)
    kept = np.asarray(mask, bool)
    u = sub[kept].reshape(-1, Bs)
    qz = quantize_subchannels(u, cfg, r0=0)
    qvals = np.zeros_like(sub)
    qvals[kept] = qz.q.reshape(-1, Bs, Bs)
    bmap = np.zeros((nb, nb, Bs), np.int64)
    bmap[kept] = qz.b.reshape(-1, Bs)
    bits = int(len(qz.b) * PRECISION_CODE_BITS + Bs * qz.b.sum())
    values = qvals.transpose(0, 3, 1, 2).reshape(nb * Bs, nb * Bs)[:N, :N]
    return PCacheRecord(values=values, b=bmap, bits=bits, subchannels=len(qz.b))


def weight_operand(v):
    """INT8 weight operand of ``K`` or ``V`` per head (numerics §2.6): ``w = rnd(v, e)`` with the
    smallest ``e >= 0`` such that ``rnd(max|v|, e) <= 127``. Returns ``(w, e)``."""
    v = np.asarray(v, dtype=np.int64)
    amax = int(np.abs(v).max(initial=0))
    e = 0
    while int(rnd(amax, e)) > 127:
        e += 1
    return rnd(v, e), e


def is_cache_step(t: int, interval: int) -> bool:
    return t % interval == 0


@dataclass
class SARStats:
    kept_fraction: float = 0.0
    cache_steps: int = 0
    reuse_steps: int = 0
    dense_macs: int = 0
    done_macs: int = 0
    bytes_written: int = 0
    bytes_read: int = 0
    per_step: list = field(default_factory=list)

    @property
    def work_removed(self) -> float:
        return 1.0 - self.done_macs / self.dense_macs if self.dense_macs else 0.0


class SARAttention:
    """One attention layer under SAR: cache steps compute ``P`` on kept blocks and cache it
    (quantized by FMDQ), reuse steps multiply the cached ``P`` by the new ``V``.

    ``mask``: (heads, nb, nb) bool. ``step(t, q, k, v)`` takes float (heads, N, d) arrays and
    returns the float output (heads, N, d). ``q`` and ``k`` are not read on reuse steps (the
    projections are skipped; pass None).
    """

    def __init__(self, mask, cfg: Config, interval: int | None = None):
        self.mask = np.asarray(mask, bool)
        self.cfg = cfg
        self.interval = cfg.sar_interval if interval is None else int(interval)
        self.cache = None
        self._footprint = 0
        self.stats = SARStats()

    def step(self, t: int, q, k, v):
        cfg = self.cfg
        H, N, d = np.shape(v)
        mask_el = expand_mask(self.mask, N, cfg.tile)
        kept = float(mask_el.mean())
        self.stats.kept_fraction = kept
        dense = 2 * H * N * N * d
        scale = float(1 << cfg.p_base_log2)
        if is_cache_step(t, self.interval) or self.cache is None:
            S = np.einsum("hnd,hmd->hnm", q, k) / np.sqrt(d)
            P = masked_softmax(S, mask_el)
            recs = [quantize_p(p_to_int(P[h], cfg.p_base_log2), self.mask[h], cfg)
                    for h in range(H)]
            self.cache = np.stack([r.values for r in recs]).astype(np.float64) / scale
            nbytes = sum(r.bytes for r in recs)
            self._footprint = nbytes
            self.stats.cache_steps += 1
            self.stats.bytes_written += nbytes
            done = int(round(kept * dense))
            kind, wr, rd = "cache", nbytes, 0
        else:
            nbytes = self.footprint_bytes
            self.stats.reuse_steps += 1
            self.stats.bytes_read += nbytes
            done = int(round(kept * dense / 2))
            kind, wr, rd = "reuse", 0, nbytes
        self.stats.dense_macs += dense
        self.stats.done_macs += done
        self.stats.per_step.append(dict(step=t, kind=kind, bytes_written=wr, bytes_read=rd,
                                        macs=done, dense_macs=dense))
        return np.einsum("hnm,hmd->hnd", self.cache, v)

    @property
    def footprint_bytes(self) -> int:
        """P-cache bytes of this layer (all heads) as of the last cache step."""
        return self._footprint
