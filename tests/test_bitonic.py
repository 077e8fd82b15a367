"""The bitonic network of numerics §2.3: construction, size, sorting, and the (valid, exp) key."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dstar_rtl.golden.bitonic import apply_network, compare_exchanges, network, sort_key
from dstar_rtl.golden.config import preset

SIZES = [1, 2, 4, 8, 16, 32, 64]
SET = settings(max_examples=200, deadline=None)


def design_network(n):
    """numerics §2.3, transcribed: for k = 2, 4, ..., n; for j = k/2, ..., 1; for every i with
    l = i ^ j > i: (i, l) descending when i & k == 0, ascending otherwise."""
    out = []
    k = 2
    while k <= n:
        j = k // 2
        while j >= 1:
            out.append([(i, i ^ j, i & k == 0) for i in range(n) if i ^ j > i])
            j //= 2
        k *= 2
    return out


@pytest.mark.parametrize("n", SIZES + [128, 256])
def test_network_matches_design_construction(n):
    net = network(n)
    assert [list(s) for s in net] == design_network(n)
    lg = n.bit_length() - 1
    assert len(net) == lg * (lg + 1) // 2
    # n/4 · log2(n) · (log2(n) + 1) compare-exchanges: 80 at 16, 672 at 64
    assert compare_exchanges(n) * 4 == n * lg * (lg + 1)
    if n >= 2:
        cfg = preset("tiny", variant="sort", sort_n=n, lanes=1)
        assert compare_exchanges(n) == cfg.sorter_compare_exchanges
    assert compare_exchanges(16) == 80 and compare_exchanges(64) == 672


@pytest.mark.parametrize("n", SIZES + [128])
def test_stages_touch_disjoint_positions(n):
    for stage in network(n):
        pos = [p for i, l, _ in stage for p in (i, l)]
        assert len(pos) == len(set(pos))
        assert all(0 <= i < l < n for i, l, _ in stage)
        if n >= 2:
            assert len(stage) == n // 2   # every position in every stage


@pytest.mark.parametrize("n", [0, 3, 6, 12, -4])
def test_network_refuses_non_power_of_two(n):
    with pytest.raises(ValueError, match="power of two"):
        network(n)


@SET
@given(st.sampled_from(SIZES).flatmap(
    lambda n: st.lists(st.integers(-5, 70), min_size=n, max_size=n)))
def test_sorts_descending_and_permutes(keys):
    n = len(keys)
    idx = list(range(n))
    k, p = apply_network(np.array(keys), np.array(idx))
    assert k.tolist() == sorted(keys, reverse=True)
    assert sorted(p.tolist()) == idx                        # a permutation
    assert [keys[i] for i in p.tolist()] == k.tolist()      # payload travels with its key


@SET
@given(st.sampled_from([2, 4, 8, 16, 32, 64]).flatmap(
    lambda n: st.lists(st.integers(0, 1), min_size=n, max_size=n)))
def test_sorts_zero_one_inputs(bits):
    # 0-1 principle: a comparator network sorts everything iff it sorts every 0-1 input.
    (k,) = apply_network(np.array(bits))
    assert k.tolist() == sorted(bits, reverse=True)


def test_all_zero_one_inputs_exhaustive_n8():
    n = 8
    allbits = (np.arange(2 ** n)[:, None] >> np.arange(n)) & 1
    (k,) = apply_network(allbits)          # batched along the leading axis
    assert (np.diff(k, axis=1) <= 0).all()
    assert (k.sum(1) == allbits.sum(1)).all()


@SET
@given(st.integers(1, 6).flatmap(lambda lg: st.tuples(
    st.lists(st.integers(0, 31), min_size=2 ** lg, max_size=2 ** lg),
    st.lists(st.booleans(), min_size=2 ** lg, max_size=2 ** lg))))
def test_valid_exp_key_puts_invalids_last(case):
    exps, valid = case
    n = len(exps)
    key = sort_key(np.array(valid, dtype=np.int64), np.array(exps))
    k, v, e, p = apply_network(key, np.array(valid, dtype=np.int64), np.array(exps),
                               np.arange(n))
    nv = sum(valid)
    assert v.tolist() == [1] * nv + [0] * (n - nv)
    ve = e[:nv].tolist()
    assert ve == sorted((x for x, ok in zip(exps, valid) if ok), reverse=True)
    assert (k == (v << 5) | e).all()
    assert [exps[i] for i in p.tolist()] == e.tolist()


def test_sort_key_valid_is_top_bit():
    assert sort_key([1, 0, 1], [0, 31, 5]).tolist() == [32, 31, 37]
    assert sort_key(1, 0) > sort_key(0, 31)


def test_sorting_on_exp_alone_is_wrong():
    """Three valid slices (exps 0, 0, 1) and one padding slot (exp 0): sorted on exp alone the
    padding lands between valid exponent-0 slices; the (valid, exp) key keeps it last."""
    exps = np.array([0, 0, 1, 0])
    valid = np.array([1, 1, 1, 0])
    _, v_bad = apply_network(exps, valid)
    assert v_bad.tolist() == [1, 1, 0, 1]      # an invalid slot before a valid one
    _, v_ok, e_ok = apply_network(sort_key(valid, exps), valid, exps)
    assert v_ok.tolist() == [1, 1, 1, 0] and e_ok.tolist() == [1, 0, 0, 0]


def test_swaps_only_when_strictly_out_of_order():
    # Equal keys are never swapped: payload order of a constant input is untouched.
    for n in SIZES:
        _, p = apply_network(np.zeros(n, np.int64), np.arange(n))
        assert p.tolist() == list(range(n))


def test_apply_network_does_not_modify_inputs():
    keys = np.array([3, 1, 2, 0])
    pay = np.array([10, 11, 12, 13])
    apply_network(keys, pay)
    assert keys.tolist() == [3, 1, 2, 0] and pay.tolist() == [10, 11, 12, 13]
