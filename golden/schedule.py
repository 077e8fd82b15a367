"""The FMDQ schedule (DESIGN.md 2.3, 2.4): the exact stream of slices, groups and metadata the
hardware sees, and an integer executor of that stream that models the output-stationary MPU.

Pipeline for one token tile (T rows × C input channels of quantized integers ``q``):

1. every sub-channel with ``b > 0`` is written in two's complement on ``b`` bits and cut into
   ``b/2`` 2-bit digits, least significant first; digit k has exponent ``e + 2k``; the top digit is
   signed {-2..1}, the others unsigned {0..3};
2. a column whose T digits are all zero is dropped (``cfg.drop_zero_columns``);
3. the kept descriptors ``(exp, signed, channel, k)``, in channel-then-k order, fill chunks of
   ``sort_n``; the last chunk is padded with invalid entries;
4. each chunk is sorted by the bitonic network of :mod:`golden.bitonic` on the key (valid, exp);
5. consecutive valid descriptors of equal exponent pack into groups of ``lanes``; a group never
   spans two exponents, chunks or tiles; a tile with no kept column emits one all-invalid group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .bitonic import apply_network, sort_key
from .config import Config
from .fmdq import Quantized, quantize_tile_matrix
from .layouts import group_layout, pack

__all__ = ["slice_digits", "Group", "Counters", "TileSchedule", "schedule_tile",
           "schedule_matrix", "execute", "reference_product", "shift_counts"]

COUNTER_NAMES = ("subchannels", "subchannels_b2", "subchannels_b4", "subchannels_b6",
                 "subchannels_b8", "subchannels_zero", "saturated", "slice_columns",
                 "dropped_columns", "groups", "padded_lanes", "shifts", "shift_amount")
COUNTER_MAX = (1 << 32) - 1


def slice_digits(q, b):
    """Digits of ``q`` (shape (S, T)) on ``b`` bits (shape (S,)): int64 array (S, 4, T).

    Digit k of a sub-channel is meaningful for ``k < b/2``; the others are zero. The top digit is
    signed, so ``q == Σ_k d_k · 4**k`` exactly.
    """
    q = np.asarray(q, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    S, T = q.shape
    out = np.zeros((S, 4, T), dtype=np.int64)
    mask = (np.int64(1) << np.maximum(b, 1)) - 1
    qb = q & mask[:, None]
    for k in range(4):
        d = (qb >> (2 * k)) & 3
        top = (b // 2 - 1) == k
        d = np.where(top[:, None] & (d >= 2), d - 4, d)
        out[:, k, :] = np.where((k < b // 2)[:, None], d, 0)
    return out


@dataclass
class Group:
    """One lane group: what enters the MPU in one cycle.

    ``digits`` is (T, lanes) of signed digit values; padded lanes hold zero everywhere.
    ``k`` (slice index per lane) is kept for inspection; it is not part of the stream record.
    """

    exp: int
    channel: np.ndarray
    signed: np.ndarray
    valid: np.ndarray
    digits: np.ndarray
    k: np.ndarray
    first: bool = False
    last: bool = False

    def record(self) -> dict:
        """Field values of :func:`golden.layouts.group_layout` (digits as raw 2-bit patterns)."""
        return dict(digits=self.digits & 3, channel=self.channel, signed=self.signed,
                    valid=self.valid, exp=self.exp, first=int(self.first), last=int(self.last))

    def word(self, cfg: Config) -> int:
        return pack(group_layout(cfg), self.record())


@dataclass
class Counters:
    """QPU statistics counters (DESIGN 2.3): 32-bit, saturating."""

    values: dict = field(default_factory=lambda: dict.fromkeys(COUNTER_NAMES, 0))

    def add(self, name, n=1):
        self.values[name] = min(COUNTER_MAX, self.values[name] + int(n))

    def merge(self, other: "Counters"):
        for k, v in other.values.items():
            self.add(k, v)

    def __getitem__(self, name):
        return self.values[name]


@dataclass
class TileSchedule:
    groups: list
    counters: Counters
    chunks: int


def _pack_chunk(keys, idx, exp_sorted, cfg):
    """Split one sorted chunk into runs of equal exponent, then into groups of ``lanes``."""
    valid = keys >> cfg.exp_width
    out = []
    pos = 0
    n = len(keys)
    while pos < n and valid[pos]:
        run_end = pos
        while run_end < n and valid[run_end] and exp_sorted[run_end] == exp_sorted[pos]:
            run_end += 1
        for g0 in range(pos, run_end, cfg.lanes):
            out.append((int(exp_sorted[pos]), idx[g0:min(g0 + cfg.lanes, run_end)]))
        pos = run_end
    return out


def schedule_tile(q, b, e, cfg: Config) -> TileSchedule:
    """Group stream of one tile. ``q``: (C, T) quantized integers; ``b``, ``e``: (C,)."""
    q = np.asarray(q, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    e = np.asarray(e, dtype=np.int64)
    C, T = q.shape
    if C > cfg.max_reduction:   # DESIGN 2.1: refused (channel field, Horner order, acc_width)
        raise ValueError(f"a tile of {C} input channels exceeds max_reduction = "
                         f"{cfg.max_reduction}")
    L = cfg.lanes
    ctr = Counters()
    digits = slice_digits(q, b)  # (C, 4, T)
    ctr.add("subchannels", C)
    for bb in (2, 4, 6, 8):
        ctr.add(f"subchannels_b{bb}", np.count_nonzero(b == bb))
    ctr.add("subchannels_zero", np.count_nonzero(b == 0))
    # Descriptors in channel-then-k order.
    ch, kk = [], []
    for c in range(C):
        for k in range(int(b[c]) // 2):
            if cfg.drop_zero_columns and not digits[c, k].any():
                ctr.add("dropped_columns")
                continue
            ch.append(c)
            kk.append(k)
    ch = np.array(ch, dtype=np.int64)
    kk = np.array(kk, dtype=np.int64)
    ctr.add("slice_columns", len(ch))
    exp = e[ch] + 2 * kk if len(ch) else np.zeros(0, np.int64)
    sgn = (kk == b[ch] // 2 - 1).astype(np.int64) if len(ch) else np.zeros(0, np.int64)

    groups = []
    n = cfg.sort_n
    nchunks = -(-len(ch) // n)
    if nchunks:
        pad = nchunks * n
        valid = np.zeros(pad, np.int64)
        valid[:len(ch)] = 1
        ex = np.zeros(pad, np.int64)
        ex[:len(ch)] = exp
        idx = np.arange(pad, dtype=np.int64)
        keys, idx_s, ex_s = apply_network(sort_key(valid, ex, cfg.exp_width).reshape(nchunks, n),
                                          idx.reshape(nchunks, n), ex.reshape(nchunks, n))
        for c in range(nchunks):
            for gexp, members in _pack_chunk(keys[c], idx_s[c], ex_s[c], cfg):
                m = len(members)
                g = Group(exp=gexp,
                          channel=np.zeros(L, np.int64), signed=np.zeros(L, np.int64),
                          valid=np.zeros(L, np.int64), digits=np.zeros((T, L), np.int64),
                          k=np.zeros(L, np.int64))
                g.channel[:m] = ch[members]
                g.signed[:m] = sgn[members]
                g.valid[:m] = 1
                g.k[:m] = kk[members]
                g.digits[:, :m] = digits[ch[members], kk[members], :].T
                groups.append(g)
    if not groups:
        groups.append(Group(exp=0, channel=np.zeros(L, np.int64), signed=np.zeros(L, np.int64),
                            valid=np.zeros(L, np.int64), digits=np.zeros((T, L), np.int64),
                            k=np.zeros(L, np.int64)))
    groups[0].first = True
    groups[-1].last = True
    ctr.add("groups", len(groups))
    ctr.add("padded_lanes", sum(L - int(g.valid.sum()) for g in groups))
    # The paper's shift counts as statistics: groups whose exponent differs from the previous
    # group's of the tile, and the sum of |differences| (a Horner PE's total shift distance).
    sc = shift_counts(groups)
    ctr.add("shifts", sum(1 for v in sc if v))
    ctr.add("shift_amount", sum(abs(v) for v in sc))
    return TileSchedule(groups=groups, counters=ctr, chunks=nchunks)


def schedule_matrix(dx, cfg: Config, base_log2: int | None = None):
    """Quantize and schedule a (tokens, channels) difference.

    Returns ``(qz, tiles)`` with ``qz`` the :class:`~golden.fmdq.Quantized` sub-channels in
    (tile, channel) order and ``tiles`` a list of :class:`TileSchedule`.
    """
    qz, ntiles = quantize_tile_matrix(dx, cfg, base_log2)
    C = np.asarray(dx).shape[1]
    out = []
    for t in range(ntiles):
        sl = slice(t * C, (t + 1) * C)
        ts = schedule_tile(qz.q[sl], qz.b[sl], qz.e[sl], cfg)
        ts.counters.add("saturated", np.count_nonzero(qz.saturated[sl]))
        out.append(ts)
    return qz, out


def _wrap(x, width):
    if width >= 64:
        return x   # the int64 model register is no wider: wrapping to `width` bits is the identity
    half = 1 << (width - 1)
    return ((x + half) & ((1 << width) - 1)) - half


def execute(groups, W, cfg: Config):
    """Integer executor of a group stream on the output-stationary array (DESIGN 2.4).

    ``W`` is (channels, cols) signed integers. Returns ``(accs, overflow)``: one (T, cols) int64
    accumulator matrix per tile (in stream order) and, per tile, a (T, cols) bool array of sticky
    overflow flags (all False unless ``cfg.overflow_detect``).

    With the derived accumulator width the accumulator is a modular two's-complement register: the
    final sum always fits (DESIGN 2.1), so wrapping partial sums cancel and the result is exact.
    With ``overflow_detect`` every addition saturates and sets the PE's sticky flag.
    """
    W = np.asarray(W, dtype=np.int64)
    T, cols = cfg.rows, cfg.cols
    if W.ndim != 2 or len(W) == 0 or W.shape[1] > cols:
        raise ValueError(f"W must have shape (channels >= 1, <= {cols}), not {W.shape}")
    W = np.pad(W, ((0, 0), (0, cols - W.shape[1])))
    width = cfg.acc_bits
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    accs, flags = [], []
    acc = np.zeros((T, cols), np.int64)
    ovf = np.zeros((T, cols), bool)
    prev_exp = 0
    for g in groups:
        if g.first:
            acc[:] = 0
            ovf[:] = False
            prev_exp = g.exp
        w = np.where(g.valid[:, None].astype(bool), W[g.channel], 0)
        part = g.digits @ w  # (T, cols)
        if cfg.alignment == "horner":
            new = (acc << (prev_exp - g.exp)) + part
            prev_exp = g.exp
        else:
            new = acc + (part << g.exp)
        if cfg.overflow_detect:
            ovf |= (new < lo) | (new > hi)
            acc = np.clip(new, lo, hi)
        else:
            acc = _wrap(new, width)
        if g.last:
            if cfg.alignment == "horner":
                fin = acc << prev_exp
                if cfg.overflow_detect:
                    ovf |= (fin < lo) | (fin > hi)
                    fin = np.clip(fin, lo, hi)
                else:
                    fin = _wrap(fin, width)
                acc = fin
            accs.append(acc.copy())
            flags.append(ovf.copy())
    return accs, flags


def reference_product(qz: Quantized, ntiles: int, W, cfg: Config):
    """``Σ_c q[i,c] · 2**e[c] · W[c, j]`` per tile straight from the numerics (no schedule)."""
    W = np.asarray(W, dtype=np.int64)
    C = W.shape[0]
    q = qz.q.reshape(ntiles, C, cfg.tile)
    e = qz.e.reshape(ntiles, C)
    return [(q[t] << e[t][:, None]).T @ W for t in range(ntiles)]


def shift_counts(groups):
    """The paper's shift counts: previous group's exponent minus this one, reset (0) at each tile."""
    out, prev = [], None
    for g in groups:
        out.append(0 if g.first or prev is None else prev - g.exp)
        prev = g.exp
    return out
