"""The record of a board build (:class:`BoardBuild`, ``reports/board-<board>-<preset>.json``):
what ``dstar build`` measured of the bitstream it made (:func:`flows.board.build`): resources,
Fmax against the board's clock, timing, the tools and the time it took. ``dstar report`` reads
the last build of each board and preset.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.gen.paths import REPORTS
from dstar_rtl.results.base import Result, build, plain
from dstar_rtl.results.quantities import CriticalPath, Resources

__all__ = ["BoardBuild", "record_path", "record"]


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


def record_path(board: str, preset: str):
    """Where the record of ``board`` with the ``preset`` core goes (``reports/``)."""
    return REPORTS / f"board-{board}-{preset}.json"


def record(result: dict) -> dict:
    """``{path: text}`` of the record of :func:`flows.board.build`'s ``result`` (written with
    the build's outputs)."""
    body = {k: (os.path.relpath(v, REPORTS.parent) if k == "bitstream" else v)
            for k, v in result.items() if k != "utilisation"}
    prov = run_provenance("board", {result["preset"]: result["config_hash"]})
    rec = build(BoardBuild, dict(body, provenance=plain(prov)), "the board build")
    return {record_path(result["board"], result["preset"]): rec.to_json()}
