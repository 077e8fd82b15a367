"""The typed result of ``dstar measure sizes`` (``reports/sweep.json``, :mod:`app.benches.sizes`
measures and renders it): the arrays' resources at each size."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import Resources

__all__ = ["SizePoint", "SizeStep", "Sizes"]


@dataclass(frozen=True)
class SizePoint:
    """One unit at one size: its configuration's hash, ECP5 resources, the LUT mapper that
    produced them, Yosys's seconds, whether a stored identical run was reused, the tools."""

    unit: str
    size: int
    config_hash: str
    resources: Resources
    flow: str
    seconds: float
    reused: bool
    tools: dict[str, str]


@dataclass(frozen=True)
class SizeStep:
    """One farm job: its name, wall seconds and, when the stored run was reused, ``reused``."""

    name: str
    seconds: float
    status: str | None = None


@dataclass(frozen=True)
class Sizes(Result):
    """``reports/sweep.json``: every (size, unit) point and the farm's steps."""

    KIND = "sizes"
    base_preset: str
    points: tuple[SizePoint, ...]
    steps: tuple[SizeStep, ...] = ()
