"""The VPU in Amaranth's simulator: every operation bit-exact against the integer golden model
(:mod:`golden.vpu`; values and per-element saturation flags) on random and edge rows, under
input gaps and output back-pressure, and its refusals; the scoreboard's per-element flags, the
sink's trailing window and the latency bound that sizes it."""

import copy
import functools
import gc

import numpy as np
import pytest
from amaranth.sim import Simulator

from dstar_rtl.golden.config import ConfigError, preset
from dstar_rtl.golden.layouts import VPU_OPS, pack, vpu_cmd_layout, vpu_out_layout
from dstar_rtl.golden.vpu import VPUTables
from dstar_rtl.golden.vpu_stream import (
    bench_rows,
    check_output,
    cmd_word,
    in_words,
    make_row,
    max_param,
    out_beats,
    random_rows,
)
from dstar_rtl.perf.timing import vpu_latency
from dstar_rtl.rtl.arith import tree_stages
from dstar_rtl.rtl.vpu import ROWS, VPU
from dstar_rtl.sim.amaranth_streams import stream_get, stream_put
from dstar_rtl.sim.amaranth_vpu import run_vpu

#: One VPU per configuration (and options): its simulator is made once and reset for each
#: run (sim.amaranth_reuse).
vpu = functools.cache(VPU)


CONFIGS = {
    "tiny": preset("tiny"),
    "fpga": preset("fpga"),
    # lanes that do not divide the row, one lane, a short row buffer
    "lanes3": preset("tiny", vpu_lanes=3, max_reduction=20, ln_row_max=50),
    "lanes1": preset("tiny", vpu_lanes=1, max_reduction=9, ln_row_max=20),
}


def _check_all(cfg, rows, run):
    assert len(run.outputs) == len(rows), f"{len(run.outputs)} rows came out of {len(rows)}"
    for k, (row, words) in enumerate(zip(rows, run.outputs)):
        check_output(cfg, row, words, where=f"row {k}: ")
    assert run.error == 0


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_operation_bit_exact(name):
    """Random and edge rows of every operation, the operations one after another in one
    simulation (a failure names the row and its operation; one simulation per configuration
    instead of one per operation: the fast tier pays the simulator's start once)."""
    cfg = CONFIGS[name]
    rows = []
    for op in VPU_OPS:
        seed = VPU_OPS.index(op) * 10 + sorted(CONFIGS).index(name)
        rows += random_rows(cfg, op, np.random.default_rng(seed), 8 if name == "fpga" else 12)
    seed = sorted(CONFIGS).index(name)
    _check_all(cfg, rows, run_vpu(vpu(cfg), rows, gap=0.2, stall=0.3, seed=seed))


def test_interleaved_operations_share_no_state():
    """Every operation in turn, twice over, back to back: no row leaks into the next."""
    cfg = CONFIGS["tiny"]
    rng = np.random.default_rng(99)
    rows = []
    for rep in range(2):
        for op in VPU_OPS:
            rows += random_rows(cfg, op, rng, 2)
    _check_all(cfg, rows, run_vpu(vpu(cfg), rows, stall=0.5, seed=4))


def test_edge_rows():
    """Named edge cases: a fully masked softmax row, one kept entry, the largest logits, a
    constant LayerNorm row with eps = 0 (zero variance: zeros out), a K/V head split over three
    commands, a saturating requantization."""
    cfg = CONFIGS["tiny"]
    n, W = cfg.max_reduction, cfg.act_width
    lo, hi = -(1 << (W - 1)), (1 << (W - 1)) - 1
    one = np.zeros(n, np.int64)
    one[5] = 1
    rows = [
        make_row(cfg, "softmax", a=np.arange(n), mask=np.zeros(n, np.int64), note="all masked"),
        make_row(cfg, "softmax", a=np.arange(n), mask=one, note="one kept"),
        make_row(cfg, "softmax", a=np.where(np.arange(n) % 2, hi, lo), mask=np.ones(n, np.int64),
                 note="extremes"),
        make_row(cfg, "layernorm", a=np.full(n, 300), param=0, note="constant, eps 0"),
        make_row(cfg, "layernorm", a=np.full(7, lo), param=1, note="constant, eps_q 1"),
        make_row(cfg, "kv_amax", a=np.full(9, 100), note="head part 1"),
        make_row(cfg, "kv_amax", a=np.full(3, -3000), param=1, carry_amax=100, note="part 2"),
        make_row(cfg, "kv_amax", a=np.full(5, 7), param=1, carry_amax=3000, note="part 3"),
        make_row(cfg, "acc_requant", a=np.full(4, (1 << (cfg.acc_bits - 1)) - 1),
                 b=np.full(4, 5), c=np.full(4, hi), m=np.full(4, (1 << cfg.mult_width) - 1),
                 sh=np.array([0, 1, 20, cfg.sh_max]), note="saturating"),
    ]
    _check_all(cfg, rows, run_vpu(vpu(cfg), rows))


