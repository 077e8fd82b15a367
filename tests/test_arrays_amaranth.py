"""PE, MPU and baseline in Amaranth's simulator against the golden model (fast tier)."""

import gc

import numpy as np
import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.golden.layouts import drain_layout, unpack
from dstar_rtl.golden.vectors import baseline_workload, mpu_workload, random_group_stream
from dstar_rtl.perf.timing import array_first_beats, array_latency, array_tile_period
from dstar_rtl.rtl.baseline import Baseline
from dstar_rtl.rtl.mpu import MPU
from dstar_rtl.rtl.pe import SlicePE
from dstar_rtl.sim.amaranth_array import run_array, run_array_reset

KINDS = ("mixed", "zero", "max", "outlier")

CONFIGS = {
    "tiny": dict(),
    "stages0": dict(pe_stages=0),
    "stages2": dict(pe_stages=2),
    "lanes2": dict(lanes=2),
    "nodrop": dict(drop_zero_columns=False),
    "thr-clip": dict(thr=(3, 15, 63)),
    "horner": dict(packer="sort", alignment="horner", max_reduction=2),
    "horner-stages2": dict(packer="sort", alignment="horner", max_reduction=2, pe_stages=2),
    "overflow": dict(acc_width=14, overflow_detect=True),
    "rect-weights": dict(weight_width=6),
    # Issue 15's levers: the products as selects (no multiplier), Booth digits.
    "select": dict(digit_product="select"),
    "select-overflow-stages2": dict(digit_product="select", acc_width=14, overflow_detect=True,
                                    pe_stages=2),
    "booth": dict(digits="booth", digit_product="select"),
    "booth-multiply": dict(digits="booth"),
    "booth-overflow-stages0": dict(digits="booth", digit_product="select", acc_width=14,
                                   overflow_detect=True, pe_stages=0),
    "booth-horner": dict(digits="booth", digit_product="select", packer="sort", alignment="horner",
                         max_reduction=2),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_mpu_matches_golden(name):
    cfg = preset("tiny", **CONFIGS[name])
    rng = np.random.default_rng(sum(map(ord, name)))
    wl = mpu_workload(cfg, rng, tiles=4, channels=min(cfg.max_reduction, 7), kinds=KINDS)
    run = run_array(MPU(cfg), cfg, wl.W, wl.words, gap=0.25, stall=0.35, seed=7)
    assert run.beats == wl.expected


def test_overflow_flags_are_set_and_saturate():
    cfg = preset("tiny", acc_width=12, overflow_detect=True)
    rng = np.random.default_rng(11)
    wl = mpu_workload(cfg, rng, tiles=3, channels=6, kinds=("max",))
    lay = drain_layout(cfg)
    flags = [unpack(lay, w)["ovf"] for w in wl.expected]
    assert any(f.any() for f in flags), "the workload must overflow a 12-bit accumulator"
    accs = np.concatenate([unpack(lay, w)["acc"] for w in wl.expected])
    assert accs.max() <= 2047 and accs.min() >= -2048
    run = run_array(MPU(cfg), cfg, wl.W, wl.words, stall=0.2)
    assert run.beats == wl.expected


def test_arbitrary_group_streams():
    cfg = preset("tiny")
    wl = random_group_stream(cfg, np.random.default_rng(2), [1, 7, 2, 19])
    assert run_array(MPU(cfg), cfg, wl.W, wl.words, gap=0.3, stall=0.3).beats == wl.expected


@pytest.mark.parametrize("hop,ahop", [(2, 1), (4, 1), (1, 2), (4, 4), (3, 4)])
@pytest.mark.parametrize("unit", ["mpu", "baseline"])
def test_weights_broadcast_every_hop_rows(unit, hop, ahop):
    """``weight_hop`` (``act_hop``): the weights (row operands) registered every ``hop`` rows
    (``ahop`` columns; 4: broadcast), under gaps and back-pressure, bit-exact; the PEs of the rows
    (columns) in between have no ``w_out`` (``a_out``) register."""
    cfg = preset("tiny", weight_hop=hop, act_hop=ahop)
    rng = np.random.default_rng(30 + hop + 7 * ahop)
    if unit == "mpu":
        dut, wl = MPU(cfg), mpu_workload(cfg, rng, tiles=3, kinds=KINDS)
    else:
        dut, wl = Baseline(cfg), baseline_workload(cfg, rng, tiles=3)
    assert run_array(dut, cfg, wl.W, wl.words, gap=0.3, stall=0.3).beats == wl.expected
    assert [cfg.weight_registered(i) for i in range(cfg.rows)] == [
        (i + 1) % hop == 0 for i in range(cfg.rows)]
    assert [cfg.act_registered(j) for j in range(cfg.cols)] == [
        (j + 1) % ahop == 0 for j in range(cfg.cols)]


def test_baseline_matches_numpy():
    cfg = preset("tiny")
    wl = baseline_workload(cfg, np.random.default_rng(4), tiles=3)
    assert run_array(Baseline(cfg), cfg, wl.W, wl.words, gap=0.2, stall=0.3).beats == wl.expected


@pytest.mark.parametrize("stages,hop,ahop", [(0, 1, 1), (1, 1, 1), (2, 1, 1), (1, 2, 1),
                                             (0, 4, 1), (1, 1, 4), (2, 4, 4), (1, 3, 2)])
@pytest.mark.parametrize("unit", ["mpu", "baseline"])
def test_cycles_follow_the_documented_formula(unit, stages, hop, ahop):
    cfg = preset("tiny", pe_stages=stages, weight_hop=hop, act_hop=ahop)
    G = [1, 3, array_tile_period(cfg) + 3, 5, 30]
    if unit == "mpu":
        dut = MPU(cfg)
        wl = random_group_stream(cfg, np.random.default_rng(stages), G)
    else:
        dut = Baseline(cfg)
        wl = baseline_workload(cfg, np.random.default_rng(stages), tiles=1, channels=5)
        G = [5]
    run = run_array(dut, cfg, wl.W, wl.words)
    assert run.beats == wl.expected
    first = [run.beat_cycles[k * cfg.rows] - run.start_cycle for k in range(len(G))]
    assert first == array_first_beats(cfg, G)
    assert dut.latency == array_latency(cfg) and dut.tile_period == array_tile_period(cfg)


def test_steady_state_is_one_group_per_cycle():
    """Tiles of at least the drain turnaround never stall the input: beats are back to back."""
    cfg = preset("tiny")
    D = array_tile_period(cfg)
    wl = random_group_stream(cfg, np.random.default_rng(9), [D, D + 1, D, 2 * D])
    run = run_array(MPU(cfg), cfg, wl.W, wl.words)
    assert run.beats == wl.expected
    assert np.diff(run.in_cycles).tolist() == [1] * (len(wl.words) - 1)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_units_refuse_a_non_config():
    with pytest.raises(TypeError, match="cfg must be a golden.config.Config"):
        MPU({"rows": 4})
    with pytest.raises(TypeError, match="cfg must be a golden.config.Config"):
        SlicePE(None)
    gc.collect()      # the refused objects warn UnusedElaboratable now, under this test's filter


@pytest.mark.parametrize("unit", ["mpu", "baseline"])
def test_reset_mid_stream(unit):
    """Reset (the ``sync`` domain's ``rst``, two cycles) with the first tile half drained and the
    second in the array, then a fresh stream with new weights under gaps and back-pressure:
    every drain beat equals golden, and from the first reset edge on the drain is valid only
    with the fresh stream's beats (its first beat first, none after its last)."""
    cfg = preset("tiny")
    rng = np.random.default_rng(12)
    G1 = cfg.rows + cfg.cols + 4
    if unit == "mpu":
        dut = MPU(cfg)
        old = random_group_stream(cfg, rng, [6, G1, 5])
        fresh = mpu_workload(cfg, rng, tiles=3, kinds=KINDS)
    else:
        dut = Baseline(cfg)
        old = baseline_workload(cfg, rng, tiles=3, channels=G1)
        fresh = baseline_workload(cfg, rng, tiles=3)
    G, half = old.groups_per_tile, cfg.rows // 2
    run = run_array_reset(dut, cfg, old, fresh, taken=half, gap=0.2, stall=0.3, seed=5)
    # The state at the reset: tile 0 half drained, tile 1 in the array (its last beat waits for
    # the drain), tile 2 not sent.
    assert run.old_beats == old.expected[:half]
    assert run.old_sent == G[0] + G[1] - 1
    assert run.beats == fresh.expected
    assert run.watched[0][0] == fresh.expected[0], "the first beat after the reset is old"
    assert [p for p, t in run.watched if t] == fresh.expected
    assert run.watched[-1][1], "a beat valid after the fresh stream's last"
