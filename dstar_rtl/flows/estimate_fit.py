"""The fit of the estimate's coefficients to measured synthesis runs (no synthesis here).

:data:`CALIBRATION_RUNS` are the configurations the coefficients are fitted to,
:data:`VALIDATION_RUNS` the held-out ones whose error is the estimate's out-of-sample error.
A *record* is one run with what synthesis measured: ``{label, kind, preset, overrides,
measured {target: value}}`` (``kind`` a unit of :mod:`flows.estimate_parts` or a component
synthesized alone: ``int8pe``, ``sorter``, ``vpu_lane``). :func:`fit` fits, per target of
:data:`flows.estimate_coef.TARGETS`, non-negative coefficients by least squares on the relative
error (:func:`scipy.optimize.nnls`); :func:`errors` gives each record's error under given
coefficients; :func:`calibration` assembles both into the layout of
:data:`flows.estimate_coef.CALIBRATION`. The synthesis that measures the records is the
application's (``dstar measure estimate``, :mod:`app.benches.estimate_calibration`).
"""

from __future__ import annotations

import numpy as np

from dstar_rtl.golden.config import Config, preset
from dstar_rtl.golden.vpu import vpu_tables

from .estimate_coef import CALIBRATION, MEASURED_VARIANT, TARGETS, uses
from .estimate_parts import int8_pe, sorter, unit_parts, vpu_lane

__all__ = ["CALIBRATION_RUNS", "VALIDATION_RUNS", "COMPONENTS", "component_parts", "features",
           "fit", "errors", "stored_records", "calibration"]

#: Components synthesized alone for the fit (every other kind is a unit).
COMPONENTS = ("int8pe", "sorter", "vpu_lane")

_SEL = {"digit_product": "select"}
_SB = {"digit_product": "select", "digits": "booth"}
_BINS = {"packer": "bins"}

