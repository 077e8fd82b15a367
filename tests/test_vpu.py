"""The integer VPU golden (numerics §2.7): tables, widths, exactness against plain-Python
references of the documented algorithms, properties, and every documented error bound."""

import ast
import inspect
import json
import math
import re
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _ref import ref_rnd
from dstar_rtl.analysis.vpu_accuracy import (
    METRICS,
    bounds,
    check,
    hard_bounds,
    layernorm_cases,
    measure,
    softmax_cases,
)
from dstar_rtl.golden import vpu
from dstar_rtl.golden.config import ConfigError, preset
from dstar_rtl.golden.differential import DiffLinear, quantize_weights
from dstar_rtl.golden.fmdq import quantize_tile_matrix, requant_params, requantize
from dstar_rtl.golden.sar import expand_mask, p_to_int, weight_operand
from dstar_rtl.golden.vpu import (
    VPUTables,
    acc_requant,
    diff_delta,
    gated_residual,
    gelu,
    gelu_ref,
    int_bitlen,
    kv_int8,
    kv_int8_ref,
    layernorm,
    layernorm_eps_int,
    layernorm_ref,
    modulate,
    recip_core,
    recon_matrix,
    rsqrt_core,
    softmax,
    softmax_block,
    softmax_ref,
    vpu_tables,
    xhat_update,
)

SET = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CFG = preset("tiny")
TB = vpu_tables(CFG)
W, F, PB = CFG.act_width, CFG.act_frac, CFG.p_base_log2
LO, HI = -(2 ** (W - 1)), 2 ** (W - 1) - 1
HB = hard_bounds(CFG)


def sat(v, w=W):
    return max(-(2 ** (w - 1)), min(2 ** (w - 1) - 1, v))


# ============================================================================ Python references
# Written from the docstrings' algorithm text with Python integers and _ref.ref_rnd (Fractions);
# they share only the tables with golden.vpu.
def ref_recip(X, T):
    Qr, Kr = T.recip_frac, T.recip_lut_bits
    y0 = T.recip_lut[(X >> (Qr - Kr)) % 2 ** Kr]
    t = ref_rnd(X * y0, Qr)
    return ref_rnd(y0 * (2 ** (Qr + 1) - t), Qr)


def ref_rsqrt(X, T):
    Qs, Ks = T.rsqrt_frac, T.rsqrt_lut_bits
    o = 1 if X >= 2 ** (Qs + 1) else 0
    y0 = T.rsqrt_lut[o * 2 ** Ks + (X >> (Qs + o - Ks)) % 2 ** Ks]
    y0sq = ref_rnd(y0 * y0, Qs)
    vy2 = ref_rnd(X * y0sq, Qs)
    return ref_rnd(y0 * (3 * 2 ** Qs - vy2), Qs + 1)


def ref_softmax_row(s, mask, T, cfg):
    F_, pb = cfg.act_frac, cfg.p_base_log2
    Z, L, Et, E, Qr = T.exp_lut_bits, T.log2e_frac, T.exp_lut_frac, T.exp_frac, T.recip_frac
    kept = [i for i in range(len(s)) if mask[i]]
    if not kept:
        return [0] * len(s)
    m = max(s[i] for i in kept)
    ex = [0] * len(s)
    for i in kept:
        a = ref_rnd((m - s[i]) * T.log2e_q, F_ + L - Z)
        k = min(a >> Z, E + 2)
        ex[i] = ref_rnd(T.exp_lut[a % 2 ** Z] * 2 ** (E - Et), k)
    tot = sum(ex)
    j = tot.bit_length() - 1
    X = tot >> (j - Qr) if j >= Qr else tot << (Qr - j)
    y1 = ref_recip(X, T)
    return [min(ref_rnd(e * y1, Qr + j - pb), 2 ** pb - 1) for e in ex]


