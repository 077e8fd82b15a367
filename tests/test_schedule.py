"""The FMDQ schedule (numerics §2.3, 2.4): slices, chunks, sorted groups, markers, counters, and the
integer executor of the group stream, against independent references."""

import numpy as np
import pytest
from _initial import preset
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _ref import ref_digits, ref_quantize, tile_columns
from dstar_rtl.golden.fmdq import quantize_subchannels
from dstar_rtl.golden.schedule import (
    COUNTER_MAX,
    Accumulator,
    Counters,
    execute,
    exp_steps,
    int8_pe_execute,
    reference_product,
    schedule_matrix,
    schedule_tile,
    shift_counts,
    slice_digits,
    slice_pe_execute,
)
from dstar_rtl.golden.vectors import random_differences, random_weights

SET = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DX_LO, DX_HI = -(2 ** 17), 2 ** 17 - 1   # act_width + 2 = 18 bits


def horner_cfg(**kw):
    return preset("tiny", alignment="horner", max_reduction=2, sort_n=8, **kw)


# ----------------------------------------------------------------------------- slices
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_slice_digits_reconstruct(data):
    S = data.draw(st.integers(1, 6))
    T = data.draw(st.integers(1, 8))
    b = data.draw(st.lists(st.sampled_from([0, 2, 4, 6, 8]), min_size=S, max_size=S))
    q = [[data.draw(st.integers(-(2 ** (bb - 1) - 1), 2 ** (bb - 1) - 1)) if bb else 0
          for _ in range(T)] for bb in b]
    d = slice_digits(np.array(q, dtype=np.int64), np.array(b, dtype=np.int64))
    assert d.shape == (S, 4, T)
    for s in range(S):
        n = b[s] // 2
        for i in range(T):
            col = d[s, :, i].tolist()
            assert col[:n] == ref_digits(q[s][i], b[s])
            assert col[n:] == [0] * (4 - n)
            assert sum(col[k] * 4 ** k for k in range(4)) == q[s][i]
            if n:
                assert all(0 <= x <= 3 for x in col[:n - 1])
                assert -2 <= col[n - 1] <= 1


def test_slice_digits_edge_values():
    q = np.array([[-127, 127, -1, 0], [-1, 1, 0, 0], [-31, 31, -16, 16]])
    d = slice_digits(q, np.array([8, 2, 6]))
    assert d[0, :, 0].tolist() == [1, 0, 0, -2]     # -127 = 1000_0001
    assert d[0, :, 1].tolist() == [3, 3, 3, 1]      # 127 = 0111_1111
    assert d[0, :, 2].tolist() == [3, 3, 3, -1]     # -1 = 1111_1111
    assert d[1, :, 0].tolist() == [-1, 0, 0, 0]     # 2-bit: the only digit is signed
    assert d[2, :, 2].tolist() == [0, 0, -1, 0]     # -16 on 6 bits = 11_00_00


# ----------------------------------------------------------------------------- worked example
def test_paper_worked_example_digits_and_groups():
    """q = 70 (b = 8, e = 0): digits 2, 1, 0, 1; the all-zero column at exponent 4 is dropped."""
    cfg = horner_cfg()
    dx = np.array([[70], [0], [0], [0]])
    qz, tiles = schedule_matrix(dx, cfg, base_log2=8)   # r0 = 0: q == u
    assert (qz.q[0].tolist(), int(qz.b[0]), int(qz.e[0])) == ([70, 0, 0, 0], 8, 0)
    assert slice_digits(qz.q, qz.b)[0, :, 0].tolist() == [2, 1, 0, 1]
    (ts,) = tiles
    assert [g.exp for g in ts.groups] == [6, 2, 0]
    assert [g.k[0] for g in ts.groups] == [3, 1, 0]
    assert [g.digits[0, 0] for g in ts.groups] == [1, 1, 2]
    assert [int(g.signed[0]) for g in ts.groups] == [1, 0, 0]
    assert shift_counts(ts.groups) == [0, 4, 2]
    assert ts.counters["dropped_columns"] == 1 and ts.counters["slice_columns"] == 3
    # Horner by hand: ((1·w) << 4 + 1·w) << 2 + 2·w = 70·w, then the final shift by exp 0.
    w = np.array([[5, -3, 127, -127]])
    acc = 0
    for g, sc in zip(ts.groups, shift_counts(ts.groups)):
        acc = (acc << sc) + g.digits[0, 0] * w[0]
    acc = acc << ts.groups[-1].exp
    assert acc.tolist() == (70 * w[0]).tolist()
    expect = np.zeros((4, 4), np.int64)
    expect[0] = 70 * w[0]
    for c in (cfg, cfg.replace(alignment="product-shift")):
        accs, flags = execute(ts.groups, w, c)
        assert len(accs) == 1 and accs[0].tolist() == expect.tolist()
        assert not flags[0].any()


