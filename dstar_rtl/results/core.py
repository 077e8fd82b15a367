"""The typed result of ``dstar measure core`` (``reports/core.json``, :mod:`app.reports.core`
measures and renders it): the core's cycles on a DiT block by section and step, beside the INT8
array."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import StepTime

__all__ = ["BlockSpec", "Section", "BlockStep", "Speed", "SimSpeed", "CorePerf", "LaneUse",
           "BytesMoved", "BaselineRow", "BaselineStep", "CoreBlock", "Core"]


@dataclass(frozen=True)
class BlockSpec:
    """The DiT block: tokens, hidden width, heads of ``head_dim``, MLP width."""

    tokens: int
    hidden: int
    heads: int
    head_dim: int
    mlp: int


@dataclass(frozen=True)
class Section:
    """One program section of a step: its cycles, commands and the core's counters."""

    name: str
    cycles: int
    commands: int
    counters: dict[str, int]


@dataclass(frozen=True)
class BlockStep:
    """One DiT-block step (a cache step or a reuse step), section by section."""

    step: int
    cache: bool
    sections: tuple[Section, ...]
    cycles: int


@dataclass(frozen=True)
class Speed:
    """Simulated cycles in wall seconds."""

    cycles: int
    wall_s: float
    cycles_per_s: float


@dataclass(frozen=True)
class SimSpeed(Speed):
    """The testbench's speed over whole steps and over the compute sections, and the bare
    model's (one step's compute sections as one program)."""

    compute_cycles: int
    compute_wall_s: float
    compute_cycles_per_s: float
    model: Speed | None


@dataclass(frozen=True)
class CorePerf:
    """The core's cycles on the block (:func:`bench.core.measure`)."""

    preset: str
    config_hash: str
    core: dict[str, int]
    spec: BlockSpec
    mask_kept: int
    mask_blocks: int
    interval: int
    steps: tuple[BlockStep, ...]
    sim: SimSpeed


@dataclass(frozen=True)
class LaneUse:
    """Valid lanes against issued lane slots, and the paper's figure to compare with."""

    valid: int
    slots: int
    util: float | None
    paper: str


@dataclass(frozen=True)
class BytesMoved:
    """Bytes through each buffer in one step."""

    step: int
    kind: str
    bytes: dict[str, int]


@dataclass(frozen=True)
class BaselineRow:
    """One section's matrix work on the core beside the INT8 baseline array's."""

    section: str
    tiles: int
    groups: int
    dense_beats: int
    lane_util: float | None
    baseline_array_cycles: int
    baseline_rtl_cycles: int | None
    core_m_busy: int
    section_cycles: int
    ratio: float | None

    @property
    def baseline(self) -> int:
        """The baseline array's cycles: measured on its RTL, else its tile-flow law."""
        return self.baseline_rtl_cycles or self.baseline_array_cycles


@dataclass(frozen=True)
class BaselineStep:
    step: int
    kind: str
    rows: tuple[BaselineRow, ...]


@dataclass(frozen=True)
class CoreBlock:
    """One preset: the core's cycles, lane use, bytes moved and the baseline beside it."""

    perf: CorePerf
    lanes: dict[str, LaneUse]
    baseline: tuple[BaselineStep, ...]
    bytes: tuple[BytesMoved, ...]


@dataclass(frozen=True)
class Core(Result):
    """``reports/core.json``: the core on a DiT block for each preset."""

    KIND = "core"
    presets: dict[str, CoreBlock]
    steps: tuple[StepTime, ...]
    host: dict[str, str]
