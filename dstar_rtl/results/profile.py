"""The typed results of ``dstar profile`` (:class:`Profile`, ``reports/profile.json``) and
``dstar profile --sweep`` (:class:`ProfileSweep`, ``reports/profile_sweep.json``): FMDQ and SAR
on the trained digits DiT, and the FMDQ operating point chosen by the threshold and base sweep
(:mod:`analysis.profile` measures them, :mod:`app.reports.profile_report` renders them).

Readers (REPORT.md's profile section, the projection's workload statistics) load them with
``load``; :func:`analysis.profile.load_operating_point`, below the application, reads the
sweep's ``operating_point`` from the same file.
"""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import QualitySummary

__all__ = ["Estimate", "Profile", "ProfileRun", "ProfileSummary", "ProfileSweep", "SweepPoint",
           "Confirmation", "OperatingPoint", "SweepRule"]


@dataclass(frozen=True)
class Estimate:
    """A mean over ``n`` seeds with its 95 % Student-t interval (``None`` with one seed)."""

    mean: float | None
    lo: float | None
    hi: float | None
    n: int


@dataclass(frozen=True)
class ProfileSummary:
    """One profile point over its seeds: PSNR against the float sample, the quantized samples'
    class accuracy and agreement with the float ones, average activation bits, the attention
    work SAR removes and the blocks it keeps, the P cache's bytes, and per layer type the
    average bits and the share of sub-channels at each precision."""

    psnr_db: Estimate
    quant_correct: Estimate
    agrees_with_float: Estimate
    avg_bits: Estimate
    attention_work_removed: Estimate
    attention_kept_fraction: Estimate
    pcache_bytes: Estimate
    layer_types: dict[str, dict[str, Estimate]]


@dataclass(frozen=True)
class ProfileRun:
    """One profile point (FMDQ alone, or with SAR at a threshold and interval): its summary
    and each seed's figures."""

    name: str
    sar: bool
    sar_thr: float | None
    sar_interval: int | None
    summary: ProfileSummary
    per_seed: tuple[dict, ...]


@dataclass(frozen=True)
class FloatQuality:
    class_accuracy: Estimate
    per_seed_correct: tuple[float, ...]


@dataclass(frozen=True)
class Profile(Result):
    """``reports/profile.json``: the model and its training, the configuration, the sampling
    run (steps, seeds, labels, the SAR calibration's seeds, the per-layer bases), the
    classifier, the float samples' accuracy, every point."""

    KIND = "profile"
    model: dict
    training: dict
    config: dict
    steps: int
    seeds: tuple[int, ...]
    labels: tuple[int, ...]
    calib_seeds: tuple[int, ...]
    base_log2: dict[str, int]
    ci_method: str
    classifier: dict
    float: FloatQuality
    runs: tuple[ProfileRun, ...]
    seconds: float


@dataclass(frozen=True)
class Confirmation:
    """A screened point run again at the full seed count, and whether it passes the rule."""

    summary: QualitySummary
    passes: bool


@dataclass(frozen=True)
class SweepPoint:
    """One point of the grid (FMDQ thresholds, the profiled base and its offset, each layer's
    base), or today's (``today``) or the preset's initial variant's (``initial``): its summary
    over the sweep's seeds, whether it passed the screen, its confirmation (``None``: not
    confirmed) and each seed's figures."""

    name: str
    thr: tuple[int, ...]
    base: str
    base_offset: int | None
    base_log2: dict[str, int]
    summary: QualitySummary
    screen: bool
    confirm: Confirmation | None
    per_seed: tuple[dict, ...]
    today: bool = False
    initial: bool = False


@dataclass(frozen=True)
class NamedPoint:
    """Today's point or the reference point: its thresholds, bases and summary."""

    name: str
    thr: tuple[int, ...]
    base_log2: dict[str, int]
    summary: QualitySummary


@dataclass(frozen=True)
class OperatingPoint:
    """The chosen point as a configuration runs it, with the seeds and steps it was confirmed
    on."""

    name: str
    thr: tuple[int, ...]
    base: str
    base_offset: int | None
    base_log2: dict[str, int]
    steps: int
    seeds: tuple[int, ...]
    summary: QualitySummary


@dataclass(frozen=True)
class SweepRule:
    """The quality rule a point must meet, in numbers and words."""

    min_psnr_db: float
    min_agreement: float
    text: str
    screen: str
    why: str


@dataclass(frozen=True)
class ProfileSweep(Result):
    """``reports/profile_sweep.json``: the grid, the sweep's and the confirmation's seeds and
    steps, the rule, every point, today's and the reference point, the operating point."""

    KIND = "profile-sweep"
    model: dict
    training: dict
    config: dict
    grid: dict[str, tuple[int, ...]]
    steps: int
    seeds: tuple[int, ...]
    confirm_steps: int
    confirm_seeds: tuple[int, ...]
    calib_seed: int
    max_confirm: int
    profiled_base_log2: dict[str, int]
    ci_method: str
    rule: SweepRule
    points: tuple[SweepPoint, ...]
    reference: NamedPoint
    initial: NamedPoint
    chosen: str | None
    operating_point: OperatingPoint | None
    message: str
    seconds: float