def ref_layernorm_row(x, eps_q, T, cfg):
    F_, Qs, Ge = cfg.act_frac, T.rsqrt_frac, T.ln_eps_frac
    x = [int(v) for v in x]
    n = len(x)
    S1 = sum(x)
    S2 = sum(v * v for v in x)
    Vp = ((n * S2 - S1 * S1) << Ge) + eps_q
    if Vp == 0:
        return [0] * n
    h = (Vp.bit_length() - 1) // 2
    X = Vp >> (2 * h - Qs) if 2 * h >= Qs else Vp << (Qs - 2 * h)
    y1 = ref_rsqrt(X, T)
    sh = Qs + h - F_ - Ge // 2
    out = []
    for v in x:
        p = (n * v - S1) * y1
        out.append(sat(ref_rnd(p, sh) if sh >= 0 else p << -sh, cfg.act_width))
    return out


def ref_gelu(x, T, cfg):
    F_, G, Sg, Ra = cfg.act_frac, T.gelu_frac, T.gelu_seg_log2, T.gelu_range_log2
    ac = min(abs(x), 2 ** (F_ + Ra) - 1)
    i, f = ac >> (F_ - Sg), ac % 2 ** (F_ - Sg)
    c = T.gelu_base[i] * 2 ** (F_ - Sg) + T.gelu_delta[i] * f
    return sat(ref_rnd((x * 2 ** (G - Sg) if x >= 0 else 0) + c, G - Sg), cfg.act_width)


# ============================================================================ strategies
@st.composite
def act_row(draw, n_min=1, n_max=64):
    """A row of act-format values at a random magnitude and offset, extremes mixed in."""
    n = draw(st.integers(n_min, n_max))
    mag = draw(st.integers(0, W - 1))
    vals = st.integers(-(2 ** mag), 2 ** mag)
    special = st.sampled_from([LO, HI, 0, 1, -1])
    row = draw(st.lists(st.one_of(vals, vals, vals, special), min_size=n, max_size=n))
    off = draw(st.one_of(st.just(0), st.integers(LO, HI)))
    return np.clip(np.array(row, np.int64) + off, LO, HI)


@st.composite
def row_and_mask(draw, n_max=64, allow_empty=False):
    s = draw(act_row(1, n_max))
    m = np.array(draw(st.lists(st.booleans(), min_size=len(s), max_size=len(s))), bool)
    if not allow_empty and not m.any():
        m[draw(st.integers(0, len(s) - 1))] = True
    return s, m


act = st.integers(LO, HI)
act_ext = st.one_of(act, st.sampled_from([LO, HI, 0, 1, -1, 2 ** F, -(2 ** F)]))


# ============================================================================ tables and widths
def test_tables_deterministic_and_documented():
    a, b = VPUTables.build(CFG), VPUTables.build(CFG)
    assert a == b and a.to_dict() == b.to_dict()
    json.dumps(a.to_dict())
    assert a.log2e_q == round(2 ** 15 / math.log(2)) == 47274
    assert a.table_bits == {"exp_lut": (256, 16, False), "recip_lut": (64, 16, False),
                            "rsqrt_lut": (128, 16, False), "gelu_base": (128, 15, True),
                            "gelu_delta": (128, 11, True)}
    assert a.exp_lut[0] == 2 ** 15 and all(x > y for x, y in zip(a.exp_lut, a.exp_lut[1:]))
    assert all(2 ** 14 < v <= 2 ** 15 for v in a.exp_lut)
    assert all(x > y for x, y in zip(a.recip_lut, a.recip_lut[1:]))
    assert all(x > y for x, y in zip(a.rsqrt_lut, a.rsqrt_lut[1:]))
    assert a.gelu_base[0] == 0 and max(a.gelu_base) == 0
    assert [a.exp_frac for a in map(vpu_tables, map(preset, ("tiny", "fpga", "paper")))] == \
        [17, 19, 23]
    # Every table entry equals its defining formula (floats are accurate enough for these checks).
    for i, v in enumerate(a.exp_lut):
        assert abs(v - 2 ** (15 - i / 256)) <= 0.5 + 1e-9
    for i, v in enumerate(a.gelu_base):
        assert abs(v - gelu_ref(np.array([-i * 8]), CFG)[0] / 256 * 2 ** 16) <= 0.5 + 1e-6


