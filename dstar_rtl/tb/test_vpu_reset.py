"""cocotb test of the generated VPU reset in the middle of its traffic (issue 14, section 3): a
fresh stream after the reset is bit-exact and nothing of the old stream comes out.

Run from ``tests/test_cocotb_reset.py`` on the VPU's usual builds (Verilator and Icarus).
"""

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from dstar_rtl.golden.layouts import VPU_OPS, pack, vpu_cmd_layout
from dstar_rtl.golden.vpu_stream import (
    check_output,
    cmd_word,
    in_words,
    make_row,
    out_beats,
    random_rows,
)

from .midstream import OutputWatch, hold_until_stalled, quiet, reset_midstream, take
from .vpu_tb import VPUTB


async def _send_rows(tb, rows, raw_cmds=()):
    """The old stream's driver: raw command words, then each row's command and input beats."""
    await tb.cmd.send(list(raw_cmds))
    for row in rows:
        await tb.cmd.send([cmd_word(tb.cfg, row)])
        await tb.src.send(in_words(tb.cfg, row))


async def _reset_round(tb, old, taken: int, fresh, what: str):
    """Stream ``old`` (after a refused command, which sets ``error``) until ``taken`` output
    beats are received and the output is then held, until the VPU stops taking input; reset
    with the drivers stopped; run ``fresh`` and check every row against golden and the output
    from the reset on against the fresh stream's beats. The rows of ``old`` wholly received
    before the reset (at least one) are checked against golden too."""
    cfg, dut = tb.cfg, tb.dut
    bad = pack(vpu_cmd_layout(cfg), dict(op=VPU_OPS.index("gelu"), n=0, param=0))
    await tb.reset()
    tb.cmd.cycles.clear()
    tb.src.cycles.clear()
    tx = cocotb.start_soon(_send_rows(tb, old, raw_cmds=[bad]))
    got = await take(dut, "o", taken)
    sent = await hold_until_stalled(dut, [tb.cmd, tb.src], 32)
    k = 0
    for row in old:
        nb = out_beats(cfg, row)
        if k + nb > len(got):
            break
        check_output(cfg, row, got[k:k + nb], where=f"{what}, old stream: ")
        k += nb
    assert k > 0, f"{what}: no old row wholly received"
    total = 1 + sum(len(in_words(cfg, r)) for r in old) + len(old)
    assert sent < total, f"{what}: the whole old stream ({sent} words) was sent"
    assert taken < sum(out_beats(cfg, r) for r in old)
    dut._log.info(f"{what}: reset with {sent} of {total} command and input words sent, "
                  f"{taken} output beats received")
    await ReadOnly()
    assert tb.error == 1
    await RisingEdge(dut.clk)
    watch = OutputWatch(dut, "o")
    await reset_midstream(dut, [tx], inputs=["cmd", "i"], outputs=["o"], watches=[watch])
    await ReadOnly()
    assert tb.error == 0, f"{what}: error survives the reset"
    await RisingEdge(dut.clk)
    await tb.run(fresh)
    assert tb.error == 0
    await quiet(dut, 100)
    watch.check(tb.out.words, f"{what}: o")


@cocotb.test()
async def reset_mid_stream(dut):
    """Two resets in the middle of traffic, each after a refused command has set ``error``
    and followed by a fresh stream whose rows all equal golden while a watch on ``o`` from the
    reset on sees only the fresh stream's beats (its first beat first, none after its last).

    1. A softmax row of ``max_reduction`` elements half output (its row buffer, reductions and
       the pass sequencer in use), the next row's command taken and its beats held; the fresh
       stream runs a row of every kind of pass.
    2. A two-beat row half output and a long ``kv_amax`` row of the largest value loading
       behind it (the running max |v| at its top); the fresh stream's first row continues the
       running max (``param`` 1), which the reset must have cleared to 0.
    """
    tb = VPUTB(dut, gap=0.2, stall=0.3)
    cfg, L = tb.cfg, tb.cfg.vpu_lanes
    rng = np.random.default_rng(cocotb.RANDOM_SEED + 31)
    n = cfg.max_reduction
    hi = (1 << (cfg.act_width - 1)) - 1

    old = [make_row(cfg, "kv_amax", a=np.full(L, hi)),
           make_row(cfg, "softmax", a=rng.integers(-3000, 3000, n), mask=np.ones(n, np.int64))]
    old += random_rows(cfg, "layernorm", rng, 2)
    fresh = [r for op in ("softmax", "gelu", "layernorm", "modulate", "kv_amax")
             for r in random_rows(cfg, op, rng, 1)]
    await _reset_round(tb, old, 1 + out_beats(cfg, old[1]) // 2, fresh, "softmax half output")

    old = [make_row(cfg, "kv_amax", a=rng.integers(-50, 50, L)),
           make_row(cfg, "gelu", a=rng.integers(-3000, 3000, 2 * L)),
           make_row(cfg, "kv_amax", a=np.full(n, hi)),
           make_row(cfg, "gelu", a=rng.integers(-3000, 3000, L))]
    fresh = [make_row(cfg, "kv_amax", a=rng.integers(-50, 50, 2 * L), param=1, carry_amax=0,
                      note="continues after the reset")]
    fresh += random_rows(cfg, "gelu", rng, 2)
    await _reset_round(tb, old, 2, fresh, "kv_amax loading")
