"""The FMDQ schedule (numerics §2.3, 2.4): the exact stream of slices, groups and metadata the
hardware sees, and an integer executor of that stream that models the output-stationary MPU.

Pipeline for one token tile (T rows × C input channels of quantized integers ``q``):

1. every sub-channel with ``b > 0`` is written in two's complement on ``b`` bits and cut into
   ``b/2`` digits, least significant first; digit k has exponent ``e + 2k``. With
   ``cfg.digits == "slice"`` the digits are 2-bit slices, the top one signed {-2..1}, the others
   unsigned {0..3} (:func:`slice_digits`); with ``"booth"`` they are radix-4 Booth digits
   ``q[2k] + q[2k-1] - 2·q[2k+1]`` (``q[-1] = 0``), every one signed in {-2..2}
   (:func:`booth_digits`). Both satisfy ``q == Σ_k d_k · 4**k``, so every dot product is the same;
2. a column whose T digits are all zero is dropped (``cfg.drop_zero_columns``; Booth's zero
   columns are different ones: e.g. ``q = -1`` is one Booth digit, 2 slices);
3. the kept descriptors ``(exp, signed, channel, k)``, in channel-then-k order, fill chunks of
   ``sort_n``; the last chunk is padded with invalid entries;
4. each chunk is sorted by the bitonic network of :mod:`golden.bitonic` on the key (valid, exp);
5. consecutive valid descriptors of equal exponent pack into groups of ``lanes``; a group never
   spans two exponents or tiles, nor two chunks unless ``cfg.open_groups`` lets a partial group
   wait for the next run of its exponent (:func:`pack_tile`); a tile with no kept column emits
   one all-invalid group.

With ``cfg.packer == "bins"`` steps 3-5 are instead the exponent bins of :func:`bin_tile`: no
chunks and no sort; each descriptor, in channel-then-k order, joins the one bin its exponent
maps to (:func:`bin_index`), a bin holding another exponent is emitted first, and a full bin is
emitted at once; the bins still open at the tile's end are emitted in bin order. The groups
differ from the sorted stream's only in which equal-exponent columns share a group and in their
order, so every dot product is the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dstar_rtl.golden.bitonic import apply_network, sort_key
from dstar_rtl.golden.config import Config
from dstar_rtl.golden.fmdq import Quantized, quantize_tile_matrix
from dstar_rtl.golden.layouts import COUNTER_NAMES, group_layout, pack, unpack

__all__ = ["slice_digits", "booth_digits", "value_digits", "digit_values", "Group", "Counters",
           "piece_bounds", "reduction_pieces", "TileSchedule", "schedule_tile", "schedule_matrix",
           "precision_counters",
           "quantize_counted", "Accumulator", "execute",
           "slice_pe_execute", "int8_pe_execute", "reference_product", "exp_steps", "shift_counts",
           "PACKINGS", "packing_groups", "pack_tile", "bin_index", "bin_tile", "bin_events",
           "bin_cycles"]

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
        top = (b // 2 - 1) == k
        d = digit_values(qb >> (2 * k), top[:, None])
        out[:, k, :] = np.where((k < b // 2)[:, None], d, 0)
    return out


def booth_digits(q, b):
    """Radix-4 Booth digits of ``q`` (shape (S, T)) on ``b`` bits (shape (S,)): int64 (S, 4, T).

    Digit k is ``q[2k] + q[2k-1] - 2·q[2k+1]`` over the bits of ``q`` in two's complement
    (``q[-1] = 0``), in {-2..2}; digits ``k >= b/2`` are zero (``q`` fits ``b`` signed bits, so
    the sign-extended bits above make them 0 anyway). ``q == Σ_k d_k · 4**k`` exactly: ``b/2``
    digits cover a signed ``b``-bit value (only an unsigned one would need a digit more).
    """
    q = np.asarray(q, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    S, T = q.shape
    out = np.zeros((S, 4, T), dtype=np.int64)
    for k in range(4):
        lo = (q >> (2 * k - 1)) & 1 if k else np.zeros_like(q)
        d = ((q >> (2 * k)) & 1) + lo - 2 * ((q >> (2 * k + 1)) & 1)
        out[:, k, :] = np.where((k < b // 2)[:, None], d, 0)
    return out


def value_digits(q, b, code: str = "slice"):
    """The digits of ``cfg.digits == code``: :func:`slice_digits` or :func:`booth_digits`."""
    if code == "booth":
        return booth_digits(q, b)
    if code == "slice":
        return slice_digits(q, b)
    raise ValueError(f"digit code must be 'slice' or 'booth', not {code!r}")


def digit_values(raw, signed, code: str = "slice"):
    """Values of raw digit patterns, elementwise. ``"slice"``: 2-bit patterns (taken mod 4),
    unsigned {0..3}, or signed {-2..1} where ``signed`` is set (a sub-channel's top digit).
    ``"booth"``: 3-bit two's-complement patterns (taken mod 8), {-2..2} (``signed`` is ignored:
    every Booth digit is signed). This is how a slice PE reads the ``d``/``s`` pair of a lane."""
    if code == "booth":
        raw = np.asarray(raw, dtype=np.int64) & 7
        return np.where(raw >= 4, raw - 8, raw)
    raw = np.asarray(raw, dtype=np.int64) & 3
    return np.where(np.asarray(signed, dtype=bool) & (raw >= 2), raw - 4, raw)


@dataclass
class Group:
    """One lane group: what enters the MPU in one cycle.

    ``digits`` is (T, lanes) of signed digit values; padded lanes hold zero everywhere.
    ``k`` (slice index per lane) is kept for inspection; it is not part of the stream record.
    ``digit_width`` is the record's bits per digit (``cfg.digit_width``: 2 slice, 3 Booth).
    """

    exp: int
    channel: np.ndarray
    signed: np.ndarray
    valid: np.ndarray
    digits: np.ndarray
    k: np.ndarray
    first: bool = False
    last: bool = False
    digit_width: int = 2

    def record(self) -> dict:
        """Field values of :func:`golden.layouts.group_layout` (digits as raw ``digit_width``-bit
        patterns)."""
        return dict(digits=self.digits & ((1 << self.digit_width) - 1), channel=self.channel,
                    signed=self.signed, valid=self.valid, exp=self.exp, first=int(self.first),
                    last=int(self.last))

    def word(self, cfg: Config) -> int:
        return pack(group_layout(cfg), self.record())

    @classmethod
    def from_word(cls, cfg: Config, word: int) -> "Group":
        """Inverse of :meth:`word` (a GMEM row back from DRAM); ``k``, not in the record, is
        0."""
        r = unpack(group_layout(cfg), word)
        return cls(exp=int(r["exp"]), channel=r["channel"], signed=r["signed"],
                   valid=r["valid"], digits=digit_values(r["digits"], r["signed"], cfg.digits),
                   k=np.zeros(cfg.lanes, np.int64), first=bool(r["first"]),
                   last=bool(r["last"]), digit_width=cfg.digit_width)


@dataclass
class Counters:
    """QPU statistics counters (numerics §2.3): 32-bit, saturating."""

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
    #: Per chunk, its runs of equal exponent in the sorted order: ``[(exp, valid descriptors)]``
    #: (what :func:`packing_groups` repacks).
    chunk_runs: list = field(default_factory=list)
    #: With exponent bins, the cycles the bins take the tile (:func:`bin_cycles`); else None.
    packer_cycles: int | None = None


def _chunk_runs(keys, idx, exp_sorted, cfg):
    """One sorted chunk's runs of equal exponent: ``[(exp, descriptor indices)]``, in order."""
    valid = keys >> cfg.exp_width
    out = []
    pos = 0
    n = len(keys)
    while pos < n and valid[pos]:
        end = pos
        while end < n and valid[end] and exp_sorted[end] == exp_sorted[pos]:
            end += 1
        out.append((int(exp_sorted[pos]), list(idx[pos:end])))
        pos = end
    return out


