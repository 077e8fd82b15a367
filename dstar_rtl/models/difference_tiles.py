"""The reference DiT's closed-loop differences cut into QPU tiles: the workload of the QPU rate
measurement (``dstar measure qpu-rate``) and of its tests."""

from __future__ import annotations

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.differential import DiffLinear
from dstar_rtl.golden.fmdq import to_fixed
from dstar_rtl.models.dit import DIT_MODELS, record_trace

__all__ = ["dit_difference_tiles"]


def dit_difference_tiles(cfg: Config, steps: int = 4, seed: int = 0, layers=None,
                         model: str = "small"):
    """Closed-loop differences ``Δx_t = x_t - x̂_{t-1}`` of the reference DiT's linear layers,
    cut into (T, C) token tiles: ``[(layer, step, tile_index, dx)]``."""
    trace = record_trace(DIT_MODELS[model], steps=steps, seed=seed)
    names = [k[:-2] for k in trace if k.endswith(".x")]
    out = []
    for name in names:
        if layers and name not in layers:
            continue
        X = trace[name + ".x"]
        C = X.shape[2]
        if C > cfg.max_reduction:
            continue
        layer = DiffLinear(np.zeros((C, 1), np.int64), np.ones(1), cfg, name=name)
        for t in range(X.shape[0]):
            x, _ = to_fixed(X[t], cfg.act_width, cfg.act_frac)
            dx = layer.step(x).dx
            N = dx.shape[0]
            pad = -(-N // cfg.tile) * cfg.tile
            dxp = np.zeros((pad, C), np.int64)
            dxp[:N] = dx
            for k in range(pad // cfg.tile):
                out.append((name, t, k, dxp[k * cfg.tile:(k + 1) * cfg.tile]))
    return out
