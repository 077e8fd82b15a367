"""FMDQ numerics (numerics §2.1 requantization, 2.2 quantizer) against plain-Python references."""

from fractions import Fraction
from math import floor

import numpy as np
import pytest
from _initial import preset
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _ref import ref_quantize, ref_rnd
from dstar_rtl.golden.fmdq import (
    dequant,
    fpot,
    quantize_subchannels,
    quantize_tile_matrix,
    requant_params,
    requantize,
    rnd,
    rnd_int,
)

SET = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- references
def ref_requant_params(s: float, mw: int = 16):
    """numerics §2.1: ``2**(mw-1) <= s·2**sh < 2**mw``, m = round half away; m == 2**mw → 2**(mw-1),
    sh - 1; s == 0 → (0, 0). Exact rationals."""
    if s == 0:
        return 0, 0
    x = Fraction(s)
    sh = 0
    while x * 2 ** sh >= 2 ** mw:
        sh -= 1
    while x * 2 ** sh < 2 ** (mw - 1):
        sh += 1
    y = x * 2 ** sh
    m = floor(y + Fraction(1, 2))
    if m == 2 ** mw:
        m, sh = 2 ** (mw - 1), sh - 1
    return m, sh


def ref_requantize(Y, m, sh, bias, w):
    v = Y * m + bias * 2 ** sh
    r = ref_rnd(v, sh)
    lo, hi = -2 ** (w - 1), 2 ** (w - 1) - 1
    return max(lo, min(hi, r)), not lo <= r <= hi


# ----------------------------------------------------------------------------- strategies
def subchannel(T, dxw=18):
    """T values of a Δx sub-channel at a random magnitude (so every exponent appears), with the
    extremes of the dx range and exact zeros mixed in."""
    lo, hi = -(2 ** (dxw - 1)), 2 ** (dxw - 1) - 1

    @st.composite
    def strat(draw):
        mag = draw(st.integers(0, dxw - 1))
        special = st.sampled_from([0, lo, hi, -hi, 2 ** mag, -(2 ** mag)])
        vals = st.integers(-(2 ** mag), 2 ** mag)
        u = draw(st.lists(st.one_of(vals, vals, special), min_size=T, max_size=T))
        return [max(lo, min(hi, v)) for v in u]
    return strat()


thr_strategy = st.lists(st.integers(0, 126), min_size=3, max_size=3, unique=True).map(
    lambda t: tuple(sorted(t)))


# ----------------------------------------------------------------------------- rnd
@SET
@given(st.lists(st.integers(-(2 ** 40), 2 ** 40), min_size=1, max_size=20), st.integers(0, 20))
def test_rnd_matches_reference(vs, r):
    got = rnd(np.array(vs, dtype=np.int64), r)
    assert got.tolist() == [ref_rnd(v, r) for v in vs]
    assert [rnd_int(v, r) for v in vs] == [ref_rnd(v, r) for v in vs]


def test_rnd_half_away_from_zero():
    assert rnd([1, 3, 5, -1, -3, -5, 2, -2, 0], 1).tolist() == [1, 2, 3, -1, -2, -3, 1, -1, 0]
    # 0.5 → 1, 0.25 → 0, 0.75 → 1 and their negatives at r = 2.
    assert rnd([2, 1, 3, -2, -1, -3, 6, -6], 2).tolist() == [1, 0, 1, -1, 0, -1, 2, -2]
    assert rnd([7, -7, 0, 123456], 0).tolist() == [7, -7, 0, 123456]
    assert rnd_int(-(2 ** 100) - 2 ** 99, 100) == -2
    assert rnd_int(5, 0) == 5


def test_rnd_broadcasts_shift_array():
    v = np.array([[6, -6], [6, -6]])
    assert rnd(v, np.array([[1], [2]])).tolist() == [[3, -3], [2, -2]]


def test_rnd_refuses_negative_shift():
    with pytest.raises(ValueError):
        rnd([1], -1)
    with pytest.raises(ValueError):
        rnd_int(1, -1)


# ----------------------------------------------------------------------------- quantizer
def quant_one(u, cfg, **kw):
    qz = quantize_subchannels(np.array([u], dtype=np.int64), cfg, **kw)
    return qz.q[0].tolist(), int(qz.b[0]), int(qz.e[0]), int(qz.M[0]), bool(qz.saturated[0])


@pytest.mark.parametrize("M,b", [(1, 2), (2, 4), (7, 4), (8, 6), (31, 6), (32, 8), (127, 8)])
def test_precision_selection_default_thresholds(M, b):
    cfg = preset("tiny", base_log2=8)   # r0 = 0: M == max|u|
    q, bb, e, MM, sat = quant_one([M, -1, 0, 1], cfg)
    assert (bb, e, MM, sat) == (b, 0, M, False)
    assert q == [M, -1, 0, 1]   # default thresholds never clip