def test_paper_worked_example_without_dropping():
    cfg = horner_cfg(drop_zero_columns=False)
    qz, (ts,) = schedule_matrix(np.array([[70], [0], [0], [0]]), cfg, base_log2=8)
    assert [g.exp for g in ts.groups] == [6, 4, 2, 0]
    assert shift_counts(ts.groups) == [0, 2, 2, 2]
    assert ts.counters["dropped_columns"] == 0 and ts.counters["slice_columns"] == 4
    w = np.array([[7, 1, -2, 3]])
    for c in (cfg, cfg.replace(alignment="product-shift")):
        assert execute(ts.groups, w, c)[0][0][0].tolist() == (70 * w[0]).tolist()


def test_negative_worked_example_horner():
    # -70 = 1011_1010: digits 2, 2, 3, -2; signed top digit at exponent 6.
    cfg = horner_cfg()
    qz, (ts,) = schedule_matrix(np.array([[-70], [1], [0], [-3]]), cfg, base_log2=8)
    w = np.array([[3, -4, 9, 127]])
    expect = np.outer(np.array([-70, 1, 0, -3]), w[0])
    for c in (cfg, cfg.replace(alignment="product-shift")):
        assert execute(ts.groups, w, c)[0][0].tolist() == expect.tolist()


def test_mixed_precision_tile():
    """One tile holding every precision and a scaled channel; groups are per exponent."""
    cfg = preset("tiny", base_log2=8, lanes=2)
    dx = np.array([[1, 5, 20, 100, 1000],
                   [-1, -7, 31, -127, -999],
                   [0, 3, -30, 64, 3],
                   [1, 0, 0, -1, 0]])
    qz, (ts,) = schedule_matrix(dx, cfg)
    assert qz.b.tolist() == [2, 4, 6, 8, 8]
    assert qz.e.tolist() == [0, 0, 0, 0, 3]
    assert qz.fpot.tolist() == [0, 2, 4, 6, 9]
    W = np.array([[1, 2, 3, 4], [-5, 6, -7, 8], [9, -10, 11, -12], [127, -127, 1, 0],
                  [-1, 2, -3, 4]])
    expect = (qz.q << qz.e[:, None]).T @ W
    assert execute(ts.groups, W, cfg)[0][0].tolist() == expect.tolist()
    for g in ts.groups:
        for l in range(cfg.lanes):
            if g.valid[l]:
                assert qz.e[g.channel[l]] + 2 * g.k[l] == g.exp
    # exponents present: 0 (b2,b4,b6,b8), 2 (b4,b6,b8), 4 (b6,b8), 6 (b8), 3,5,7,9 (e = 3)
    assert sorted({g.exp for g in ts.groups}) == [0, 2, 3, 4, 5, 6, 7, 9]


