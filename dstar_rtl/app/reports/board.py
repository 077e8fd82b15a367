"""The record of a board build (:class:`BoardBuild`, ``reports/board-<board>-<preset>.json``):
what ``dstar build`` measured of the bitstream it made (:func:`flows.board.build`): resources,
Fmax against the board's clock, timing, the tools and the time it took. ``dstar report`` reads
the last build of each board and preset.
"""

from __future__ import annotations

import os

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.gen.paths import REPORTS
from dstar_rtl.results.base import build, plain
from dstar_rtl.results.board import BoardBuild

__all__ = ["BoardBuild", "record_path", "record"]


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
