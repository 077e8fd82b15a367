"""The typed result of ``dstar measure pe-area`` (``reports/pe_area.json``,
:mod:`app.reports.pe_area` measures and renders it): the DSTAR and INT8 PEs in standard cells, lever
by lever, with their energy on a workload."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import Library

__all__ = ["Workload", "PeRow", "PresetPes", "PeArea"]


@dataclass(frozen=True)
class Workload:
    """The workload a preset's rates come from: average activation bits, lane fill, source."""

    bits: float
    fill: float
    source: str


@dataclass(frozen=True)
class PeRow:
    """One PE with one lever: its cells' area (µm², combinational and sequential), flip-flops,
    accumulator bits, critical path (ns), rate (values per cycle), area per value and cycle, and
    that against the INT8 default's; for DSTAR rows the area against DSTAR's default."""

    kind: str
    lever: str
    overrides: dict[str, int | str | bool]
    config_hash: str
    area_um2: float
    comb_um2: float
    seq_um2: float
    ff: int
    acc_bits: int
    critical_ns: float | None
    values_per_cycle: float
    um2_per_value: float
    seconds: float | None
    per_um2_vs_int8: float
    area_vs_default: float | None = None


@dataclass(frozen=True)
class PresetPes:
    workload: Workload
    rows: tuple[PeRow, ...]


@dataclass(frozen=True)
class PeArea(Result):
    """``reports/pe_area.json``: every lever's PE for each preset."""

    KIND = "pe-area"
    yosys: str
    liberty: Library
    presets: dict[str, PresetPes]
