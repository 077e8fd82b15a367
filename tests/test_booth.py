"""Radix-4 Booth digits (``cfg.digits == "booth"``, issue 15) in the golden schedule: the digit
code, its zero columns and partial sums, and that the executed schedule equals the slice schedule
and the reference product exactly."""

import numpy as np
import pytest
from _initial import preset
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dstar_rtl.golden.layouts import group_layout, unpack
from dstar_rtl.golden.schedule import (
    Accumulator,
    booth_digits,
    digit_values,
    execute,
    reference_product,
    schedule_matrix,
    slice_digits,
    value_digits,
)
from dstar_rtl.golden.vectors import random_differences, random_weights

SET = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DX_LO, DX_HI = -(2 ** 17), 2 ** 17 - 1
SAME = ("subchannels", "subchannels_b2", "subchannels_b4", "subchannels_b6", "subchannels_b8",
        "subchannels_zero", "saturated")


def ref_booth(v, b):
    """Booth digits of ``v`` on ``b`` bits from its bit string (independent of the golden)."""
    bits = [(v >> i) & 1 for i in range(b)]          # two's complement, Python's >> floors
    out = []
    for k in range(b // 2):
        lo = bits[2 * k - 1] if k else 0
        out.append(bits[2 * k] + lo - 2 * bits[2 * k + 1])
    return out


@pytest.mark.parametrize("b", [2, 4, 6, 8])
def test_booth_digits_exhaustive(b):
    """Every b-bit value, -2**(b-1) included: b/2 digits in {-2..2}, Σ d·4**k = q, zero above."""
    q = np.arange(-(1 << (b - 1)), 1 << (b - 1))[None, :]
    d = booth_digits(q, np.array([b]))[0]
    assert d.shape == (4, q.shape[1])
    assert ((d >= -2) & (d <= 2)).all() and not d[b // 2:].any()
    assert (sum(d[k] * 4 ** k for k in range(4)) == q[0]).all()
    for i, v in enumerate(q[0].tolist()):
        assert d[:b // 2, i].tolist() == ref_booth(v, b)
    # The 3-bit record pattern reads back; the signed flag does not matter.
    for s in (0, 1):
        assert (digit_values(d & 7, np.full_like(d, s), "booth") == d).all()
    assert (value_digits(q, np.array([b]), "slice") == slice_digits(q, np.array([b]))).all()


def test_booth_edge_values_and_zero_columns():
    q = np.array([[-127, 127, -1, 0], [-1, 1, 0, 0], [-31, 31, -16, 16]])
    d = booth_digits(q, np.array([8, 2, 6]))
    assert d[0, :, 0].tolist() == [1, 0, 0, -2]      # -127 = 1000_0001
    assert d[0, :, 1].tolist() == [-1, 0, 0, 2]      # 127 = 0111_1111 = 128 - 1
    assert d[0, :, 2].tolist() == [-1, 0, 0, 0]      # -1: one digit (slices: 3, 3, 3, -1)
    assert d[1, :, 0].tolist() == [-1, 0, 0, 0]
    assert d[2, :, 2].tolist() == [0, 0, -1, 0]      # -16 on 6 bits
    assert d[2, :, 3].tolist() == [0, 0, 1, 0]
    with pytest.raises(ValueError, match="digit code"):
        value_digits(q, np.array([8, 2, 6]), "radix8")


def test_booth_drops_other_zero_columns():
    """A tile of q = -1 (b = 8) is one Booth column (3 dropped) but 4 slice columns; q = 3 is
    one slice column but two Booth ones. Both execute to the same exact product."""
    cfg = preset("tiny", base_log2=8)
    W = random_weights(cfg, np.random.default_rng(0), 2)
    dx = np.array([[-1, 3], [-1, 3], [-1, 3], [-127, 3]])   # b = 8 (M = 127), b = 4 (M = 3)
    res = {}
    for code in ("slice", "booth"):
        qz, (ts,) = schedule_matrix(dx, cfg.replace(digits=code))
        assert qz.b.tolist() == [8, 4]
        res[code] = (ts.counters, execute(ts.groups, W, cfg.replace(digits=code))[0][0])
        ref = reference_product(qz, 1, W, cfg)[0]
        assert res[code][1].tolist() == ref.tolist()
    # -1 = 1111_1111, -127 = 1000_0001: Booth [-1,0,0,0] and [1,0,0,-2] -> k = 1, 2 are zero.
    assert res["booth"][0]["dropped_columns"] == 2 + 0
    assert res["slice"][0]["dropped_columns"] == 0 + 1       # 3 = 00_11 on 4 bits: k = 1 zero


@st.composite
def case(draw):
    name = draw(st.sampled_from(["tiny", "tiny", "fpga"]))
    N = draw(st.integers(1, 13))
    C = draw(st.integers(1, 24))
    sort_n = draw(st.sampled_from([4, 8, 16, 32]))
    lanes = draw(st.sampled_from([l for l in (1, 2, 4) if l <= sort_n]))
    horner = draw(st.booleans())
    kw = dict(sort_n=sort_n, lanes=lanes, max_reduction=draw(st.sampled_from([C, 64])),
              drop_zero_columns=draw(st.booleans()), base_log2=draw(st.integers(0, 8)),
              overflow_detect=draw(st.booleans()))
    if horner:
        kw.update(alignment="horner", max_reduction=C)
        while kw["sort_n"] < 4 * C:
            kw["sort_n"] *= 2
    cfg = preset(name, **kw)
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    mag = rng.integers(0, 18, size=C)
    dx = rng.integers(-(2 ** mag), 2 ** mag + 1, size=(N, C))
    dx[:, rng.random(C) < 0.15] = 0
    dx[rng.random((N, C)) < draw(st.sampled_from([0.0, 0.5, 0.9]))] = 0
    ext = rng.random((N, C)) < 0.05
    dx[ext] = rng.choice([DX_LO, DX_HI, -DX_HI], size=int(ext.sum()))
    W = rng.integers(-127, 128, size=(C, draw(st.integers(1, cfg.cols))))
    W[rng.random(W.shape) < 0.1] = rng.choice([-127, 127])
    return cfg, np.clip(dx, DX_LO, DX_HI), W


def _max_partial(groups, W, cfg):
    """Largest |accumulator| over every beat of the stream (a 62-bit model register)."""
    W = np.pad(np.asarray(W, np.int64), ((0, 0), (0, cfg.cols - np.shape(W)[1])))
    acc = Accumulator(62, (cfg.rows, cfg.cols), horner=cfg.alignment == "horner")
    worst = 0
    for g in groups:
        w = np.where(g.valid[:, None].astype(bool), W[g.channel], 0)
        acc.step(g.digits @ w, g.exp, g.first, g.last)
        worst = max(worst, int(np.abs(acc.acc).max()))
    return worst


@SET
@given(case())
def test_booth_schedule_executes_like_slice_and_reference(case):
    cfg, dx, W = case
    booth = cfg.replace(digits="booth")
    qz, tiles = schedule_matrix(dx, cfg)
    qb, btiles = schedule_matrix(dx, booth)
    assert (qz.q == qb.q).all() and (qz.e == qb.e).all() and (qz.b == qb.b).all()
    refs = reference_product(qz, len(tiles), W, cfg)
    sa, sf = execute([g for ts in tiles for g in ts.groups], W, cfg)
    stream = [g for ts in btiles for g in ts.groups]
    ba, bf = execute(stream, W, booth)
    for r, a, b, f in zip(refs, sa, ba, bf):
        assert a[:, :W.shape[1]].tolist() == r.tolist() == b[:, :W.shape[1]].tolist()
        assert not f.any()              # the derived width holds Booth's partial sums too
    assert _max_partial(stream, W, booth) <= (1 << (booth.acc_bits - 1)) - 1
    lay = group_layout(booth)
    for ts, tb in zip(tiles, btiles):
        for name in SAME:
            assert ts.counters[name] == tb.counters[name]
        assert (ts.counters["slice_columns"] + ts.counters["dropped_columns"]
                == tb.counters["slice_columns"] + tb.counters["dropped_columns"])
        for g in tb.groups:
            assert (g.signed == g.valid).all()
            assert ((g.digits >= -2) & (g.digits <= 2)).all()
            back = unpack(lay, g.word(booth))
            assert (digit_values(back["digits"], 1, "booth") == g.digits).all()
            assert (back["signed"] == g.valid).all()


def test_booth_straddling_partial_sum_needs_the_booth_width():
    """Channel 0: q = -127 (Booth 1, 0, 0, -2: two zero columns), channel 1: q = -120 (Booth 0,
    -2, 1, -2) in rows 1-3, both at e = 10 (r0 = 0), against W = -127, chunks of 4. Chunk 1 ends
    with channel 1's digits 0 and 1, chunk 2 starts with its top digit: row 1's partial sum is
    (127 + 136)·2**10·127, past the slice bound 2·128·2**10·127 and past the width it derives
    (26 bits); the Booth width (27 bits) holds it, and the result is exact."""
    kw = dict(base_log2=8, max_reduction=2, overflow_detect=True, sort_n=4)
    cfg = preset("tiny", digits="booth", **kw)
    assert preset("tiny", **kw).acc_bits == 26 and cfg.acc_bits == 27
    dx = np.zeros((4, 2), np.int64)
    dx[:, 0] = -127 * 1024
    dx[0, 1] = 130000                    # q = 127, e = 10
    dx[1:, 1] = -120 * 1024
    qz, (ts,) = schedule_matrix(dx, cfg)
    assert (qz.e == 10).all() and qz.q[0, 1] == -127 and qz.q[1, 1] == -120
    W = np.full((2, 4), -127)
    worst = _max_partial(ts.groups, W, cfg)
    assert worst == 263 * 1024 * 127 > (1 << 25) - 1
    assert worst <= (1 << (cfg.acc_bits - 1)) - 1
    accs, flags = execute(ts.groups, W, cfg)
    assert not flags[0].any()
    assert accs[0].tolist() == reference_product(qz, 1, W, cfg)[0].tolist()
    # With the slice width the same stream saturates (and flags), as the formula says.
    _, narrow = execute(ts.groups, W, cfg.replace(acc_width=26))
    assert narrow[0].any()


def test_random_group_streams_and_digit_width():
    from dstar_rtl.golden.vectors import random_group_stream
    cfg = preset("tiny", digits="booth")
    assert cfg.digit_width == 3 and preset("tiny").digit_width == 2
    wl = random_group_stream(cfg, np.random.default_rng(1), [3, 1, 5])
    assert len(wl.accs) == 3 and len(wl.words) == 9
    dx = random_differences(np.random.default_rng(2), cfg, 4, 6)
    assert dx.shape == (4, 6)
