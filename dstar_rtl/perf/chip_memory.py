"""The chip's memories and the bytes a linear layer moves through them (issue 47).

The paper's chip has about 3.1 MB of SRAM in all: a 512 KB scratchpad and one unified buffer of
about 80 KB per core (``../shared/REFERENCES.md``), beside HBM2 at 1.5 TB/s. What a model needs
beyond that lives in HBM and is charged there: every layer's weights, the activations that do
not fit the scratchpad, FMDQ's differential state (``x̂`` and ``Y`` of every differential layer,
at the widths the core stores them), the P cache, and the traffic a small buffer adds to a GEMM
(partial sums or quantized inputs that go out and come back). :class:`MemorySystem` states the
budget; :func:`linear_plan` finds, for one core's share of a linear layer, the loop order and
reduction split whose working set fits the core's buffer with the least HBM traffic.

How a core runs its share of a linear layer (``T`` tokens a tile, ``kb`` blocks of ``T`` output
channels on each visit to a token tile; the projection's split of token tiles and column blocks
over the cores): the tile's input is quantized piece by piece (``pieces`` pieces of
``ceil(cin / pieces)`` channels), each piece's groups replayed against the weight rows of every
column block whose accumulators are resident (``resident`` blocks at a time, ``chunks =
ceil(kb / resident)`` chunks). The working set:

- the resident accumulators, ``resident · T² · acc_bits`` (the array drains into them after
  each piece; the differential layers' stored ``Y`` is read into them and written back once,
  at the width the core stores it);
- the weight rows of one piece and column block, double-buffered (the next block's arrive while
  this one's GEMM runs), ``2 · ceil(cin / pieces) · T`` bytes;
- the groups of one piece, double-buffered (the next piece's are made or fetched meanwhile);
- the quantizer's staging: one chunk of ``x`` and ``x̂`` rows in and out, double-buffered.

With one chunk the groups are made once and never leave the core; with more, every chunk after
the first fetches the tile's groups again from HBM, where the first wrote them (``groups ·
chunks`` bytes). With a single resident block and no room for the groups of the whole tile
either, the partial sums may instead go out and come back once per piece (``2 · (pieces - 1)``
times the core's accumulator bytes): the plan takes whichever moves fewer bytes.

Double buffers make the traffic overlap the compute, so a layer takes the longer of the two (the
projection's per-layer roofline). The HBM bandwidth and capacity are the chip's; the SRAM energy
per access is the banked buffer's (:attr:`MemorySystem.bank_bytes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dstar_rtl.models.published import A100_40GB, PAPER_CHIP

__all__ = ["MemorySystem", "PAPER_MEMORY", "LinearPlan", "linear_plans", "linear_plan", "PIECES"]


@dataclass(frozen=True)
class MemorySystem:
    """The chip's memories. ``scratchpad_bytes`` and ``core_buffer_bytes`` (each core's unified
    buffer) are the paper's (512 KB and about 80 KB: 3.1 MB with 32 cores); ``bank_bytes`` the
    SRAM macro a buffer is banked into (an access pays a bank's energy, not the whole buffer's);
    HBM: ``hbm_bytes_per_s`` (the paper's 1.5 TB/s) and ``hbm_capacity_bytes`` (40 GB: five
    8 GB HBM2e stacks, the A100 40 GB's memory at the same bandwidth class; the paper gives no
    capacity)."""

    scratchpad_bytes: int = PAPER_CHIP["scratchpad_bytes"]
    core_buffer_bytes: int = PAPER_CHIP["core_buffer_bytes"]
    bank_bytes: int = 8 * 1024
    hbm_bytes_per_s: float = PAPER_CHIP["hbm_bytes_per_s"]
    hbm_capacity_bytes: float = A100_40GB["hbm_bytes"]

    def __post_init__(self):
        for f in ("scratchpad_bytes", "core_buffer_bytes", "bank_bytes"):
            v = getattr(self, f)
            if not (isinstance(v, int) and v > 0):
                raise ValueError(f"{f} must be a positive integer, not {v!r}")
        if self.bank_bytes > self.core_buffer_bytes:
            raise ValueError(f"bank_bytes ({self.bank_bytes}) must be at most core_buffer_bytes "
                             f"({self.core_buffer_bytes})")
        for f in ("hbm_bytes_per_s", "hbm_capacity_bytes"):
            if not getattr(self, f) > 0:
                raise ValueError(f"{f} must be positive, not {getattr(self, f)!r}")

    def on_chip_bytes(self, cores: int) -> int:
        """All SRAM of a chip of ``cores`` cores: the scratchpad and every core's buffer."""
        return self.scratchpad_bytes + cores * self.core_buffer_bytes


