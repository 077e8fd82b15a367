"""One PE alone (:class:`rtl.pe.SlicePE`, :class:`rtl.pe.Int8PE`) in Amaranth's simulator.

Every output is compared after every clock edge with :mod:`sim.pe_vectors` (golden results from
:func:`golden.schedule.slice_pe_execute` / :func:`golden.schedule.int8_pe_execute`, the PE's
register transfers and ``pe_stages + 1`` latency): every digit with both signed flags in every
lane, every exponent, both alignments, ``pe_stages`` 0..2, tiles back to back, bubbles carrying
garbage, the shadow chain under ``drain_shift``, one ``captured`` pulse per tile, and narrow
saturating accumulators whose sticky flag must fire (and stay clear on tiles that fit).
"""

import numpy as np
import pytest
from _initial import preset
from amaranth.hdl import Value
from amaranth.sim import Simulator

from dstar_rtl.perf.timing import pe_latency
from dstar_rtl.rtl.pe import Int8PE, SlicePE
from dstar_rtl.sim.pe_vectors import SECTIONS, check_run, input_ports, output_ports, pe_case

SLICE_CONFIGS = {
    "tiny": dict(),
    "stages0": dict(pe_stages=0),
    "stages2": dict(pe_stages=2),
    "broadcast": dict(weight_hop=4, digit_product="select", digits="booth"),
    "broadcast-both": dict(weight_hop=4, act_hop=2, digit_product="select", digits="booth"),
    "horner-stages0": dict(alignment="horner", max_reduction=2, pe_stages=0),
    "horner": dict(alignment="horner", max_reduction=2),
    "horner-stages2": dict(alignment="horner", max_reduction=2, pe_stages=2),
    "ovf12-stages0": dict(acc_width=12, overflow_detect=True, pe_stages=0),
    "ovf16-stages2": dict(acc_width=16, overflow_detect=True, pe_stages=2),
    "horner-ovf12": dict(alignment="horner", max_reduction=2, acc_width=12, overflow_detect=True),
    "horner-ovf14-stages2": dict(alignment="horner", max_reduction=2, acc_width=14,
                                 overflow_detect=True, pe_stages=2),
    "lanes1-w4": dict(lanes=1, weight_width=4, e_max=3),
    "lanes1-w4-ovf10": dict(lanes=1, weight_width=4, e_max=3, acc_width=10, overflow_detect=True),
    "lanes2-w6-stages0": dict(lanes=2, weight_width=6, pe_stages=0),
    # Issue 15's levers: the products as selects (no multiplier), and Booth digits.
    "select": dict(digit_product="select"),
    "select-stages2": dict(digit_product="select", pe_stages=2),
    "select-ovf12": dict(digit_product="select", acc_width=12, overflow_detect=True),
    "select-horner": dict(digit_product="select", alignment="horner", max_reduction=2),
    "booth": dict(digits="booth", digit_product="select"),
    "booth-stages0": dict(digits="booth", digit_product="select", pe_stages=0),
    "booth-multiply": dict(digits="booth"),
    "booth-horner-ovf12": dict(digits="booth", digit_product="select", alignment="horner",
                               max_reduction=2, acc_width=12, overflow_detect=True),
    "booth-lanes1-w4-ovf10": dict(digits="booth", digit_product="select", lanes=1,
                                  weight_width=4, e_max=3, acc_width=10, overflow_detect=True),
    "booth-lanes2-w6-stages2": dict(digits="booth", digit_product="select", lanes=2,
                                    weight_width=6, pe_stages=2),
}
INT8_CONFIGS = {
    "tiny": dict(),
    "stages0": dict(pe_stages=0),
    "stages2": dict(pe_stages=2),
    "w4-r4": dict(weight_width=4, max_reduction=4),
    "broadcast": dict(weight_hop=4),
    "broadcast-both": dict(weight_hop=2, act_hop=4),
}
OVERFLOW_TAGS = ("over+", "over-", "recover", "final-shift")


def run_pe(dut, case):
    """Drive ``case.inputs`` one cycle each; returns the outputs out of reset and after every
    clock edge, as {port: int} (``shadow_out`` signed). The outputs of a cycle are read once the
    next cycle's inputs are applied (``case.probe`` after the last), so a combinational path
    from an input to an output is a difference."""
    ins = {n: Value.cast(getattr(dut, n)) for n in case.inputs[0]}
    outs = {n: Value.cast(getattr(dut, n)) for n in case.expected[0]}
    initial, got = {}, []

    async def bench(ctx):
        for k, inp in enumerate([*case.inputs, case.probe]):
            for n, v in inp.items():
                ctx.set(ins[n], v)
            sample = {n: ctx.get(v) for n, v in outs.items()}
            if k == 0:
                initial.update(sample)
            else:
                got.append(sample)
            if k < len(case.inputs):
                await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return initial, got


def _tiles(section):
    """Random tiles of a section: 20 of ``stream``; 4 of ``dense`` (64 beats each, the energy
    workload; tb/test_pe.py's default too)."""
    return 4 if section == "dense" else 20


def _slice(name):
    return preset("tiny", **SLICE_CONFIGS[name])


