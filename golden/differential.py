"""Differential linear layers with error feedback (numerics §2.5).

Closed loop (default): the layer keeps the reconstruction ``x̂`` and the running integer sum ``Y``::

    Δx_t = x_t - x̂_{t-1}        (act_width + 2 bits)
    q_t  = FMDQ(Δx_t)
    x̂_t  = x̂_{t-1} + dequant(q_t)   (exact shift; act_width + 1 bits)
    Y_t  = Y_{t-1} + Σ q·2**e·W  (acc_width, units of s0 · s_w[j])

so ``Y_t = W·x̂_t`` exactly and ``|x_t - x̂_t| <= step/2`` while nothing saturates. Open loop takes
``Δx_t = x_t - x_{t-1}`` against the exact previous input and lets the error drift; its ``Y``
saturates at ``acc_width`` with a sticky flag.

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

from golden.config import Config
from golden.fmdq import (
    Quantized,
    dequant,
    requant_params,
    requantize,
    to_fixed,
)
from golden.schedule import (
    Counters,
    execute,
    quantize_counted,
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
    tiles: list | None     # TileSchedule per token tile (None: built without the schedule)
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
    """

    def __init__(self, W, s_w, cfg: Config, bias=None, base_log2: int | None = None, name="",
                 schedule: bool = True):
        self.W = np.asarray(W, dtype=np.int64)
        self.cfg = cfg
        self.name = name
        self.schedule = schedule or cfg.overflow_detect
        cin, cout = self.W.shape
        if cin > cfg.max_reduction:
            raise ValueError(f"layer {name!r} has {cin} input channels; max_reduction is "
                             f"{cfg.max_reduction}")
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
        qz, tiles, nt, ctr = quantize_counted(dx, cfg, self.B, schedule=self.schedule)
        T = cfg.tile
        recon = dequant(qz).reshape(nt, cin, T).transpose(0, 2, 1).reshape(nt * T, cin)[:N]
        acc = np.zeros((nt * T, self.W.shape[1]), np.int64)
        cols = cfg.cols
        if not cfg.overflow_detect:
            # The executor equals Σ q·2**e·W exactly (property-tested in tests/test_schedule.py),
            # so the fast path takes the product from the numerics for every column at once.
            ref = reference_product(qz, nt, self.W, cfg)
            acc = np.concatenate(ref, axis=0) if ref else acc
        for t, ts in enumerate(tiles if cfg.overflow_detect else ()):
            # The tile's group stream is replayed for every block of `cols` output channels.
            for j0 in range(0, self.W.shape[1], cols):
                a, ovf = execute(ts.groups, self.W[:, j0:j0 + cols], cfg)
                if ovf[0].any():   # the MPU's sticky overflow flag (narrow acc_width only)
                    self.flags["acc_overflow"] = True
                acc[t * T:(t + 1) * T, j0:j0 + cols] = a[0][:, :min(cols, self.W.shape[1] - j0)]
        acc = acc[:N]
        self.recon_sum = self.recon_sum + recon
        if cfg.closed_loop:
            self.state = self._saturate(self.state + recon, cfg.xhat_width, "xhat_saturated")
        else:
            self.state = x.copy()
        # Y has the accumulator width in both modes: it saturates, never wraps (numerics §2.1, 2.5).
        # With the derived width this only happens in open loop (closed loop: Y = W·x̂ fits).
        self.Y = self._saturate(self.Y + acc, cfg.acc_bits, "Y_saturated")
        y, nsat = requantize(self.Y, self.m, self.sh, self.bias_int, cfg.act_width, cfg.sh_max)
        self.flags["y_saturated"] += nsat
        return StepResult(y=y, Y=self.Y.copy(), acc=acc, qz=qz, tiles=tiles, counters=ctr, dx=dx)