def test_precision_uses_rounded_max_at_r0():
    cfg = preset("tiny", base_log2=6)   # r0 = 2: step 4 fixed-point units
    assert quant_one([6, 0, 0, 0], cfg)[1:4] == (4, 0, 2)   # rnd(6, 2) = 2 → b = 4
    assert quant_one([5, 0, 0, 0], cfg)[1:4] == (2, 0, 1)   # rnd(5, 2) = 1 → b = 2
    assert quant_one([2, -2, 0, 0], cfg)[:4] == ([1, -1, 0, 0], 2, 0, 1)  # 0.5 rounds away
    assert quant_one([1, -1, 1, 0], cfg)[:4] == ([0, 0, 0, 0], 0, 0, 0)   # M == 0


def test_pot_exponent_rule():
    cfg = preset("tiny", base_log2=8)   # r0 = 0
    # 128 > 127 → e = 1: rnd(128, 1) = 64.
    assert quant_one([128, 0, 0, 0], cfg)[:3] == ([64, 0, 0, 0], 8, 1)
    # 255: rnd(255, 1) = 128 > 127 → e = 2, rnd(255, 2) = 64.
    assert quant_one([255, 3, -2, 0], cfg)[:3] == ([64, 1, -1, 0], 8, 2)
    # 254: rnd(254, 1) = 127 → e = 1.
    assert quant_one([254, -254, 1, 0], cfg)[:3] == ([127, -127, 1, 0], 8, 1)


def test_zero_subchannel():
    cfg = preset("tiny")
    q, b, e, M, sat = quant_one([0, 0, 0, 0], cfg)
    assert (q, b, e, M, sat) == ([0, 0, 0, 0], 0, 0, 0, False)


@pytest.mark.parametrize("r0", [0, 2, 5, 8])
def test_every_exponent_reached_at_range_extremes(r0):
    """Each e from 0 to the largest the act_width+2-bit range needs is reached, with the extremes
    of that range; at r0 = 0 that is e_max = 11."""
    cfg = preset("tiny", base_log2=8 - r0)
    lo, hi = -(2 ** 17), 2 ** 17 - 1
    seen = set()
    for e in range(0, cfg.e_max + 1):
        # Smallest magnitude that needs exponent e (for e >= 1: rnd(a, r0+e-1) == 128).
        a = 127 * 2 ** r0 if e == 0 else 255 * 2 ** (r0 + e - 2) if r0 + e >= 2 else 128
        if a > 2 ** 17:
            break
        for u in ([a, -a, 1, 0], [-a, a - 1, 0, -1]):
            q, b, ee, M, sat = quant_one(u, cfg)
            assert (q, b, ee, M, sat) == ref_quantize(u, r0, cfg.thr, cfg.e_max)
            assert ee == e and b == 8 and not sat
        seen.add(e)
    for u in ([lo, hi, 0, 1], [hi, hi, hi, hi], [lo, lo, lo, lo], [lo, 0, 0, 0]):
        q, b, ee, M, sat = quant_one(u, cfg)
        assert (q, b, ee, M, sat) == ref_quantize(u, r0, cfg.thr, cfg.e_max)
        assert not sat and max(abs(v) for v in q) <= 127
        seen.add(ee)
    if r0 == 0:
        assert seen == set(range(cfg.e_max + 1))   # e_max = 11 is reached, never exceeded
        assert quant_one([lo, 0, 0, 0], cfg)[:3] == ([-64, 0, 0, 0], 8, 11)


def test_outside_dx_range_refused():
    cfg = preset("tiny")
    with pytest.raises(ValueError, match="18-bit"):
        quantize_subchannels(np.array([[2 ** 17, 0, 0, 0]]), cfg)
    with pytest.raises(ValueError, match="18-bit"):
        quantize_subchannels(np.array([[-(2 ** 17) - 1, 0, 0, 0]]), cfg)
    quantize_subchannels(np.array([[-(2 ** 17), 2 ** 17 - 1, 0, 0]]), cfg)


def test_base_override_refused_above_bmax():
    cfg = preset("tiny", base_log2_max=6)
    with pytest.raises(ValueError, match="base_log2"):
        quantize_subchannels(np.zeros((1, 4), np.int64), cfg, base_log2=7)


def test_e_max_saturation_flag():
    cfg = preset("tiny", base_log2=8, e_max=3)   # e <= 3: |q·2**e| at most 127·8
    u = [2000, -2000, 1015, 8]
    q, b, e, M, sat = quant_one(u, cfg)
    assert (b, e, sat) == (8, 3, True)
    assert q == [127, -127, 127, 1]
    assert (q, b, e, M, sat) == ref_quantize(u, 0, cfg.thr, 3)
    # Just inside the limit: no saturation.
    q, b, e, M, sat = quant_one([1016, -1016, 0, 0], cfg)
    assert (q, b, e, sat) == ([127, -127, 0, 0], 8, 3, False)


