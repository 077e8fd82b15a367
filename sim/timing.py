"""Cycle formulas of the output-stationary arrays (MPU and baseline), as their docstrings state.

The tests compare measured cycles with these; the performance model builds on them.
"""

from __future__ import annotations

__all__ = ["array_latency", "array_tile_period", "array_first_beats"]


def array_latency(cfg) -> int:
    """Cycles from the transfer of a tile's last input beat to its first drain beat."""
    return cfg.rows + cfg.cols + cfg.pe_stages + 2


def array_tile_period(cfg) -> int:
    """Fewest cycles between the last input beats of consecutive tiles (drain turnaround)."""
    return array_latency(cfg) + cfg.rows


def array_first_beats(cfg, groups_per_tile) -> list:
    """Cycle (from the first input transfer) of each tile's first drain beat, when the input
    never stalls and the drain is always ready."""
    L, D = array_latency(cfg), array_tile_period(cfg)
    out, t = [], -1
    for k, G in enumerate(groups_per_tile):
        t = G - 1 if k == 0 else t + max(G, D)
        out.append(t + L)
    return out