#: (label, unit or component, preset, overrides): the configurations the coefficients are fitted
#: to. Each synthesizes in well under two minutes for every target on two busy cores.
CALIBRATION_RUNS = (
    ("pe tiny", "pe", "tiny", {}),
    ("pe lanes=1", "pe", "tiny", {"lanes": 1}),
    ("pe lanes=2", "pe", "tiny", {"lanes": 2}),
    ("pe lanes=8", "pe", "tiny", {"lanes": 8}),
    ("pe ww=4", "pe", "tiny", {"weight_width": 4}),
    ("pe ww=12", "pe", "tiny", {"weight_width": 12}),
    ("pe max_reduction=4096", "pe", "tiny", {"max_reduction": 4096}),
    ("pe act_width=8", "pe", "tiny", {"act_width": 8, "act_frac": 4, "base_log2": 4}),
    ("pe stages=0", "pe", "tiny", {"pe_stages": 0}),
    ("pe stages=2", "pe", "tiny", {"pe_stages": 2}),
    ("pe horner", "pe", "tiny", {"alignment": "horner", "max_reduction": 2}),
    ("pe overflow", "pe", "tiny", {"overflow_detect": True, "acc_width": 20}),
    ("int8pe tiny", "int8pe", "tiny", {}),
    ("int8pe ww=4", "int8pe", "tiny", {"weight_width": 4}),
    ("int8pe ww=12 stages=2", "int8pe", "tiny", {"weight_width": 12, "pe_stages": 2}),
    ("mpu 2x2", "mpu", "tiny", {"rows": 2, "cols": 2}),
    ("mpu 2x2 lanes=2", "mpu", "tiny", {"rows": 2, "cols": 2, "lanes": 2}),
    ("mpu 3x3 lanes=2", "mpu", "tiny", {"rows": 3, "cols": 3, "lanes": 2}),
    ("mpu tiny", "mpu", "tiny", {}),
    ("baseline 2x2", "baseline", "tiny", {"rows": 2, "cols": 2}),
    ("baseline tiny", "baseline", "tiny", {}),
    ("sorter n=4", "sorter", "tiny", {"sort_n": 4}),
    ("sorter n=8", "sorter", "tiny", {}),
    ("sorter n=16", "sorter", "tiny", {"sort_n": 16}),
    ("qpu tiny", "qpu", "tiny", {}),
    ("qpu T=2 n=4 lanes=2", "qpu", "tiny", {"rows": 2, "cols": 2, "sort_n": 4, "lanes": 2}),
    ("qpu n=16", "qpu", "tiny", {"sort_n": 16}),
    # ECP5 synthesis of this one trips an assertion in Yosys 0.70's abc9 (ABC_OPS_REINTEGRATE,
    # rtlil.cc:3091), as it does for rows 2 and 8 with 4 lanes: only its generic run is fitted.
    ("qpu T=6", "qpu", "tiny", {"rows": 6, "cols": 6}),
    ("qpu lanes=2 max_reduction=1024", "qpu", "tiny", {"lanes": 2, "max_reduction": 1024}),
    ("qpu act_width=12", "qpu", "tiny", {"act_width": 12, "act_frac": 6, "base_log2": 4}),
    ("vpu_lane tiny", "vpu_lane", "tiny", {}),
    ("vpu_lane act_width=12", "vpu_lane", "tiny", {"act_width": 12, "act_frac": 6,
                                                   "base_log2": 4}),
    ("vpu lanes=1", "vpu", "tiny", {"vpu_lanes": 1}),
    ("vpu tiny", "vpu", "tiny", {}),
    ("vpu lanes=2", "vpu", "tiny", {"vpu_lanes": 2}),
    ("vpu lanes=8 max_reduction=256", "vpu", "tiny", {"vpu_lanes": 8, "max_reduction": 256}),
    # The select datapath (digit products as selects of the weight's multiples, no DSP) with
    # slice and with Booth digits, and Booth digits with multiplied products.
    ("pe select", "pe", "tiny", _SEL),
    ("pe select+booth", "pe", "tiny", _SB),
    ("pe select lanes=2", "pe", "tiny", {**_SEL, "lanes": 2}),
    ("pe select+booth lanes=8", "pe", "tiny", {**_SB, "lanes": 8}),
    ("pe booth", "pe", "tiny", {"digits": "booth"}),
    ("pe select+booth stages=0", "pe", "tiny", {**_SB, "pe_stages": 0}),
    ("mpu 2x2 select", "mpu", "tiny", {**_SEL, "rows": 2, "cols": 2}),
    ("mpu select+booth tiny", "mpu", "tiny", _SB),
    # The presets' array: select+Booth PEs with both operands broadcast (hops = rows = cols).
    ("mpu select+booth xbcast tiny", "mpu", "tiny", {**_SB, "weight_hop": 4, "act_hop": 4}),
    # The exponent bins (issue 28, the presets' packer) with slice and Booth digits.
    ("qpu bins tiny", "qpu", "tiny", _BINS),
    ("qpu bins 8", "qpu", "tiny", {**_BINS, "pack_bins": 8}),
    ("qpu bins 16 lanes=2", "qpu", "tiny", {**_BINS, "pack_bins": 16, "lanes": 2}),
    ("qpu bins booth lanes=8", "qpu", "tiny", {**_BINS, "digits": "booth", "lanes": 8}),
    ("qpu bins booth T=2", "qpu", "tiny", {**_BINS, "digits": "booth", "rows": 2, "cols": 2}),
)

#: Held-out configurations: synthesized and compared by ``dstar measure estimate --calibrate``
#: (and by the tests), never fitted to. Their errors are the estimate's measured out-of-sample
#: error.
VALIDATION_RUNS = (
    ("pe ww=6", "pe", "tiny", {"weight_width": 6}),
    ("pe lanes=2 stages=0 max_reduction=256", "pe", "tiny",
     {"lanes": 2, "pe_stages": 0, "max_reduction": 256}),
    ("pe horner lanes=2 ww=6", "pe", "tiny",
     {"alignment": "horner", "max_reduction": 1, "lanes": 2, "weight_width": 6}),
    ("pe overflow acc_width=26 lanes=8", "pe", "tiny",
     {"overflow_detect": True, "acc_width": 26, "lanes": 8}),
    ("mpu 3x3", "mpu", "tiny", {"rows": 3, "cols": 3}),
    ("mpu 2x2 ww=6 stages=2", "mpu", "tiny",
     {"rows": 2, "cols": 2, "weight_width": 6, "pe_stages": 2}),
    ("baseline 3x3", "baseline", "tiny", {"rows": 3, "cols": 3}),
    ("baseline 2x2 ww=6", "baseline", "tiny", {"rows": 2, "cols": 2, "weight_width": 6}),
    ("qpu T=2 lanes=2", "qpu", "tiny", {"rows": 2, "cols": 2, "lanes": 2}),
    ("qpu n=16 lanes=8", "qpu", "tiny", {"sort_n": 16, "lanes": 8}),
    ("vpu lanes=2 act_width=12", "vpu", "tiny",
     {"vpu_lanes": 2, "act_width": 12, "act_frac": 6, "base_log2": 4}),
    ("qpu_mpu tiny", "qpu_mpu", "tiny", {}),
    # 64 PEs: the extrapolation check (about 20 minutes of Yosys when not stored, e.g. by
    # dstar measure arrays).
    ("mpu fpga", "mpu", "fpga", {}),
    ("pe select+booth stages=2 ww=6", "pe", "tiny", {**_SB, "pe_stages": 2, "weight_width": 6}),
    ("mpu 3x3 select", "mpu", "tiny", {**_SEL, "rows": 3, "cols": 3}),
    # weight_hop: the column operand registered every 2 rows (MPU), broadcast (baseline).
    ("mpu select+booth weight_hop=2", "mpu", "tiny", {**_SB, "weight_hop": 2}),
    ("baseline weight_hop=4", "baseline", "tiny", {"weight_hop": 4}),
    # The fpga MPU with the select datapath and Booth digits (0 DSP; 64 PEs).
    ("mpu fpga select+booth", "mpu", "fpga", _SB),
    # The presets' MPU and QPUs (select+Booth PEs, operands broadcast; exponent bins).
    ("mpu fpga select+booth xbcast", "mpu", "fpga", {**_SB, "weight_hop": 8, "act_hop": 8}),
    ("qpu bins booth tiny", "qpu", "tiny", {**_BINS, "digits": "booth"}),
    ("qpu bins booth fpga", "qpu", "fpga", {**_BINS, "digits": "booth"}),
)