# ----------------------------------------------------------------------------- property tests
@st.composite
def sched_case(draw):
    name = draw(st.sampled_from(["tiny", "tiny", "fpga"]))
    N = draw(st.integers(1, 13))
    C = draw(st.integers(1, 24))
    T = 4 if name == "tiny" else 8
    sort_n = draw(st.sampled_from([2, 4, 8, 16, 32]))
    lanes = draw(st.sampled_from([l for l in (1, 2, 4, 8) if l <= sort_n]))
    horner = draw(st.booleans())
    max_red = draw(st.sampled_from([C, 64]))
    if horner:
        max_red = C
        while sort_n < 4 * max_red:
            sort_n *= 2
    kw = dict(sort_n=sort_n, lanes=lanes, max_reduction=max_red,
              drop_zero_columns=draw(st.booleans()),
              base_log2=draw(st.integers(0, 8)),
              thr=draw(st.one_of(st.just((1, 7, 31)),
                                 st.lists(st.integers(0, 126), min_size=3, max_size=3,
                                          unique=True).map(lambda t: tuple(sorted(t))))),
              alignment="horner" if horner else "product-shift",
              overflow_detect=draw(st.booleans()))
    if draw(st.integers(0, 4)) == 0:
        kw["e_max"] = draw(st.integers(0, 5))
    cfg = preset(name, **kw)
    ncols = draw(st.integers(1, cfg.cols))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    # Per channel a random magnitude (so every e appears), some all-zero channels and tiles,
    # the extremes of the range.
    mag = rng.integers(0, 18, size=C)
    dx = rng.integers(-(2 ** mag), 2 ** mag + 1, size=(N, C))
    dx[:, rng.random(C) < 0.15] = 0
    sparse = rng.random((N, C)) < draw(st.sampled_from([0.0, 0.5, 0.9]))
    dx[sparse] = 0
    ext = rng.random((N, C)) < 0.05
    dx[ext] = rng.choice([DX_LO, DX_HI, -DX_HI], size=int(ext.sum()))
    tiles = -(-N // T)
    for t in range(tiles):
        if rng.random() < 0.2:
            dx[t * T:(t + 1) * T] = 0
    dx = np.clip(dx, DX_LO, DX_HI)
    W = rng.integers(-127, 128, size=(C, ncols))
    W[rng.random((C, ncols)) < 0.1] = rng.choice([-127, 127])
    return cfg, dx, W


def descriptors(q, b, drop):
    """Kept (channel, k) descriptors of a tile in channel-then-k order (numerics §2.3)."""
    out, dropped = [], 0
    for c in range(len(b)):
        digs = [ref_digits(v, int(b[c])) for v in q[c]]
        for k in range(int(b[c]) // 2):
            if drop and all(d[k] == 0 for d in digs):
                dropped += 1
                continue
            out.append((c, k))
    return out, dropped


def check_tile(ts, q, b, e, cfg):
    """Structure of one tile's group stream against an independent recomputation."""
    L, T, n = cfg.lanes, cfg.tile, cfg.sort_n
    C = len(b)
    desc, dropped = descriptors(q, b, cfg.drop_zero_columns)
    pos = {d: i for i, d in enumerate(desc)}
    groups = ts.groups
    # markers exactly once, on the first and last group
    assert [g.first for g in groups] == [True] + [False] * (len(groups) - 1)
    assert [g.last for g in groups] == [False] * (len(groups) - 1) + [True]
    if not desc:
        (g,) = groups
        assert g.exp == 0 and not g.valid.any() and not g.digits.any()
        assert not g.channel.any() and not g.signed.any()
    seen = []
    prev = (-1, None)
    per_run = {}
    for g in groups:
        assert g.digits.shape == (T, L) and len(g.valid) == L
        nv = int(g.valid.sum())
        # valid lanes first, padded lanes all zero
        assert g.valid.tolist() == [1] * nv + [0] * (L - nv)
        assert not g.digits[:, nv:].any() and not g.channel[nv:].any()
        assert not g.signed[nv:].any()
        assert 0 <= g.exp <= cfg.max_exp < 2 ** cfg.exp_width
        if desc:
            assert nv >= 1
        chunks = set()
        for l in range(nv):
            c, k = int(g.channel[l]), int(g.k[l])
            assert 0 <= c < C and 0 <= k < b[c] // 2
            assert e[c] + 2 * k == g.exp                        # never mixes exponents
            assert g.signed[l] == int(k == b[c] // 2 - 1)
            assert g.digits[:, l].tolist() == [ref_digits(v, int(b[c]))[k] for v in q[c]]
            chunks.add(pos[(c, k)] // n)
            seen.append((c, k))
        if nv:
            assert len(chunks) == 1                              # never spans two chunks
            key = (chunks.pop(), g.exp)
            # chunks in order; inside a chunk exponents strictly descending between runs
            assert key[0] > prev[0] or (key[0] == prev[0] and key[1] <= prev[1])
            per_run.setdefault(key, []).append(nv)
            prev = key
    # every kept column exactly once
    assert sorted(seen) == sorted(desc)
    # lanes packed as full as the runs allow: all groups of a run but its last are full
    for key, sizes in per_run.items():
        assert all(s == L for s in sizes[:-1])
        assert len(sizes) == -(-sum(sizes) // L)
    # counters
    ctr = ts.counters
    assert ctr["subchannels"] == C
    for bb in (2, 4, 6, 8):
        assert ctr[f"subchannels_b{bb}"] == sum(1 for x in b if x == bb)
    assert ctr["subchannels_zero"] == sum(1 for x in b if x == 0)
    assert ctr["slice_columns"] == len(desc)
    assert ctr["dropped_columns"] == dropped
    assert ctr["groups"] == len(groups)
    assert ctr["padded_lanes"] == sum(L - int(g.valid.sum()) for g in groups)
    assert ts.chunks == -(-len(desc) // n)


@SET
@given(sched_case())
def test_schedule_equals_numerics(case):
    cfg, dx, W = case
    N, C = dx.shape
    T = cfg.tile
    qz, tiles = schedule_matrix(dx, cfg)
    nt = len(tiles)
    assert nt == -(-N // T)
    pad = np.zeros((nt * T, C), np.int64)
    pad[:N] = dx
    stream = [g for ts in tiles for g in ts.groups]
    accs, flags = execute(stream, W, cfg)
    refs = reference_product(qz, nt, W, cfg)
    assert len(accs) == len(refs) == nt
    total_sat = 0
    for t, ts in enumerate(tiles):
        # independent quantization of every sub-channel of the tile
        rq = [ref_quantize(pad[t * T:(t + 1) * T, c].tolist(), cfg.r0, cfg.thr, cfg.e_max)
              for c in range(C)]
        q = [r[0] for r in rq]
        b = [r[1] for r in rq]
        e = [r[2] for r in rq]
        total_sat += sum(r[4] for r in rq)
        sl = slice(t * C, (t + 1) * C)
        assert qz.q[sl].tolist() == q and qz.b[sl].tolist() == b and qz.e[sl].tolist() == e
        # Σ_c q · 2**e · W in Python integers
        exact = [[sum(q[c][i] * 2 ** e[c] * int(W[c, j]) for c in range(C))
                  for j in range(W.shape[1])] for i in range(T)]
        assert refs[t].tolist() == exact
        acc = accs[t]
        assert acc.shape == (T, cfg.cols)
        assert acc[:, :W.shape[1]].tolist() == exact
        assert not acc[:, W.shape[1]:].any()           # padded output columns compute zeros
        if N - t * T < T:
            assert not acc[N - t * T:].any()            # padded token rows compute zeros
        # The derived width cannot overflow, even with saturating partial sums.
        assert not flags[t].any()
        check_tile(ts, q, b, e, cfg)
        assert ts.counters["saturated"] == sum(r[4] for r in rq)
        if all(x == 0 for x in b):
            assert len(ts.groups) == 1 and ts.counters["groups"] == 1
    assert sum(ts.counters["saturated"] for ts in tiles) == total_sat


@SET
@given(sched_case())
def test_each_tile_executes_alone(case):
    """A tile's stream is self-contained: replaying one tile alone gives the same accumulators."""
    cfg, dx, W = case
    qz, tiles = schedule_matrix(dx, cfg)
    refs = reference_product(qz, len(tiles), W, cfg)
    for t in reversed(range(len(tiles))):
        accs, _ = execute(tiles[t].groups, W, cfg)
        assert accs[0][:, :W.shape[1]].tolist() == refs[t].tolist()


def test_all_zero_tile_emits_one_invalid_group():
    for cfg in (preset("tiny"), preset("tiny", drop_zero_columns=False), preset("fpga")):
        dx = np.zeros((cfg.tile, 5), np.int64)
        dx[0, 2] = 1   # rounds to zero at r0 = 2: M == 0 too
        qz, (ts,) = schedule_matrix(dx, cfg)
        (g,) = ts.groups
        assert g.exp == 0 and g.first and g.last
        assert not g.valid.any() and not g.digits.any() and not g.channel.any()
        assert not g.signed.any()
        c = ts.counters
        assert (c["groups"], c["padded_lanes"], c["subchannels_zero"], c["slice_columns"],
                c["dropped_columns"], c["subchannels"]) == (1, cfg.lanes, 5, 0, 0, 5)
        assert ts.chunks == 0
        W = np.full((5, cfg.cols), 127)
        accs, _ = execute(ts.groups, W, cfg)
        assert not accs[0].any()


def test_zero_tile_between_tiles_resets():
    cfg = preset("tiny", base_log2=8)
    dx = np.zeros((12, 3), np.int64)
    dx[0:4] = [[100, -5, 3]] * 4
    dx[8:12] = [[-1, 2, 1]] * 4
    qz, tiles = schedule_matrix(dx, cfg)
    assert len(tiles[1].groups) == 1
    W = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [-9, -10, -11, -12]])
    accs, _ = execute([g for ts in tiles for g in ts.groups], W, cfg)
    assert [a.tolist() for a in accs] == [r.tolist() for r in reference_product(qz, 3, W, cfg)]


def test_chunks_and_lanes_with_many_channels():
    """Chunks of sort_n: 20 channels × 4 slices fill 10 chunks of 8; no group spans two."""
    cfg = preset("tiny", base_log2=8, drop_zero_columns=False)
    dx = np.full((4, 20), 127)
    dx[1] = -127
    qz, (ts,) = schedule_matrix(dx, cfg)
    assert ts.chunks == 10
    # each chunk holds 2 channels × exps {6,4,2,0}: 4 groups of 2 valid lanes each
    assert len(ts.groups) == 40 and all(int(g.valid.sum()) == 2 for g in ts.groups)
    assert ts.counters["padded_lanes"] == 80
    W = np.arange(-40, 40).reshape(20, 4)
    assert execute(ts.groups, W, cfg)[0][0].tolist() == ((qz.q.T) @ W).tolist()


def test_descriptor_order_and_exponent_mixing():
    """Equal exponents from different channels share a group; different ones never do."""
    cfg = preset("tiny", base_log2=8, sort_n=16, lanes=4)
    # channel 0: q = 3 (b = 4, e = 0) → exps 0; channel 1: 200 → e = 1, b = 8: exps 1,3,5,7
    # channel 2: q = 1 (b = 2): exp 0
    dx = np.array([[3, 200, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
    qz, (ts,) = schedule_matrix(dx, cfg)
    assert qz.e.tolist() == [0, 1, 0]
    exps = [g.exp for g in ts.groups]
    assert exps == sorted(exps, reverse=True)
    g0 = [g for g in ts.groups if g.exp == 0]
    assert len(g0) == 1 and sorted(g0[0].channel[:int(g0[0].valid.sum())].tolist()) == [0, 2]


def test_group_stream_carries_absolute_exponent():
    cfg = preset("tiny", base_log2=8)
    qz, tiles = schedule_matrix(np.array([[1000, 0], [0, 7], [0, 0], [0, 0]]), cfg)
    ts = tiles[0]
    assert [g.exp for g in ts.groups] == [int(qz.e[0]) + 2 * int(g.k[0]) if g.channel[0] == 0
                                          else 2 * int(g.k[0]) for g in ts.groups]
    assert ts.groups[0].exp == int(qz.fpot.max())


# ----------------------------------------------------------------------------- accumulator width
@pytest.mark.parametrize("sort_n,align", [(8, "product-shift"), (256, "product-shift"),
                                          (256, "horner")])
def test_safe_width_holds_worst_case_partial_sums(sort_n, align):
    """Adversarial: every channel at q = -65 with e = 10 (its top digit alone is -128·2**10)
    against W = -127, at r0 = 0 and max_reduction = C. With sort_n = 256 the whole tile is one
    chunk, so all 64 top digits come first and the partial sum reaches 64·127·2**17, exactly the
    bound of numerics §2.1: the derived width holds every partial sum (no saturation)."""
    C = 64
    cfg = preset("tiny", base_log2=8, max_reduction=C, overflow_detect=True, sort_n=sort_n,
                 alignment=align)
    dx = np.zeros((4, C), np.int64)
    dx[0] = 130000            # rnd(130000, 9) = 254 > 127, rnd(130000, 10) = 127 → e = 10
    dx[1] = -65 * 1024        # q = -65: 1011_1111, top digit -2 (prefix -128)
    qz, (ts,) = schedule_matrix(dx, cfg)
    assert (qz.e == 10).all() and qz.q[0, 1] == -65
    W = np.full((C, 4), -127)
    accs, flags = execute(ts.groups, W, cfg)
    assert not flags[0].any()
    assert accs[0].tolist() == reference_product(qz, 1, W, cfg)[0].tolist()
    if sort_n == 256:
        g = ts.groups[0]
        assert g.exp == 16 and (g.digits[1] == -2).all()
        first_partial = int(g.digits[1].sum()) * -127 * 2 ** 16 * (C // cfg.lanes)
        assert first_partial == C * 127 * 2 ** 17 <= 2 ** (cfg.acc_bits - 1) - 1


@st.composite
def narrow_case(draw):
    cfg, dx, W = draw(sched_case())
    width = draw(st.integers(4, cfg.safe_acc_width - 1))
    return cfg.replace(acc_width=width, overflow_detect=True), dx, W


@SET
@given(narrow_case())
def test_narrow_accumulator_saturates_and_flags(case):
    cfg, dx, W = case
    lo, hi = -(2 ** (cfg.acc_bits - 1)), 2 ** (cfg.acc_bits - 1) - 1
    qz, tiles = schedule_matrix(dx, cfg)
    accs, flags = execute([g for ts in tiles for g in ts.groups], W, cfg)
    for acc, flag, ref in zip(accs, flags, reference_product(qz, len(tiles), W, cfg)):
        acc = acc[:, :W.shape[1]]
        flag = flag[:, :W.shape[1]]
        assert ((acc >= lo) & (acc <= hi)).all()
        # no flag: the result is exact; an exact result outside the range always flags
        assert (acc[~flag] == ref[~flag]).all()
        assert flag[(ref < lo) | (ref > hi)].all()


def test_narrow_accumulator_never_wraps():
    for align in ("product-shift", "horner"):
        cfg = preset("tiny", base_log2=8, max_reduction=4, sort_n=16, acc_width=12,
                     overflow_detect=True, alignment=align)
        dx = np.array([[127] * 4, [-127] * 4, [3] * 4, [0] * 4])
        qz, (ts,) = schedule_matrix(dx, cfg)
        W = np.array([[127, -127, 1, 0]] * 4)
        accs, flags = execute(ts.groups, W, cfg)
        ref = reference_product(qz, 1, W, cfg)[0]   # row 0: ±4·127·127 = ±64516
        assert accs[0][0].tolist() == [2047, -2048, 508, 0]
        assert flags[0][0].tolist() == [True, True, False, False]
        # Row 1 (q = -127 = 1000_0001: digits 1, 0, 0, -2) saturates on its first group
        # (exp 6) and then keeps adding: the register saturates at every addition, so the
        # final value depends on the order and the alignment; the sticky flag is what counts.
        assert flags[0][1].tolist() == [True, True, False, False]
        if align == "product-shift":
            # -2048 after exp 6, then + 4·1·127 at exp 0
            assert accs[0][1].tolist() == [-1540, 1539, -508, 0]
        else:
            # Horner keeps the partial sum shifted down; the late shifts saturate it again.
            assert accs[0][1].tolist() == [-2048, 2047, -508, 0]
        assert accs[0][2].tolist() == ref[2].tolist() and not flags[0][2].any()
        # a wrapping register would give a different, in-range value
        wrapped = ((ref[0, 0] + 2048) % 4096) - 2048
        assert wrapped != accs[0][0, 0]


def test_flags_reset_per_tile():
    cfg = preset("tiny", base_log2=8, acc_width=10, overflow_detect=True)
    dx = np.zeros((8, 2), np.int64)
    dx[0:4] = 127
    dx[4:8] = 1
    qz, tiles = schedule_matrix(dx, cfg)
    W = np.full((2, 4), 127)
    accs, flags = execute([g for ts in tiles for g in ts.groups], W, cfg)
    assert flags[0].all() and (accs[0] == 511).all()
    assert not flags[1].any() and (accs[1] == 254).all()


# ----------------------------------------------------------------------------- misc
def test_execute_refuses_bad_weight_shapes():
    cfg = preset("tiny")
    qz, (ts,) = schedule_matrix(np.ones((4, 2), np.int64) * 100, cfg)
    with pytest.raises(ValueError):
        execute(ts.groups, np.zeros((2, 5), np.int64), cfg)
    with pytest.raises(ValueError):
        execute(ts.groups, np.zeros((0, 4), np.int64), cfg)


def test_counters_saturate_at_32_bits():
    c = Counters()
    c.add("groups", COUNTER_MAX - 1)
    c.add("groups", 5)
    assert c["groups"] == COUNTER_MAX == 2 ** 32 - 1
    d = Counters()
    d.add("groups", 10)
    d.merge(c)
    assert d["groups"] == COUNTER_MAX


def test_schedule_tile_direct():
    """schedule_tile on hand-written (q, b, e): counters per precision, sign flags, exponents."""
    cfg = preset("tiny", lanes=2, sort_n=8)
    q = np.array([[1, -1, 0, 1], [0, 0, 0, 0], [-8, 7, 2, 0], [127, -127, 0, 5]])
    b = np.array([2, 0, 4, 8])
    e = np.array([0, 0, 0, 2])
    ts = schedule_tile(q, b, e, cfg)
    check_tile(ts, q.tolist(), b.tolist(), e.tolist(), cfg)
    assert ts.counters["subchannels_b8"] == 1 and ts.counters["subchannels_zero"] == 1
    W = np.arange(16).reshape(4, 4) - 8
    assert execute(ts.groups, W, cfg)[0][0].tolist() == ((q << e[:, None]).T @ W).tolist()


def test_quantize_then_schedule_matches_quantize_subchannels():
    cfg = preset("fpga")
    rng = np.random.default_rng(7)
    dx = rng.integers(-5000, 5000, size=(8, 9))
    qz, _ = schedule_matrix(dx, cfg)
    direct = quantize_subchannels(dx.T, cfg)
    assert (qz.q == direct.q).all() and (qz.e == direct.e).all() and (qz.b == direct.b).all()


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("width", [31, 40, 62, 63, 64, 65, 128])
@pytest.mark.parametrize("detect", [False, True])
def test_wide_explicit_accumulators_are_exact(width, detect):
    cfg = preset("tiny", base_log2=8, acc_width=width, overflow_detect=detect)
    rng = np.random.default_rng(width)
    dx = rng.integers(DX_LO, DX_HI + 1, size=(4, 30))
    W = rng.integers(-127, 128, size=(30, 4))
    qz, (ts,) = schedule_matrix(dx, cfg)
    accs, flags = execute(ts.groups, W, cfg)
    assert accs[0].dtype == np.int64
    assert accs[0].tolist() == reference_product(qz, 1, W, cfg)[0].tolist()
    assert not flags[0].any()


def test_derived_width_wraps_partial_sums_but_not_results():
    """Without overflow detection the derived-width register is modular: the final sum fits."""
    cfg = preset("tiny", base_log2=8, max_reduction=3)
    dx = np.array([[DX_LO] * 3, [DX_HI] * 3, [-(2 ** 16)] * 3, [1] * 3])
    qz, (ts,) = schedule_matrix(dx, cfg)
    W = np.array([[-127, 127, 1, 0]] * 3)
    ref = reference_product(qz, 1, W, cfg)[0]
    assert np.abs(ref).max() < 2 ** (cfg.acc_bits - 1)
    assert execute(ts.groups, W, cfg)[0][0].tolist() == ref.tolist()


def test_schedule_refuses_more_channels_than_max_reduction():
    """Otherwise channel indices overflow the record's channel field and Horner order breaks."""
    cfg = preset("tiny", alignment="horner", max_reduction=2, sort_n=8, base_log2=8)
    with pytest.raises(ValueError, match="5 input channels exceeds max_reduction = 2"):
        schedule_matrix(np.full((4, 5), 100), cfg)
    schedule_matrix(np.full((4, 2), 100), cfg)


# ----------------------------------------------------------------------------- one PE
@pytest.mark.parametrize("overrides", [
    {}, dict(alignment="horner", max_reduction=2), dict(acc_width=12, overflow_detect=True),
    dict(alignment="horner", max_reduction=2, acc_width=10, overflow_detect=True)])
def test_each_pe_of_the_array_is_slice_pe_execute(overrides):
    """PE (i, j) of :func:`execute` is :func:`slice_pe_execute` on what that PE's ports carry:
    the raw 2-bit digits of row i with the lanes' signed flags, the weights ``W[channel, j]``
    (0 on padded lanes), the exponents and tile markers. Horner's ``dexp`` is ``exp_steps``."""
    cfg = preset("tiny", **overrides)
    rng = np.random.default_rng(3)
    C = min(cfg.max_reduction, 6)
    dx = np.concatenate([random_differences(rng, cfg, cfg.tile, C, k) for k in
                         ("mixed", "max", "outlier")])
    W = random_weights(cfg, rng, C)
    _, tiles = schedule_matrix(dx, cfg, cfg.B_max)
    groups = [g for ts in tiles for g in ts.groups]
    accs, flags = execute(groups, W, cfg)
    assert shift_counts(groups) == exp_steps([g.exp for g in groups], [g.first for g in groups])
    args = [[g.exp for g in groups], [g.first for g in groups], [g.last for g in groups], cfg]
    for i in range(cfg.rows):
        raw = np.array([g.digits[i] & 3 for g in groups])
        signed = np.array([g.signed for g in groups])
        for j in range(cfg.cols):
            w = np.array([np.where(g.valid.astype(bool), W[g.channel, j], 0) for g in groups])
            got = slice_pe_execute(raw, signed, w, *args)
            assert got == [(int(a[i, j]), int(f[i, j])) for a, f in zip(accs, flags)]
    if cfg.overflow_detect:
        assert any(f.any() for f in flags)
    assert Accumulator.slice_pe(cfg).width == cfg.acc_bits


def test_int8_pe_execute_is_a_dot_product_per_tile():
    """:func:`int8_pe_execute`: ``Σ a · w`` per tile (back to back), exact while it fits the
    baseline's accumulator, over the whole signed operand range."""
    cfg = preset("tiny")
    rng = np.random.default_rng(4)
    half = 1 << (cfg.weight_width - 1)
    a = rng.integers(-half, half, size=40)
    w = rng.integers(-half, half, size=40)
    first = [k in (0, 17, 18) for k in range(40)]
    last = [k in (16, 17, 39) for k in range(40)]
    assert int8_pe_execute(a, w, first, last, cfg) == [
        int(a[:17] @ w[:17]), int(a[17] * w[17]), int(a[18:] @ w[18:])]


def test_horner_accumulator_refuses_an_increasing_exponent():
    """A negative shift has no meaning; the schedule never emits one (one sorted chunk per tile)."""
    acc = Accumulator(20, horner=True)
    assert acc.step(3, 5, first=True) is None
    with pytest.raises(ValueError, match="non-increasing exponents within a tile, got 6 after 5"):
        acc.step(1, 6)
    assert acc.step(1, 7, first=True, last=True)[0] == 1 << 7   # a new tile may start anywhere


def test_packing_groups_by_hand():
    """Two chunks of 4 lanes: runs (5: 3, 2: 2) then (7: 1, 2: 1). As built: 4 groups. Snake:
    the second chunk is read ascending, its first run (2: 1) refills the open group of
    exponent 2 (2 + 1 = 3 descriptors, one group): 3 groups. Whole tile: 5 → 1, 2: 3 → 1,
    7 → 1: 3 groups."""
    from dstar_rtl.golden.schedule import packing_groups

    runs = [[(5, 3), (2, 2)], [(7, 1), (2, 1)]]
    assert packing_groups(runs, 4, "chunk") == 4
    assert packing_groups(runs, 4, "snake") == 3
    assert packing_groups(runs, 4, "tile") == 3
    # a refill that overflows the open group saves nothing: 2 + 3 = 5 descriptors, 2 groups
    assert packing_groups([[(5, 3), (2, 2)], [(7, 1), (2, 3)]], 4, "snake") == 4
    assert packing_groups([[(3, 2)], [(4, 1), (3, 2)]], 4, "snake") == 2
    assert packing_groups([[(3, 2)], [(4, 1), (3, 2)]], 4, "tile") == 2
    assert [packing_groups([], 4, p) for p in ("chunk", "snake", "tile")] == [1, 1, 1]
    with pytest.raises(ValueError, match="packing must be one of"):
        packing_groups(runs, 4, "greedy")


@pytest.mark.parametrize("seed", range(6))
def test_packings_count_the_schedules_groups_and_never_more(seed):
    """``chunk`` is the schedule's own group count; merging partial groups never adds one."""
    from dstar_rtl.golden.schedule import packing_groups

    rng = np.random.default_rng(seed)
    cfg = preset("tiny", sort_n=8, lanes=int(rng.choice([2, 4])))
    C = int(rng.integers(1, 40))
    dx = random_differences(rng, cfg, cfg.tile, C)
    _, tiles = schedule_matrix(dx, cfg)
    for ts in tiles:
        g = [packing_groups(ts.chunk_runs, cfg.lanes, p) for p in ("chunk", "snake", "tile")]
        assert g[0] == len(ts.groups)
        assert g[0] >= g[1] >= g[2] >= 1
        valid = sum(n for runs in ts.chunk_runs for _, n in runs)
        assert valid == sum(int(gr.valid.sum()) for gr in ts.groups)


def test_open_groups_by_hand():
    """``pack_tile`` on two chunks of 4 lanes. Chunk 0 (not the tile's last): run 5 of five
    descriptors, run 3 of two; chunk 1 (last): run 5 of one, run 3 of three. With two open slots:
    (5: 0-3) full; 4 waits in slot 0, (5, 6) in slot 1; chunk 1 fills slot 0's group with 7 and
    emits it short (last chunk), slot 1's with 8, 9 (full), and 10 goes out alone: 4 groups
    where the chunked packing needs 5. With one slot the run 3 of chunk 0 finds no free slot and
    goes out at once."""
    from dstar_rtl.golden.schedule import pack_tile

    runs = [[(5, [0, 1, 2, 3, 4]), (3, [5, 6])], [(5, [7]), (3, [8, 9, 10])]]
    two = preset("tiny", lanes=4, open_groups=2)
    assert pack_tile(runs, two) == [(5, [0, 1, 2, 3]), (5, [4, 7]), (3, [5, 6, 8, 9]),
                                     (3, [10])]
    one = preset("tiny", lanes=4, open_groups=1)
    assert pack_tile(runs, one) == [(5, [0, 1, 2, 3]), (3, [5, 6]), (5, [4, 7]),
                                     (3, [8, 9, 10])]
    none = preset("tiny", lanes=4)
    assert pack_tile(runs, none) == [(5, [0, 1, 2, 3]), (5, [4]), (3, [5, 6]), (5, [7]),
                                      (3, [8, 9, 10])]
    # A partial group with every slot taken goes out at once; the slots still open after the
    # last chunk go out in slot order.
    runs = [[(6, [0]), (4, [1])], [(2, [2])], [(6, [3]), (1, [4])]]
    assert pack_tile(runs, two) == [(2, [2]), (6, [0, 3]), (1, [4]), (4, [1])]


@SET
@given(sched_case(), st.integers(1, 4))
def test_open_groups_keep_the_product_and_never_add_a_group(case, k):
    """With ``open_groups = k`` every tile still computes Σ q·2**e·W; every kept column is in
    exactly one group, a group never mixes exponents, markers sit on the first and last group,
    and no tile takes more groups than with ``open_groups = 0`` (whose stream is unchanged)."""
    import dataclasses

    cfg0, dx, W = case
    cfg = dataclasses.replace(cfg0, open_groups=k)
    qz, tiles = schedule_matrix(dx, cfg)
    _, tiles0 = schedule_matrix(dx, cfg0)
    refs = reference_product(qz, len(tiles), W, cfg)
    for t, (ts, ts0) in enumerate(zip(tiles, tiles0)):
        accs, flags = execute(ts.groups, W, cfg)
        if not cfg.overflow_detect or not flags[0].any():
            assert accs[0][:, :W.shape[1]].tolist() == refs[t].tolist()
        assert len(ts.groups) <= len(ts0.groups)
        assert tile_columns(ts.groups) == tile_columns(ts0.groups)
        for g in ts.groups:
            nv = int(g.valid.sum())
            assert g.valid.tolist() == [1] * nv + [0] * (cfg.lanes - nv)
            ch, kk = g.channel[:nv], g.k[:nv]
            assert all(int(qz.e[t * dx.shape[1] + c]) + 2 * int(j) == g.exp
                       for c, j in zip(ch, kk))
        if ts.chunks <= 1:
            assert [g.word(cfg) for g in ts.groups] == [g.word(cfg0) for g in ts0.groups]


@pytest.mark.parametrize("seed", range(4))
def test_chunk_runs_are_each_chunks_exponents_in_sorted_order(seed):
    """:attr:`TileSchedule.chunk_runs` from the numerics alone: the tile's digit columns in
    channel-then-digit order (a zero column dropped), cut into chunks of ``sort_n``; per chunk
    ``(exponent, count)`` for each exponent present, largest exponent first."""
    from collections import Counter

    rng = np.random.default_rng(seed)
    cfg = preset("tiny", sort_n=8, lanes=4)
    dx = random_differences(rng, cfg, cfg.tile, int(rng.integers(8, 40)))
    qz, tiles = schedule_matrix(dx, cfg)
    C = dx.shape[1]
    for t, ts in enumerate(tiles):
        q, b, e = (a[t * C:(t + 1) * C] for a in (qz.q, qz.b, qz.e))
        # a column is zero when every token's digit k is 0 (slice digits, _ref's reading)
        zero = {(c, k) for c in range(C) for k in range(int(b[c]) // 2)
                if not any(ref_digits(v, int(b[c]))[k] for v in q[c])}
        exps = [int(e[c]) + 2 * k for c in range(C) for k in range(int(b[c]) // 2)
                if not (cfg.drop_zero_columns and (c, k) in zero)]
        chunks = [exps[i:i + cfg.sort_n] for i in range(0, len(exps), cfg.sort_n)]
        want = [sorted(Counter(ch).items(), key=lambda r: -r[0]) for ch in chunks]
        assert ts.chunk_runs == want
        assert len(chunks) > 1 or t                 # several chunks in the first tile at least


@SET
@given(sched_case(), st.integers(0, 3))
def test_the_summed_executor_equals_the_beat_by_beat_one(case, drop):
    """:func:`execute`'s wrapping shortcut (``_execute_wrapping``) against its loop on every
    stream: well-formed ones (the shortcut must agree bit for bit, overflow flags included)
    and ones with a tile's ``last`` beat dropped (the shortcut must refuse and the loop run)."""
    import dstar_rtl.golden.schedule as sch

    cfg, dx, W = case
    stream = [g for ts in schedule_matrix(dx, cfg)[1] for g in ts.groups]
    Wp = np.pad(np.asarray(W, np.int64), ((0, 0), (0, cfg.cols - np.shape(W)[1])))
    if drop and len(stream) > 1:
        lasts = [i for i, g in enumerate(stream[:-1]) if g.last]
        if lasts:
            from dataclasses import replace
            i = lasts[drop % len(lasts)]
            stream[i] = replace(stream[i], last=False)
            assert sch._execute_wrapping(stream, Wp, cfg) is None
    fast = execute(stream, W, cfg)
    orig = sch._execute_wrapping
    try:
        sch._execute_wrapping = lambda *a: None
        slow = execute(stream, W, cfg)
    finally:
        sch._execute_wrapping = orig
    assert len(fast[0]) == len(slow[0])
    for a, b in zip(fast[0], slow[0]):
        assert np.array_equal(a, b)
    for a, b in zip(fast[1], slow[1]):
        assert np.array_equal(a, b)
    if not drop and not cfg.overflow_detect:      # the schedule's own streams take the shortcut
        assert sch._execute_wrapping(stream, Wp, cfg) is not None
