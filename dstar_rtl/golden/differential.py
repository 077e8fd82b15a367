"""Differential linear layers with error feedback (numerics §2.5).

Closed loop (default): the layer keeps the reconstruction ``x̂`` and the running integer sum ``Y``::

    Δx_t = x_t - x̂_{t-1}        (act_width + 2 bits)
    q_t  = FMDQ(Δx_t)
    x̂_t  = x̂_{t-1} + dequant(q_t)   (exact shift; act_width + 1 bits)
    Y_t  = Y_{t-1} + Σ q·2**e·W  (acc_width, units of s0 · s_w[j])

so ``Y_t = W·x̂_t`` exactly and ``|x_t - x̂_t| <= step/2`` while nothing saturates. Open loop takes
``Δx_t = x_t - x_{t-1}`` against the exact previous input and lets the error drift; its ``Y``
saturates at ``acc_width`` with a sticky flag.

**Long reductions** (numerics §2.5): a layer of more input channels than ``max_reduction`` runs
in :attr:`DiffLinear.pieces` ``= ceil(cin / max_reduction)`` pieces of consecutive channels
(:func:`golden.schedule.piece_bounds`), as the core's compiler splits it: each piece's
sub-channels are quantized and scheduled as a tile of their own (FMDQ quantizes every
sub-channel alone, so they are the whole tile's), multiplied with their rows of ``W``, and
added to ``Y`` in order, ``Y`` saturating after each piece as the core's GEMM does. ``Y``'s
width bounds ``max_reduction`` channels, so only a longer reduction can saturate there.

The product goes through the full schedule and executor of :mod:`golden.schedule`, so every
statistic (groups, lane fill, counters) is the one the hardware would see. With
``schedule=False`` (and no ``overflow_detect``) the layer skips building the group schedule:
the same integer numerics (the product comes from :func:`golden.schedule.reference_product` in
both cases), about ten times faster, without the schedule's statistics (``tiles`` is None;
the counters are only those of :func:`golden.schedule.precision_counters`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.fmdq import (
    Quantized,
    dequant,
    requant_params,
    requantize,
    rnd,
    to_fixed,
)
from dstar_rtl.golden.schedule import (
    Counters,
    execute,
    piece_bounds,
    quantize_counted,
    reduction_pieces,
    reference_product,
)

__all__ = ["quantize_weights", "DiffLinear", "StepResult"]


def quantize_weights(Wf, weight_width: int = 8):
    """Symmetric per-output-channel INT quantization of a float (in, out) matrix.

    Returns ``(W, s_w)`` with ``W`` int64 in ``[-(2**(w-1)-1), 2**(w-1)-1]`` and ``s_w`` the float
    scale per output channel (0 for an all-zero column).
    """
    Wf = np.asarray(Wf, dtype=np.float64)
    qmax = (1 << (weight_width - 1)) - 1
    amax = np.abs(Wf).max(axis=0)
    s = np.where(amax > 0, amax / qmax, 0.0)
    safe = np.where(s > 0, s, 1.0)
    r = Wf / safe
    W = (np.sign(r) * np.floor(np.abs(r) + 0.5)).astype(np.int64)
    return np.clip(W, -qmax, qmax), s


@dataclass
class StepResult:
    """What one step of a differential layer produced."""

    y: np.ndarray          # requantized output, act fixed point (tokens, out)
    Y: np.ndarray          # running integer sum after the step (tokens, out)
    acc: np.ndarray        # this step's accumulator contribution (tokens, out)
    qz: Quantized          # the step's quantized sub-channels
    tiles: list | None     # TileSchedule per token tile and piece, piece-minor (None: no schedule)
    counters: Counters
    dx: np.ndarray         # the difference that was quantized


class DiffLinear:
    """One differential linear layer with state (``x̂`` or ``x_prev``, and ``Y``).

    Parameters
    ----------
    W : int array (in, out), already quantized to ``cfg.weight_width``.
    s_w : float array (out,), weight scale per output channel.
    cfg : the configuration (tile size, widths, loop mode).
    bias : float array (out,) or None.
    base_log2 : static base ``B`` of this layer (default ``cfg.base_log2``).
    schedule : build the QPU group schedule of every step (module docstring).
    pieces : the reduction pieces each step runs in (default and least ``ceil(cin /
        max_reduction)``); more only change a stored Y's rounding (numerics §2.5), as the
        compiler's ``pieces`` do on the core.
    """

    def __init__(self, W, s_w, cfg: Config, bias=None, base_log2: int | None = None, name="",
                 schedule: bool = True, pieces: int | None = None):
        self.W = np.asarray(W, dtype=np.int64)
        self.cfg = cfg
        self.name = name
        self.schedule = schedule or cfg.overflow_detect
        cin, cout = self.W.shape
        #: Reduction pieces (module docstring): 1 unless ``cin`` exceeds ``max_reduction`` or
        #: more are asked for.
        need = reduction_pieces(cin, cfg)
        self.pieces = need if pieces is None else pieces
        if not (isinstance(self.pieces, int) and need <= self.pieces <= cin):
            raise ValueError(f"layer {name!r}: pieces must be an int in {need}..{cin} (at least "
                             f"ceil(cin / max_reduction), at most the input channels), not "
                             f"{pieces!r}")
        self.B = cfg.base_log2 if base_log2 is None else int(base_log2)
        self.r0 = cfg.act_frac - self.B
        self.s_w = np.asarray(s_w, dtype=np.float64)
        # Output scale: Y · s0 · s_w[j] in real units, · 2**act_frac in output LSBs.
        self.m, self.sh = zip(*(requant_params(s * 2.0 ** self.r0, cfg.mult_width)
                                for s in self.s_w))
        self.m = np.array(self.m, dtype=np.int64)
        self.sh = np.array(self.sh, dtype=np.int64)
        bad = (self.sh < 0) | (self.sh > cfg.sh_max)
        if bad.any():   # numerics §2.1: refused when the program is built, not at the first step
            j = int(np.argmax(bad))
            raise ValueError(f"layer {name!r}: output channel {j} needs requantization shift "
                             f"{int(self.sh[j])}, outside [0, {cfg.sh_max}] "
                             f"(s_w = {self.s_w[j]!r})")
        b = np.zeros(cout) if bias is None else np.asarray(bias, dtype=np.float64)
        self.bias_int, _ = to_fixed(b, 48, cfg.act_frac)
        self.state = None   # x̂ (closed loop) or x_prev (open loop)
        self.recon_sum = None  # Σ dequant(q_t): what Y represents (== x̂ in closed loop)
        self.Y = None
        self.flags = dict(y_saturated=0, Y_saturated=False, xhat_saturated=False,
                          acc_overflow=False)

    def reset(self):
        self.state = None
        self.recon_sum = None
        self.Y = None

    def _saturate(self, v, width: int, flag: str):
        """Clip ``v`` to ``width`` signed bits, setting the sticky ``flag`` when it clips."""
        lim = 1 << (width - 1)
        if v.min(initial=0) < -lim or v.max(initial=0) >= lim:
            self.flags[flag] = True
            v = np.clip(v, -lim, lim - 1)
        return v

    def step(self, x) -> StepResult:
        """Process one denoising step's input ``x`` (tokens, in) in act fixed point."""
        cfg = self.cfg
        x = np.asarray(x, dtype=np.int64)
        N, cin = x.shape
        if cin != self.W.shape[0]:
            raise ValueError(f"layer {self.name!r}: input has {cin} channels, "
                             f"W has {self.W.shape[0]}")
        if self.state is None:
            self.state = np.zeros_like(x)
            self.recon_sum = np.zeros_like(x)
            self.Y = np.zeros((N, self.W.shape[1]), np.int64)
        dx = x - self.state
        T = cfg.tile
        parts, ctr = [], Counters()
        for c0, n in piece_bounds(cin, self.pieces):
            qz, tiles, nt, counted = quantize_counted(dx[:, c0:c0 + n], cfg, self.B,
                                                      schedule=self.schedule)
            ctr.merge(counted)
            parts.append((qz, tiles, self._product(qz, tiles, nt, self.W[c0:c0 + n])[:N]))
        qz = parts[0][0] if len(parts) == 1 else _merge([q for q, _, _ in parts], nt)
        tiles = None if parts[0][1] is None else [
            p[1][t] for t in range(nt) for p in parts]
        recon = dequant(qz).reshape(nt, cin, T).transpose(0, 2, 1).reshape(nt * T, cin)[:N]
        self.recon_sum = self.recon_sum + recon
        if cfg.closed_loop:
            self.state = self._saturate(self.state + recon, cfg.xhat_width, "xhat_saturated")
        else:
            self.state = x.copy()
        # Y has the accumulator width in both modes: it saturates, never wraps (numerics §2.1, 2.5),
        # after each piece. With the derived width and one piece this only happens in open loop
        # (closed loop: Y = W·x̂ fits). A stored Y (ystate_frac) is the running sum rounded by the
        # channel's shift s: each piece adds to it at full width, stores it rounded, and the last
        # piece's full sum gives y.
        s = cfg.ystate_shift(self.sh)
        for _, _, acc_p in parts:
            full = self._saturate((self.Y << s) + acc_p, cfg.acc_bits, "Y_saturated")
            self.Y = full if cfg.ystate_frac is None else self._saturate(
                rnd(full, s), cfg.ystate_width, "Y_saturated")
        acc = sum(p[2] for p in parts)
        y, nsat = requantize(full, self.m, self.sh, self.bias_int, cfg.act_width, cfg.sh_max)
        self.flags["y_saturated"] += nsat
        return StepResult(y=y, Y=self.Y.copy(), acc=acc, qz=qz, tiles=tiles, counters=ctr, dx=dx)

    def _product(self, qz, tiles, nt: int, W):
        """``Σ q·2**e·W`` of one piece's ``nt`` token tiles against its rows ``W``: from the
        numerics, or with ``overflow_detect`` by replaying each tile's group stream for every
        block of ``cols`` output channels (the MPU's sticky overflow flag set on overflow)."""
        cfg, T, cout = self.cfg, self.cfg.tile, W.shape[1]
        acc = np.zeros((nt * T, cout), np.int64)
        if not cfg.overflow_detect:
            # The executor equals Σ q·2**e·W exactly (property-tested in tests/test_schedule.py),
            # so the fast path takes the product from the numerics for every column at once.
            ref = reference_product(qz, nt, W, cfg)
            return np.concatenate(ref, axis=0) if ref else acc
        for t, ts in enumerate(tiles):
            for j0 in range(0, cout, cfg.cols):
                a, ovf = execute(ts.groups, W[:, j0:j0 + cfg.cols], cfg)
                if ovf[0].any():   # the MPU's sticky overflow flag (narrow acc_width only)
                    self.flags["acc_overflow"] = True
                acc[t * T:(t + 1) * T, j0:j0 + cfg.cols] = a[0][:, :min(cfg.cols, cout - j0)]
        return acc


def _merge(qzs: list, nt: int) -> Quantized:
    """The pieces' :class:`Quantized` (each ``nt`` token tiles of its own channels, tile-major)
    as one of all the channels, tile-major as :func:`golden.schedule.quantize_counted` orders
    them."""
    def cat(name):
        arrs = [getattr(q, name) for q in qzs]
        return np.concatenate([a.reshape(nt, -1, *a.shape[1:]) for a in arrs], axis=1).reshape(
            -1, *arrs[0].shape[1:])
    return Quantized(q=cat("q"), b=cat("b"), e=cat("e"), M=cat("M"), saturated=cat("saturated"),
                     r0=qzs[0].r0)
