"""Record layouts (numerics §2.1): widths from the configuration, pack/unpack round trips."""

from math import prod

import numpy as np
import pytest
from _initial import preset
from hypothesis import given, settings
from hypothesis import strategies as st

from dstar_rtl.golden.layouts import (
    baseline_group_layout,
    drain_layout,
    group_layout,
    layout_width,
    pack,
    recon_layout,
    unpack,
    weight_load_layout,
)
from dstar_rtl.golden.schedule import schedule_matrix

LAYOUTS = [group_layout, baseline_group_layout, drain_layout, weight_load_layout, recon_layout]
CONFIGS = [preset("tiny"), preset("fpga"), preset("tiny", lanes=2, max_reduction=5),
           preset("tiny", acc_width=70), preset("tiny", acc_width=9, overflow_detect=True)]


def random_values(layout, rng):
    vals = {}
    for name, width, dims, signed in layout:
        lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
        n = prod(dims)
        # extremes first, then random values (Python ints: widths may exceed 64 bits)
        pool = [lo, hi, 0, -1 if signed else 1]
        flat = [pool[i] if i < len(pool) and rng.random() < 0.5 else int(rng.integers(0, 2 ** 62))
                % (hi - lo + 1) + lo for i in range(n)]
        vals[name] = np.array(flat, dtype=object).reshape(dims) if dims else flat[0]
    return vals


def same(a, b):
    return np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object))


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.name}-{c.rows}-{c.acc_bits}")
@pytest.mark.parametrize("make", LAYOUTS, ids=lambda f: f.__name__)
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1))
def test_pack_unpack_round_trip(cfg, make, seed):
    rng = np.random.default_rng(seed)
    layout = make(cfg)
    vals = random_values(layout, rng)
    word = pack(layout, vals)
    assert 0 <= word < 1 << layout_width(layout)
    back = unpack(layout, word)
    assert set(back) == {f[0] for f in layout}
    for name, width, dims, signed in layout:
        assert same(back[name], vals[name]), name
        if dims:
            assert back[name].shape == dims


def test_field_order_and_bit_positions():
    layout = [("a", 3, (), False), ("b", 2, (2,), True), ("c", 1, (), False)]
    assert layout_width(layout) == 8
    w = pack(layout, dict(a=5, b=[-1, 1], c=1))
    # a at bits 0-2, b[0] at 3-4, b[1] at 5-6, c at 7
    assert w == 5 | (3 << 3) | (1 << 5) | (1 << 7)
    back = unpack(layout, w)
    assert back["a"] == 5 and back["b"].tolist() == [-1, 1] and back["c"] == 1


def test_pack_refuses_wrong_element_count():
    with pytest.raises(ValueError, match="needs 2 elements"):
        pack([("b", 2, (2,), False)], dict(b=[1, 2, 3]))


@pytest.mark.parametrize("cfg", CONFIGS[:3], ids=lambda c: f"{c.name}-{c.lanes}")
def test_widths_come_from_the_configuration(cfg):
    def fields(layout):
        return {n: (w, d, s) for n, w, d, s in layout}
    g = fields(group_layout(cfg))
    assert g["digits"] == (2, (cfg.rows, cfg.lanes), False)
    assert g["channel"] == (cfg.chan_width, (cfg.lanes,), False)
    assert g["exp"] == (5, (), False)
    assert fields(drain_layout(cfg))["acc"] == (cfg.acc_bits, (cfg.cols,), True)
    assert fields(recon_layout(cfg))["value"] == (cfg.act_width + 3, (cfg.rows,), True)
    assert fields(weight_load_layout(cfg))["w"] == (8, (cfg.cols,), True)
    assert layout_width(group_layout(cfg)) == (2 * cfg.rows * cfg.lanes + cfg.lanes
                                               * (cfg.chan_width + 2) + 5 + 2)


def test_group_records_round_trip_from_a_real_schedule():
    cfg = preset("tiny", base_log2=8)
    rng = np.random.default_rng(3)
    dx = rng.integers(-3000, 3000, size=(7, 11))
    _, tiles = schedule_matrix(dx, cfg)
    layout = group_layout(cfg)
    for ts in tiles:
        for g in ts.groups:
            back = unpack(layout, g.word(cfg))
            assert back["exp"] == g.exp and back["first"] == g.first and back["last"] == g.last
            assert back["valid"].tolist() == g.valid.tolist()
            assert back["channel"].tolist() == g.channel.tolist()
            assert back["signed"].tolist() == g.signed.tolist()
            # digits travel as raw 2-bit patterns; the signed flag says how to read the top one
            raw = back["digits"]
            val = np.where(g.signed[None, :].astype(bool) & (raw >= 2), raw - 4, raw)
            assert val.tolist() == g.digits.tolist()
