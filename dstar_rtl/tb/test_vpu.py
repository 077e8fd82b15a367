"""cocotb tests of the generated VPU: every operation bit-exact against the integer golden model
(values and per-element saturation flags) on random and edge rows, under input gaps and output
back-pressure; refused commands; a beat after the expected ones fails the sink.

Knobs of ``every_operation_random_and_edge_rows`` (environment): ``DSTAR_ROWS`` (rows per
operation, default 6), ``DSTAR_VPU_OPS`` (a comma-separated subset of the operations, default
all), ``DSTAR_TB_RESULT`` (a JSON file for what it ran: per operation the rows, input beats and
output beats, and ``run_cycles``, the clock cycles from time 0)."""

import os

import cocotb
import numpy as np
from cocotb.utils import get_sim_time

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.golden.layouts import VPU_OPS, pack, vpu_cmd_layout
from dstar_rtl.golden.vpu_stream import cmd_word, in_words, make_row, out_beats, random_rows

from .array_tb import env_int
from .streams import CLOCK_NS, expect_trailing_beat
from .vpu_tb import VPUTB


@cocotb.test()
async def every_operation_random_and_edge_rows(dut):
    """Each operation on random rows of every value kind (typical, small, extreme, all equal,
    one dominant, masked), lengths 1 .. max_reduction, with gaps and back-pressure."""
    tb = VPUTB(dut, gap=0.2, stall=0.3)
    await tb.reset()
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    ops = os.environ.get("DSTAR_VPU_OPS")
    for op in ops.split(",") if ops else VPU_OPS:
        await tb.run(random_rows(tb.cfg, op, rng, env_int("DSTAR_ROWS", 6)))
    assert tb.error == 0
    path = os.environ.get("DSTAR_TB_RESULT")
    if path:
        with open(path, "w") as fh:
            fh.write(data_json(dict(ops=tb.counts,
                                    run_cycles=round(get_sim_time(unit="ns") / CLOCK_NS))))


@cocotb.test()
async def interleaved_operations_at_full_rate(dut):
    """All operations back to back without gaps or stalls: no state leaks between rows."""
    tb = VPUTB(dut)
    await tb.reset()
    rng = np.random.default_rng(cocotb.RANDOM_SEED + 1)
    rows = [r for op in VPU_OPS * 2 for r in random_rows(tb.cfg, op, rng, 1)]
    await tb.run(rows)
    assert tb.error == 0


@cocotb.test()
async def named_edge_rows(dut):
    """Fully masked softmax row, the largest logits, a zero-variance LayerNorm row with eps = 0,
    a K/V head over two commands, a saturating requantization."""
    tb = VPUTB(dut, stall=0.5)
    await tb.reset()
    cfg = tb.cfg
    n, W = cfg.max_reduction, cfg.act_width
    lo, hi = -(1 << (W - 1)), (1 << (W - 1)) - 1
    rows = [
        make_row(cfg, "softmax", a=np.arange(n), mask=np.zeros(n, np.int64), note="all masked"),
        make_row(cfg, "softmax", a=np.where(np.arange(n) % 2, hi, lo), mask=np.ones(n, np.int64),
                 note="extremes"),
        make_row(cfg, "layernorm", a=np.full(n, 300), param=0, note="constant, eps 0"),
        make_row(cfg, "kv_amax", a=np.full(9, 100), note="head part 1"),
        make_row(cfg, "kv_amax", a=np.full(3, -3000), param=1, carry_amax=100, note="part 2"),
        make_row(cfg, "acc_requant", a=np.full(4, (1 << (cfg.acc_bits - 1)) - 1),
                 b=np.full(4, 5), c=np.full(4, hi), m=np.full(4, (1 << cfg.mult_width) - 1),
                 sh=np.array([0, 1, 20, cfg.sh_max]), note="saturating"),
    ]
    await tb.run(rows)
    assert tb.error == 0


@cocotb.test()
async def refused_command_sets_error_and_loses_nothing(dut):
    """A command with n = 0 is consumed without effect, flags ``error``, and the rows after it
    are still exact."""
    tb = VPUTB(dut)
    await tb.reset()
    cfg = tb.cfg
    bad = pack(vpu_cmd_layout(cfg), dict(op=VPU_OPS.index("gelu"), n=0, param=0))
    rows = random_rows(cfg, "gated_residual", np.random.default_rng(cocotb.RANDOM_SEED + 2), 2)
    await tb.run(rows, raw_cmds=[bad])
    assert tb.error == 1


@cocotb.test()
async def a_beat_after_the_expected_ones_fails(dut):
    """The sink's trailing window: told to expect one output beat fewer than a row gives, the
    sink fails on the row's last beat (it stands for a duplicated or extra trailing beat)."""
    tb = VPUTB(dut)
    await tb.reset()
    cfg = tb.cfg
    row = make_row(cfg, "gelu", a=np.arange(2 * cfg.vpu_lanes) - 5)

    async def send():
        await tb.cmd.send([cmd_word(cfg, row)])
        await tb.src.send(in_words(cfg, row))

    tx = cocotb.start_soon(send())
    await expect_trailing_beat(tb.out, out_beats(cfg, row) - 1, timeout=1000, pending=tx)