def component_parts(kind: str, cfg: Config) -> list:
    """Parts of a unit or of a component synthesized alone (:data:`COMPONENTS`)."""
    if kind == "int8pe":
        return [int8_pe(cfg)]
    if kind == "sorter":
        return [sorter(cfg)]
    if kind == "vpu_lane":
        return [vpu_lane(cfg, vpu_tables(cfg), operands=False)]
    return unit_parts(kind, cfg)


def features(rec: dict) -> dict:
    """Total features of a record's unit or component (every instance of every part)."""
    v = {}
    cfg = preset(rec["preset"], rec.get("variant", MEASURED_VARIANT), **rec["overrides"])
    for p in component_parts(rec["kind"], cfg):
        for f, a in p.vector().items():
            v[f] = v.get(f, 0) + p.count * a
    return v


def fit(records: list) -> dict:
    """Coefficients per target fitted to measured records by non-negative least squares on the
    relative error (each record's row divided by its measurement, so that every run weighs
    alike), rounded to 5 significant digits: ``{target: {feature: coefficient}}`` with the
    features in sorted order and zero coefficients left out."""
    # scipy.optimize takes over half a second to import: only the fit needs it.
    from scipy.optimize import nnls

    coef = {}
    vecs = [features(r) for r in records]
    for target in TARGETS:
        feats = sorted({f for v in vecs for f, a in v.items() if a and uses(target, f)})
        rows = [(v, r["measured"][target]) for v, r in zip(vecs, records)
                if r["measured"].get(target)]
        A = np.array([[v.get(f, 0) / y for f in feats] for v, y in rows], dtype=float)
        x, _residual = nnls(A, np.ones(len(rows)))
        coef[target] = {f: float(f"{c:.5g}") for f, c in zip(feats, x) if c > 0}
    return coef


def errors(coef: dict, records: list) -> dict:
    """``{label: {target: estimate / measured - 1}}`` of measured records under ``coef``,
    rounded to 4 decimals; a target with no measurement is left out."""
    out = {}
    for r in records:
        v = features(r)
        out[r["label"]] = {
            t: round(sum(coef[t].get(f, 0) * a for f, a in v.items() if uses(t, f))
                     / r["measured"][t] - 1, 4)
            for t in TARGETS if r["measured"].get(t)}
    return out


def stored_records(runs, cal: dict | None = None) -> list:
    """Records of ``runs`` with the measurements stored in ``cal`` (default the stored
    :data:`~flows.estimate_coef.CALIBRATION`; a run with none has ``measured == {}``)."""
    measured = (CALIBRATION if cal is None else cal)["measured"]
    return [dict(label=lab, kind=kind, preset=p, overrides=ov, measured=measured.get(lab, {}))
            for lab, kind, p, ov in runs]


def calibration(yosys: str, date: str, fitted: list, held: list) -> dict:
    """Fit ``fitted`` records and measure the error on them and on ``held``: a calibration in
    the layout of :data:`~flows.estimate_coef.CALIBRATION`, for a Yosys version and a date."""
    coef = fit(fitted)
    return dict(yosys=yosys, date=date, coef=coef,
                error=errors(coef, fitted), validation=errors(coef, held),
                measured={r["label"]: r["measured"] for r in fitted + held})
