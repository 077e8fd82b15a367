"""Cycle formulas of the output-stationary arrays (MPU and baseline) and of their PEs, as their
docstrings state.

The tests compare measured cycles with these; the performance model builds on them. The
latencies of the QPU, the VPU and the core's STORE also size the testbenches' trailing windows
(after a stream's expected beats, any further beat fails).
"""

from __future__ import annotations

from dstar_rtl.golden.bitonic import network

__all__ = ["pe_latency", "array_latency", "array_tile_period", "array_first_beats",
           "qpu_latency", "vpu_latency", "core_store_latency", "QPU_FRONT", "BINS_FIXED"]

#: Register stages of the QPU's front end (max, precision, quantize: rtl/qpu_front.py).
QPU_FRONT = 3
#: Cycles of a QUANT through the exponent bins beyond :func:`golden.schedule.bin_cycles`, from
#: its first sub-channel in to its last group out: the front end and the bins' output register.
BINS_FIXED = QPU_FRONT + 1


def pe_latency(cfg) -> int:
    """Cycles from a PE's operands at its inputs to its accumulator (and, for a group marked
    ``last``, its shadow register and ``captured``) holding their result: ``pe_stages + 1``."""
    return cfg.pe_stages + 1


def array_latency(cfg) -> int:
    """Cycles from the transfer of a tile's last input beat to its first drain beat:
    ``(rows - 1) // weight_hop + (cols - 1) // act_hop + pe_stages + 4`` (``rows + cols +
    pe_stages + 2`` with both operands registered at every PE)."""
    return ((cfg.rows - 1) // cfg.weight_hop + (cfg.cols - 1) // cfg.act_hop
            + cfg.pe_stages + 4)


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


def qpu_latency(cfg) -> int:
    """Cycles from the transfer of a tile's last sub-channel to the first group of its last chunk
    (the QPU's docstring, output always ready): the front end (3), the chunker closing the
    chunk (1), the sorter (one register per network stage) and the packer (1). With
    ``packer = "bins"`` (:class:`rtl.binner.Binner`), to the tile's last group in the output
    register: the front end (3), up to four cycles for the sub-channel's groups, one per open
    bin and the tile's end."""
    if cfg.packer == "bins":
        return QPU_FRONT + 4 + cfg.pack_bins + 1
    return QPU_FRONT + 1 + len(network(cfg.sort_n)) + 1


def vpu_latency(cfg) -> int:
    """A bound on the cycles from the transfer of a row's last input beat to its first output
    beat, for every operation and row length, output always ready (the VPU's docstring): the
    longest is softmax, its exponential pass over the row (``nb = ceil(max_reduction /
    vpu_lanes)`` beats) between three trips through the 9-cycle beat pipeline with the
    reduction trees, and the reciprocal; bounded by ``nb + 4·9 + 10`` (10: the slowest per-row
    scalar unit, LayerNorm's). tests/test_vpu_amaranth.py checks the bound."""
    nb = -(-cfg.max_reduction // cfg.vpu_lanes)
    return nb + 4 * 9 + 10


def core_store_latency(cfg) -> int:
    """Cycles from a STORE's transfer on the core's ``cmd`` stream, the core idle, to its first
    host word on ``host_out``: the dispatcher's head register, its two check cycles and the
    issue, then the host engine's buffer read and output register (6, any configuration)."""
    return 6
