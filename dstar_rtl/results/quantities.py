"""Typed quantities that several results hold: a synthesis run's resources, a place-and-route
run's timing (issue 48: typed quantities in place of dict arithmetic).

Each type is built from what the flows return (:func:`flows.synth.synthesize`,
:func:`flows.pnr.place_and_route`) with ``from_flow`` and stored inside a result
(:mod:`results.base`); a figure a flow did not report is ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

__all__ = ["Resources", "FlowRun", "SynthRun", "Hop", "CriticalPath", "PnrRun", "StepTime",
           "AsicArea", "Library", "Interval", "Bounds", "QualitySummary"]


@dataclass(frozen=True)
class Resources:
    """A netlist's cells as :mod:`flows.synth` reads them: on the ECP5 LUT4s, carry cells (two
    LUTs each), DSP blocks, block RAMs, LUT RAMs, wide multiplexers, flip-flops, ``lut_total``
    (LUT4s plus two per carry cell) and all cells; on generic gates the cells, flip-flops,
    memory bits and transistors (``stat -tech cmos``)."""

    lut4: int | None = None
    carry: int | None = None
    dsp: int | None = None
    bram: int | None = None
    lutram: int | None = None
    widemux: int | None = None
    ff: int | None = None
    lut_total: int | None = None
    cells: int | None = None
    memory_bits: int | None = None
    transistors: int | None = None

    @classmethod
    def from_flow(cls, res: dict) -> Resources:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in res.items() if k in known})

    def as_dict(self) -> dict:
        """The figures the flow reported, as the flows' own dict."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class FlowRun:
    """One synthesis as a table row needs it: its resources, wall seconds and LUT mapper
    (``flat``: ``synth_ecp5``'s abc9; ``abc``: ``abc -lut 4``)."""

    resources: Resources
    seconds: float | None = None
    flow: str | None = None

    @classmethod
    def from_flow(cls, r: dict) -> FlowRun:
        return cls(Resources.from_flow(r["resources"]), r.get("seconds"), r.get("flow"))


@dataclass(frozen=True)
class SynthRun:
    """One synthesis: its resources, wall seconds, tool versions, work folder and whether the
    stored run of an identical design was reused."""

    resources: Resources
    seconds: float | None = None
    tools: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    reused: bool = False

    @classmethod
    def from_flow(cls, r: dict) -> SynthRun:
        return cls(Resources.from_flow(r["resources"]), r.get("seconds"), r.get("tools", {}),
                   r.get("workdir"), r.get("reused", False))


@dataclass(frozen=True)
class Hop:
    """The slowest routing hop of a path: its net, delay (ns), end cells and their places."""

    net: str | None
    delay_ns: float
    from_cell: str
    to_cell: str
    from_loc: tuple[int, ...] | None = None
    to_loc: tuple[int, ...] | None = None


@dataclass(frozen=True)
class CriticalPath:
    """nextpnr's critical path (:func:`flows.pnr.critical_path`): its end points, delay split
    into logic and routing (ns), its logic levels, its slowest hop and the RTL lines along it."""

    start: str | None = None
    end: str | None = None
    delay_ns: float | None = None
    logic_ns: float | None = None
    routing_ns: float | None = None
    logic_levels: int | None = None
    worst_hop: Hop | None = None
    rtl_sources: tuple[str, ...] = ()

    @classmethod
    def from_flow(cls, cp: dict | None) -> CriticalPath | None:
        if cp is None:
            return None
        from dstar_rtl.results.base import build
        return build(cls, cp, "critical path")


@dataclass(frozen=True)
class PnrRun:
    """One place and route: Fmax against the constraint, whether timing was met, wall seconds,
    tool versions, the device's cells used and available, the critical path."""

    fmax_mhz: float
    constraint_mhz: float
    timing_pass: bool
    seconds: float | None = None
    reused: bool = False
    tools: dict[str, str] = field(default_factory=dict)
    utilisation: dict[str, dict[str, int]] = field(default_factory=dict)
    critical_path: CriticalPath = field(default_factory=CriticalPath)

    @classmethod
    def from_flow(cls, p: dict) -> PnrRun:
        return cls(p["fmax_mhz"], p["constraint_mhz"], p["timing_pass"], p.get("seconds"),
                   p.get("reused", False), p.get("tools", {}), p.get("utilisation", {}),
                   CriticalPath.from_flow(p.get("critical_path")) or CriticalPath())


@dataclass(frozen=True)
class StepTime:
    """A measurement's step (:class:`gen.progress.Step`): its name, wall seconds, status and
    the machine's one-minute load average when it ended."""

    step: str
    seconds: float
    status: str
    load_avg_1min: float | None = None


@dataclass(frozen=True)
class AsicArea:
    """A standard-cell netlist's cell area (µm²), its combinational and sequential parts and its
    flip-flops (``dstar synth --target asic``, buffers as macros)."""

    area: float
    combinational_area: float | None = None
    sequential_area: float | None = None
    ff: int | None = None

    @classmethod
    def from_flow(cls, res: dict) -> AsicArea:
        return cls(**{f.name: res.get(f.name) for f in fields(cls)})


@dataclass(frozen=True)
class Library:
    """The standard-cell library a result was measured on: its name, file and SHA-256."""

    name: str | None
    file: str | None = None
    sha256: str | None = None

    @classmethod
    def from_flow(cls, lib: dict) -> Library:
        return cls(**{f.name: lib.get(f.name) for f in fields(cls)})


@dataclass(frozen=True)
class Interval:
    """A mean over ``n`` samples with its 95 % Student-t interval ``[lo, hi]``."""

    mean: float
    lo: float
    hi: float
    n: int


@dataclass(frozen=True)
class Bounds:
    """An interval without a mean (the exact binomial interval of an agreement count)."""

    lo: float
    hi: float


@dataclass(frozen=True)
class QualitySummary:
    """The quality of a sampling point over its seeds (:func:`analysis.profile._sweep_summary`):
    average activation bits, PSNR against the float sample, the classifier's agreement with the
    float sample (per seed, its count ``(k, n)`` and its exact interval), the share of
    quantizations that are exact, of saturated values, the bit mix and the bits by layer
    type."""

    avg_bits: Interval
    psnr_db: Interval
    agrees_with_float: Interval
    agreement_count: tuple[int, ...]
    agreement_exact: Bounds
    quant_correct: Interval
    share_saturated: Interval
    mix: dict[str, float]
    layer_types: dict[str, dict[str, float]]
