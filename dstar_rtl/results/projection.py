"""The typed result of ``dstar measure projection`` (:class:`Projection`,
``reports/projection.json``): every model under each workload on the paper's chip, every byte
charged (:func:`perf.chip_model.project_model`), its energy per image when the gate-level
energies are there, and the levers on FMDQ's state (:mod:`app.reports.state_levers`).

Readers (REPORT.md's paper-scale sections, ``dstar power``'s paper chip) load it with
:meth:`Projection.load`.
"""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.perf.chip_memory import MemorySystem
from dstar_rtl.perf.chip_model import Chip, Workload
from dstar_rtl.perf.perf_model import Timing
from dstar_rtl.results.base import Result

__all__ = ["Projection", "ProjectionRow", "ChipSide", "ChipStep", "Utilization", "GpuBound",
           "RowEnergy", "SideEnergy", "A100Energy", "LeverRow"]


@dataclass(frozen=True)
class ChipStep:
    """One step on the chip (a cache or a reuse step): seconds of linear layers, attention
    and vector work, of compute in all, of HBM traffic, the step's total, and its HBM bytes by
    kind (weights, activations, state, restream, operands, P cache)."""

    linear_s: float
    attention_s: float
    vector_s: float
    compute_s: float
    hbm_s: float
    total_s: float
    hbm_bytes: dict[str, float]


@dataclass(frozen=True)
class Utilization:
    """Useful products against the array's capacity over a cache step."""

    products: float
    capacity: float
    utilization: float | None


@dataclass(frozen=True)
class ChipSide:
    """One chip (DSTAR or INT8 cores) on one model: its cache and reuse steps, PE utilization
    by part, attention's bounds and cycles by part, seconds per image (and of compute alone),
    each layer's reduction pieces and mode, FMDQ's state, the HBM in use and whether it fits."""

    cache: ChipStep
    reuse: ChipStep
    pe_utilization: dict[str, Utilization]
    attention_bound: float | None
    attention_bound_any_drain: float | None
    attention_parts_cycles: dict[str, float]
    per_image_s: float
    compute_per_image_s: float
    reduction_pieces: dict[str, int]
    layer_modes: dict[str, str]
    state_bytes: float
    hbm_used_bytes: float
    fits_hbm: bool


@dataclass(frozen=True)
class GpuBound:
    """The A100 roofline bound of a model (:mod:`perf.gpu_bound`): the GPU, FLOPs and bytes
    per step, their seconds, the bound's seconds per step and per image, which one binds."""

    gpu: dict[str, float | str]
    flops_per_step: float
    bytes_per_step: float
    compute_s_per_step: float
    traffic_s_per_step: float
    s_per_step: float
    per_image_s: float
    bound: str


@dataclass(frozen=True)
class SideEnergy:
    """One chip's energy per image (pJ by part, in all, in J, at 7 nm), its seconds and watts,
    its idle energy per core cycle and its HBM bytes per image by kind."""

    parts: dict[str, float]
    total_pj: float
    energy_j: float
    per_image_s: float
    watts: float
    energy_7nm_j: float
    idle_fj_per_core_cycle: float
    hbm_bytes: dict[str, float]


@dataclass(frozen=True)
class A100Energy:
    energy_j: float
    per_image_s: float
    watts: float


@dataclass(frozen=True)
class RowEnergy:
    """Energy per image of both chips and the A100 bound, and their ratios."""

    dstar: SideEnergy
    int8: SideEnergy
    a100: A100Energy
    dstar_over_int8: float
    a100_over_dstar: float
    a100_over_dstar_7nm: float


@dataclass(frozen=True)
class ProjectionRow:
    """One model under one workload: both chips, the model's steps and dense work, the P cache
    (its bytes, where it lives, its traffic), the chip's SRAM, the speed-up, the A100 bound,
    the memory system and, when computed, the energy per image."""

    dstar: ChipSide
    int8: ChipSide
    model: str
    steps: int
    dense_gmacs_per_step: float
    pcache_bytes: float
    pcache_location: str
    int8_pcache_bytes: float
    pcache_traffic_s_per_step: float
    on_chip_sram_bytes: int
    speedup: float
    gpu: GpuBound
    a100_over_dstar: float
    a100_over_int8: float
    workload: Workload
    config: dict
    memory: MemorySystem
    energy: RowEnergy | None = None


@dataclass(frozen=True)
class LeverRow:
    """One lever on the state (:data:`app.reports.state_levers.LEVERS`) at one buffer size, for
    one model and workload: its configuration and options, the speed-up, both chips' seconds
    per image (and of compute), the state, the HBM bytes of a cache step, the layers left
    stateless, whether it fits, and the energies when computed."""

    lever: str
    buffer_kb: int
    model: str
    workload: str
    config: dict
    options: dict
    memory: MemorySystem
    speedup: float
    dstar_s: float
    int8_s: float
    dstar_compute_s: float
    int8_compute_s: float
    state_bytes: float
    hbm_bytes_per_cache_step: dict[str, float]
    cache_step: dict[str, dict[str, float]]
    stateless: tuple[str, ...]
    fits_hbm: bool
    dstar_j: float | None = None
    int8_j: float | None = None
    energy_ratio: float | None = None


@dataclass(frozen=True)
class Projection(Result):
    """``reports/projection.json``."""

    KIND = "projection"
    chip: Chip
    config_hash: str
    timing: Timing
    timing_notes: tuple[str, ...]
    workload_notes: tuple[str, ...]
    energy_note: str
    rows: tuple[ProjectionRow, ...]
    levers: tuple[LeverRow, ...]
    lever_model: str
