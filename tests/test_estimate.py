"""The analytic estimate (:mod:`flows.estimate`) against real ECP5 synthesis.

Every comparison synthesizes with :func:`flows.synth.synthesize` (``reuse=True``: a stored result
of byte-identical RTLIL, script and Yosys is taken, e.g. one that ``dstar measure estimate
--calibrate`` made; otherwise Yosys runs) and asserts the relative error of the estimate's LUT
total and flip-flops against the documented tolerance ``flows.estimate.TOLERANCE`` (LUTs 25 %,
flip-flops 10 %; the arrays' flip-flops and their DSP and RAM blocks must be exact).

Measured errors in per cent, estimate / synthesis - 1, of the calibration of 2026-12-01 (Yosys
0.70; stored in ``flows/estimate_calibration.json``, read as ``flows.estimate.CALIBRATION``; "-":
the synthesis failed, see ``flows.estimate.CALIBRATION_RUNS``). The held-out runs took no part in
the fit: they are the estimate's error.

::

    configuration (tiny preset unless named)     LUT   LUT      FF  trans-
                                                     -nodsp         istors
    fitted:
    pe tiny                                     -5.3    -1.8    -0.0    +0.4
    pe lanes=1                                  +0.2    -3.7    -0.0    +0.5
    pe lanes=2                                  -6.4    +8.6    -0.0    -1.1
    pe lanes=8                                  -3.4    -1.1    -0.0    -0.2
    pe ww=4                                     +8.1    +2.0    -0.0    -0.0
    pe ww=12                                    -1.0    -1.7    -0.0    -0.0
    pe max_reduction=4096                       -3.7    -0.4    -0.0    +0.6
    pe act_width=8                              +8.3    -0.1    -0.0    +0.4
    pe stages=0                                 +5.1    +2.1    -0.0    +0.1
    pe stages=2                                 +3.4    +0.6    -0.0    +0.0
    pe horner                                   -0.0    +0.0    -0.0    +0.0
    pe overflow                                 +0.0    +0.0    -0.0    +0.0
    int8pe tiny                                 -2.5    +0.8    -0.0    -0.1
    int8pe ww=4                                 +0.0    -0.3    -0.0    -0.0
    int8pe ww=12 stages=2                       +0.0    -1.4    -0.0    -0.0
    mpu 2x2                                     -4.1    -3.2    -0.0    +0.4
    mpu 2x2 lanes=2                             +0.4    -1.9    -0.0    +0.1
    mpu 3x3 lanes=2                             -1.0    -3.5    -0.0    -0.1
    mpu tiny                                    +0.2    +0.7    -0.0    -0.2
    baseline 2x2                                -1.5    -0.8    -0.0    -0.3
    baseline tiny                               +3.8    +1.7    +0.2    +0.4
    sorter n=4                                  +2.4    +2.4    -0.9    -0.7
    sorter n=8                                  +0.3    +0.3    -0.9    +0.1
    sorter n=16                                 -2.5    -2.5    -0.9    +0.5
    qpu tiny                                    -0.1    -0.1    +0.4    -0.4
    qpu T=2 n=4 lanes=2                         -1.0    -1.0    -0.1    -0.1
    qpu n=16                                    -2.0    -2.0    +1.7    -0.1
    qpu T=6                                        -       -       -    -0.1
    qpu lanes=2 max_reduction=1024              -1.7    -1.7    +0.3    +0.5
    qpu act_width=12                            +4.2    +4.2    +0.5    +0.1
    vpu_lane tiny                               +3.2    +0.4    +0.5    +0.0
    vpu_lane act_width=12                       -3.5    -2.7    +0.8    +0.0
    vpu lanes=1                                 +0.0    -2.5    -0.2    +0.0
    vpu tiny                                    +0.0    +4.0    +0.5    +0.0
    vpu lanes=2                                 -0.0    +0.7    -0.4    -0.0
    vpu lanes=8 max_reduction=256               +0.0    -0.1    -1.2    +0.0
    pe select                                  -11.4   -10.7    -0.0    -0.5
    pe select+booth                            -20.8   -21.0    -0.0    -0.4
    pe select lanes=2                           +1.5    +1.6    -0.0    +0.8
    pe select+booth lanes=8                     +0.8    +0.9    -0.0    +0.6
    pe booth                                    -4.4    +1.8    -0.0    -0.7
    pe select+booth stages=0                   +18.6   +18.3    -0.0    -0.4
    mpu 2x2 select                              +7.7    +7.1    -0.0    +0.1
    mpu select+booth tiny                       -6.0    -5.6    -0.0    -0.4
    held out:
    pe ww=6                                     +5.0    +1.9    -0.0    +0.4
    pe lanes=2 stages=0 max_reduction=256      +20.5    -7.0    -0.0    -1.0
    pe horner lanes=2 ww=6                      +5.2    +3.7    -0.0    -0.2
    pe overflow acc_width=26 lanes=8            -7.8    -7.6    -0.0    +3.2
    mpu 3x3                                     -4.7    -2.6    -0.0    +0.4
    mpu 2x2 ww=6 stages=2                       +0.8    +3.5    -0.0    +0.4
    baseline 3x3                                -3.1    -0.2    -0.0    -0.2
    baseline 2x2 ww=6                           +1.4    -3.1    -0.0    -0.5
    qpu T=2 lanes=2                             -3.2    -3.2    +0.7    -0.7
    qpu n=16 lanes=8                            -5.7    -5.7    +1.6    -0.3
    vpu lanes=2 act_width=12                    -1.2   -15.3    -0.3    +0.7
    qpu_mpu tiny                                +0.1    +0.4    +0.3    -1.0
    mpu fpga                                    -1.9    +0.2    -0.0    -2.7
    pe select+booth stages=2 ww=6               +9.6    +9.0    -0.0    +1.5
    mpu 3x3 select                              +4.8    +5.7    -0.0    -0.0
    mpu select+booth weight_hop=2               -6.0    -5.6    -0.0    -0.4
    baseline weight_hop=4                       +3.6    +1.7    +0.2    +0.3
    mpu fpga select+booth                       -9.6    -8.2    -0.0    -3.3

Fast tier: the tiny PE and MPU (fitted) and three held-out configurations, each ECP5 run under a
minute cold (a few seconds when stored). Slow tier: the QPU, the VPU, the QPU → MPU chain and the
tiny MPU without DSPs (one to several minutes each cold).
"""