def test_custom_thresholds_clip_and_flag():
    cfg = preset("tiny", base_log2=8, thr=(3, 20, 60))
    assert quant_one([3, -3, 1, 0], cfg)[:5] == ([1, -1, 1, 0], 2, 0, 3, True)
    assert quant_one([1, -1, 1, 0], cfg)[:5] == ([1, -1, 1, 0], 2, 0, 1, False)
    assert quant_one([20, -8, 7, 6], cfg)[:5] == ([7, -7, 7, 6], 4, 0, 20, True)
    assert quant_one([60, 31, -32, 0], cfg)[:5] == ([31, 31, -31, 0], 6, 0, 60, True)
    assert quant_one([61, 31, -32, 0], cfg)[:5] == ([61, 31, -32, 0], 8, 0, 61, False)


def test_fpot_values():
    assert fpot(np.array([2, 4, 6, 8, 8, 8]), np.array([0, 0, 0, 0, 1, 11])).tolist() == \
        [0, 2, 4, 6, 7, 17]


@st.composite
def quant_case(draw):
    T = draw(st.sampled_from([4, 8]))
    base = draw(st.integers(0, 8))
    thr = draw(st.one_of(st.just((1, 7, 31)), thr_strategy))
    e_max = draw(st.sampled_from([11, 11, 0, 1, 4, 25]))
    S = draw(st.integers(1, 6))
    u = draw(st.lists(subchannel(T), min_size=S, max_size=S))
    cfg = preset("tiny" if T == 4 else "fpga", base_log2=base, thr=thr, e_max=e_max)
    return cfg, u


@SET
@given(quant_case())
def test_quantizer_equals_scalar_reference(case):
    cfg, u = case
    qz = quantize_subchannels(np.array(u, dtype=np.int64), cfg)
    assert qz.r0 == cfg.act_frac - cfg.base_log2
    for s, us in enumerate(u):
        q, b, e, M, sat = ref_quantize(us, qz.r0, cfg.thr, cfg.e_max)
        assert qz.q[s].tolist() == q
        assert (int(qz.b[s]), int(qz.e[s]), int(qz.M[s]), bool(qz.saturated[s])) == (b, e, M, sat)


@SET
@given(quant_case())
def test_quantizer_invariants(case):
    cfg, u = case
    qz = quantize_subchannels(np.array(u, dtype=np.int64), cfg)
    recon = dequant(qz)
    for s in range(len(u)):
        b, e = int(qz.b[s]), int(qz.e[s])
        assert 0 <= e <= cfg.e_max
        if b == 0:
            assert qz.M[s] == 0 and e == 0 and not qz.q[s].any() and not qz.saturated[s]
            assert not recon[s].any()
            continue
        assert b in (2, 4, 6, 8)
        assert np.abs(qz.q[s]).max() <= 2 ** (b - 1) - 1
        assert e == 0 or b == 8
        # FPoT determines both precision and scale.
        f = int(qz.fpot[s])
        assert f == e + b - 2
        assert min(f + 2, 8) == b and max(0, f - 6) == e
        assert 0 <= f <= 2 ** cfg.exp_width - 1
        # Reconstruction is q · 2**(e + r0), and within half a step unless saturated.
        step = 2 ** (e + qz.r0)
        assert recon[s].tolist() == [int(v) * step for v in qz.q[s]]
        # the reconstruction stream is act_width + 3 bits wide (numerics §2.1)
        assert np.abs(recon[s]).max() < 2 ** (cfg.recon_width - 1)
        if not qz.saturated[s]:
            assert all(abs(int(x) - int(y)) * 2 <= step for x, y in zip(u[s], recon[s]))


def test_quantizer_p_mode_r0_zero():
    cfg = preset("tiny")
    qz = quantize_subchannels(np.array([[127, 0, 3, 64], [0, 0, 1, 0], [0, 0, 0, 0]]), cfg, r0=0)
    assert qz.r0 == 0
    assert qz.e.tolist() == [0, 0, 0] and qz.b.tolist() == [8, 2, 0]
    assert qz.q[0].tolist() == [127, 0, 3, 64]


def test_quantize_tile_matrix_layout_and_padding():
    cfg = preset("tiny", base_log2=8)
    rng = np.random.default_rng(1)
    dx = rng.integers(-300, 300, size=(6, 3))   # 6 tokens → 2 tiles, last one half padded
    qz, tiles = quantize_tile_matrix(dx, cfg)
    assert tiles == 2 and qz.q.shape == (6, 4)
    pad = np.zeros((8, 3), np.int64)
    pad[:6] = dx
    for t in range(2):
        for c in range(3):
            exp = ref_quantize(pad[4 * t:4 * t + 4, c].tolist(), 0, cfg.thr, cfg.e_max)
            assert qz.q[t * 3 + c].tolist() == exp[0]
            assert qz.b[t * 3 + c] == exp[1] and qz.e[t * 3 + c] == exp[2]


