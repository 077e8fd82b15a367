"""The analytic estimate (:mod:`fpga.estimate`) against real ECP5 synthesis.

Every comparison synthesizes with :func:`fpga.synth.synthesize` (``reuse=True``: a stored result
of byte-identical RTLIL, script and Yosys is taken, e.g. one that ``python -m fpga.estimate
--calibrate`` made; otherwise Yosys runs) and asserts the relative error of the estimate's LUT
total and flip-flops against the documented tolerance ``fpga.estimate.TOLERANCE`` (LUTs 25 %,
flip-flops 10 %; the arrays' flip-flops and their DSP and RAM blocks must be exact).

Measured errors of the calibration of 2026-11-30 (Yosys 0.70; estimate / synthesis - 1; every
run is listed in ``fpga.estimate.CALIBRATION``):

__ERRORS__

Fast tier: the tiny PE and MPU (fitted) and three held-out configurations, each ECP5 run under a
minute cold (a few seconds when stored). Slow tier: the QPU, the VPU, the QPU → MPU chain and the
tiny MPU without DSPs (one to several minutes each cold).
"""

import time

import pytest

from fpga.estimate import (CALIBRATION, CALIBRATION_RUNS, TARGETS, TOLERANCE, UNITS,
                           VALIDATION_RUNS, errors, estimate, fit)
from fpga.synth import synthesize
from golden.config import preset

ARRAYS = ("pe", "mpu", "baseline")

# (unit, overrides, nodsp): fast tier.
FAST = [
    ("pe", {}, False),
    ("pe", {}, True),
    ("mpu", {}, False),
    ("pe", {"weight_width": 6}, False),                                        # held out
    ("mpu", {"rows": 2, "cols": 2, "weight_width": 6, "pe_stages": 2}, False),  # held out
    ("mpu", {"rows": 2, "cols": 2, "weight_width": 6, "pe_stages": 2}, True),   # held out
    ("baseline", {"rows": 2, "cols": 2, "weight_width": 6}, False),             # held out
]
SLOW = [
    ("mpu", {}, True),
    ("mpu", {"rows": 3, "cols": 3}, False),                                     # held out
    ("baseline", {}, True),
    ("qpu", {}, False),
    ("qpu", {"rows": 2, "cols": 2}, False),                                     # held out
    ("vpu", {}, False),
    ("vpu", {}, True),
    ("vpu", {"vpu_lanes": 2, "act_width": 12, "act_frac": 6, "base_log2": 4}, False),  # held out
    ("qpu_mpu", {}, False),                                                     # held out
]


def _ids(cases):
    return [f"{u}-{'-'.join(f'{k}={v}' for k, v in ov.items()) or 'tiny'}"
            f"-{'nodsp' if nd else 'dsp'}" for u, ov, nd in cases]


def _compare(unit, overrides, nodsp):
    cfg = preset("tiny", **overrides)
    res = synthesize(unit, cfg, "ecp5", nodsp=nodsp, reuse=True)
    est = estimate(unit, cfg)["ecp5_nodsp" if nodsp else "ecp5"]
    got = res["resources"]
    lut_err = est["lut_total"] / got["lut_total"] - 1
    ff_err = est["ff"] / got["ff"] - 1
    tol = TOLERANCE["lut_nodsp" if nodsp else "lut"]
    assert abs(lut_err) <= tol, (f"LUT estimate {est['lut_total']} vs {got['lut_total']} "
                                 f"synthesized: {100 * lut_err:+.1f} % (tolerance {100 * tol} %)")
    ff_tol = 0.01 if unit in ARRAYS else TOLERANCE["ff"]
    assert abs(ff_err) <= ff_tol, (f"FF estimate {est['ff']} vs {got['ff']} synthesized: "
                                   f"{100 * ff_err:+.1f} %")
    if unit in ARRAYS:
        assert (est["dsp"], est["bram"], est["lutram"]) == (got["dsp"], got["bram"],
                                                            got["lutram"])


@pytest.mark.parametrize("unit, overrides, nodsp", FAST, ids=_ids(FAST))
def test_estimate_vs_synthesis(unit, overrides, nodsp):
    _compare(unit, overrides, nodsp)