def test_tables_refuse_too_wide_configs():
    with pytest.raises(ConfigError, match="int64 model"):
        VPUTables.build(CFG.replace(act_width=32, act_frac=8))
    with pytest.raises(ConfigError, match="ln_eps_frac"):
        VPUTables.build(CFG, ln_eps_frac=3)


def _doc_tables(fn):
    """``{name: tiny_width}`` from the RST width table of a docstring."""
    doc = inspect.getdoc(fn)
    seps = [i for i, l in enumerate(doc.splitlines()) if re.fullmatch(r"=+( +=+)+", l.strip())]
    assert len(seps) == 3, fn.__name__
    out = {}
    for line in doc.splitlines()[seps[1] + 1:seps[2]]:
        cols = re.split(r"\s{2,}", line.strip())
        for name in cols[0].split(","):
            out[name] = int(cols[-1])
    return out


@pytest.mark.parametrize("fn,prefix", [
    (vpu.recip_core, "recip"), (vpu.rsqrt_core, "rsqrt"), (vpu.softmax, "softmax"),
    (vpu.layernorm, "layernorm"), (vpu.modulate, "modulate"),
    (vpu.gated_residual, "gated_residual"), (vpu.gelu, "gelu"), (vpu.acc_requant, "acc_requant"),
    (vpu.diff_delta, "diff"), (vpu.xhat_update, "diff"), (vpu.kv_int8, "kv")])
def test_docstring_width_tables_match_widths(fn, prefix):
    doc = _doc_tables(fn)
    widths = {k.split(".", 1)[1]: v[0] for k, v in TB.widths.items() if k.startswith(prefix + ".")}
    assert doc == {k: widths[k] for k in doc}
    if prefix != "diff":                    # diff_delta and xhat_update share the "diff" widths
        assert set(doc) == set(widths)


def _probe_all(cfg, rng):
    pr = {}
    for _, s, m in softmax_cases(cfg, rng, 16):
        softmax(s, m, cfg, probe=pr)
    for _, x, e in layernorm_cases(cfg, rng, 4):
        layernorm(x, cfg, e, probe=pr)
    gelu(np.arange(LO, HI + 1), cfg, probe=pr)
    ext = np.array([LO, HI, 0, 1, -1, 2 ** F, -(2 ** F)])
    a, b, c = np.meshgrid(ext, ext, ext)
    modulate(a, b, c, cfg, probe=pr)
    gated_residual(a, b, c, cfg, probe=pr)
    xl = 2 ** (cfg.xhat_width - 1)
    diff_delta(np.array([LO, HI]), np.array([xl - 1, -xl]), cfg, probe=pr)
    rl = 2 ** (cfg.recon_width - 1)
    xhat_update(np.array([xl - 1, -xl]), np.array([rl - 1, -rl]), cfg, probe=pr)
    kv_int8(np.array([[[LO, HI]], [[3, -4]]]), cfg, probe=pr)
    return pr


#: The width probes' configurations; ``tiny-ln1024``: LayerNorm rows up to 1,024 at
#: max_reduction 64 (LayerNorm's widths derived from ln_row_max).
PROBED = {"tiny": {}, "paper": {}, "tiny-ln1024": {"ln_row_max": 1024}}


@pytest.mark.parametrize("name", sorted(PROBED))
def test_observed_widths_within_stated(name):
    """Every intermediate within its stated width."""
    cfg = preset(name.split("-")[0], **PROBED[name])
    T = vpu_tables(cfg)
    pr = _probe_all(cfg, np.random.default_rng(3))
    pr.update(_probe_cores(T))
    for k, (bits, signed) in pr.items():
        sb, ss = T.widths[k]
        assert bits <= sb, (k, bits, sb)
        assert ss or not signed, k
    # The stated widths are tight for the data path (reached by the suite or by every input).
    tight = [k for k in pr if pr[k][0] == T.widths[k][0]]
    assert len(tight) >= 0.7 * len(pr)


def _probe_cores(T):
    pr = {}
    recip_core(np.arange(2 ** T.recip_frac, 2 ** (T.recip_frac + 1)), T, pr)
    rsqrt_core(np.arange(2 ** T.rsqrt_frac, 2 ** (T.rsqrt_frac + 2)), T, pr)
    return pr


