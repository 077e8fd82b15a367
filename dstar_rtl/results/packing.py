"""The typed result of ``dstar measure packing`` (``reports/qpu_packing.json``,
:mod:`app.reports.packing` measures and renders it): lane utilization and QPU area per packing."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import AsicArea, Library, Resources

__all__ = ["PackingRow", "Packing"]


@dataclass(frozen=True)
class PackingRow:
    """One packing: its parameters, the bench workload's groups and valid lanes, and its QPU's
    ECP5 cells (``abc -lut 4``) and cell area."""

    label: str
    packer: str
    open_groups: int
    pack_windows: int
    groups: int
    lanes_valid: int
    lane_util: float
    config_hash: str
    ecp5: Resources
    ecp5_flow: str | None
    asic: AsicArea | None
    pack_bins: int | None = None


@dataclass(frozen=True)
class Packing(Result):
    """``reports/qpu_packing.json``: a row per packing of :data:`PACKINGS`."""

    KIND = "packing"
    yosys: str
    library: Library | None
    steps: int
    operating_point: str
    bench: dict[str, str | int]
    rows: tuple[PackingRow, ...]
