"""The typed result of ``dstar measure qpu-rate`` (``reports/qpu_rate.json``,
:mod:`app.benches.qpu` measures and renders it): the QPU's rate per preset, packing and phase."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result

__all__ = ["QpuRateRow", "QpuRate"]


@dataclass(frozen=True)
class QpuRateRow:
    """One preset, packing and phase: the QPU's rate (:func:`measure`)."""

    preset: str
    packing: str
    packer: str
    open_groups: int
    pack_windows: int
    phase: str
    config_hash: str
    subchannels: int
    groups: int
    subchannels_per_cycle: float
    groups_per_cycle: float
    groups_per_subchannel: float
    mpu_wait_cycles: int
    first_group_latency: int
    lane_fill: float
    sim_cycles_per_second: float
    tiles: int
    pack_bins: int | None = None

    @property
    def key(self) -> str:
        return f"{self.preset}/{self.packing}/{self.phase}"


@dataclass(frozen=True)
class QpuRate(Result):
    """``reports/qpu_rate.json``: a row per preset, packing and phase."""

    KIND = "qpu-rate"
    rows: tuple[QpuRateRow, ...]