def test_integer_path_has_no_float_arithmetic():
    """The integer functions contain no true division, float literal or float math call."""
    banned = {"float", "sqrt", "exp", "tanh", "log", "log2", "float64", "exp2", "power"}
    for fn in (vpu.softmax, vpu.layernorm, vpu.modulate, vpu.gated_residual, vpu.gelu,
               vpu.acc_requant, vpu.diff_delta, vpu.xhat_update, vpu.kv_int8, vpu.recip_core,
               vpu.rsqrt_core, vpu.int_bitlen, vpu._shift_round, vpu._sat):
        body = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0].body   # not defaults
        for node in (n for stmt in body for n in ast.walk(stmt)):
            assert not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Pow))), \
                fn.__name__
            assert not (isinstance(node, ast.Constant) and isinstance(node.value, float)), \
                fn.__name__
            assert not (isinstance(node, ast.Attribute) and node.attr in banned), fn.__name__
            assert not (isinstance(node, ast.Name) and node.id in banned), fn.__name__


def test_int_bitlen():
    v = np.array([0, 1, 2, 3, 255, 256, 2 ** 40 - 1, 2 ** 40, 2 ** 62, 2 ** 63 - 1], np.int64)
    assert int_bitlen(v).tolist() == [int(x).bit_length() for x in v.tolist()]


# ============================================================================ Newton cores
def test_newton_cores_exhaustive():
    T = TB
    X = np.arange(2 ** T.recip_frac, 2 ** (T.recip_frac + 1))
    y = recip_core(X, T)
    rel = y * X / 2.0 ** (2 * T.recip_frac) - 1
    assert np.abs(rel).max() <= bounds(CFG)["recip_core_rel"]["max_abs"]
    assert y.max() < 2 ** T.recip_frac                    # Qr bits (documented width)
    Xs = np.arange(2 ** T.rsqrt_frac, 2 ** (T.rsqrt_frac + 2))
    ys = rsqrt_core(Xs, T)
    rel = ys * np.sqrt(Xs / 2.0 ** T.rsqrt_frac) / 2.0 ** T.rsqrt_frac - 1
    assert np.abs(rel).max() <= bounds(CFG)["rsqrt_core_rel"]["max_abs"]
    idx = np.random.default_rng(0).choice(len(X), 300, replace=False)
    assert [ref_recip(int(X[i]), T) for i in idx] == y[idx].tolist()
    idx = np.random.default_rng(1).choice(len(Xs), 300, replace=False)
    assert [ref_rsqrt(int(Xs[i]), T) for i in idx] == ys[idx].tolist()


# ============================================================================ softmax
@SET
@given(row_and_mask(allow_empty=True))
def test_softmax_matches_reference_algorithm_and_properties(sm):
    s, m = sm
    P, nsat = softmax(s, m, CFG)
    assert P.dtype == np.int64
    assert P.tolist() == ref_softmax_row(s.tolist(), m.tolist(), TB, CFG)
    assert ((P >= 0) & (P <= 2 ** PB - 1)).all()
    assert (P[~m] == 0).all()                                      # masked entries exactly 0
    if not m.any():
        assert (P == 0).all()
        return
    ref = softmax_ref(s, m, CFG)
    err = np.abs(P - np.clip(ref, 0, 2 ** PB - 1))[m]
    assert err.max() <= HB["softmax"]
    assert np.abs(P - p_to_int(ref / 2 ** PB, PB)).max() <= 1     # at most 1 off the rounded ref
    assert abs(int(P.sum()) - 2 ** PB) <= 1 + m.sum() * HB["softmax"]
    # Invariant to a common offset of the kept logits (nd = max - s is exact), to the values of
    # masked logits, and to permutation.
    for c in (LO - int(s[m].min()), HI - int(s[m].max())):
        assert softmax(np.where(m, s + c, s[::-1]), m, CFG)[0].tolist() == P.tolist()
    perm = np.random.default_rng(len(s)).permutation(len(s))
    assert softmax(s[perm], m[perm], CFG)[0].tolist() == P[perm].tolist()


