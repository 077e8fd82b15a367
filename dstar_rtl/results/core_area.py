"""The typed result of ``dstar measure core-area`` (``reports/core_area.json``,
:mod:`app.reports.core_area` measures and renders it): the core's ECP5 area by part."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import Resources, StepTime

__all__ = ["CoreParts", "CoreArea"]


@dataclass(frozen=True)
class CoreParts:
    """One preset's core synthesized module by module: ECP5 cells by part and in total (the
    flattened netlist), Yosys's seconds, versions and work folder."""

    preset: str
    variant: str | None
    config_hash: str
    parts: dict[str, Resources]
    total: Resources
    seconds: float
    tools: dict[str, str]
    workdir: str


@dataclass(frozen=True)
class CoreArea(Result):
    """``reports/core_area.json``: the core's ECP5 area by part for each preset."""

    KIND = "core-area"
    presets: dict[str, CoreParts]
    steps: tuple[StepTime, ...]