def test_elementwise_rate_is_one_beat_per_cycle():
    """Without gaps or back-pressure an element-wise row streams one beat per cycle."""
    cfg = CONFIGS["fpga"]
    x = np.arange(-512, 512, dtype=np.int64)[: 16 * cfg.vpu_lanes]
    rows = [make_row(cfg, "gelu", a=x)]
    run = run_vpu(vpu(cfg), rows)
    _check_all(cfg, rows, run)
    c = run.out_cycles
    assert c == list(range(c[0], c[0] + len(c)))


def _cmd(cfg, op, n, param=0):
    return pack(vpu_cmd_layout(cfg), dict(op=op, n=n, param=param))


@pytest.mark.parametrize("bad", ["op", "n0", "nbig", "kv_shift"])
def test_illegal_command_sets_error_and_consumes_nothing(bad):
    cfg = CONFIGS["tiny"]
    word = {"op": _cmd(cfg, len(VPU_OPS), 4), "n0": _cmd(cfg, VPU_OPS.index("gelu"), 0),
            "nbig": _cmd(cfg, VPU_OPS.index("softmax"), cfg.max_reduction + 1),
            "kv_shift": _cmd(cfg, VPU_OPS.index("kv_quant"), 4, cfg.act_width + 1)}[bad]
    rows = random_rows(cfg, "modulate", np.random.default_rng(5), 3)
    run = run_vpu(vpu(cfg), rows, raw_cmds=[word])
    for row, words in zip(rows, run.outputs):
        check_output(cfg, row, words)
    assert run.error == 1


def test_requant_shift_above_sh_max_sets_error():
    cfg = CONFIGS["tiny"]
    row = make_row(cfg, "acc_requant", a=[1, 2], b=[0, 0], c=[0, 0], m=[1, 1], sh=[0, 0])
    row.operands["sh"] = np.array([cfg.sh_max + 1, 0])
    run = run_vpu(vpu(cfg), [row])
    assert run.error == 1


