"""The typed result of ``dstar measure pe-levers`` (``reports/pe_levers.json``,
:mod:`app.reports.pe_levers` measures and renders it): the slice PE's and the MPU's levers alone."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import CriticalPath, FlowRun

__all__ = ["LeverRow", "PnrSettings", "PeLevers"]


@dataclass(frozen=True)
class LeverRow:
    """One PE or MPU: its lever settings (``None``: the preset's), its synthesis on the ECP5
    with and without DSP blocks and on generic gates, and its Fmax (or why there is none)."""

    label: str
    unit: str
    config_hash: str
    digit_product: str | None = None
    digits: str | None = None
    weight_hop: int | None = None
    act_hop: int | None = None
    pe_stages: int | None = None
    ecp5: FlowRun | None = None
    ecp5_nodsp: FlowRun | None = None
    generic: FlowRun | None = None
    fmax_mhz: float | None = None
    pnr_seconds: float | None = None
    critical_path: CriticalPath | None = None
    fmax_error: str | None = None


@dataclass(frozen=True)
class PnrSettings:
    """nextpnr's constraint (MHz), seed and device of the Fmax figures."""

    freq_mhz: float
    seed: int
    device: str


@dataclass(frozen=True)
class PeLevers(Result):
    """``reports/pe_levers.json``: a row per PE setting and, with ``--mpu``, per MPU."""

    KIND = "pe-levers"
    host: dict[str, int | str]
    tools: dict[str, str]
    preset: str
    pnr: PnrSettings
    pe: tuple[LeverRow, ...]
    mpu: tuple[LeverRow, ...] = ()
