"""The typed result of ``dstar power`` (:class:`Energy`, ``reports/energy.json``): the arrays'
gate-level energy per MAC on real tiles, the QPU's and the VPU's, the energy per image of the
whole ``fpga`` cores and the paper chip's projected energy (:mod:`bench.power` and
:mod:`bench.image_energy` measure it, :mod:`app.reports.energy` renders it).

The gate-level breakdowns (energy by part and cell group, a core's parts per image, the paper
chip's models) are kept as the flows report them, string-keyed data inside the typed fields;
issue 50 (clock gating) reworks them.
"""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result

__all__ = ["Energy", "ArrayEnergy", "UnitEnergy", "PaperChip"]


@dataclass(frozen=True)
class ArrayEnergy:
    """One array's standard-cell netlist simulated on the workload's tiles: its cells and
    area, the library, the run's and the stream's cycles, the drain beats checked against
    golden, the energy by part (fJ: internal, switching, leakage), its transitions, the idle
    energy per cycle and the data energy per group, pJ per MAC."""

    unit: str
    config_hash: str
    area_um2: float
    cells: int
    library: dict
    run_cycles: int
    stream_cycles: int
    drain_beats_checked: int
    checked: bool
    energy: dict
    transitions: int
    idle_fj_per_cycle: float
    groups: int
    data_fj: float
    data_fj_per_group: float
    energy_fj: float
    pj_per_mac: float
    by_group: dict
    workdir: str | None = None


@dataclass(frozen=True)
class UnitEnergy:
    """The QPU's or the VPU's gate-level energy on its workload: cells, area, cycles, events,
    total, idle per cycle and data energy (per event), by part, the run's seconds."""

    cells: int
    area_um2: float
    run_cycles: int
    events: dict[str, int]
    total_fj: float
    idle_fj_per_cycle: float
    data_fj: float
    data_fj_per_event: dict[str, float]
    parts: dict
    workload: dict
    seconds: dict[str, float]
    testbench: str
    unbounded: dict | None = None


@dataclass(frozen=True)
class PaperChip:
    """The paper chip's energy per image of every projected model (``models``), from the
    projection and the comparison named, and the command that computed it."""

    models: tuple[dict, ...]
    projection: str
    compare: str
    command: str | None = None


@dataclass(frozen=True)
class Energy(Result):
    """``reports/energy.json``."""

    KIND = "energy"
    preset: str
    config_hash: str
    clock_ns: float
    workload: dict
    arrays: dict[str, ArrayEnergy]
    pj_per_mac: dict[str, dict[str, float]]
    ratio_dstar_over_int8: float
    runtime_s: float
    precision_sweep: dict | None = None
    pes: dict | None = None
    units: dict[str, UnitEnergy] | None = None
    image: dict | None = None
    paper_chip: PaperChip | None = None
    energy_per_image_j: dict[str, dict[str, float]] | None = None
    qpu_power_share: float | None = None
