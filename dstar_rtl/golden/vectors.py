"""Test-vector builders shared by the Amaranth tests, the cocotb testbenches and the benchmarks.

Each builder returns the weight block, the packed input beats and the packed drain beats the
golden model expects, so a harness only moves integers and compares them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.layouts import baseline_group_layout, drain_layout, pack
from dstar_rtl.golden.schedule import execute, schedule_matrix

__all__ = ["Workload", "random_differences", "random_weights", "exponent_sweep",
           "random_group_stream", "QPUWorkload", "qpu_workload", "qpu_workload_from_tiles",
           "mpu_workload", "baseline_workload", "precision_differences", "precision_workload",
           "drain_words"]


@dataclass
class Workload:
    W: np.ndarray            # (channels, cols) weights for the buffer
    words: list              # packed input beats
    expected: list           # packed drain beats
    groups_per_tile: list    # input beats per tile
    accs: list               # (T, cols) expected accumulators per tile


def random_differences(rng, cfg: Config, tokens: int, channels: int, kind: str = "mixed"):
    """Differences ``Δx`` in the ``dx_width`` range that exercise every precision and exponent.

    ``kind``: ``"mixed"`` (per-channel random magnitude, some zero channels), ``"zero"``,
    ``"max"`` (extremes of the range) or ``"outlier"`` (one large value per channel).
    """
    lim = 1 << (cfg.dx_width - 1)
    if kind == "zero":
        return np.zeros((tokens, channels), np.int64)
    if kind == "max":
        return rng.choice(np.array([-lim, lim - 1, -lim + 1, 0]), size=(tokens, channels))
    if kind == "outlier":
        dx = rng.integers(-4, 5, size=(tokens, channels))
        rows = rng.integers(0, tokens, size=channels)
        dx[rows, np.arange(channels)] = rng.integers(-lim, lim, size=channels)
        return dx
    shift = rng.integers(0, cfg.dx_width, size=(1, channels))
    dx = rng.integers(-lim, lim, size=(tokens, channels)) >> shift
    dx[:, rng.random(channels) < 0.15] = 0
    return dx


def random_weights(cfg: Config, rng, channels: int):
    """Symmetric signed weights of ``weight_width`` bits, extremes included."""
    wmax = (1 << (cfg.weight_width - 1)) - 1
    W = rng.integers(-wmax, wmax + 1, size=(channels, cfg.cols))
    W.flat[rng.integers(0, W.size, size=max(1, W.size // 8))] = wmax
    W.flat[rng.integers(0, W.size, size=max(1, W.size // 8))] = -wmax
    return W


def drain_words(cfg: Config, accs, flags=None, baseline: bool = False):
    """Packed drain beats of a list of (T, cols) accumulator matrices (rows in order)."""
    lay = drain_layout(cfg, baseline)
    words = []
    for t, acc in enumerate(accs):
        for i in range(cfg.rows):
            rec = dict(acc=acc[i], row=i, last=int(i == cfg.rows - 1))
            if cfg.overflow_detect and not baseline:
                rec["ovf"] = flags[t][i].astype(np.int64)
            words.append(pack(lay, rec))
    return words


def mpu_workload(cfg: Config, rng, tiles: int = 3, channels: int | None = None,
                 kinds=("mixed",), base_log2: int | None = None) -> Workload:
    """Random tiles through the golden schedule: the group stream and the expected drain."""
    C = channels or int(rng.integers(1, min(cfg.max_reduction, 3 * cfg.sort_n) + 1))
    W = random_weights(cfg, rng, C)
    return _mpu_tiles(cfg, W, (random_differences(rng, cfg, cfg.tile, C, kinds[t % len(kinds)])
                               for t in range(tiles)), base_log2)


def _mpu_tiles(cfg: Config, W, dxs, base_log2: int | None = None) -> Workload:
    """The MPU's workload of the difference tiles ``dxs`` (each ``T × channels``) against
    weights ``W``: each tile quantized and scheduled by golden, its groups packed, its drain
    from :func:`golden.schedule.execute`."""
    words, gpt, accs, flags = [], [], [], []
    for dx in dxs:
        _, ts = schedule_matrix(dx, cfg, base_log2)
        groups = ts[0].groups
        words += [g.word(cfg) for g in groups]
        gpt.append(len(groups))
        a, f = execute(groups, W, cfg)
        accs += a
        flags += f
    return Workload(W=W, words=words, expected=drain_words(cfg, accs, flags), groups_per_tile=gpt,
                    accs=accs)


def precision_differences(rng, cfg: Config, tokens: int, channels: int, bits: int,
                          base_log2: int | None = None):
    """Differences whose every sub-channel quantizes at ``bits`` (2, 4, 6 or 8; exponent 0):
    each channel's largest magnitude ``M`` (in steps of ``2**r0``) drawn from the band of
    precision ``bits`` (numerics §2.2: above the next lower precision's threshold, at most this
    one's), one element at it and the rest uniform within it. Raises ValueError for a
    precision that is not one of :data:`golden.config.PRECISIONS`."""
    from dstar_rtl.golden.config import PRECISIONS
    from dstar_rtl.golden.fmdq import quantize_subchannels

    if bits not in PRECISIONS:
        raise ValueError(f"bits must be one of {PRECISIONS}, not {bits}")
    thr = cfg.thresholds
    r0 = cfg.act_frac - (cfg.base_log2 if base_log2 is None else base_log2)
    lo = thr[bits - 2] if bits > 2 else 0
    M = rng.integers(lo + 1, thr[bits] + 1, size=channels)
    dx = rng.integers(-M, M + 1, size=(tokens, channels)) << r0
    dx[rng.integers(0, tokens, size=channels), np.arange(channels)] = (
        M * rng.choice([-1, 1], size=channels)) << r0
    b = quantize_subchannels(dx.T, cfg, base_log2).b
    if not (b == bits).all():
        raise RuntimeError(f"a sub-channel quantized at {sorted(set(b.tolist()))} bits, not "
                           f"{bits}: the thresholds' bands and the quantizer disagree")
    return dx


def precision_workload(cfg: Config, rng, bits: int, tiles: int, channels: int) -> Workload:
    """:func:`mpu_workload`'s tiles with every sub-channel at ``bits``
    (:func:`precision_differences`); the weights are drawn first, as
    :func:`baseline_workload` draws them, so the same ``rng`` seed gives both the same ``W``."""
    W = random_weights(cfg, rng, channels)
    return _mpu_tiles(cfg, W, (precision_differences(rng, cfg, cfg.tile, channels, bits)
                               for _ in range(tiles)))


def baseline_workload(cfg: Config, rng, tiles: int = 3, channels: int | None = None) -> Workload:
    """Random INT8 tiles for the baseline array: one beat per input channel."""
    C = channels or int(rng.integers(1, min(cfg.max_reduction, 24) + 1))
    W = random_weights(cfg, rng, C)
    lay = baseline_group_layout(cfg)
    words, accs = [], []
    half = 1 << (cfg.weight_width - 1)
    for _ in range(tiles):
        A = rng.integers(-half, half, size=(cfg.tile, C))
        for c in range(C):
            words.append(pack(lay, dict(act=A[:, c], channel=c, first=int(c == 0),
                                        last=int(c == C - 1))))
        accs.append(A @ W)
    return Workload(W=W, words=words, expected=drain_words(cfg, accs, baseline=True),
                    groups_per_tile=[C] * tiles, accs=accs)


def exponent_sweep(cfg: Config, rng, tokens: int | None = None):
    """Differences whose channel ``k`` gets PoT exponent ``e = k`` for every ``k <= e_max`` when
    quantized with the finest legal base (``base_log2 = B_max``, so ``r0 = r0_min``).

    Returns ``(dx, base_log2)``; other rows hold smaller random values of either sign.
    """
    T = tokens or cfg.tile
    lim = (1 << (cfg.dx_width - 1)) - 1
    r0 = cfg.r0_min
    C = cfg.e_max + 1
    dx = np.zeros((T, C), np.int64)
    for k in range(C):
        amax = 127 << (r0 + k) if k < cfg.e_max else lim
        amax = min(amax, lim)
        col = rng.integers(-amax, amax + 1, size=T)
        col[rng.integers(0, T)] = amax * (1 if rng.random() < 0.5 else -1)
        dx[:, k] = col
    return dx, cfg.B_max


def random_group_stream(cfg: Config, rng, groups_per_tile, channels: int | None = None):
    """Arbitrary (not schedule-shaped) group streams: random lanes, digits, signs and exponents
    in any order; tiles of the given group counts, over ``channels`` input channels (default
    8, or ``max_reduction`` when the weight buffer holds fewer). Returns a :class:`Workload`."""
    if channels is None:
        channels = min(8, cfg.max_reduction)
    if not 1 <= channels <= cfg.max_reduction:
        raise ValueError(f"channels must be in [1, max_reduction = {cfg.max_reduction}], "
                         f"not {channels}")
    from dstar_rtl.golden.schedule import Group, digit_values

    L, T = cfg.lanes, cfg.tile
    W = random_weights(cfg, rng, channels)
    words, groups = [], []
    for G in groups_per_tile:
        for k in range(G):
            valid = (rng.random(L) < 0.8).astype(np.int64)
            if cfg.digits == "booth":
                signed = valid.copy()
                raw = (rng.integers(-2, 3, size=(T, L)) & 7) * valid
            else:
                signed = rng.integers(0, 2, size=L) * valid
                raw = rng.integers(0, 4, size=(T, L)) * valid
            digits = digit_values(raw, signed, cfg.digits)
            g = Group(exp=int(rng.integers(0, cfg.max_exp + 1)) if cfg.alignment != "horner" else 0,
                      channel=rng.integers(0, channels, size=L) * valid, signed=signed,
                      valid=valid, digits=digits, k=np.zeros(L, np.int64),
                      first=k == 0, last=k == G - 1, digit_width=cfg.digit_width)
            groups.append(g)
            words.append(g.word(cfg))
    accs, flags = execute(groups, W, cfg)
    return Workload(W=W, words=words, expected=drain_words(cfg, accs, flags),
                    groups_per_tile=list(groups_per_tile), accs=accs)


@dataclass
class QPUWorkload:
    words: list          # packed sub-channel beats (golden.layouts.subchannel_layout)
    groups: list         # packed group records the QPU must emit, in order
    recon: list          # packed reconstruction beats, one per sub-channel
    counters: dict       # golden counter values after the whole workload
    tiles: list          # (dx, TileSchedule) per tile
    group_objs: list     # golden Group objects, in order


def qpu_workload(cfg: Config, rng, tiles: int = 3, channels: int | None = None,
                 kinds=("mixed",), base_log2: int | None = None, thr=None) -> QPUWorkload:
    """Random tiles of differences and everything the QPU must produce for them."""
    dxs = []
    for t in range(tiles):
        C = channels or int(rng.integers(1, min(cfg.max_reduction, 3 * cfg.sort_n) + 1))
        kind = kinds[t % len(kinds)]
        if kind == "sweep":
            dx, _ = exponent_sweep(cfg, rng)
            dx = dx[:, :C] if dx.shape[1] >= C else np.concatenate(
                [dx, random_differences(rng, cfg, cfg.tile, C - dx.shape[1])], axis=1)
        else:
            dx = random_differences(rng, cfg, cfg.tile, C, kind)
        dxs.append(dx)
    return qpu_workload_from_tiles(cfg, dxs, base_log2, thr)


def qpu_workload_from_tiles(cfg: Config, dxs, base_log2: int | None = None,
                            thr=None) -> QPUWorkload:
    """Everything the QPU must produce for a sequence of (T, C) difference tiles."""
    from dstar_rtl.golden.fmdq import dequant
    from dstar_rtl.golden.layouts import recon_layout, subchannel_layout
    from dstar_rtl.golden.schedule import Counters

    qcfg = cfg if thr is None else cfg.replace(thr=tuple(thr))
    sl, rl = subchannel_layout(cfg), recon_layout(cfg)
    out = QPUWorkload([], [], [], {}, [], [])
    total = Counters()
    for dx in dxs:
        C = dx.shape[1]
        qz, ts = schedule_matrix(dx, qcfg, base_log2)
        rec = dequant(qz)
        for c in range(C):
            out.words.append(pack(sl, dict(u=dx[:, c], last=int(c == C - 1))))
            out.recon.append(pack(rl, dict(value=rec[c])))
        out.groups += [g.word(cfg) for g in ts[0].groups]
        out.group_objs += ts[0].groups
        total.merge(ts[0].counters)
        out.tiles.append((dx, ts[0]))
    out.counters = dict(total.values)
    return out
