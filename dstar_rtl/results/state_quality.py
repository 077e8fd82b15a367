"""The typed result of ``dstar measure state-quality`` (``reports/state_quality.json``,
:mod:`app.reports.state_quality` measures and renders it): the stored Y's cost in quality."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import QualitySummary

__all__ = ["QualityPoint", "StateQuality"]


@dataclass(frozen=True)
class QualityPoint:
    """One stored-Y setting at one base offset: its Y width, reduction bound, quality and
    whether it passes the operating-point rule."""

    name: str
    base_offset: int
    ystate_frac: int | None
    ystate_width: int
    max_reduction: int
    summary: QualitySummary
    passes: bool


@dataclass(frozen=True)
class StateQuality(Result):
    """``reports/state_quality.json``: every point of :func:`points`."""

    KIND = "state-quality"
    points: tuple[QualityPoint, ...]
    seeds: int
    steps: int
    preset: str
    thr: tuple[int, ...]
    acc_bits: int
    seconds: float
