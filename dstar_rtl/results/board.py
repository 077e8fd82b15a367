"""The record of a board build (``reports/board-<board>-<preset>.json``, :mod:`app.reports.board`
writes it): what ``dstar build`` measured of the bitstream it made."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import CriticalPath, Resources

__all__ = ["BoardBuild"]


@dataclass(frozen=True)
class BoardBuild(Result):
    """One board build: the board, the core's preset and configuration, the UART's baud rate
    and cycles per bit, the core's clock (``pll``: made by the FPGA's PLL), the resources and
    LUT mapper, Fmax against the constraint and whether timing was met, the critical path, the
    bitstream (relative to the checkout), the tools and the build's seconds."""

    KIND = "board"
    board: str
    preset: str
    config_hash: str
    baud: int
    cycles_per_bit: int
    clock_mhz: float
    pll: bool
    resources: Resources
    synth_flow: str
    fmax_mhz: float
    constraint_mhz: float
    timing_pass: bool
    critical_path: CriticalPath | None
    bitstream: str
    tools: dict[str, str]
    seconds: float