def test_softmax_edge_rows():
    n = 64
    # All equal: every entry gets rnd(2**pb / n_kept) exactly.
    for k in (1, 2, 3, 5, 7, 51, 64):
        m = np.zeros(n, bool)
        m[:k] = True
        for v in (LO, 0, HI):
            P, _ = softmax(np.full(n, v), m, CFG)
            want = min(2 ** PB - 1, math.floor(2 ** PB / k + 0.5))
            assert P[:k].tolist() == [want] * k and not P[k:].any()
    # One dominant entry saturates at 2**pb - 1 and the rest vanish.
    s = np.full(n, LO)
    s[5] = HI
    P, nsat = softmax(s, None, CFG)
    assert P[5] == 2 ** PB - 1 and P.sum() == 2 ** PB - 1 and nsat == 1
    # Whole-range logits (nd up to 2**W - 1: the shift clamp) and a fully masked row.
    P, _ = softmax(np.array([[HI, LO, 0], [0, 0, 0]]), np.array([[1, 1, 1], [0, 0, 0]], bool), CFG)
    assert P.tolist() == [[127, 0, 0], [0, 0, 0]]


@SET
@given(row_and_mask(allow_empty=True), st.integers(0, 2000))
def test_softmax_with_the_row_max_given(sm, extra):
    """softmax_mx: the exact kept max gives the softmax bit for bit; a larger bound is a
    defined result (probabilities in range, masked entries 0); a bound below a kept logit is
    refused."""
    s, m = sm
    mx = int(np.where(m, s, LO).max())
    assert softmax(s, m, CFG, mx=[mx])[0].tolist() == softmax(s, m, CFG)[0].tolist()
    P = softmax(s, m, CFG, mx=[min(mx + extra, HI)])[0]
    assert ((P >= 0) & (P <= 2 ** PB - 1)).all() and (P[~m] == 0).all()
    if m.any() and mx > LO:
        with pytest.raises(ValueError, match="exceeds the given row max"):
            softmax(s, m, CFG, mx=[mx - 1])