@pytest.mark.parametrize("section", SECTIONS["slice"])
@pytest.mark.parametrize("name", sorted(SLICE_CONFIGS))
def test_slice_pe_matches_golden(name, section):
    cfg = _slice(name)
    case = pe_case(cfg, "slice", section, seed=sum(map(ord, name)), tiles=_tiles(section))
    dut = SlicePE(cfg, register_w=cfg.weight_hop == 1, register_a=cfg.act_hop == 1)
    assert dut.latency == pe_latency(cfg)
    assert set(dut.signature.members) == {*input_ports(cfg, "slice"), *output_ports(cfg, "slice")}
    assert set(case.inputs[0]) == set(input_ports(cfg, "slice"))
    check_run(case, *run_pe(dut, case))


@pytest.mark.parametrize("section", SECTIONS["int8"])
@pytest.mark.parametrize("name", sorted(INT8_CONFIGS))
def test_int8_pe_matches_golden(name, section):
    cfg = preset("tiny", **INT8_CONFIGS[name])
    case = pe_case(cfg, "int8", section, seed=sum(map(ord, name)), tiles=_tiles(section))
    dut = Int8PE(cfg, register_w=cfg.weight_hop == 1, register_a=cfg.act_hop == 1)
    assert dut.latency == pe_latency(cfg)
    assert set(dut.signature.members) == {*input_ports(cfg, "int8"), *output_ports(cfg, "int8")}
    assert set(case.expected[0]) == set(output_ports(cfg, "int8"))
    check_run(case, *run_pe(dut, case))


@pytest.mark.parametrize("name", ["ovf12-stages0", "horner-ovf12", "ovf16-stages2",
                                  "lanes1-w4-ovf10", "select-ovf12", "booth-horner-ovf12",
                                  "booth-lanes1-w4-ovf10"])
def test_narrow_accumulator_flag_fires_and_saturates_to_golden(name):
    """The sticky flag is 1 on every tile that overflows, 0 on the tiles that fit (also right
    after an overflowing one), and the saturated result is golden's (the range bound)."""
    cfg = _slice(name)
    case = pe_case(cfg, "slice", "overflow", seed=3)
    initial, got = run_pe(SlicePE(cfg), case)
    check_run(case, initial, got)
    lo, hi = -(1 << (cfg.acc_bits - 1)), (1 << (cfg.acc_bits - 1)) - 1
    seen = [(g["shadow_out"], g["ovf_out"]) for g in got if g["captured"]]
    assert seen == case.results
    over = [r for r, t in zip(seen, case.tags) if t in OVERFLOW_TAGS]
    fits = [r for r, t in zip(seen, case.tags) if t == "fit"]
    assert len(over) >= 4 and len(fits) >= 3
    assert all(f == 1 for _, f in over) and all(f == 0 for _, f in fits)
    saturated = [v for (v, _), t in zip(seen, case.tags) if t in ("over+", "over-", "final-shift")]
    assert saturated and all(v in (lo, hi) for v in saturated)
    assert any(lo < v < hi for (v, _), t in zip(seen, case.tags) if t == "recover")


@pytest.mark.parametrize("name", ["tiny", "horner", "lanes2-w6-stages0", "select", "booth"])
def test_wide_accumulator_wraps_like_golden(name):
    """Without overflow detection the register is modular: sums past the range wrap, partial
    sums that wrap and cancel give the exact result, and there is no flag port."""
    cfg = _slice(name)
    case = pe_case(cfg, "slice", "overflow", seed=5)
    assert "ovf_out" not in case.expected[0]
    assert case.tags.count("wrap") >= 2 and "wrap-cancel" in case.tags
    check_run(case, *run_pe(SlicePE(cfg), case))


@pytest.mark.parametrize("name", sorted(SLICE_CONFIGS))
def test_stimulus_covers_every_digit_sign_lane_and_exponent(name):
    cfg = _slice(name)
    d = pe_case(cfg, "slice", "digits")
    raws = (0, 1, 2, 6, 7) if cfg.digits == "booth" else range(4)
    assert d.coverage["combos"] == {(lane, raw, s) for lane in range(cfg.lanes)
                                    for raw in raws for s in (0, 1)}
    assert d.coverage["exps"] == set(range(cfg.max_exp + 1))
    assert pe_case(cfg, "slice", "exponents").coverage["exps"] == set(range(cfg.max_exp + 1))
    s = pe_case(cfg, "slice", "stream")
    assert sum(1 for i in s.inputs if i["drain_shift"]) > 10
    assert s.coverage["bubbles_in_tiles"] > 5 and s.coverage["back_to_back"] > 3
    assert s.coverage["single_beat_tiles"] > 1 and d.coverage["back_to_back"] >= 16 * cfg.lanes
    assert 1 in np.diff(d.capture_cycles)   # captures on consecutive cycles


def test_int8_stimulus_covers_the_operand_extremes():
    cfg = preset("tiny")
    case = pe_case(cfg, "int8", "products")
    lo, hi = -(1 << (cfg.weight_width - 1)), (1 << (cfg.weight_width - 1)) - 1
    ext = {lo, -1, 0, 1, hi}
    assert {(a, w) for a in ext for w in ext} <= case.coverage["products"]