def pack_tile(chunk_runs, cfg):
    """The packer (:class:`rtl.packer.Packer`) over one tile's sorted chunks: the lane groups as
    ``[(exp, descriptor indices)]`` in stream order.

    The packer reads a chunk one window at a time. A window starts at a run of exponent ``e``;
    when one of the ``cfg.open_groups`` open slots holds a partial group of ``e`` (``m``
    descriptors), the window's group is those ``m`` in lanes ``0..m-1`` followed by up to
    ``lanes - m`` descriptors of the run, and the slot is freed. A full group is emitted. A
    partial one (its run ends in the window) is emitted too in the tile's last chunk, or when no
    slot is free; otherwise it is stored, without output, in the slot it came from or else the
    free slot of lowest index. After the tile's last chunk the slots still open are emitted in
    slot order. With ``open_groups == 0`` a group never spans two chunks.
    """
    L, K = cfg.lanes, cfg.open_groups
    slots = [None] * K                 # (exp, descriptor indices) or None
    out = []
    for c, runs in enumerate(chunk_runs):
        last_chunk = c == len(chunk_runs) - 1
        for e, members in runs:
            pos = 0
            while pos < len(members):
                s = next((i for i, v in enumerate(slots) if v is not None and v[0] == e), None)
                held = slots[s][1] if s is not None else []
                if s is not None:
                    slots[s] = None
                take = members[pos:pos + L - len(held)]
                pos += len(take)
                group = held + take
                free = s if s is not None else next(
                    (i for i, v in enumerate(slots) if v is None), None)
                if len(group) < L and not last_chunk and free is not None:
                    slots[free] = (e, group)
                else:
                    out.append((e, group))
    out.extend(v for v in slots if v is not None)
    return out


