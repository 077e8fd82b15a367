"""The estimate's fitted coefficients, and what a list of parts costs under them.

The coefficients, the synthesis measurements they were fitted to and the fit's error on every
run live in ``flows/estimate_calibration.json`` (shipped as package data), read once at import
into :data:`CALIBRATION`::

    {"yosys": "0.70", "date": "2026-12-01",
     "coef": {target: {feature: coefficient}},
     "error": {label: {target: estimate / measured - 1}},          # fitted runs
     "validation": {label: {target: ...}},                          # held-out runs
     "measured": {label: {target: value}}}                          # both

``dstar measure estimate --calibrate --write`` (or ``--refit --write``) rewrites the file with
:func:`write_calibration`; it is not edited by hand (``tests/test_estimate.py`` checks that the
coefficients are the fit of the measurements). :func:`value` prices parts
(:class:`flows.estimate_parts.Part`): per target Σ coefficient × feature over the features that
target's model may use (:func:`uses`), plus each part's ``fixed`` amounts.
"""

from __future__ import annotations

import json
from pathlib import Path

from dstar_rtl.gen.outputs import data_json

__all__ = ["MEASURED_VARIANT", "CALIBRATION", "CALIBRATION_FILE", "TARGETS", "load_calibration",
           "calibration_text", "write_calibration", "uses", "value", "ecp5_resources"]

#: The measured cores and every record of the calibration are of the presets' ``initial``
#: variant (:data:`golden.config.VARIANTS`): the default before issue 27, when they were measured.
MEASURED_VARIANT = "initial"

#: The stored calibration (package data next to this module).
CALIBRATION_FILE = Path(__file__).resolve().with_name("estimate_calibration.json")

#: Estimated quantity → (synthesis target, nodsp, result field) it is calibrated against.
TARGETS = {
    "lut": ("ecp5", False, "lut_total"),
    "lut_nodsp": ("ecp5", True, "lut_total"),
    "ff": ("ecp5", False, "ff"),
    "transistors": ("generic", False, "transistors"),
}


def load_calibration(path: Path | None = None) -> dict:
    """The calibration stored in ``path`` (default :data:`CALIBRATION_FILE`)."""
    return json.loads(Path(path or CALIBRATION_FILE).read_text())


def calibration_text(cal: dict) -> str:
    """The JSON text :func:`write_calibration` stores: two-space indent, keys in the order the
    calibration builds them (runs in the order of the run lists), a final newline."""
    return data_json(cal, indent=2) + "\n"


def write_calibration(cal: dict, path: Path | None = None) -> Path:
    """Store ``cal`` (the layout of :data:`CALIBRATION`) in ``path`` (default
    :data:`CALIBRATION_FILE`); returns the path. The running process keeps the calibration it
    read at import."""
    path = Path(path or CALIBRATION_FILE)
    path.write_text(calibration_text(cal))
    return path


CALIBRATION = load_calibration()


def uses(target: str, feature: str) -> bool:
    """Which features a target's model may use: ``reg.*`` only the flip-flop count; ``ff``,
    ``mem`` and ``g.*`` (what is a block RAM on ECP5) only the transistor count."""
    if target == "ff":
        return feature.startswith("reg.")
    if feature.startswith("reg."):
        return False
    if feature in ("ff", "mem") or feature.startswith("g."):
        return target == "transistors"
    return True


def value(target: str, ps: list) -> float:
    """``target``'s estimate of parts ``ps`` under the stored coefficients: Σ count × (Σ
    coefficient × feature + fixed amount)."""
    c = CALIBRATION["coef"][target]
    return sum(p.count * (sum(c.get(f, 0.0) * a for f, a in p.vector().items()
                              if uses(target, f)) + p.fixed.get(target, 0))
               for p in ps)


def ecp5_resources(ps: list, nodsp: bool = False) -> dict:
    """``{lut_total, ff, dsp, bram, lutram}`` of parts ``ps`` (``nodsp``: multipliers in LUTs)."""
    return dict(lut_total=round(value("lut_nodsp" if nodsp else "lut", ps)),
                ff=round(value("ff", ps)),
                dsp=0 if nodsp else sum(p.count * p.dsp for p in ps),
                bram=sum(p.count * p.bram for p in ps),
                lutram=sum(p.count * p.lutram for p in ps))