# ----------------------------------------------------------------------------- requantization
def test_requant_params_examples():
    assert requant_params(0.0) == (0, 0)
    assert requant_params(1.0) == (2 ** 15, 15)
    assert requant_params(0.5) == (2 ** 15, 16)
    assert requant_params(0.75) == (3 * 2 ** 14, 16)
    # 1 - 2**-18: s · 2**16 = 65535.75 rounds to 2**16 → use 2**15 and sh - 1.
    s = 1 - 2.0 ** -18
    assert ref_requant_params(s) == (2 ** 15, 15)
    assert requant_params(s) == (2 ** 15, 15)
    # A scale whose rounding is an exact half rounds away from zero.
    s = (40000 + 0.5) / 2 ** 20
    assert requant_params(s) == (40001, 20)
    with pytest.raises(ValueError):
        requant_params(-1.0)
    with pytest.raises(ValueError):
        requant_params(float("nan"))


@SET
@given(st.one_of(st.floats(min_value=1e-12, max_value=1e6, allow_subnormal=False),
                 st.builds(lambda m, x: (2 ** 16 - m) * 2.0 ** x,
                           st.floats(0, 1), st.integers(-40, 10))))
def test_requant_params_rule(s):
    m, sh = requant_params(s)
    assert (m, sh) == ref_requant_params(s)
    assert 2 ** 15 <= m <= 2 ** 16 - 1
    assert 2 ** 15 <= Fraction(s) * Fraction(2) ** sh < 2 ** 16 or m == 2 ** 15


@SET
@given(st.floats(min_value=1e-6, max_value=1e3, allow_subnormal=False), st.integers(8, 24))
def test_requant_params_mult_width(s, mw):
    assert requant_params(s, mw) == ref_requant_params(s, mw)


@SET
@given(st.lists(st.integers(-(2 ** 38), 2 ** 38), min_size=1, max_size=8),
       st.floats(min_value=1e-7, max_value=4.0, allow_subnormal=False),
       st.integers(-(2 ** 20), 2 ** 20), st.sampled_from([8, 16, 20]))
def test_requantize_matches_reference(Y, s, bias, w):
    m, sh = requant_params(s)
    if not 0 <= sh <= 47:
        with pytest.raises(ValueError, match="shift outside"):
            requantize(np.array(Y), m, sh, bias, w)
        return
    y, nsat = requantize(np.array(Y, dtype=np.int64), m, sh, bias, w)
    ref = [ref_requantize(v, m, sh, bias, w) for v in Y]
    assert y.tolist() == [r[0] for r in ref]
    assert nsat == sum(r[1] for r in ref)


def test_requantize_bias_rounding_and_saturation():
    # s = 1/2: m = 2**15, sh = 16. Y = 3 → 1.5 → 2; Y = -3 → -2; bias joins before the rounding.
    m, sh = requant_params(0.5)
    y, n = requantize(np.array([3, -3, 3, 1]), m, sh, bias=np.array([0, 0, -1, 0]))
    assert y.tolist() == [2, -2, 1, 1] and n == 0
    y, n = requantize(np.array([2 ** 20, -(2 ** 20), 65534, 65535]), m, sh, out_width=16)
    assert y.tolist() == [32767, -32768, 32767, 32767] and n == 3
    # s = 0 gives m = sh = 0: only the bias is left.
    y, n = requantize(np.array([12345, -7]), 0, 0, bias=np.array([5, 40000]), out_width=16)
    assert y.tolist() == [5, 32767] and n == 1


def test_requantize_per_channel_broadcast():
    Y = np.array([[10, 10, 10], [-10, -10, -10]])
    ms, shs = zip(*(requant_params(s) for s in (0.25, 1.0, 3.0)))
    y, _ = requantize(Y, np.array(ms), np.array(shs), bias=np.array([1, 0, -1]))
    assert y.tolist() == [[ref_requantize(v, ms[j], shs[j], [1, 0, -1][j], 16)[0]
                           for j, v in enumerate(row)] for row in Y.tolist()]


def test_requantize_refuses_shift_out_of_range():
    with pytest.raises(ValueError, match="shift outside"):
        requantize(np.array([1]), 1, 48, sh_max=47)
    with pytest.raises(ValueError, match="shift outside"):
        requantize(np.array([1]), 1, -1)
    requantize(np.array([1]), 1, 47, sh_max=47)
