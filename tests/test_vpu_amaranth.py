"""The VPU in Amaranth's simulator: every operation bit-exact against the integer golden model
(:mod:`golden.vpu`) on random and edge rows, under input gaps and output back-pressure, and its
refusals."""

import numpy as np
import pytest

from golden.config import ConfigError, preset
from golden.layouts import VPU_OPS, pack, vpu_cmd_layout
from golden.vpu import VPUTables
from golden.vpu_stream import check_output, make_row, random_rows
from rtl.vpu import VPU
from sim.amaranth_vpu import run_vpu

CONFIGS = {
    "tiny": preset("tiny"),
    "fpga": preset("fpga"),
    # lanes that do not divide the row, one lane, a short row buffer
    "lanes3": preset("tiny", vpu_lanes=3, max_reduction=20),
    "lanes1": preset("tiny", vpu_lanes=1, max_reduction=9),
}


def _check_all(cfg, rows, run):
    for row, words in zip(rows, run.outputs):
        check_output(cfg, row, words)
    assert run.error == 0


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("op", VPU_OPS)
def test_operation_bit_exact(op, name):
    cfg = CONFIGS[name]
    seed = VPU_OPS.index(op) * 10 + sorted(CONFIGS).index(name)
    rows = random_rows(cfg, op, np.random.default_rng(seed), 8 if name == "fpga" else 12)
    _check_all(cfg, rows, run_vpu(VPU(cfg), rows, gap=0.2, stall=0.3, seed=seed))


def test_interleaved_operations_share_no_state():
    """Every operation in turn, twice over, back to back: no row leaks into the next."""
    cfg = CONFIGS["tiny"]
    rng = np.random.default_rng(99)
    rows = []
    for rep in range(2):
        for op in VPU_OPS:
            rows += random_rows(cfg, op, rng, 2)
    _check_all(cfg, rows, run_vpu(VPU(cfg), rows, stall=0.5, seed=4))


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
    _check_all(cfg, rows, run_vpu(VPU(cfg), rows))


def test_elementwise_rate_is_one_beat_per_cycle():
    """Without gaps or back-pressure an element-wise row streams one beat per cycle."""
    cfg = CONFIGS["fpga"]
    x = np.arange(-512, 512, dtype=np.int64)[: 16 * cfg.vpu_lanes]
    rows = [make_row(cfg, "gelu", a=x)]
    run = run_vpu(VPU(cfg), rows)
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
    run = run_vpu(VPU(cfg), rows, raw_cmds=[word])
    for row, words in zip(rows, run.outputs):
        check_output(cfg, row, words)
    assert run.error == 1


def test_requant_shift_above_sh_max_sets_error():
    cfg = CONFIGS["tiny"]
    row = make_row(cfg, "acc_requant", a=[1, 2], b=[0, 0], c=[0, 0], m=[1, 1], sh=[0, 0])
    row.operands["sh"] = np.array([cfg.sh_max + 1, 0])
    run = run_vpu(VPU(cfg), [row])
    assert run.error == 1


def test_layernorm_shift_must_not_be_negative():
    cfg = preset("tiny", act_frac=12)
    with pytest.raises(ConfigError, match="act_frac"):
        VPU(cfg, VPUTables.build(cfg))
