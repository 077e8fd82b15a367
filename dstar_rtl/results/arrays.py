"""The typed result of ``dstar measure arrays`` (``reports/arrays.json``, :mod:`app.reports.arrays`
measures and renders it): each unit's synthesis runs, the place and route of the ECP5 netlists, the
MPU's simulation speed on both simulators, the step times."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import CriticalPath, Resources, StepTime

__all__ = ["UnitSynth", "ArrayPnr", "SpeedRun", "SimSpeed", "PnrSettings", "Arrays"]


@dataclass(frozen=True)
class UnitSynth:
    """One unit's synthesis for one target (the arrays', the QPU's, a PE's): its resources,
    Yosys's cells by type, the CMOS transistor estimate on generic gates
    (``transistors_complete``: every cell priced), wall seconds, whether a stored identical run
    was reused, the LUT mapper, the tools, the elaboration's seconds; or the error that stopped
    it."""

    resources: Resources | None = None
    cells: dict[str, int] = field(default_factory=dict)
    num_cells: int | None = None
    transistors: int | None = None
    transistors_complete: bool | None = None
    seconds: float | None = None
    reused: bool = False
    flow: str | None = None
    tools: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    elaboration_seconds: float | None = None

    @classmethod
    def from_flow(cls, r: dict) -> UnitSynth:
        if "error" in r:
            return cls(error=r["error"])
        return cls(Resources.from_flow(r["resources"]), r.get("cells", {}), r.get("num_cells"),
                   r.get("transistors"), r.get("transistors_complete"), r.get("seconds"),
                   r.get("reused", False), r.get("flow"), r.get("tools", {}),
                   elaboration_seconds=r.get("elaboration_seconds"))


@dataclass(frozen=True)
class ArrayPnr:
    """One unit's place and route (``unit``, ``variant``: with or without DSPs): Fmax against
    the constraint, the device's cells used and available, the critical path, wall seconds,
    whether it was reused; or why it did not place."""

    unit: str
    variant: str
    fmax_mhz: float | None = None
    constraint_mhz: float | None = None
    timing_pass: bool | None = None
    utilisation: dict[str, dict[str, int]] = field(default_factory=dict)
    critical_path: CriticalPath | None = None
    seconds: float | None = None
    reused: bool = False
    tools: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    @classmethod
    def from_flow(cls, r: dict) -> ArrayPnr:
        if "error" in r:
            return cls(r.get("unit", ""), r.get("variant", ""), error=r["error"])
        return cls(r["unit"], r["variant"], r["fmax_mhz"], r.get("constraint_mhz"),
                   r["timing_pass"], r.get("utilisation", {}),
                   CriticalPath.from_flow(r.get("critical_path")), r.get("seconds"),
                   r.get("reused", False), r.get("tools", {}))


@dataclass(frozen=True)
class SpeedRun:
    """One timed run of the speed workload: clock cycles, wall seconds of the timed region,
    their ratio, the process's seconds and the load average."""

    cycles: int
    wall_s: float
    cycles_per_s: float
    process_s: float | None = None
    load_avg_1min: float | None = None


@dataclass(frozen=True)
class SimSpeed:
    """One simulator's speed on the MPU: the workload (tiles × channels, input beats), the best
    of the repeated runs (cycles, wall seconds, cycles per second), every run, the model's
    build time (``build_cached``: found current), whether every beat was checked; or the
    error."""

    simulator: str | None = None
    simulator_version: str | None = None
    tiles: int | None = None
    channels: int | None = None
    input_beats: int | None = None
    cycles: int | None = None
    wall_s: float | None = None
    cycles_per_s: float | None = None
    runs: tuple[SpeedRun, ...] = ()
    build_s: float | None = None
    build_cached: bool = False
    checked: bool = False
    error: str | None = None

    @classmethod
    def from_run(cls, r: dict) -> SimSpeed:
        keep = {f.name for f in fields(SpeedRun)}
        return cls(r.get("simulator"), r.get("simulator_version"), r.get("tiles"),
                   r.get("channels"), r.get("input_beats"), r.get("cycles"), r.get("wall_s"),
                   r.get("cycles_per_s"),
                   tuple(SpeedRun(**{k: v for k, v in x.items() if k in keep})
                         for x in r.get("runs", ())),
                   r.get("build_s"), r.get("build_cached", False), r.get("checked", False),
                   r.get("error"))


@dataclass(frozen=True)
class PnrSettings:
    """nextpnr's device, package, constraint (MHz) and seed; out of context."""

    device: str
    package: str
    freq_mhz: float
    seed: int
    out_of_context: bool = True


@dataclass(frozen=True)
class Arrays(Result):
    """``reports/arrays.json``: the arrays' synthesis by unit and target, their place and
    route, the MPU's simulation speed, the tools and the step times."""

    KIND = "arrays"
    preset: str
    config_hash: str
    config: dict
    host: dict[str, int | float | str]
    tools: dict[str, str]
    steps: tuple[StepTime, ...]
    total_seconds: float
    source_digest: str | None = None
    synthesis: dict[str, dict[str, UnitSynth]] = field(default_factory=dict)
    pnr_settings: PnrSettings | None = None
    pnr: dict[str, ArrayPnr] = field(default_factory=dict)
    sim_speed: dict[str, SimSpeed] = field(default_factory=dict)
