"""The typed result of ``dstar measure qpu-area`` (:class:`QpuArea`, ``reports/qpu_area.json``):
the QPU against the MPU it feeds at each preset, the QPU by submodule, and the paper-scale
estimate (:mod:`flows.qpu_area` runs the syntheses, :mod:`app.reports.qpu` renders them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dstar_rtl.results.arrays import UnitSynth
from dstar_rtl.results.base import Result
from dstar_rtl.results.qpu_rate import QpuRateRow
from dstar_rtl.results.quantities import StepTime

__all__ = ["QpuArea", "Breakdown", "ModuleCells", "PresetArea", "PaperArea",
           "PaperEstimate"]


@dataclass(frozen=True)
class ModuleCells:
    """One submodule's own cells (submodule instances not counted): its figures (including,
    for the top, the flip-flops of the digit store and the counters by name), its cell count
    and its cells by type."""

    resources: dict[str, int | None]
    num_cells: int
    cells: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Breakdown:
    """The QPU by submodule in one flow, its totals, seconds; or why it failed."""

    modules: dict[str, ModuleCells] = field(default_factory=dict)
    total: dict[str, int | None] | None = None
    seconds: float | None = None
    reused: bool = False
    error: str | None = None


@dataclass(frozen=True)
class PresetArea:
    """One preset: the QPU's and the MPU's runs by flow, the QPU's share of QPU + MPU by flow
    and metric, the QPU by submodule."""

    preset: str
    config_hash: str
    config: dict
    qpu: dict[str, UnitSynth]
    mpu: dict[str, UnitSynth]
    share: dict[str, dict[str, float | None]]
    breakdown: dict[str, Breakdown] | None = None


@dataclass(frozen=True)
class PaperEstimate:
    """The paper-scale QPU's transistors against rows × cols PEs'."""

    pes: int
    pe_transistors: int
    array_transistors: int
    qpu_transistors: int
    qpu_over_array: float
    share: float


@dataclass(frozen=True)
class PaperArea:
    preset: str
    config_hash: str
    config: dict
    qpu: UnitSynth
    pe: UnitSynth
    estimate: PaperEstimate | None = None
    breakdown: dict[str, Breakdown] = field(default_factory=dict)


@dataclass(frozen=True)
class QpuArea(Result):
    """``reports/qpu_area.json``."""

    KIND = "qpu-area"
    host: dict[str, int | float | str]
    tools: dict[str, str]
    steps: tuple[StepTime, ...]
    presets: dict[str, PresetArea]
    total_seconds: float
    source_digest: str | None = None
    paper: PaperArea | None = None
    rate: dict[str, QpuRateRow] | None = None
    plot: str | None = None