import time

import pytest
from _initial import preset

from dstar_rtl.flows import estimate_coef, estimate_parts
from dstar_rtl.flows.estimate import (
    CALIBRATION,
    CALIBRATION_RUNS,
    TARGETS,
    TOLERANCE,
    UNITS,
    VALIDATION_RUNS,
    errors,
    estimate,
    fit,
)
from dstar_rtl.flows.synth import synthesize
from dstar_rtl.gen.paths import ROOT
from dstar_rtl.golden.layouts import COUNTER_NAMES
from dstar_rtl.rtl.chunker import SLOTS
from dstar_rtl.rtl.qpu import QPU

ARRAYS = ("pe", "mpu", "baseline")

# (unit, overrides, nodsp): fast tier: configurations the fit was not made on (a Yosys run each,
# seconds); the fitted ones, which a fresh machine synthesizes again, in the slow tier.
FAST = [
    ("pe", {"weight_width": 6}, False),                                        # held out
    ("mpu", {"rows": 2, "cols": 2, "weight_width": 6, "pe_stages": 2}, False),  # held out
    ("mpu", {"rows": 2, "cols": 2, "weight_width": 6, "pe_stages": 2}, True),   # held out
    ("baseline", {"rows": 2, "cols": 2, "weight_width": 6}, False),             # held out
]
SLOW = [
    ("pe", {}, False),
    ("pe", {}, True),
    ("mpu", {}, False),
    ("mpu", {}, True),
    ("mpu", {"rows": 3, "cols": 3}, False),                                     # held out
    ("baseline", {}, True),
    ("qpu", {}, False),
    ("qpu", {"rows": 2, "cols": 2, "lanes": 2}, False),                         # held out
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


def test_calibration_file_is_the_stored_calibration():
    """``CALIBRATION`` is read from ``flows/estimate_calibration.json``, which is in the layout
    the calibration writes (so that ``--write`` after ``--refit`` changes nothing), and the file
    is shipped as package data."""
    path = estimate_coef.CALIBRATION_FILE
    assert path == ROOT / "dstar_rtl" / "flows" / "estimate_calibration.json"
    assert estimate_coef.load_calibration(path) == CALIBRATION
    assert estimate_coef.calibration_text(CALIBRATION) == path.read_text()
    assert list(CALIBRATION) == ["yosys", "date", "coef", "error", "validation", "measured"]
    assert list(CALIBRATION["measured"]) == [r[0] for r in CALIBRATION_RUNS + VALIDATION_RUNS]
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert path.name in project["tool"]["setuptools"]["package-data"]["dstar_rtl.flows"]


def test_rtl_constants_are_the_rtls():
    """The QPU's digit-store slots, counters and reconstruction queue depth are the RTL's own
    names, and the elaborated QPU's queue has that depth."""
    assert estimate_parts.SLOTS is SLOTS
    assert estimate_parts._COUNTER_BITS == 32 * len(COUNTER_NAMES)
    m = QPU(preset("tiny")).elaborate(None)
    assert m.submodules.recon_fifo.depth == estimate_parts.RECON_FIFO_DEPTH


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


# ----------------------------------------------------- the select datapath, Booth, weight_hop
SELECT_BOOTH = {"digit_product": "select", "digits": "booth"}


def test_select_mpu_has_no_dsp_and_matches_its_synthesis():
    """With digit products as selects no PE has a DSP block; the fpga MPU with the select
    datapath and Booth digits (held out) is within the tolerance of its stored synthesis, its
    flip-flops exact."""
    est = estimate("mpu", preset("fpga", **SELECT_BOOTH))
    assert est["ecp5"]["dsp"] == 0 and est["ecp5_nodsp"]["dsp"] == 0
    assert estimate("pe", preset("tiny", digit_product="select"))["ecp5"]["dsp"] == 0
    assert estimate("mpu", preset("fpga"))["ecp5"]["dsp"] == 256
    got = CALIBRATION["measured"]["mpu fpga select+booth"]
    assert abs(est["ecp5"]["lut_total"] / got["lut"] - 1) <= TOLERANCE["lut"]
    assert est["ecp5"]["ff"] == pytest.approx(got["ff"], rel=1e-3)
    # Without a multiplier the two LUT figures agree.
    assert est["ecp5"]["lut_total"] == pytest.approx(est["ecp5_nodsp"]["lut_total"], rel=0.05)


def test_weight_hop_removes_the_forwarding_registers():
    """``weight_hop`` k keeps ``w_out`` in every k-th row only."""
    one = estimate("mpu", preset("tiny", **SELECT_BOOTH))["ecp5"]["ff"]
    two = estimate("mpu", preset("tiny", weight_hop=2, **SELECT_BOOTH))["ecp5"]["ff"]
    assert two < one
    assert two == pytest.approx(CALIBRATION["measured"]["mpu select+booth weight_hop=2"]["ff"],
                                rel=1e-3)


@pytest.mark.slow
def test_select_mpu_estimate_vs_synthesis():
    """The tiny select+Booth MPU (fitted) against its synthesis: 0 DSP, LUTs within the
    tolerance, flip-flops exact (stored run reused)."""
    _compare("mpu", SELECT_BOOTH, False)


@pytest.mark.slow
def test_act_hop_cols_removes_the_row_forwarding_registers():
    """``act_hop = cols`` (the row operand broadcast along each row): no PE but the right
    column's registers ``a_out`` (whose register leads nowhere anyway) and no column skew, so
    the tiny MPU loses ``rows × (cols − 1)`` PEs' row operand (digits and signed flags) and the
    column skew chains (weights, and the control once); the estimate matches a synthesis run's
    flip-flops exactly (stored run reused; about 10 s of Yosys otherwise)."""
    base = preset("tiny")
    R, C, L = base.rows, base.cols, base.lanes
    bcast = base.replace(act_hop=C)
    one = estimate("mpu", base)["ecp5"]["ff"]
    got = estimate("mpu", bcast)["ecp5"]["ff"]
    a_out = R * (C - 1) * (base.digit_width + 1) * L
    skew = C * (C - 1) // 2 * L * base.weight_width + (C - 1) * (3 + base.exp_width)
    assert one - got == a_out + skew
    assert got == synthesize("mpu", bcast, "ecp5", reuse=True)["resources"]["ff"]
    # Both operands broadcast: the two savings add up (the INT8 array too).
    both = estimate("mpu", bcast.replace(weight_hop=R))["ecp5"]["ff"]
    assert both == got - (one - estimate("mpu", base.replace(weight_hop=R))["ecp5"]["ff"])
    b1 = estimate("baseline", base)["ecp5"]["ff"]
    ww = base.weight_width
    assert estimate("baseline", bcast)["ecp5"]["ff"] == \
        b1 - R * (C - 1) * ww - C * (C - 1) // 2 * ww - (C - 1) * 3
