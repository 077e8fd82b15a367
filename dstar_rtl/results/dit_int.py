"""The typed result of ``dstar dit-int`` (``reports/dit_int.json``, :mod:`app.commands.dit_int`
measures and renders it): the float DiT with the integer blocks against the float model."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result

__all__ = ["DitIntRun", "DitInt"]


@dataclass(frozen=True)
class DitIntRun:
    """One preset with SAR on or off: the model and configuration, the sampling run (steps,
    seed, label, weight and calibration seeds, the SAR interval, the base), the kept blocks per
    attention, saturations, each layer's flags, every step's errors and the summary."""

    model: dict
    config: dict
    steps: int
    seed: int
    label: int
    weight_seed: int
    calib_seed: int | None
    sar: bool
    interval: int | None
    base_log2: int
    kept_fraction: tuple[float, ...]
    input_saturated: int
    flags: dict
    per_step: tuple[dict, ...]
    summary: dict


@dataclass(frozen=True)
class DitInt(Result):
    """``dstar dit-int --json``: every run, keyed by preset (and ``no-SAR``)."""

    KIND = "dit-int"
    model: str
    runs: dict[str, DitIntRun]
