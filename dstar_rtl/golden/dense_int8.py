"""The INT8 core's numerics (numerics §2.8): dense layers on INT8 activations with one
power-of-two exponent per token tile, on the INT8 baseline array.

With ``cfg.datapath == "int8"`` the core runs the same programs as DSTAR's with the INT8 array
and an INT8 activation quantizer in place of the MPU and the QPU. Every linear layer is dense
(no ``x̂``, no running sum): each step ``y = requant(W · q(x))``.

**Quantizer** (one QUANT: the ``nch`` sub-channels of one token tile, ``T`` tokens each):

    e = smallest e >= 0 with rnd(max |x|, e) <= 127      over the whole tile (golden.vpu.kv_shift)
    q = rnd(x, e)                                        |q| <= 127, nothing clips

the rule of the K/V operands (numerics §2.6) over a tile. One group per sub-channel whose ``q``
is not all zero, in channel order: ``act`` the ``T`` values, ``channel``, ``valid = 1``, ``exp =
e``; the first marked ``first``, the last ``last``. A tile whose ``q`` is all zero emits one
group with ``valid = 0``, ``act`` zero, ``channel = 0``, ``first = last = 1``. The quantizer
reads the tile twice (the maximum, then the values).

**Product and requantization.** The array computes ``acc = Σ_c q[i, c] · W[c, j]`` (the
baseline PE, :func:`execute`), exact on ``baseline_acc_width`` bits. The value is ``acc · 2**e``
activation LSBs times the weight scale, so a dense layer requantizes with ``(m, sh) =
requant_params(s_w[j])`` and the shift ``sh - e`` (an attention product: ``sh - s - e`` with the
K/V shift ``s``). A shift below 0 is taken as 0. That is exact for a product without bias when
``mult_width >= act_width`` (the configuration requires it): with ``m >= 2**(mult_width-1)`` any
``acc != 0`` then saturates either way. A dense layer has a bias, so it is refused when it is
built if a channel with ``m > 0`` has ``sh < kv_e_max`` (the largest ``e`` of an act-format
tile).

**Counters** (the QPU's, :data:`golden.layouts.COUNTER_NAMES`): per sub-channel ``subchannels``
and either ``subchannels_b8`` (``q`` not all zero) or ``subchannels_zero``; ``groups`` per group
written; ``padded_lanes`` 1 for the group of an all-zero tile. The rest stay 0. The average
activation bits of :func:`models.dit_int_model.average_bits` are 8 on every non-zero sub-channel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dstar_rtl.golden import vpu
from dstar_rtl.golden.config import Config
from dstar_rtl.golden.fmdq import requant_params, requantize, rnd, to_fixed
from dstar_rtl.golden.layouts import int8_group_layout, pack, unpack
from dstar_rtl.golden.schedule import Accumulator, Counters

__all__ = ["Int8Group", "Int8Tile", "quantize_tile", "quantize_matrix", "execute",
           "DenseInt8Linear", "Int8StepResult", "requant_int8", "zero_group"]


@dataclass
class Int8Group:
    """One GMEM row of the INT8 core (:func:`golden.layouts.int8_group_layout`)."""

    act: np.ndarray          # (T,) INT8 activations of one channel
    channel: int
    exp: int
    valid: bool = True
    first: bool = False
    last: bool = False

    def record(self) -> dict:
        return dict(act=self.act, channel=self.channel, valid=int(self.valid), exp=self.exp,
                    first=int(self.first), last=int(self.last))

    def word(self, cfg: Config) -> int:
        return pack(int8_group_layout(cfg), self.record())

    @classmethod
    def from_word(cls, cfg: Config, word: int) -> "Int8Group":
        """Inverse of :meth:`word` (a GMEM row back from DRAM)."""
        r = unpack(int8_group_layout(cfg), word)
        return cls(act=r["act"], channel=int(r["channel"]), exp=int(r["exp"]),
                   valid=bool(r["valid"]), first=bool(r["first"]), last=bool(r["last"]))


def zero_group(cfg: Config) -> Int8Group:
    """The reset content of an INT8 GMEM row: all fields zero."""
    return Int8Group(act=np.zeros(cfg.tile, np.int64), channel=0, exp=0, valid=False)


@dataclass
class Int8Tile:
    """One quantized tile: ``q`` (nch, T) INT8, ``e`` its exponent, the group stream and the
    QPU counters it adds."""

    q: np.ndarray
    e: int
    groups: list
    counters: Counters


def quantize_tile(rows, cfg: Config) -> Int8Tile:
    """Quantize one tile given as its ``nch`` sub-channel rows (nch, T) of act-format integers
    (module docstring)."""
    x = np.asarray(rows, np.int64)
    if x.ndim != 2 or x.shape[1] != cfg.tile or not len(x):
        raise ValueError(f"a tile must be (nch >= 1, T = {cfg.tile}) sub-channel rows, not "
                         f"{x.shape}")
    lim = 1 << (cfg.act_width - 1)
    if x.min() < -lim or x.max() >= lim:
        raise ValueError(f"tile values exceed the {cfg.act_width}-bit act range")
    e = vpu.kv_shift(int(np.abs(x).max()))
    q = rnd(x, e)
    ctr = Counters()
    keep = [c for c in range(len(q)) if q[c].any()]
    ctr.add("subchannels", len(q))
    ctr.add("subchannels_b8", len(keep))
    ctr.add("subchannels_zero", len(q) - len(keep))
    if keep:
        groups = [Int8Group(act=q[c].copy(), channel=c, exp=e, first=i == 0,
                            last=i == len(keep) - 1) for i, c in enumerate(keep)]
    else:
        groups = [Int8Group(act=np.zeros(cfg.tile, np.int64), channel=0, exp=e, valid=False,
                            first=True, last=True)]
        ctr.add("padded_lanes", 1)
    ctr.add("groups", len(groups))
    return Int8Tile(q=q, e=e, groups=groups, counters=ctr)


def quantize_matrix(x, cfg: Config) -> list:
    """An (N, C) act-format tensor (N a multiple of T) → one :class:`Int8Tile` per token tile
    (its rows are the tile's C sub-channels)."""
    x = np.asarray(x, np.int64)
    T = cfg.tile
    N, C = x.shape
    if N % T:
        raise ValueError(f"N = {N} is not a multiple of the tile size T = {T}")
    return [quantize_tile(x[t * T:(t + 1) * T].T, cfg) for t in range(N // T)]


def execute(groups, W, cfg: Config) -> np.ndarray:
    """The INT8 array on one tile's group stream: ``acc[i, j] = Σ act[i] · W[channel, j]`` on
    the baseline's accumulator (:meth:`golden.schedule.Accumulator.int8_pe`); an invalid group
    adds 0. ``W`` (channels, <= cols). Returns (T, cols) int64."""
    W = np.asarray(W, np.int64)
    cols = cfg.cols
    W = np.pad(W, ((0, 0), (0, cols - W.shape[1])))
    acc = Accumulator.int8_pe(cfg, (cfg.tile, cols))
    out = None
    for g in groups:
        part = np.outer(g.act, W[g.channel]) if g.valid else np.zeros((cfg.tile, cols), np.int64)
        r = acc.step(part, 0, g.first, g.last)
        if r is not None:
            out = r[0]
    if out is None:
        raise ValueError("the group stream has no last group")
    return out


def requant_int8(acc, m, sh, e: int, bias, cfg: Config):
    """``y = sat(rnd(acc·m + b·2**sh', sh'))`` with ``sh' = max(0, sh - e)`` per channel (module
    docstring); returns ``(y, saturated count)``."""
    shift = np.maximum(np.asarray(sh, np.int64) - int(e), 0)
    return requantize(acc, m, shift, bias, cfg.act_width, cfg.sh_max)


@dataclass
class Int8StepResult:
    """What one step of a dense INT8 layer produced: ``tiles`` (:class:`Int8Tile` per token
    tile), ``acc`` (N, cout) the array's product, ``y`` (N, cout) the output, ``counters``."""

    y: np.ndarray
    acc: np.ndarray
    tiles: list
    counters: Counters


class DenseInt8Linear:
    """A dense linear layer of the INT8 core (module docstring): no state.

    ``W`` (in, out) INT8 and ``s_w`` (out,) from :func:`golden.differential.quantize_weights`,
    ``bias`` float (out,) or None. Attributes the compiler reads: ``W``, ``m``, ``sh``,
    ``bias_int``, ``B`` (None: the INT8 quantizer has no base), ``pieces`` (1: the INT8 core
    cannot split a reduction, its quantizer scales a whole tile by one exponent), ``name``.
    """

    B = None
    pieces = 1

    def __init__(self, W, s_w, cfg: Config, bias=None, name: str = ""):
        self.W = np.asarray(W, np.int64)
        self.cfg, self.name = cfg, name
        cin, cout = self.W.shape
        if cin > cfg.max_reduction:
            raise ValueError(f"layer {name!r} has {cin} input channels; max_reduction is "
                             f"{cfg.max_reduction}")
        self.s_w = np.asarray(s_w, np.float64)
        mm, ss = zip(*(requant_params(s, cfg.mult_width) for s in self.s_w)) if cout else ((), ())
        self.m, self.sh = np.array(mm, np.int64), np.array(ss, np.int64)
        emax = vpu.kv_shift(1 << (cfg.act_width - 1))
        bad = (self.m > 0) & ((self.sh < emax) | (self.sh > cfg.sh_max))
        if bad.any():
            j = int(np.argmax(bad))
            raise ValueError(f"layer {name!r}: output channel {j} needs requantization shifts "
                             f"{int(self.sh[j]) - emax}..{int(self.sh[j])}, outside "
                             f"[0, {cfg.sh_max}] (s_w = {self.s_w[j]!r})")
        b = np.zeros(cout) if bias is None else np.asarray(bias, np.float64)
        self.bias_int, _ = to_fixed(b, 48, cfg.act_frac)
        self.flags = dict(y_saturated=0)

    def reset(self):
        """Nothing to reset: a dense layer keeps no state."""

    def step(self, x) -> Int8StepResult:
        """One step on ``x`` (N, in), act format, N a multiple of T."""
        cfg, T = self.cfg, self.cfg.tile
        x = np.asarray(x, np.int64)
        if x.ndim != 2 or x.shape[1] != self.W.shape[0]:
            raise ValueError(f"layer {self.name!r}: input must be (N, {self.W.shape[0]}), not "
                             f"{x.shape}")
        tiles = quantize_matrix(x, cfg)
        ctr = Counters()
        acc = np.zeros((x.shape[0], self.W.shape[1]), np.int64)
        y = np.zeros_like(acc)
        nsat = 0
        for t, tile in enumerate(tiles):
            ctr.merge(tile.counters)
            a = tile.q.T @ self.W          # = execute() of the tile's groups, per column block
            acc[t * T:(t + 1) * T] = a
            y[t * T:(t + 1) * T], n = requant_int8(a, self.m, self.sh, tile.e, self.bias_int, cfg)
            nsat += n
        self.flags["y_saturated"] += nsat
        return Int8StepResult(y=y, acc=acc, tiles=tiles, counters=ctr)
