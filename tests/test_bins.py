"""The QPU's exponent bins (``packer = "bins"``, numerics §2.3; :func:`golden.schedule.bin_tile`):
a sub-channel's columns land in different bins, the stream by hand, and on random tiles the same
products as the sorted stream with every column once, groups of one exponent, full groups but
where a bin was evicted or flushed, and markers on the first and last group."""

import dataclasses

import numpy as np
import pytest
from _initial import preset
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _ref import tile_columns
from dstar_rtl.golden.config import PACK_BINS, ConfigError
from dstar_rtl.golden.schedule import (
    bin_cycles,
    bin_events,
    bin_index,
    bin_tile,
    execute,
    reference_product,
    schedule_matrix,
)

SET = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("bins", PACK_BINS)
def test_a_subchannels_columns_fall_in_different_bins(bins):
    for e in range(32):
        assert len({bin_index(e + 2 * k, bins) for k in range(4)}) == 4
    if bins >= 8:
        assert len({bin_index(x, bins) for x in range(8)}) == 8


def test_bins_by_hand():
    """Four bins of two lanes. Exponents 0 (bin 0), 2 (bin 1), 1 (bin 2), 8 (bin 0 again):
    0, 2 open bins 0 and 1; the second 0 fills bin 0 (out at once); 1 opens bin 2; 8 opens bin 0;
    the next 0 evicts 8 (out partial) and reopens bin 0; the second 2 fills bin 1. At the end the
    bins still open leave in bin order: 0 (bin 0), then 1 (bin 2)."""
    cfg = preset("tiny", packer="bins", lanes=2)
    exps = [0, 2, 0, 1, 8, 0, 2]
    assert [bin_index(x, 4) for x in (0, 2, 1, 8)] == [0, 1, 2, 0]
    assert bin_tile(exps, cfg) == [(0, [0, 2]), (8, [4]), (2, [1, 6]), (0, [5]), (1, [3])]
    assert bin_tile([], cfg) == []
    # Eight bins: 0 and 8 part (bins 0 and 4), but 1 and 8 now share bin 4: 8 evicts 1.
    eight = dataclasses.replace(cfg, pack_bins=8)
    assert [bin_index(x, 8) for x in (0, 2, 1, 8)] == [0, 1, 4, 4]
    assert bin_tile(exps, eight) == [(0, [0, 2]), (1, [3]), (2, [1, 6]), (0, [5]), (8, [4])]


def test_bin_cycles_by_hand():
    """The stream of test_bins_by_hand sends its groups on descriptors 2, 5 and 6, then two at
    the tile's end. Sub-channels {0, 1, 2}, {3}, {4, 5, 6} of a tile of 5 (4 without columns):
    the first sends on its last column (1 cycle), the second sends nothing (1), the third on
    its second and last columns (2), the two without columns 1 each; then 2 bins, the end 1."""
    cfg = preset("tiny", packer="bins", lanes=2)
    groups, trig = bin_events([0, 2, 0, 1, 8, 0, 2], cfg)
    assert groups == bin_tile([0, 2, 0, 1, 8, 0, 2], cfg)
    assert trig == [2, 5, 6, None, None]
    assert bin_cycles([0, 0, 0, 1, 2, 2, 2], trig, 5) == 1 + 1 + 2 + 1 + 1 + 2 + 1
    # Sending on a column that is not its sub-channel's last costs a cycle more.
    assert bin_cycles([0, 0, 1, 1, 2, 2, 3], trig, 4) == 1 + 2 + 1 + 1 + 2 + 1
    assert bin_cycles([], [], 3) == 3 + 1


@pytest.mark.parametrize("bad, msg", [
    (dict(packer="heap"), "packer"), (dict(packer="bins", pack_bins=6), "pack_bins"),
    (dict(packer="bins", open_groups=2), "open_groups = 0"),
    (dict(packer="bins", lanes=1), "lanes >= 2"),
    (dict(packer="bins", alignment="horner", max_reduction=2), "unless packer = 'sort'"),
])
def test_bins_refuse_what_they_cannot_do(bad, msg):
    with pytest.raises(ConfigError, match=msg):
        preset("tiny", **bad)


@st.composite
def case(draw):
    name = draw(st.sampled_from(["tiny", "fpga"]))
    lanes = draw(st.sampled_from([2, 4, 8]))
    cfg = preset(name, packer="bins", lanes=lanes, sort_n=max(8, lanes),
                 pack_bins=draw(st.sampled_from(PACK_BINS)),
                 drop_zero_columns=draw(st.booleans()), base_log2=draw(st.integers(0, 8)),
                 digits=draw(st.sampled_from(["slice", "booth"])),
                 max_reduction=64)
    N, C = draw(st.integers(1, 2 * cfg.rows)), draw(st.integers(1, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    mag = rng.integers(0, 18, size=C)
    dx = rng.integers(-(2 ** mag), 2 ** mag + 1, size=(N, C))
    dx[:, rng.random(C) < 0.2] = 0
    W = rng.integers(-128, 128, size=(C, cfg.cols))
    return cfg, dx, W


@SET
@given(case())
def test_bins_keep_every_product_and_column(case):
    cfg, dx, W = case
    qz, tiles = schedule_matrix(dx, cfg)
    _, sorted_tiles = schedule_matrix(dx, dataclasses.replace(cfg, packer="sort"))
    refs = reference_product(qz, len(tiles), W, cfg)
    L = cfg.lanes
    for t, (ts, ts0) in enumerate(zip(tiles, sorted_tiles)):
        accs, _ = execute(ts.groups, W, cfg)
        assert accs[0].tolist() == refs[t].tolist()
        # every kept column exactly once, markers on the first and last group
        assert tile_columns(ts.groups) == tile_columns(ts0.groups)
        assert ts.counters.values == {**ts0.counters.values,
                                        **{k: ts.counters[k] for k in
                                           ("groups", "padded_lanes", "shifts",
                                            "shift_amount")}}
        for g in ts.groups:
            nv = int(g.valid.sum())
            assert g.valid.tolist() == [1] * nv + [0] * (L - nv)
            c, k = g.channel[:nv], g.k[:nv]
            assert all(int(qz.e[t * dx.shape[1] + ch]) + 2 * int(j) == g.exp
                       for ch, j in zip(c, k))
            assert not g.digits[:, nv:].any() and not g.channel[nv:].any()
        # At least one group per lanes columns of each exponent; exactly that when no two of
        # the tile's exponents share a bin (nothing is evicted).
        per_exp = {}
        for g in ts.groups:
            per_exp[g.exp] = per_exp.get(g.exp, 0) + int(g.valid.sum())
        least = max(1, sum(-(-n // L) for n in per_exp.values() if n))
        assert len(ts.groups) >= least
        if len({bin_index(x, cfg.pack_bins) for x in per_exp}) == len(per_exp):
            assert len(ts.groups) == least
