"""The typed result of ``dstar bench`` (:class:`Bench`, ``reports/bench.json``): the MPU and the
INT8 array on the same DiT layers, their resources, cell areas and Fmax, and every layer's
cycles and ratios (:mod:`app.benches.layers` measures it and renders it).

Readers (REPORT.md's component view, the projection's lane fill, the whole-core comparison's
and the PE-area report's workloads) load it with :meth:`Bench.load`.
"""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import CriticalPath, Library, Resources

__all__ = ["Bench", "BenchRow", "BenchTotals", "Workload", "UsedOperatingPoint",
           "ArrayResources", "ArrayArea", "ArrayAreas", "ArrayFmax", "ArrayFmaxes",
           "ArraySimulation"]


@dataclass(frozen=True)
class BenchRow:
    """One layer at one step, or a total over steps (``kind``, ``step``, ``step_kind`` and the
    shape are ``None`` then): blocks of output channels, groups, valid lanes, dense INT8 beats,
    both arrays' cycles and the ratios DSTAR over INT8 (``None`` where a figure is missing),
    lane utilization as built and under other packings, the mean activation bits, the
    sub-channels by precision, saturated accumulators, weight-load cycles."""

    layer: str
    blocks: int
    groups: int
    lanes_valid: int
    dense_beats: int
    cycles_dstar: int
    cycles_int8: int
    cycles_ratio: float | None
    lut_ratio: float | None
    tput_per_lut_ratio: float | None
    lut_ratio_fabric: float | None
    tput_per_lut_fabric_ratio: float | None
    area_ratio: float | None
    tput_per_area_ratio: float | None
    fmax_ratio: float | None
    tput_per_second_ratio: float | None
    lane_util: float | None
    groups_packed: dict[str, int]
    lane_util_packed: dict[str, float | None]
    mean_act_bits: float | None
    subchannels: dict[str, int]
    acc_overflows: int
    weight_load_cycles: int
    kind: str | None = None
    step: int | None = None
    step_kind: str | None = None
    tokens: int | None = None
    cin: int | None = None
    cout: int | None = None


@dataclass(frozen=True)
class BenchTotals:
    """The whole run's total and one per step (keyed by the step's number)."""

    all: BenchRow
    by_step: dict[str, BenchRow]


@dataclass(frozen=True)
class UsedOperatingPoint:
    """The FMDQ operating point the layers were quantized at: its name, thresholds and each
    layer's base."""

    name: str | None
    thr: tuple[int, ...]
    base_log2: dict[str, int]


@dataclass(frozen=True)
class Workload:
    """What ran: the weights and model (or a trace and its weights), the tokens, the sampling
    run's steps, seed and label, the block, the steps measured, the operating point, the SAR
    interval and the layers."""

    weights: str
    model: str
    source: str
    tokens: int
    steps: int
    steps_run: tuple[int, ...]
    quick: bool
    layers: tuple[str, ...]
    sar_interval: int | None = None
    params_sha256: str | None = None
    spec: dict | None = None
    seed: int | None = None
    label: int | None = None
    block: int | None = None
    weight_seed: int | None = None
    trace: str | None = None
    operating_point: UsedOperatingPoint | None = None


@dataclass(frozen=True)
class ArrayResources:
    """One array's ECP5 resources with DSP blocks (``fabric``: without), where they come from."""

    resources: Resources
    tools: dict[str, str]
    config_hash: str
    flow: str
    seconds: float | None
    source: str
    fabric: Resources | None = None


@dataclass(frozen=True)
class ArrayArea:
    """One array's standard-cell area at its best flow (``booth``: Yosys's ``-booth``)."""

    area: float
    combinational: float | None
    sequential: float | None
    ff: int | None
    booth: bool
    config_hash: str
    source: str


@dataclass(frozen=True)
class ArrayAreas:
    mpu: ArrayArea
    baseline: ArrayArea
    library: Library


@dataclass(frozen=True)
class ArrayFmax:
    """One array's nextpnr Fmax against its constraint and its critical path."""

    fmax_mhz: float
    constraint_mhz: float | None
    critical_path: CriticalPath | None
    seconds: float | None
    source: str


@dataclass(frozen=True)
class ArrayFmaxes:
    mpu: ArrayFmax
    baseline: ArrayFmax


@dataclass(frozen=True)
class ArraySimulation:
    """One array's simulation: cycles, drain beats checked against golden, wall seconds."""

    cycles: int
    drain_beats_checked: int
    checked: bool
    sim_wall_s: float
    run_s: float


@dataclass(frozen=True)
class Bench(Result):
    """``reports/bench.json``."""

    KIND = "bench"
    preset: str
    config: dict
    config_hash: str
    simulator: str
    tools: dict[str, str | None]
    workload: Workload
    resources: dict[str, ArrayResources | None]
    simulation: dict[str, ArraySimulation]
    rows: tuple[BenchRow, ...]
    totals: BenchTotals
    runtime_s: float
    areas: ArrayAreas | None = None
    fmax: ArrayFmaxes | None = None