@pytest.mark.slow
@pytest.mark.parametrize("unit, overrides, nodsp", SLOW, ids=_ids(SLOW))
def test_estimate_vs_synthesis_slow(unit, overrides, nodsp):
    _compare(unit, overrides, nodsp)


# ------------------------------------------------------------------- no synthesis below here
def test_calibration_is_the_fit_of_its_measurements():
    """The stored coefficients are what the fit gives on the stored measurements (nobody edited
    them), and the stored errors are those of the stored coefficients."""
    recs = [dict(label=lab, kind=kind, preset=p, overrides=ov,
                 measured=CALIBRATION["measured"][lab]) for lab, kind, p, ov in CALIBRATION_RUNS]
    coef = fit(recs)
    for t in TARGETS:
        assert coef[t].keys() == CALIBRATION["coef"][t].keys()
        for k, v in coef[t].items():
            assert v == pytest.approx(CALIBRATION["coef"][t][k], rel=1e-3)
    assert errors(CALIBRATION["coef"], recs) == CALIBRATION["error"]
    held = [dict(label=lab, kind=kind, preset=p, overrides=ov,
                 measured=CALIBRATION["measured"][lab]) for lab, kind, p, ov in VALIDATION_RUNS]
    assert errors(CALIBRATION["coef"], held) == CALIBRATION["validation"]


def test_measured_errors_within_tolerance():
    """Every error measured at calibration, fitted or held out, is within the tolerance."""
    for errs in (CALIBRATION["error"], CALIBRATION["validation"]):
        for label, e in errs.items():
            for t, v in e.items():
                assert abs(v) <= TOLERANCE[t], (label, t, v)


def test_peak_ops():
    tiny, paper = preset("tiny"), preset("paper")
    assert estimate("mpu", tiny)["peak"]["ops_per_cycle"] == 4 * 4 * 4
    assert estimate("mpu", paper)["peak"]["ops_per_cycle"] == 64 * 64 * 4
    assert estimate("mpu", paper)["peak"]["int8_mac_equivalent"] == 64 * 64
    assert estimate("qpu_mpu", tiny)["peak"]["ops_per_cycle"] == 64
    assert estimate("baseline", tiny)["peak"]["ops_per_cycle"] == 16
    assert estimate("vpu", preset("fpga"))["peak"]["ops_per_cycle"] == 8
    assert estimate("qpu", preset("fpga"))["peak"]["ops_per_cycle"] == 8
    assert estimate("pe", tiny)["peak"]["ops_per_cycle"] == 4


def test_structure_and_counts():
    est = estimate("mpu", preset("tiny"))
    assert [p["count"] for p in est["parts"]] == [16, 1]
    assert sum(p["ff"] for p in est["parts"]) == pytest.approx(est["ecp5"]["ff"], abs=2)
    assert est["ecp5"]["dsp"] == 64 and est["ecp5_nodsp"]["dsp"] == 0
    assert est["generic"]["memory_bits"] == 64 * 4 * 8
    assert est["ecp5_nodsp"]["lut_total"] > est["ecp5"]["lut_total"]
    # More lanes, more of everything.
    wide = estimate("mpu", preset("tiny", lanes=8))
    for k in ("lut_total", "ff", "dsp"):
        assert wide["ecp5"][k] > est["ecp5"][k]


def test_every_unit_and_preset_is_cheap():
    t0 = time.perf_counter()
    for unit in UNITS:
        for name in ("tiny", "fpga", "paper"):
            e = estimate(unit, preset(name))
            assert e["ecp5"]["lut_total"] > 0 and e["ecp5"]["ff"] > 0
            assert e["generic"]["transistors"] > 0
    assert time.perf_counter() - t0 < 5


def test_refuses_what_the_rtl_refuses():
    with pytest.raises(ValueError, match="unit must be one of"):
        estimate("gpu", preset("tiny"))
    with pytest.raises(ValueError, match="sort_n must be >= 4 for the QPU"):
        estimate("qpu", preset("tiny", sort_n=2, lanes=2))
