"""The typed result of ``dstar measure perf`` (``reports/perf_model.json``,
:mod:`app.benches.perf_validate` measures and renders it): the cycle model's calibration and its
errors against the RTL per preset."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.perf.perf_model import Timing
from dstar_rtl.results.base import Result

__all__ = ["Counters", "Section", "Errors", "PresetFit", "PerfModel"]


@dataclass(frozen=True)
class Counters:
    """The core's cycle counter and its engines' busy counters over a section."""

    cycles: int
    busy_H: int
    busy_Q: int
    busy_M: int
    busy_V: int


@dataclass(frozen=True)
class Section:
    """One section of one step of a validation layer (its shape: tokens, channels in and out,
    drift) or of the DiT block (``shape == "block"``): the RTL's counters and the model's."""

    shape: str
    step: int
    section: str
    rtl: Counters
    model: Counters
    tokens: int | None = None
    cin: int | None = None
    cout: int | None = None
    drift: int | None = None


@dataclass(frozen=True)
class Errors:
    """The largest and the mean absolute relative error over ``n`` sections or steps."""

    max: float
    mean: float
    n: int


@dataclass(frozen=True)
class PresetFit:
    """One preset's calibration (the :class:`perf.perf_model.Timing` fitted on the RTL) and its
    validation: every section of the validation layers (``rows``) and of the DiT block, the
    block's bytes per step by buffer and direction, the errors by section name."""

    preset: str
    config_hash: str
    simulator: str
    sim_seconds: float
    timing: Timing
    shapes: int
    rows: tuple[Section, ...]
    block: tuple[Section, ...]
    block_bytes: tuple[dict[str, int], ...]
    calibration: dict[str, Errors]
    summary: dict[str, Errors]
    block_summary: dict[str, Errors]


@dataclass(frozen=True)
class PerfModel(Result):
    """``reports/perf_model.json``: the cycle model calibrated and validated per preset."""

    KIND = "perf"
    presets: tuple[PresetFit, ...]
