"""SAR, sparse attention reuse (numerics §2.6): mask profiling, masked softmax, P quantization and
its cache record, cache/reuse sequencing and traffic, and the K/V weight operand."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _ref import ref_quantize, ref_rnd
from dstar_rtl.golden.config import preset
from dstar_rtl.golden.sar import (
    PRECISION_CODE_BITS,
    SARAttention,
    block_importance,
    expand_mask,
    is_cache_step,
    masked_softmax,
    p_to_int,
    profile_mask,
    quantize_p,
    weight_operand,
)

SET = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def random_probs(rng, lead, H, N, sharp=3.0):
    S = rng.normal(size=(*lead, H, N, N)) * sharp
    e = np.exp(S - S.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def random_mask(rng, H, nb, keep=0.4):
    m = rng.random((H, nb, nb)) < keep
    m[:, np.arange(nb), np.arange(nb)] = True
    return m


# ----------------------------------------------------------------------------- mask profiling
@pytest.mark.parametrize("N,Bs", [(16, 4), (14, 4), (9, 8), (24, 8), (3, 4)])
def test_profile_mask_threshold_and_diagonal(N, Bs):
    rng = np.random.default_rng(N * Bs)
    probs = random_probs(rng, (2, 3), 2, N)        # samples × steps × heads × N × N
    nb = -(-N // Bs)
    # importance recomputed by loops: mean over samples and steps of the block mass per real row
    imp = np.zeros((2, nb, nb))
    for h in range(2):
        for a in range(nb):
            rows = range(a * Bs, min(N, (a + 1) * Bs))
            for b in range(nb):
                cols = range(b * Bs, min(N, (b + 1) * Bs))
                tot = 0.0
                for s in range(2):
                    for t in range(3):
                        tot += sum(probs[s, t, h, i, j] for i in rows for j in cols)
                imp[h, a, b] = tot / 6 / len(rows)
    assert np.allclose(block_importance(probs, Bs), imp)
    # every row's importances sum to 1 over the key blocks (average row mass)
    assert np.allclose(imp.sum(-1), 1.0)
    for thr in (0.0, 1e-3, np.median(imp), 0.2, 2.0):
        m = profile_mask(probs, Bs, thr)
        assert m.shape == (2, nb, nb) and m.dtype == bool
        diag = np.eye(nb, dtype=bool)[None]
        assert (m == ((imp >= thr) | diag)).all()
        assert m[:, np.arange(nb), np.arange(nb)].all()   # diagonal always kept
    assert profile_mask(probs, Bs, 2.0).sum() == 2 * nb  # impossible threshold: diagonal only
    assert profile_mask(probs, Bs, 0.0).all()


def test_block_importance_without_leading_axes():
    rng = np.random.default_rng(0)
    p = random_probs(rng, (), 3, 8)
    assert block_importance(p, 4).shape == (3, 2, 2)
    assert np.allclose(block_importance(p, 4), block_importance(p[None, None], 4))
    with pytest.raises(ValueError):
        block_importance(np.zeros((4, 8)), 4)


def test_expand_mask():
    m = np.array([[[True, False], [False, True]]])
    el = expand_mask(m, 6, 4)
    assert el.shape == (1, 6, 6)
    assert el[0, :4, :4].all() and not el[0, :4, 4:].any() and el[0, 4:, 4:].all()


# ----------------------------------------------------------------------------- softmax and P
@SET
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 20), st.sampled_from([4, 8]))
def test_masked_softmax(seed, N, Bs):
    rng = np.random.default_rng(seed)
    nb = -(-N // Bs)
    mask = random_mask(rng, 2, nb)
    el = expand_mask(mask, N, Bs)
    S = rng.normal(size=(2, N, N)) * 10
    P = masked_softmax(S, el)
    assert (P[~el] == 0.0).all()                       # exact zeros outside the mask
    assert (P[el] > 0).all()
    assert np.allclose(P.sum(-1), 1.0)
    # equals the softmax of the kept entries alone
    for h in range(2):
        for i in range(N):
            k = el[h, i]
            ref = np.exp(S[h, i, k] - S[h, i, k].max())
            assert np.allclose(P[h, i, k], ref / ref.sum())


def test_p_to_int_rounding_and_saturation():
    u = 1 / 128
    P = np.array([0.0, 0.49 * u, 0.5 * u, 1.5 * u, 2.5 * u, 126.49 * u, 126.5 * u, 127.4 * u,
                  127.5 * u, 1.0])
    assert p_to_int(P).tolist() == [0, 0, 1, 2, 3, 126, 127, 127, 127, 127]
    assert p_to_int(P).dtype == np.int64
    assert p_to_int(np.array([0.5, 1.0]), 4).tolist() == [8, 15]


def footprint_bits(P_int, mask, cfg):
    """numerics §2.6 record size: per kept block and per key column (a sub-channel of T queries) a
    precision code and T values at b bits; b from the FMDQ rule with r0 = 0."""
    Bs = cfg.tile
    N = P_int.shape[0]
    nb = mask.shape[0]
    bits = 0
    for qa in range(nb):
        for kb in range(nb):
            if not mask[qa, kb]:
                continue
            for j in range(Bs):
                key = kb * Bs + j
                u = [int(P_int[qa * Bs + i, key]) if qa * Bs + i < N and key < N else 0
                     for i in range(Bs)]
                _, b, e, _, _ = ref_quantize(u, 0, cfg.thr, cfg.e_max)
                assert e == 0
                bits += PRECISION_CODE_BITS + Bs * b
    return bits


@SET
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 4), st.sampled_from(["tiny", "fpga"]),
       st.one_of(st.just((1, 7, 31)), st.just((3, 20, 60)), st.just((0, 1, 2))),
       st.floats(0.5, 6.0))
def test_quantize_p_footprint(seed, nblocks, name, thr, sharp):
    cfg = preset(name, thr=thr)
    Bs = cfg.tile
    N = nblocks * Bs
    rng = np.random.default_rng(seed)
    mask = random_mask(rng, 1, nblocks)[0]
    el = expand_mask(mask[None], N, Bs)[0]
    P = masked_softmax(rng.normal(size=(N, N)) * sharp, el)
    Pi = p_to_int(P)
    rec = quantize_p(Pi, mask, cfg)
    assert PRECISION_CODE_BITS == 3
    assert rec.bits == footprint_bits(Pi, mask, cfg)
    assert rec.bytes == -(-rec.bits // 8)
    assert rec.subchannels == int(mask.sum()) * Bs
    # values: the FMDQ q of every kept entry (e = 0, r0 = 0), zero in dropped blocks
    assert not rec.values[~el].any()
    for qa in range(nblocks):
        for kb in range(nblocks):
            for j in range(Bs):
                u = Pi[qa * Bs:(qa + 1) * Bs, kb * Bs + j].tolist()
                q, b, _, _, _ = ref_quantize(u, 0, cfg.thr, cfg.e_max)
                if mask[qa, kb]:
                    assert rec.values[qa * Bs:(qa + 1) * Bs, kb * Bs + j].tolist() == q
                    assert rec.b[qa, kb, j] == b
                else:
                    assert rec.b[qa, kb, j] == 0
    if thr == (1, 7, 31):   # default thresholds never clip: the cache holds P exactly
        assert (rec.values == np.where(el, Pi, 0)).all()


def test_footprint_worked_example():
    cfg = preset("tiny")           # Bs = 4
    Pi = np.zeros((4, 4), np.int64)
    Pi[:, 0] = [127, 0, 0, 0]      # b = 8
    Pi[:, 1] = [5, 7, 0, 1]        # b = 4
    Pi[:, 2] = [1, 0, 0, 0]        # b = 2
    Pi[:, 3] = 0                   # b = 0: the code only
    rec = quantize_p(Pi, np.ones((1, 1), bool), cfg)
    assert rec.b.tolist() == [[[8, 4, 2, 0]]]
    assert rec.bits == 4 * 3 + 4 * (8 + 4 + 2 + 0) == 68 and rec.bytes == 9


def test_footprint_partial_block_convention():
    """N not a multiple of Bs: a kept edge block still has Bs key columns; the padded ones are
    all-zero sub-channels (code only, b = 0). Current convention, see docs."""
    cfg = preset("tiny")
    Pi = np.full((6, 6), 20)
    rec = quantize_p(Pi, np.ones((2, 2), bool), cfg)
    assert rec.subchannels == 16
    assert rec.bits == footprint_bits(Pi, np.ones((2, 2), bool), cfg)
    assert rec.values.shape == (6, 6) and (rec.values == 20).all()


# ----------------------------------------------------------------------------- cache / reuse
@pytest.mark.parametrize("interval", [1, 2, 3])
def test_cache_and_reuse_sequencing(interval):
    cfg = preset("tiny", sar_interval=interval)
    rng = np.random.default_rng(interval)
    H, N, d = 2, 10, 5
    nb = 3
    mask = random_mask(rng, H, nb)
    sar = SARAttention(mask, cfg)
    assert sar.interval == interval
    el = expand_mask(mask, N, cfg.tile)
    written = read = 0
    for t in range(7):
        q, k, v = (rng.normal(size=(H, N, d)) for _ in range(3))
        cache = is_cache_step(t, interval)
        assert cache == (t % interval == 0)
        out = sar.step(t, q if cache else None, k if cache else None, v)
        rec = sar.stats.per_step[-1]
        if cache:
            S = np.einsum("hnd,hmd->hnm", q, k) / np.sqrt(d)
            P = masked_softmax(S, el)
            recs = [quantize_p(p_to_int(P[h]), mask[h], cfg) for h in range(H)]
            fp = sum(r.bytes for r in recs)
            Pq = np.stack([r.values for r in recs]) / 128.0
            assert rec["kind"] == "cache" and rec["bytes_written"] == fp and rec["bytes_read"] == 0
            assert sar.footprint_bytes == fp
            written += fp
        else:
            assert rec["kind"] == "reuse"
            assert rec["bytes_read"] == sar.footprint_bytes and rec["bytes_written"] == 0
            read += sar.footprint_bytes
        # O = P_cached · V_t, masked entries of P exactly zero
        assert np.allclose(out, np.einsum("hnm,hmd->hnd", Pq, v))
        assert (sar.cache[~el] == 0).all()
    st_ = sar.stats
    assert st_.cache_steps == len([t for t in range(7) if t % interval == 0])
    assert st_.reuse_steps == 7 - st_.cache_steps
    assert st_.bytes_written == written and st_.bytes_read == read
    assert 0 <= st_.work_removed < 1


def test_reuse_step_needs_no_q_or_k():
    cfg = preset("tiny")
    mask = np.ones((1, 2, 2), bool)
    sar = SARAttention(mask, cfg)
    rng = np.random.default_rng(5)
    v = rng.normal(size=(1, 8, 3))
    sar.step(0, rng.normal(size=(1, 8, 3)), rng.normal(size=(1, 8, 3)), v)
    out = sar.step(1, None, None, 2 * v)
    assert np.allclose(out, np.einsum("hnm,hmd->hnd", sar.cache, 2 * v))


def test_default_interval_is_two():
    assert preset("tiny").sar_interval == 2
    assert [is_cache_step(t, 2) for t in range(5)] == [True, False, True, False, True]


# ----------------------------------------------------------------------------- weight operand
@SET
@given(st.lists(st.integers(-(2 ** 17), 2 ** 17), min_size=1, max_size=30))
def test_weight_operand_rule(vals):
    v = np.array(vals, dtype=np.int64)
    w, e = weight_operand(v)
    amax = max(abs(x) for x in vals)
    assert ref_rnd(amax, e) <= 127
    assert e == 0 or ref_rnd(amax, e - 1) > 127           # the smallest such e
    assert w.tolist() == [ref_rnd(x, e) for x in vals]
    assert np.abs(w).max() <= 127


def test_weight_operand_examples():
    assert weight_operand(np.array([127, -127, 0]))[1] == 0
    w, e = weight_operand(np.array([128, -3]))
    assert (w.tolist(), e) == ([64, -2], 1)
    w, e = weight_operand(np.array([[255, 1], [-254, 2]]))   # rnd(255, 1) = 128 → e = 2
    assert (w.tolist(), e) == ([[64, 0], [-64, 1]], 2)
    w, e = weight_operand(np.zeros((2, 2), np.int64))
    assert e == 0 and not w.any()