#: The paper's chip's memories.
PAPER_MEMORY = MemorySystem()

#: Reduction piece counts a plan chooses among (beyond these a piece would be a few channels).
PIECES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)


@dataclass(frozen=True)
class LinearPlan:
    """One core's loop order for its share of a linear layer (module docstring): ``pieces``,
    ``resident`` accumulator blocks, ``chunks`` of column blocks, ``spill`` (partial sums go out
    and back per piece instead of resident accumulators), ``buffer_bytes`` of the working set,
    and the HBM bytes one visit adds beyond the layer's own data: ``restream_bytes`` (groups
    fetched again, or partial sums out and back)."""

    pieces: int
    resident: int
    chunks: int
    spill: bool
    buffer_bytes: int
    restream_bytes: float


def linear_plans(*, T: int, cin: int, kb: int, group_bytes_per_channel: float,
                 acc_bits: int, weight_bytes: int, stage_bits: int, buffer_bytes: int,
                 min_pieces: int = 1) -> list:
    """For every piece count of :data:`PIECES` from ``min_pieces`` on (and at most ``cin``),
    the plan with the least HBM traffic whose working set fits ``buffer_bytes`` (module
    docstring), if any; the caller weighs each against its compute time. ``kb``: column blocks
    the core computes on one visit to a token tile; ``group_bytes_per_channel``: the quantized
    input's bytes per input channel of a tile (groups and their metadata); ``acc_bits``: the
    accumulators' width; ``weight_bytes``: bytes of one weight; ``stage_bits``: bits per element
    of the quantizer's staged inputs and outputs (``x`` plus, on a differential layer, ``x̂`` in
    and out); ``min_pieces``: the fewest pieces the accumulator allows (``ceil(cin /
    max_reduction)``). Raises ``ValueError`` when nothing fits (the buffer cannot hold one
    accumulator block and a piece of one channel)."""
    acc_block = T * T * acc_bits / 8
    groups = cin * group_bytes_per_channel
    plans = []
    for pieces in PIECES:
        if pieces < min_pieces or pieces > cin:
            continue
        nch = math.ceil(cin / pieces)
        weights = 2 * nch * T * weight_bytes          # one piece and block, double-buffered
        stage = 2 * T * min(16, nch) * stage_bits / 8  # 16 channels in and out, double-buffered
        best = None
        # The groups of the whole tile kept on the core (every chunk replays them) or streamed,
        # one piece double-buffered (every chunk after the first fetches them again).
        for keep in (True, False):
            held = weights + (groups if keep else 2 * nch * group_bytes_per_channel)
            for resident in range(kb, 0, -1):
                need = resident * acc_block + held + stage
                if need > buffer_bytes:
                    continue
                chunks = math.ceil(kb / resident)
                restream = groups * chunks if chunks > 1 and not keep else 0.0
                best = _better(best, LinearPlan(pieces, resident, chunks, False,
                                                math.ceil(need), restream))
                break                 # fewer resident blocks only add chunks
        # Partial sums out and back per piece: one block's accumulators in and one out
        # (double-buffered) and the groups of one piece held for every block.
        if kb > 1 and pieces > 1:
            need = 4 * acc_block + weights + nch * group_bytes_per_channel + stage
            if need <= buffer_bytes:
                best = _better(best, LinearPlan(pieces, 1, kb, True, math.ceil(need),
                                                2 * (pieces - 1) * kb * acc_block))
        if best is not None:
            plans.append(best)
    if not plans:
        raise ValueError(f"a core buffer of {buffer_bytes} bytes holds no plan of this layer "
                         f"(cin {cin}, T {T}: one {acc_block:.0f}-byte accumulator block and a "
                         f"piece's weights and groups)")
    return plans


def linear_plan(**k) -> LinearPlan:
    """The plan of :func:`linear_plans` that moves the fewest bytes (the fewest pieces among
    equals)."""
    best = None
    for p in linear_plans(**k):
        best = _better(best, p)
    return best


def _better(a: LinearPlan | None, b: LinearPlan) -> LinearPlan:
    if a is None or (b.restream_bytes, b.pieces) < (a.restream_bytes, a.pieces):
        return b
    return a