def test_softmax_sar_block_mask():
    rng = np.random.default_rng(4)
    H, N, Bs = 2, 14, CFG.tile
    nb = -(-N // Bs)
    bm = rng.random((H, nb, nb)) < 0.3
    bm[:, np.arange(nb), np.arange(nb)] = True
    bm[1] = np.eye(nb, dtype=bool)                                 # diagonal blocks only
    S = rng.integers(-(4 << F), 4 << F, (H, N, N))
    P, _ = softmax_block(S, bm, CFG)
    el = expand_mask(bm, N, Bs)
    assert (P[~el] == 0).all() and (P.sum(-1) > 0).all()
    assert P.tolist() == softmax(S, el, CFG)[0].tolist()
    ref = np.clip(softmax_ref(S, el, CFG), 0, 127)
    assert np.abs(P - ref)[el].max() <= HB["softmax"]


def test_softmax_refuses_bad_input():
    with pytest.raises(ValueError, match="16-bit"):
        softmax(np.array([HI + 1]), None, CFG)
    with pytest.raises(ValueError, match="max_reduction"):
        softmax(np.zeros(CFG.max_reduction + 1, np.int64), None, CFG)
    with pytest.raises(ValueError, match="integers"):
        softmax(np.array([0.5]), None, CFG)


# ============================================================================ LayerNorm
@SET
@given(act_row(1, 64), st.sampled_from([0.0, 1e-6, 1e-5, 1e-3]))
def test_layernorm_matches_reference_algorithm_and_bounds(x, eps):
    y, nsat = layernorm(x, CFG, eps)
    eps_q = layernorm_eps_int(len(x), eps, CFG)
    assert y.tolist() == ref_layernorm_row(x, eps_q, TB, CFG)
    assert nsat == 0
    ref = layernorm_ref(x, CFG, eps)
    assert (np.abs(y - np.clip(ref, LO, HI)) <= HB["layernorm"](ref)).all()
    assert abs(y.mean()) <= HB["layernorm_mean"]                   # Σ(n·x - S1) = 0 exactly
    if eps == 0.0 and len(x) >= 2 and x.min() != x.max():
        assert abs((y / 2.0 ** F).var() - 1.0) <= HB["layernorm_var"]
    # Exactly invariant to a common offset (D and V are), and, with eps = 0, to doubling.
    c = HI - int(x.max()) if x.max() < HI else LO - int(x.min())
    assert layernorm(x + c // 2, CFG, eps)[0].tolist() == y.tolist()
    if eps == 0.0 and np.abs(x).max() < 2 ** (W - 2):
        assert layernorm(2 * x, CFG, 0.0)[0].tolist() == y.tolist()


def test_layernorm_edges():
    for v in (LO, 0, 7, HI):
        assert not layernorm(np.full((3, 9), v), CFG)[0].any()                    # all equal
        assert not layernorm(np.full((3, 9), v), CFG, eps=0.0)[0].any()           # Vp = 0
    y, _ = layernorm(np.array([0] * 63 + [HI]), CFG, eps=0.0)                     # one dominant
    assert abs(y[-1] / 2 ** F - math.sqrt(63)) <= 1 / 2 ** F
    y, _ = layernorm(np.array([LO, HI] * 32), CFG)                                # very large
    assert set(y.tolist()) == {-(2 ** F), 2 ** F}
    y, _ = layernorm(np.array([0, 1]), CFG, eps=1e-6)                             # tiny variance
    ref = layernorm_ref(np.array([0, 1]), CFG, 1e-6)
    assert np.abs(y - ref).max() <= 0.5 + 1e-6
    with pytest.raises(ValueError, match="eps"):
        layernorm(np.array([1, 2]), CFG, eps=2.0)


# ============================================================================ modulation, residual
def py_modulate(x, sh, sc):
    return sat(ref_rnd(x * (sc + 2 ** F) + sh * 2 ** F, F))


def py_gated(x, g, y):
    return sat(ref_rnd(x * 2 ** F + g * y, F))


@SET
@given(st.lists(st.tuples(act_ext, act_ext, act_ext), min_size=1, max_size=40))
def test_modulate_and_gated_residual_exact(rows):
    a, b, c = (np.array(v, np.int64) for v in zip(*rows))
    y, nsat = modulate(a, b, c, CFG)
    want = [py_modulate(*map(int, t)) for t in zip(a, b, c)]
    assert y.tolist() == want
    raw = [ref_rnd(int(x) * (int(s) + 2 ** F) + int(h) * 2 ** F, F) for x, h, s in zip(a, b, c)]
    assert nsat == sum(not LO <= r <= HI for r in raw)
    g, _ = gated_residual(a, b, c, CFG)
    assert g.tolist() == [py_gated(*map(int, t)) for t in zip(a, b, c)]


def test_modulate_and_gated_broadcast_per_channel():
    rng = np.random.default_rng(2)
    x = rng.integers(LO, HI + 1, (5, 8))
    sh, sc = rng.integers(-(2 << F), 2 << F, 8), rng.integers(-(1 << F), 1 << F, 8)
    y, _ = modulate(x, sh, sc, CFG)
    assert y.tolist() == [[py_modulate(int(x[i, j]), int(sh[j]), int(sc[j])) for j in range(8)]
                          for i in range(5)]
    g, _ = gated_residual(x, sc, x[::-1], CFG)
    assert g.tolist() == [[py_gated(int(x[i, j]), int(sc[j]), int(x[4 - i, j])) for j in range(8)]
                          for i in range(5)]


# ============================================================================ GELU
def test_gelu_exhaustive():
    x = np.arange(LO, HI + 1)
    y, nsat = gelu(x, CFG)
    assert nsat == 0
    err = np.abs(y - np.clip(gelu_ref(x, CFG), LO, HI))
    assert err.max() <= HB["gelu"]
    # Unimodal: non-increasing up to the minimum, non-decreasing after; monotonic for x >= 0.
    i0 = int(np.argmin(y))
    assert -1.0 <= x[i0] / 2 ** F <= -0.5
    assert (np.diff(y[:i0 + 1]) <= 0).all() and (np.diff(y[i0:]) >= 0).all()
    # Exact outside the table range, 0 at 0.
    big = x >= 4 << F
    assert (y[big] == x[big]).all() and (y[x <= -(4 << F)] == 0).all() and y[x == 0] == 0
    idx = np.random.default_rng(0).choice(len(x), 400, replace=False)
    assert [ref_gelu(int(x[i]), TB, CFG) for i in idx] == y[idx].tolist()


# ============================================================================ requantize
@SET
@given(st.data())
def test_acc_requant_equals_fmdq_requantize(data):
    A = CFG.acc_bits
    lim = 2 ** (A - 1)
    n = data.draw(st.integers(1, 6))
    ints = st.one_of(st.integers(-lim, lim - 1), st.sampled_from([-lim, lim - 1, 0]))
    Y = np.array(data.draw(st.lists(ints, min_size=n, max_size=n)), np.int64)
    acc = np.array(data.draw(st.lists(ints, min_size=n, max_size=n)), np.int64)
    s = data.draw(st.floats(2.0 ** -30, 2.0 ** 8))
    m, sh = requant_params(s, CFG.mult_width)
    if not 0 <= sh <= CFG.sh_max:
        return
    b = np.array(data.draw(st.lists(act, min_size=n, max_size=n)), np.int64)
    r = acc_requant(Y, acc, m, sh, b, CFG)
    Ysum = Y.astype(object) + acc
    assert r.Y.tolist() == [max(-lim, min(lim - 1, v)) for v in Ysum]
    assert r.Y_saturated == sum(not -lim <= v < lim for v in Ysum)
    y, ns = requantize(r.Y, m, sh, b, W, CFG.sh_max)
    assert r.y.tolist() == y.tolist() and r.y_saturated == ns
    ref = r.Y.astype(np.float64) * s + b
    assert (np.abs(r.y - np.clip(ref, LO, HI)) <= HB["acc_requant"](ref, b)).all()


# ============================================================================ differential pair
def test_diff_pair_widths_and_saturation():
    xl = 2 ** (CFG.xhat_width - 1)
    dx = diff_delta(np.array([LO, HI, 0]), np.array([xl - 1, -xl, 5]), CFG)
    assert dx.tolist() == [LO - xl + 1, HI + xl, -5]
    assert -(2 ** (CFG.dx_width - 1)) <= dx.min() and dx.max() < 2 ** (CFG.dx_width - 1)
    xh, n = xhat_update(np.array([xl - 1, -xl, 3]), np.array([1, -1, 4]), CFG)
    assert xh.tolist() == [xl - 1, -xl, 7] and n == 2
    with pytest.raises(ValueError):
        diff_delta(np.array([HI + 1]), np.array([0]), CFG)


def test_diff_pair_and_acc_requant_replay_diff_linear():
    """The VPU ops replay DiffLinear (numerics §2.5) bit for bit over several steps."""
    cfg = preset("tiny")
    rng = np.random.default_rng(7)
    N, C, O = 6, 5, 3
    Wq, s_w = quantize_weights(rng.normal(size=(C, O)) * 0.1, cfg.weight_width)
    lin = DiffLinear(Wq, s_w, cfg, bias=rng.normal(size=O))
    x = rng.integers(-(1 << 14), 1 << 14, (N, C))
    xhat = np.zeros((N, C), np.int64)
    Y = np.zeros((N, O), np.int64)
    for _ in range(5):
        res = lin.step(x)
        dx = diff_delta(x, xhat, cfg)
        assert dx.tolist() == res.dx.tolist()
        qz, _ = quantize_tile_matrix(dx, cfg, lin.B)
        xhat, nsat = xhat_update(xhat, recon_matrix(qz, N, C, cfg), cfg)
        assert xhat.tolist() == lin.state.tolist() and nsat == 0
        r = acc_requant(Y, res.acc, lin.m, lin.sh, lin.bias_int, cfg, stored=True)
        Y = r.Y
        assert Y.tolist() == res.Y.tolist() and r.y.tolist() == res.y.tolist()
        x = np.clip(x + rng.integers(-300, 301, (N, C)), LO, HI)


# ============================================================================ K, V to INT8
@SET
@given(st.data())
def test_kv_int8_per_head(data):
    H = data.draw(st.integers(1, 3))
    mag = data.draw(st.integers(0, W - 1))
    v = np.array(data.draw(st.lists(st.integers(-(2 ** mag), 2 ** mag - 1), min_size=H * 6,
                                    max_size=H * 6)), np.int64).reshape(H, 3, 2)
    w, e = kv_int8(v, CFG)
    for h in range(H):
        ww, ee = weight_operand(v[h])
        assert w[h].tolist() == ww.tolist() and e[h] == ee
    assert np.abs(w).max() <= 127
    assert np.abs(w - kv_int8_ref(v, e)).max() <= HB["kv_int8"]
    assert all(ee == 0 or ref_rnd(int(np.abs(v[h]).max()), int(ee) - 1) > 127
               for h, ee in enumerate(e))


# ============================================================================ documented bounds
@pytest.fixture(scope="module")
def measured():
    return measure(CFG)


@pytest.mark.parametrize("metric", METRICS)
def test_documented_bound(measured, metric):
    b, m = bounds(CFG)[metric], measured[metric]
    assert m["max_abs"] <= b["max_abs"], (metric, m)
    if not math.isnan(b["mean_abs"]):
        assert m["mean_abs"] <= b["mean_abs"], (metric, m)


@pytest.mark.parametrize("name,overrides", [
    ("fpga", {}), ("tiny", dict(act_width=12, act_frac=4, base_log2=2)),
    ("tiny", dict(act_width=24, act_frac=16)), ("tiny", dict(p_base_log2=5))])
def test_bounds_hold_on_other_configurations(name, overrides):
    """The max bounds are analytic: they hold for other presets and formats too."""
    assert check(preset(name, **overrides)) == []


def test_acc_requant_with_a_stored_y():
    """``ystate_frac`` (numerics §2.5): the stored Y comes back by its channel's shift, the sum
    (saturated at ``acc_bits``) gives y, and Y goes out rounded by the shift at
    ``ystate_width`` with its saturation in the flags; the same rule as
    :class:`golden.differential.DiffLinear`."""
    from dstar_rtl.golden.config import preset as full_preset
    from dstar_rtl.golden.fmdq import requantize, rnd
    from dstar_rtl.golden.vpu import acc_requant

    cfg = full_preset("tiny", ystate_frac=2)
    rng = np.random.default_rng(5)
    T = cfg.tile
    sh = np.array([18, 20, 23, 30])[:T]
    m = rng.integers(1 << 15, 1 << 16, size=T)
    bias = rng.integers(-100, 100, size=T)
    lim = 1 << (cfg.ystate_width - 1)
    Z = rng.integers(-lim, lim, size=(T, T))
    Z[0, :] = lim - 1                                  # pushed over by a positive acc below
    acc = rng.integers(-(1 << 24), 1 << 24, size=(T, T))
    acc[0, :] = 1 << 28
    s = cfg.ystate_shift(sh)
    assert list(s) == [0, 2, 5, 12][:T]
    assert acc_requant(0 * Z, acc, m, sh, bias, cfg).Y.max() > (1 << 24)   # the VPU's: whole
    r = acc_requant(Z, acc, m, sh, bias, cfg, stored=True)
    amax = 1 << (cfg.acc_bits - 1)
    full = np.clip((Z << s) + acc, -amax, amax - 1)    # the sum saturates at acc_bits first
    y, _ = requantize(full, m, sh, bias, cfg.act_width, cfg.sh_max)
    want = rnd(full, s)
    np.testing.assert_array_equal(r.y, y)
    np.testing.assert_array_equal(r.Y, np.clip(want, -lim, lim - 1))
    raw = (Z << s) + acc
    np.testing.assert_array_equal(r.Y_saturated.flags, (raw < -amax) | (raw >= amax)
                                  | (want < -lim) | (want > lim - 1))
    assert r.Y_saturated.flags[0].all()