def bin_index(exp, bins: int):
    """The bin of exponent ``exp`` among ``bins`` (a power of two >= 4): ``(exp >> 1) + (exp & 1)
    · bins / 2`` modulo ``bins``. A sub-channel's columns have exponents ``e, e + 2, e + 4,
    e + 6``, so they always fall in four different bins; with 8 bins the exponents 0..7 have
    one bin each."""
    return ((exp >> 1) + (exp & 1) * (bins // 2)) % bins


def bin_events(exps, cfg: Config) -> tuple:
    """The exponent bins (``cfg.packer == "bins"``, :class:`rtl.binner.Binner`) over one tile's
    descriptors in channel-then-k order (``exps``: their exponents): ``(groups, triggers)``,
    the lane groups as ``[(exp, descriptor indices)]`` in stream order and, per group, the
    index of the descriptor whose arrival sent it (``None``: sent at the tile's end).

    Each descriptor goes to bin :func:`bin_index` of its exponent among ``cfg.pack_bins``. A bin
    that holds another exponent is emitted first (partial) and starts again with the
    descriptor; a bin that reaches ``lanes`` descriptors is emitted at once. After the tile's
    last descriptor the bins still open are emitted in bin order."""
    K, L = cfg.pack_bins, cfg.lanes
    bins = [None] * K                  # (exp, descriptor indices) or None
    out, why = [], []
    for i, x in enumerate(exps):
        s = bin_index(int(x), K)
        if bins[s] is not None and bins[s][0] != x:
            out.append(bins[s])
            why.append(i)
            bins[s] = None
        if bins[s] is None:
            bins[s] = (int(x), [])
        bins[s][1].append(i)
        if len(bins[s][1]) == L:
            out.append(bins[s])
            why.append(i)
            bins[s] = None
    rest = [v for v in bins if v is not None]
    return out + rest, why + [None] * len(rest)


def bin_tile(exps, cfg: Config) -> list:
    """The groups of :func:`bin_events`."""
    return bin_events(exps, cfg)[0]


def bin_cycles(channels, triggers, C: int) -> int:
    """Cycles the exponent bins (:class:`rtl.binner.Binner`) take one tile of ``C``
    sub-channels, output always ready, from taking its first sub-channel to being ready for the
    next tile's: a sub-channel takes a cycle per group its columns send and one more for its
    columns after the last such one (one cycle when it sends none); then a cycle per bin still
    open at the tile's end and one for the end. ``channels``: each descriptor's sub-channel, in
    channel-then-k order; ``triggers``: :func:`bin_events`'."""
    channels = np.asarray(channels, dtype=np.int64)
    sends = np.zeros(C, np.int64)
    tail = np.ones(C, np.int64)        # a cycle for the columns after the last group sent
    last = {int(c): i for i, c in enumerate(channels)}   # each sub-channel's last column
    for t in triggers:
        if t is not None:
            c = int(channels[t])
            sends[c] += 1
            if last[c] == t:
                tail[c] = 0
    return int((sends + tail).sum()) + sum(t is None for t in triggers) + 1


def schedule_tile(q, b, e, cfg: Config) -> TileSchedule:
    """Group stream of one tile. ``q``: (C, T) quantized integers; ``b``, ``e``: (C,)."""
    q = np.asarray(q, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    e = np.asarray(e, dtype=np.int64)
    C, T = q.shape
    if C > cfg.max_reduction:   # numerics §2.1: refused (channel field, Horner order, acc_width)
        raise ValueError(f"a tile of {C} input channels exceeds max_reduction = "
                         f"{cfg.max_reduction}")
    L = cfg.lanes
    ctr = precision_counters(b)
    digits = value_digits(q, b, cfg.digits)  # (C, 4, T)
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
    if cfg.digits == "booth":   # every Booth digit is signed; the flag is kept, always 1
        sgn = np.ones(len(ch), np.int64)
    else:
        sgn = (kk == b[ch] // 2 - 1).astype(np.int64) if len(ch) else np.zeros(0, np.int64)

    groups, chunk_runs = [], []
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
        runs_of = [_chunk_runs(keys[c], idx_s[c], ex_s[c], cfg) for c in range(nchunks)]
        chunk_runs = [[(e, len(members)) for e, members in runs] for runs in runs_of]
        if cfg.packer == "bins":
            packed, trig = bin_events(exp, cfg)
        else:
            packed = pack_tile(runs_of, cfg)
        for gexp, members in packed:
            members = np.asarray(members, dtype=np.int64)
            m = len(members)
            g = Group(exp=gexp,
                      channel=np.zeros(L, np.int64), signed=np.zeros(L, np.int64),
                      valid=np.zeros(L, np.int64), digits=np.zeros((T, L), np.int64),
                      k=np.zeros(L, np.int64), digit_width=cfg.digit_width)
            g.channel[:m] = ch[members]
            g.signed[:m] = sgn[members]
            g.valid[:m] = 1
            g.k[:m] = kk[members]
            g.digits[:, :m] = digits[ch[members], kk[members], :].T
            groups.append(g)
    if not groups:
        groups.append(Group(exp=0, channel=np.zeros(L, np.int64), signed=np.zeros(L, np.int64),
                            valid=np.zeros(L, np.int64), digits=np.zeros((T, L), np.int64),
                            k=np.zeros(L, np.int64), digit_width=cfg.digit_width))
    groups[0].first = True
    groups[-1].last = True
    ctr.add("groups", len(groups))
    ctr.add("padded_lanes", sum(L - int(g.valid.sum()) for g in groups))
    # The paper's shift counts as statistics: groups whose exponent differs from the previous
    # group's of the tile, and the sum of |differences| (a Horner PE's total shift distance).
    sc = shift_counts(groups)
    ctr.add("shifts", sum(1 for v in sc if v))
    ctr.add("shift_amount", sum(abs(v) for v in sc))
    cycles = None
    if cfg.packer == "bins":        # no kept column: every sub-channel a cycle, then the end
        cycles = bin_cycles(ch, trig if nchunks else [], C)
    return TileSchedule(groups=groups, counters=ctr, chunks=nchunks, chunk_runs=chunk_runs,
                        packer_cycles=cycles)


#: Packings :func:`packing_groups` counts: ``chunk`` (the schedule's: a group never spans two
#: chunks), ``snake`` (every other chunk read in reverse, ascending, and the partial group that
#: ends one chunk refilled by the next chunk's first run when its exponent is the same: one
#: group of buffering), ``tile`` (the partial groups of each exponent merged over the whole
#: tile: one partial group buffered per exponent).
PACKINGS = ("chunk", "snake", "tile")


def packing_groups(chunk_runs, lanes: int, packing: str = "chunk") -> int:
    """Groups one tile takes under ``packing`` (:data:`PACKINGS`), from its
    :attr:`TileSchedule.chunk_runs`; an empty tile takes one (all-invalid) group. ``"chunk"``
    is the schedule's own count with ``cfg.open_groups == 0`` (``len(TileSchedule.groups)``)."""
    if packing not in PACKINGS:
        raise ValueError(f"packing must be one of {PACKINGS}, not {packing!r}")
    if packing == "tile":
        total = {}
        for runs in chunk_runs:
            for e, n in runs:
                total[e] = total.get(e, 0) + n
        return max(1, sum(-(-n // lanes) for n in total.values()))
    groups, carry = 0, None            # carry: (exp, descriptors in the open partial group)
    for k, runs in enumerate(chunk_runs):
        if packing == "snake" and k % 2:
            runs = runs[::-1]
        for j, (e, n) in enumerate(runs):
            if packing == "snake" and j == 0 and carry and carry[0] == e:
                n += carry[1]
                groups -= 1            # the open group is refilled, not a new one
            groups += -(-n // lanes)
            last = (e, n % lanes)
        carry = last if last[1] else None
    return max(1, groups)


def schedule_matrix(dx, cfg: Config, base_log2: int | None = None, r0: int | None = None):
    """Quantize and schedule a (tokens, channels) difference (one QUANT per tile of T tokens;
    ``base_log2`` and ``r0`` as in :func:`golden.fmdq.quantize_subchannels`).

    Returns ``(qz, tiles)`` with ``qz`` the :class:`~golden.fmdq.Quantized` sub-channels in
    (tile, channel) order and ``tiles`` a list of :class:`TileSchedule`.
    """
    qz, ntiles = quantize_tile_matrix(dx, cfg, base_log2, r0)
    C = np.asarray(dx).shape[1]
    out = []
    for t in range(ntiles):
        sl = slice(t * C, (t + 1) * C)
        ts = schedule_tile(qz.q[sl], qz.b[sl], qz.e[sl], cfg)
        ts.counters.add("saturated", np.count_nonzero(qz.saturated[sl]))
        out.append(ts)
    return qz, out


def precision_counters(b, saturated=None) -> Counters:
    """The counters that depend only on the sub-channels' precisions ``b`` (``subchannels``,
    ``subchannels_b<b>``, ``subchannels_zero``) and, given the clip flags, ``saturated``: the
    part of :func:`schedule_tile`'s counters (and :func:`schedule_matrix`'s ``saturated``) that
    a layer built without the schedule still counts (``groups``, ``dropped_columns`` and the
    rest stay 0)."""
    b = np.asarray(b)
    ctr = Counters()
    ctr.add("subchannels", b.size)
    for bb in (2, 4, 6, 8):
        ctr.add(f"subchannels_b{bb}", np.count_nonzero(b == bb))
    ctr.add("subchannels_zero", np.count_nonzero(b == 0))
    if saturated is not None:
        ctr.add("saturated", np.count_nonzero(saturated))
    return ctr


def piece_bounds(cin: int, pieces: int) -> list:
    """The ``(first channel, channels)`` of each of the ``pieces`` reduction pieces (``1 <=
    pieces <= cin``): ``floor`` or ``ceil(cin / pieces)`` channels each, in order."""
    return [(k * cin // pieces, (k + 1) * cin // pieces - k * cin // pieces)
            for k in range(pieces)]


def reduction_pieces(cin: int, cfg: Config) -> int:
    """The fewest pieces of at most ``max_reduction`` channels a reduction of ``cin`` input
    channels runs in (numerics §2.5): ``ceil(cin / max_reduction)``."""
    return max(1, -(-int(cin) // cfg.max_reduction))


def quantize_counted(dx, cfg: Config, base_log2: int | None = None, r0: int | None = None,
                     schedule: bool = True):
    """:func:`schedule_matrix` with the tiles' counters summed: ``(qz, tiles, ntiles,
    counters)``. ``schedule=False`` quantizes the same sub-channels without building the group
    stream (``tiles`` None; only :func:`precision_counters`), for runs that need the integers
    and the precision mix but not the stream."""
    if not schedule:
        qz, nt = quantize_tile_matrix(dx, cfg, base_log2, r0)
        return qz, None, nt, precision_counters(qz.b, qz.saturated)
    qz, tiles = schedule_matrix(dx, cfg, base_log2, r0)
    ctr = Counters()
    for ts in tiles:
        ctr.merge(ts.counters)
    return qz, tiles, len(tiles), ctr


def _wrap(x, width):
    if width >= 64:
        return x   # the int64 model register is no wider: wrapping to `width` bits is the identity
    half = 1 << (width - 1)
    return ((x + half) & ((1 << width) - 1)) - half


class Accumulator:
    """The accumulator of output-stationary PEs (numerics §2.1, 2.4), elementwise over ``shape``:
    the one statement of what a PE does with its operand beats, used by :func:`execute` (the
    array) and by :func:`slice_pe_execute` / :func:`int8_pe_execute` (one PE).

    :meth:`step` is one valid beat: ``part``, the beat's unaligned partial sum (``Σ d · w`` over
    the lanes of a slice PE, ``a · w`` for the INT8 PE), the group's absolute exponent ``exp``
    and the tile markers. A beat marked ``first`` restarts the sum and the sticky flag.

    - ``horner=False`` (product-shift): ``acc = fit(acc + (part << exp))``;
    - ``horner=True``: ``acc = fit((acc << (prev_exp - exp)) + part)`` with ``prev_exp`` the
      previous beat's exponent (the shift is 0 at ``first``; exponents must not increase within
      a tile), and the final value is ``fit(acc << exp)``.

    ``fit`` wraps to ``width`` bits (a modular two's-complement register), or with ``saturate``
    clips to the ``width``-bit range and sets the sticky overflow flag. At a beat marked ``last``
    :meth:`step` returns ``(value, ovf)``, what the PE copies into its shadow register, else None.
    """

    def __init__(self, width: int, shape=(), *, horner: bool = False, saturate: bool = False):
        self.width = int(width)
        self.horner = bool(horner)
        self.saturate = bool(saturate)
        self.lo, self.hi = -(1 << (self.width - 1)), (1 << (self.width - 1)) - 1
        self.acc = np.zeros(shape, np.int64)
        self.ovf = np.zeros(shape, bool)
        self.prev_exp = 0

    @classmethod
    def slice_pe(cls, cfg: Config, shape=()) -> "Accumulator":
        """The accumulator of :class:`rtl.pe.SlicePE` under ``cfg``."""
        return cls(cfg.acc_bits, shape, horner=cfg.alignment == "horner",
                   saturate=cfg.overflow_detect)

    @classmethod
    def int8_pe(cls, cfg: Config, shape=()) -> "Accumulator":
        """The accumulator of :class:`rtl.pe.Int8PE` (the baseline's: wraps, no flag)."""
        return cls(cfg.baseline_acc_width, shape)

    def _fit(self, x):
        if self.saturate:
            self.ovf |= (x < self.lo) | (x > self.hi)
            return np.clip(x, self.lo, self.hi)
        return _wrap(x, self.width)

    def step(self, part, exp: int = 0, first: bool = False, last: bool = False):
        part = np.asarray(part, dtype=np.int64)
        exp = int(exp)
        if first:
            self.acc = np.zeros_like(self.acc)
            self.ovf = np.zeros_like(self.ovf)
            self.prev_exp = exp
        if self.horner:
            if exp > self.prev_exp:
                raise ValueError(f"Horner alignment needs non-increasing exponents within a "
                                 f"tile, got {exp} after {self.prev_exp}")
            self.acc = self._fit((self.acc << (self.prev_exp - exp)) + part)
        else:
            self.acc = self._fit(self.acc + (part << exp))
        self.prev_exp = exp
        if not last:
            return None
        value = self._fit(self.acc << exp) if self.horner else self.acc
        return value.copy(), self.ovf.copy()


def execute(groups, W, cfg: Config):
    """Integer executor of a group stream on the output-stationary array (numerics §2.4).

    ``W`` is (channels, cols) signed integers. Returns ``(accs, overflow)``: one (T, cols) int64
    accumulator matrix per tile (in stream order) and, per tile, a (T, cols) bool array of sticky
    overflow flags (all False unless ``cfg.overflow_detect``). PE (i, j) is one
    :class:`Accumulator` fed with ``Σ_lanes digits[i] · W[channel, j]`` (weight 0 on padded lanes).

    With the derived accumulator width the accumulator is a modular two's-complement register: the
    final sum always fits (numerics §2.1), so wrapping partial sums cancel and the result is exact.
    With ``overflow_detect`` every addition saturates and sets the PE's sticky flag.
    """
    W = np.asarray(W, dtype=np.int64)
    T, cols = cfg.rows, cfg.cols
    if W.ndim != 2 or len(W) == 0 or W.shape[1] > cols:
        raise ValueError(f"W must have shape (channels >= 1, <= {cols}), not {W.shape}")
    W = np.pad(W, ((0, 0), (0, cols - W.shape[1])))
    groups = list(groups)
    fast = _execute_wrapping(groups, W, cfg)
    if fast is not None:
        return fast
    acc = Accumulator.slice_pe(cfg, (T, cols))
    accs, flags = [], []
    for g in groups:
        w = np.where(g.valid[:, None].astype(bool), W[g.channel], 0)
        out = acc.step(g.digits @ w, g.exp, g.first, g.last)  # (T, cols)
        if out is not None:
            accs.append(out[0])
            flags.append(out[1])
    return accs, flags


def _execute_wrapping(groups: list, W, cfg: Config):
    """:func:`execute` without the beat-by-beat loop, when that gives the same result: a wrapping
    accumulator (no ``overflow_detect``) is a register modulo ``2**acc_bits``, so each tile's
    value is its beats' ``Σ part · 2**exp`` (for a Horner PE too: its shifts and its final
    ``<< exp`` are the same sum modulo the register) wrapped once. Only for a well-formed
    stream (the first beat marked ``first``, every tile ended by ``last`` before the next
    ``first``, Horner exponents not increasing within a tile); None otherwise, and the loop
    runs (and raises where it does)."""
    if cfg.overflow_detect or not groups:
        return None
    first = np.array([bool(g.first) for g in groups])
    last = np.array([bool(g.last) for g in groups])
    exp = np.array([int(g.exp) for g in groups], np.int64)
    open_ = np.cumsum(first) - np.cumsum(np.concatenate(([False], last[:-1])))
    if not first[0] or (open_ != 1).any() or not last[-1]:
        return None
    if cfg.alignment == "horner" and (np.diff(exp)[~first[1:]] > 0).any():
        return None
    if (exp < 0).any() or exp.max() > 40:
        return None
    valid = np.stack([g.valid for g in groups]).astype(bool)            # (G, L)
    w = np.where(valid[:, :, None], W[np.stack([g.channel for g in groups])], 0)  # (G, L, cols)
    digits = np.stack([g.digits for g in groups]).astype(np.int64)      # (G, T, L)
    part = np.einsum("gtl,glc->gtc", digits, w) << exp[:, None, None]
    starts = np.flatnonzero(first)
    sums = np.add.reduceat(part, starts, axis=0)
    width = cfg.acc_bits
    accs = [_wrap(x, width) for x in sums]
    return accs, [np.zeros(a.shape, bool) for a in accs]


def slice_pe_execute(digits, signed, w, exp, first, last, cfg: Config):
    """What one slice PE (:class:`rtl.pe.SlicePE`) computes for a stream of valid groups.

    ``digits``, ``signed``, ``w``: (G, lanes) raw digit patterns (``cfg.digit_width`` bits),
    their signed flags (:func:`digit_values` with ``cfg.digits``) and the lane weights (0 on padded
    lanes); ``exp``, ``first``, ``last``: (G,) the groups' absolute exponents and tile markers.
    Returns one ``(value, ovf)`` pair of Python ints per tile, in stream order. A Horner PE is also
    given each group's :func:`exp_steps` (``dexp``) by its array; this function derives it the same
    way.
    """
    part = (digit_values(digits, signed, cfg.digits) * np.asarray(w, dtype=np.int64)).sum(axis=1)
    acc = Accumulator.slice_pe(cfg)
    out = []
    for p, e, f, l in zip(part, exp, first, last):
        r = acc.step(p, e, bool(f), bool(l))
        if r is not None:
            out.append((int(r[0]), int(r[1])))
    return out


def int8_pe_execute(a, w, first, last, cfg: Config):
    """What one baseline PE (:class:`rtl.pe.Int8PE`) computes: ``acc += a · w`` on the
    baseline's accumulator width, wrapping. ``a``, ``w``, ``first``, ``last``: (G,) per valid
    beat. Returns the final value of each tile (Python ints), in stream order."""
    acc = Accumulator.int8_pe(cfg)
    out = []
    for p, f, l in zip(np.asarray(a, np.int64) * np.asarray(w, np.int64), first, last):
        r = acc.step(p, 0, bool(f), bool(l))
        if r is not None:
            out.append(int(r[0]))
    return out


def reference_product(qz: Quantized, ntiles: int, W, cfg: Config):
    """``Σ_c q[i,c] · 2**e[c] · W[c, j]`` per tile straight from the numerics (no schedule)."""
    W = np.asarray(W, dtype=np.int64)
    C = W.shape[0]
    q = qz.q.reshape(ntiles, C, cfg.tile)
    e = qz.e.reshape(ntiles, C)
    return [(q[t] << e[t][:, None]).T @ W for t in range(ntiles)]


def exp_steps(exp, first):
    """Each group's exponent step: the previous group's exponent minus its own, 0 at a tile's
    first group (``exp``, ``first``: per group). A Horner PE shifts its accumulator by it
    (``dexp``); the schedule counts them as the paper's shifts."""
    out, prev = [], None
    for e, f in zip(exp, first):
        out.append(0 if f or prev is None else int(prev) - int(e))
        prev = e
    return out


def shift_counts(groups):
    """The paper's shift counts: previous group's exponent minus this one, reset (0) at each
    tile."""
    return exp_steps([g.exp for g in groups], [g.first for g in groups])