@pytest.mark.parametrize("name", ["tiny", "fpga"])
def test_vpu_without_requant(name):
    """The core's VPU (``requant=False``): every other operation bit-exact, in one stream, at its
    narrower lane widths, and acc_requant refused like an unknown operation (error, nothing
    consumed: the rows after it come out right)."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(21)
    rows = [r for op in VPU_OPS if op not in ("acc_requant",)
            for r in random_rows(cfg, op, rng, 2)]
    dut = VPU(cfg, requant=False)
    run = run_vpu(dut, rows, gap=0.1, stall=0.2, seed=4)
    _check_all(cfg, rows, run)
    bad = _cmd(cfg, VPU_OPS.index("acc_requant"), 2)
    run = run_vpu(vpu(cfg, requant=False), rows[:3], raw_cmds=[bad])
    for row, words in zip(rows[:3], run.outputs):
        check_output(cfg, row, words)
    assert run.error == 1


def _row_law(cfg, op, nb):
    """Cycles between consecutive rows' last output beats, steady state, for ``op`` (rtl/vpu.py's
    docstring): softmax and LayerNorm one row at a time; softmax_mx ``k`` rows in flight, so
    ``k`` consecutive intervals add up to ``max(k·nb, nb + 17 + s)``."""
    s = tree_stages(cfg.vpu_lanes, 2)
    if op == "softmax":
        return 3 * nb + 20 + 2 * s
    return 2 * nb + 21 + s


@pytest.mark.parametrize("name", ["tiny", pytest.param("fpga", marks=pytest.mark.slow)])
@pytest.mark.parametrize("op", ["softmax", "softmax_mx", "layernorm"])
def test_row_operations_take_their_docstring_cycles(op, name):
    """Back-to-back rows of ``nb`` beats, their commands queued ahead (as the core's vector
    engine does), output always ready: rtl/vpu.py's docstring laws, from one row's last output
    beat to the next's."""
    cfg = CONFIGS[name]
    depth = -(-cfg.max_reduction // cfg.vpu_lanes)
    for nb in (1, 3, 8, depth // 2 + 1, depth):
        rows = bench_rows(cfg, op, nb * cfg.vpu_lanes, 9, seed=nb)
        oc = run_vpu(vpu(cfg), rows, cmds_ahead=True).out_cycles
        ends = [oc[(k + 1) * nb - 1] for k in range(len(rows))]
        gaps = [b - a for a, b in zip(ends, ends[1:])]
        if op != "softmax_mx":
            assert set(gaps) == {_row_law(cfg, op, nb)}, (op, nb, gaps)
            continue
        k = min(ROWS, 2 * depth // nb)
        want = max(k * nb, nb + 17 + tree_stages(cfg.vpu_lanes, 2))
        assert {sum(gaps[i:i + k]) for i in range(len(gaps) - k + 1)} == {want}, (nb, gaps)


#: LayerNorm rows longer than max_reduction (ln_row_max): odd lanes and the tiny preset.
LONG_LN = {"lanes3": preset("tiny", vpu_lanes=3, max_reduction=20, ln_row_max=70),
           "tiny": preset("tiny", ln_row_max=256)}


@pytest.mark.parametrize("name", sorted(LONG_LN))
def test_long_layernorm_rows_come_twice(name):
    """LayerNorm rows up to ``ln_row_max`` (most longer than ``max_reduction``, each sent twice),
    interleaved with softmax rows (which use the row buffer the long rows leave alone), under
    gaps and back-pressure: bit-exact; and at full rate they keep the docstring's law."""
    cfg = LONG_LN[name]
    rng = np.random.default_rng(7)
    rows = [r for _ in range(3) for op in ("layernorm", "softmax", "layernorm")
            for r in random_rows(cfg, op, rng, 2)]
    assert any(r.op == "layernorm" and r.n > cfg.max_reduction for r in rows)
    _check_all(cfg, rows, run_vpu(vpu(cfg), rows, gap=0.2, stall=0.3, seed=3))
    nb = -(-cfg.ln_max // cfg.vpu_lanes)
    rows = bench_rows(cfg, "layernorm", cfg.ln_max, 4, seed=1)
    oc = run_vpu(vpu(cfg), rows, cmds_ahead=True).out_cycles
    ends = [oc[(k + 1) * nb - 1] for k in range(len(rows))]
    assert {b - a for a, b in zip(ends, ends[1:])} == {_row_law(cfg, "layernorm", nb)}


@pytest.mark.parametrize("op, n", [("layernorm", 71), ("softmax", 21), ("gelu", 21)])
def test_rows_beyond_their_bound_are_refused(op, n):
    """With ``ln_row_max`` 70 and ``max_reduction`` 20: a LayerNorm row of 71 and any other row
    of 21 set ``error`` and consume nothing."""
    cfg = LONG_LN["lanes3"]
    rows = random_rows(cfg, "modulate", np.random.default_rng(5), 2)
    run = run_vpu(vpu(cfg), rows, raw_cmds=[_cmd(cfg, VPU_OPS.index(op), n)])
    _check_all_but_error(cfg, rows, run)


def _check_all_but_error(cfg, rows, run):
    for row, words in zip(rows, run.outputs):
        check_output(cfg, row, words)
    assert run.error == 1


def test_softmax_mx_below_a_kept_logit_sets_error():
    """softmax_mx's given max must bound every kept logit; a masked one may exceed it."""
    cfg = CONFIGS["tiny"]
    ok = make_row(cfg, "softmax_mx", param=max_param(cfg, 5), a=[5, 900, -3],
                  mask=[1, 0, 1], note="masked logit above the max")
    run = run_vpu(vpu(cfg), [ok])
    check_output(cfg, ok, run.outputs[0])
    assert run.error == 0
    bad = make_row(cfg, "softmax_mx", param=max_param(cfg, 100), a=[5, 90, -3],
                   mask=[1, 1, 1])
    bad.param = max_param(cfg, 50)            # below the kept 90
    assert run_vpu(vpu(cfg), [bad]).error == 1


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_layernorm_shift_must_not_be_negative():
    cfg = preset("tiny", act_frac=12)
    with pytest.raises(ConfigError, match="act_frac"):
        VPU(cfg, tables=VPUTables.build(cfg))
    gc.collect()      # the refused VPU warns UnusedElaboratable now, under this test's filter


def _out_words(cfg, row):
    """The output beats the golden row expects, packed (flags and all)."""
    L, nb = cfg.vpu_lanes, out_beats(cfg, row)

    def lanes(v):
        w = np.zeros(nb * L, np.int64)
        if v is not None:
            w[:len(v)] = v
        return w.reshape(nb, L)

    f = {k: lanes(getattr(row, k)) for k in ("y", "Y", "sat", "Ysat")}
    return [pack(vpu_out_layout(cfg), dict(y=f["y"][i], Y=f["Y"][i], sat=f["sat"][i],
                                           Ysat=f["Ysat"][i], last=int(i == nb - 1)))
            for i in range(nb)]


def test_saturation_flags_are_compared_per_element():
    """The scoreboard takes the golden beats and refuses the same beats with one saturation
    flag moved to another element (the count per row unchanged), for ``y`` and for ``Y``."""
    cfg = CONFIGS["tiny"]
    A = cfg.acc_bits
    row = make_row(cfg, "acc_requant", a=[(1 << (A - 1)) - 1, 3, -(1 << (A - 1)), 7],
                   b=[5, 0, -5, 0], c=[0] * 4, m=[(1 << cfg.mult_width) - 1, 1] * 2, sh=[0] * 4)
    assert row.sat.tolist() == [True, False, True, False]
    assert row.Ysat.tolist() == [True, False, True, False]
    check_output(cfg, row, _out_words(cfg, row))
    for f in ("sat", "Ysat"):
        moved = copy.deepcopy(row)
        getattr(moved, f)[[0, 1]] = [False, True]
        with pytest.raises(AssertionError, match=rf"{f}\[0\] = 0, golden 1"):
            check_output(cfg, row, _out_words(cfg, moved))


def test_an_output_beat_after_the_expected_ones_fails():
    """A sink told to expect one beat fewer than the VPU sends (the row's last beat then looks
    like a duplicated or extra trailing beat) fails in its trailing window."""
    cfg = CONFIGS["tiny"]
    rows = [make_row(cfg, "gelu", a=np.arange(2 * cfg.vpu_lanes) - 3)]
    dut = VPU(cfg)

    async def feed(ctx):
        await stream_put(ctx, dut.cmd, [cmd_word(cfg, rows[0])])
        await stream_put(ctx, dut.i, in_words(cfg, rows[0]))

    async def sink(ctx):
        await stream_get(ctx, dut.o, out_beats(cfg, rows[0]) - 1, [],
                         window=2 * vpu_latency(cfg))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed)
    sim.add_testbench(sink)
    with pytest.raises(AssertionError, match="valid 0 cycles after the 1 expected beats"):
        sim.run()


@pytest.mark.parametrize("name", ["tiny", "lanes3"])
def test_latency_is_within_the_trailing_window_bound(name):
    """Every operation, rows of one element and of ``max_reduction``: from a row's last input
    beat to its first output beat takes at most :func:`perf.timing.vpu_latency` cycles (the
    sinks' trailing windows are twice that)."""
    cfg = CONFIGS[name]
    rows = [bench_rows(cfg, op, n, 1, seed=n)[0] for op in VPU_OPS
            for n in (1, cfg.max_reduction)]
    run = run_vpu(vpu(cfg), rows)
    _check_all(cfg, rows, run)
    first_in, first_out = 0, 0
    worst = 0
    for row in rows:
        last_in = run.in_cycles[first_in + len(in_words(cfg, row)) - 1]
        worst = max(worst, run.out_cycles[first_out] - last_in)
        first_in += len(in_words(cfg, row))
        first_out += out_beats(cfg, row)
    assert 0 < worst <= vpu_latency(cfg), (worst, vpu_latency(cfg))
