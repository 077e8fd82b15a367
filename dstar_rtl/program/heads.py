"""Heads whose width the array's tile does not divide (issue 31): the attention output ``o`` is
laid out with each head padded to ``dp = ceil(d / T)·T`` channels, and the ``proj`` layer reads
it through zero weight rows at the padded channels.

Why this is exact: the P·V GEMM of a head's last column block writes ``T`` output channels, of
which ``dp - d`` are padding; V's padded lanes are 0 (a VROW writes 0 past ``n``) and the
``O.r`` bias is 0, so those channels hold 0. ``proj`` quantizes each sub-channel on its own
(numerics §2.2), so a zero channel adds no group and its ``x̂`` stays 0; its zero weight rows
add nothing to ``Y``. Q·Kᵀ needs no padding: its reduction, K's WMEM rows and the score GEMMs
take any ``d``. One condition: ``proj`` runs in one reduction piece (the padded layer's piece
boundaries would otherwise move, and ``Y`` saturates after each piece, numerics §2.5).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

__all__ = ["padded_head_dim", "real_channels", "padded_proj", "unpad"]


def padded_head_dim(d: int, T: int) -> int:
    """``d`` rounded up to a multiple of the tile ``T``."""
    return -(-d // T) * T


def real_channels(heads: int, d: int, dp: int) -> np.ndarray:
    """Indices of the ``heads·d`` real channels in the padded layout of ``heads·dp``."""
    return (np.arange(heads)[:, None] * dp + np.arange(d)[None, :]).reshape(-1)


def padded_proj(lay, heads: int, d: int, dp: int):
    """``lay`` (the block's ``proj``) with zero weight rows at the padded channels: the fields
    the compiler reads (``W``, ``B``, ``m``, ``sh``, ``bias_int``, ``pieces``) and ``real_in``
    (:func:`real_channels`: where the golden layer's input channels are). Raises ValueError
    when ``lay`` runs in more than one reduction piece."""
    if lay.pieces != 1:
        raise ValueError(f"head dim {d} is padded to {dp} (a multiple of the tile), which needs "
                         f"the proj layer in one reduction piece, not {lay.pieces}")
    real = real_channels(heads, d, dp)
    W = np.zeros((heads * dp, lay.W.shape[1]), np.int64)
    W[real] = lay.W
    return SimpleNamespace(W=W, B=getattr(lay, "B", None), m=lay.m, sh=lay.sh,
                           bias_int=lay.bias_int, pieces=1, real_in=real)


def unpad(a, heads: int, d: int, dp: int):
    """The real channels (last axis) of an array in the padded layout."""
    return np.asarray(a)[..., real_channels(heads, d, dp)]
