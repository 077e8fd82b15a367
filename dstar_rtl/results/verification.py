"""The typed result of ``dstar measure verification`` (``reports/verification.json``,
:mod:`app.reports.verification` records and renders it): the cocotb regression's verdicts."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result

__all__ = ["Run", "Verification"]


@dataclass(frozen=True)
class Run:
    """One cocotb run's verdict: its unit, preset, configuration, simulator, run and test
    module, the tests expected, passed, failed, skipped and missing, whether it passes and,
    if not, why, whether the runner left a verdict, and when it ran."""

    unit: str
    preset: str
    config_hash: str
    simulator: str
    run: str
    module: str
    tests: int
    passed: int
    failed: int
    skipped: int
    missing: int
    passing: bool
    why: str
    has_verdict: bool
    date: str


@dataclass(frozen=True)
class Verification(Result):
    """``reports/verification.json``: the runs of the regression made on today's sources
    (``sources``: their digest), how many pass, how many older runs were left out."""

    KIND = "verification"
    sources: str
    runs: int
    passing: int
    older: int
    rows: tuple[Run, ...]
