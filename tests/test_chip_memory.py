"""The chip's memories (perf/chip_memory.py) and every byte the projection charges (issue 47):
behaviour, not figures (those are in reports/projection.md)."""

import math
from dataclasses import replace

import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.models.dit_shapes import Attention, DiTModel, Linear
from dstar_rtl.perf.chip_memory import PAPER_MEMORY, MemorySystem, linear_plan, linear_plans
from dstar_rtl.perf.chip_model import Chip, Workload, paper_timing, project_model, state_bytes

CFG = preset("paper")
PLAN = dict(T=64, group_bytes_per_channel=47.0, acc_bits=38, weight_bytes=1, stage_bits=50)


def test_the_paper_budget_is_about_3_1_mb():
    assert PAPER_MEMORY.on_chip_bytes(32) == 512 * 1024 + 32 * 80 * 1024
    assert 3.0e6 < PAPER_MEMORY.on_chip_bytes(32) < 3.2e6


@pytest.mark.parametrize("kw, match", [
    (dict(core_buffer_bytes=0), "core_buffer_bytes must be a positive integer, not 0"),
    (dict(bank_bytes=1 << 20), r"bank_bytes \(1048576\) must be at most core_buffer_bytes"),
    (dict(hbm_bytes_per_s=0.0), "hbm_bytes_per_s must be positive")])
def test_impossible_memories_are_refused_naming_the_parameter(kw, match):
    with pytest.raises(ValueError, match=match):
        MemorySystem(**kw)


def test_every_plan_fits_and_a_small_layer_moves_nothing_extra():
    for kb in (1, 4, 18):
        for p in linear_plans(cin=1152, kb=kb, buffer_bytes=80 * 1024, **PLAN):
            assert p.buffer_bytes <= 80 * 1024 and p.pieces >= 1
            assert p.chunks == math.ceil(kb / p.resident)
    small = linear_plan(cin=64, kb=2, buffer_bytes=80 * 1024, **PLAN)
    assert small.restream_bytes == 0 and small.pieces == 1


def test_more_buffer_never_moves_more_bytes():
    for cin, kb in ((1152, 18), (4608, 9), (4608, 36)):
        moved = [linear_plan(cin=cin, kb=kb, buffer_bytes=k * 1024, **PLAN).restream_bytes
                 for k in (80, 160, 320, 2048)]
        assert moved == sorted(moved, reverse=True), (cin, kb, moved)
        assert moved[0] > 0 and moved[-1] == 0


def test_a_buffer_too_small_for_any_plan_is_one_clear_error():
    with pytest.raises(ValueError, match="a core buffer of 4096 bytes holds no plan"):
        linear_plans(cin=1152, kb=4, buffer_bytes=4096, **PLAN)


def test_min_pieces_is_respected():
    assert all(p.pieces >= 3 for p in linear_plans(cin=1152, kb=4, buffer_bytes=80 * 1024,
                                                   min_pieces=3, **PLAN))


@pytest.fixture(scope="module")
def timing():
    from test_project import calibrated
    return paper_timing(calibrated())[0]


def _model(tokens=1024, D=512):
    return DiTModel("m", 10, (Linear("blk.qk", tokens, D, 2 * D, 2, cache_only=True),
                              Linear("blk.fc1", tokens, D, 4 * D, 2),
                              Linear("blk.fc2", tokens, 4 * D, D, 2)),
                    (Attention("attn", tokens, tokens, 8, D // 8, 2),))


def test_the_state_is_charged_on_dstar_alone_at_its_stored_widths(timing):
    wl = Workload("w", 4.0, 4.0, 0.9, 0.5)
    m = _model()
    whole = CFG.replace(ystate_frac=None)
    r = project_model(m, Chip(), timing, timing, whole, wl)
    assert r["int8"]["cache"]["hbm_bytes"]["state"] == 0 and r["int8"]["state_bytes"] == 0
    total = sum(state_bytes(whole, x) for x in m.linears)
    assert r["dstar"]["state_bytes"] == total
    assert r["dstar"]["cache"]["hbm_bytes"]["state"] == pytest.approx(2 * total)
    # A reuse step leaves qk's state where it is.
    qk = state_bytes(whole, m.linears[0])
    assert r["dstar"]["reuse"]["hbm_bytes"]["state"] == pytest.approx(2 * (total - qk))
    # A stored Y (ystate_frac, the preset's) keeps Y at act_width + 2 + g bits, not acc_bits.
    narrow = CFG
    r2 = project_model(m, Chip(), timing, timing, narrow, wl)
    y = sum(x.count * x.tokens * x.cout for x in m.linears) / 8
    assert r["dstar"]["state_bytes"] - r2["dstar"]["state_bytes"] == pytest.approx(
        y * (whole.acc_bits - narrow.ystate_width))
    assert r2["dstar"]["per_image_s"] <= r["dstar"]["per_image_s"]
    assert r2["int8"] == r["int8"]


def test_activations_that_fit_the_scratchpad_stay_on_chip(timing):
    wl = Workload("w", 4.0, 4.0, 0.9, 0.5)
    small = project_model(_model(tokens=64, D=128), Chip(), timing, timing, CFG, wl)
    big = project_model(_model(), Chip(), timing, timing, CFG, wl)
    assert small["dstar"]["cache"]["hbm_bytes"]["activations"] == 0
    assert big["dstar"]["cache"]["hbm_bytes"]["activations"] > 0
    assert big["dstar"]["cache"]["hbm_bytes"]["activations"] == \
        big["int8"]["cache"]["hbm_bytes"]["activations"]


def test_hbm_capacity_is_checked(timing):
    wl = Workload("w", 4.0, 4.0, 0.9, 0.5)
    tiny_hbm = replace(Chip(), memory=MemorySystem(hbm_capacity_bytes=1e6))
    r = project_model(_model(), tiny_hbm, timing, timing, CFG, wl)
    assert not r["dstar"]["fits_hbm"] and r["dstar"]["hbm_used_bytes"] > 1e6
    assert project_model(_model(), Chip(), timing, timing, CFG, wl)["dstar"]["fits_hbm"]


def test_stateless_layers_only_where_faster_and_with_their_bits(timing):
    """A layer runs without state only when the projection finds it faster; its state then
    leaves the total, and without ``dense_bits`` the lever does nothing."""
    m = _model()
    base = Workload("w", 4.0, 4.0, 0.9, 0.5)
    off = project_model(m, Chip(), timing, timing, CFG, base, stateless=True)
    assert set(off["dstar"]["layer_modes"].values()) == {"differential"}
    cheap = Workload("w", 4.0, 4.0, 0.9, 0.5, dense_bits=4.0)   # as cheap as differential
    on = project_model(m, Chip(), timing, timing, CFG, cheap, stateless=True)
    assert "stateless" in on["dstar"]["layer_modes"].values()
    assert on["dstar"]["state_bytes"] < off["dstar"]["state_bytes"]
    assert on["dstar"]["per_image_s"] <= off["dstar"]["per_image_s"]
