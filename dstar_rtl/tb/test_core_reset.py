"""cocotb test of the generated core reset in the middle of its traffic (issue 14, section 3): a
fresh program after the reset returns exactly the ISA executor's host words (data and event
counters) and nothing of the old program comes out.

Run from ``tests/test_cocotb_reset.py`` on the core's usual builds (Verilator and Icarus).
"""

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from dstar_rtl.golden.layouts import VPU_OPS
from dstar_rtl.golden.vpu import layernorm_eps_int
from dstar_rtl.program import isa
from dstar_rtl.program.executor import CoreExecutor

from .core_tb import CoreTB
from .midstream import OutputWatch, quiet, reset_midstream, take

BUF = isa.BUFFERS.index


def _load(cfg, buf, addr, rows):
    """A LOAD of ``rows`` (arrays of lane values) and its host words."""
    words = [w for r in rows for w in isa.row_to_words(cfg, buf, {"v": r})]
    return isa.Cmd("LOAD", dict(buf=BUF(buf), addr=addr, count=len(rows))), words


def _store(buf, addr, count):
    return isa.Cmd("STORE", dict(buf=BUF(buf), addr=addr, count=count))


def _layernorm(T, C, a, dst):
    """VROW layernorm over the ``T`` token rows of a (T, C) ABUF tensor at ``a``."""
    return isa.Cmd("VROW", dict(vop=VPU_OPS.index("layernorm"), cols=0, R=T, n=C, a=a, C=C, c=0,
                                vb=0, dst=dst, sreg=0))


async def _send_counted(tb, words, sent: list):
    """The old program's command driver: one command at a time, counting those taken."""
    for w in words:
        await tb.send_commands([w])
        sent[0] += 1


@cocotb.test()
async def reset_mid_stream(dut):
    """Reset while a STORE streams out (part of its words received), the following LOAD waits
    with its host words offered and later commands are not yet taken, after the old program has
    set the step phase (STEP), VPARAM and the QPU's configuration (QCFG). The fresh program then
    needs the reset state of each: a SKIP that must discard nothing (phase 0), a LayerNorm with
    the VPARAM of reset (0), a QUANT at the default configuration; its host words (the rows it
    stores and every event counter, counted from zero) equal the ISA executor's, its cycle
    counters count only from the reset, and a watch on ``host_out`` from the reset on shows the
    fresh program's words and nothing else."""
    tb = CoreTB(dut, gap=0.1, stall=0.2)
    cfg, T = tb.cfg, tb.cfg.tile
    rng = np.random.default_rng(cocotb.RANDOM_SEED + 41)
    lim = 1 << (cfg.act_width - 1)
    th = cfg.thresholds
    C = 2 * T

    # The old program and its host words.
    old_rows = rng.integers(-lim, lim, (2 * T, T))
    ld0, w0 = _load(cfg, "ABUF", 0, old_rows)
    ld1, w1 = _load(cfg, "ABUF", 200, rng.integers(-lim, lim, (T, T)))
    old = [isa.Cmd("STEP", dict(interval=2)),
           isa.Cmd("VPARAM", dict(value=layernorm_eps_int(C, 1.0, cfg))),
           isa.Cmd("QCFG", dict(base_log2=cfg.B_max, thr=[th[2] + 1, th[4] + 1, th[6] + 1])),
           ld0, isa.Cmd("QUANT", dict(src=0, nch=C, gdst=0)), _store("ABUF", 0, 2 * T),
           ld1, _store("ABUF", 200, T), isa.Cmd("END", {})]
    old_words = [isa.encode(cfg, c) for c in old]
    old_host = w0 + w1
    old_out = CoreExecutor(cfg, tb.core).run(old, old_host)
    wpr = isa.host_words_per_row(cfg, "ABUF")
    taken = T * wpr                                   # half of the first STORE

    dut.cmd__payload.value = 0          # no undriven (X) inputs in a four-state simulator
    dut.host_in__payload.value = 0
    await tb.reset()
    sent = [0]
    tx_cmd = cocotb.start_soon(_send_counted(tb, old_words, sent))
    tx_host = cocotb.start_soon(tb.host.send(old_host))
    got = await take(dut, "host_out", taken, timeout=50_000)
    await quiet(dut, 40)
    await ReadOnly()
    st = tb.status()
    assert got == old_out[:taken], "the old STORE's first words differ from the executor's"
    assert st["busy"] and not st["done"] and not st["error"] and st["phase"] == 1, st
    assert int(dut.host_out__valid.value) == 1, "the old STORE should hold a word"
    assert sent[0] < len(old_words), "every old command was taken"
    assert len(tb.host.cycles) == len(w0), "the second LOAD's host words should wait"
    dut._log.info(f"reset with {sent[0]} of {len(old_words)} commands and {len(w0)} of "
                  f"{len(old_host)} host words taken, {taken} of {len(old_out)} words stored")
    await RisingEdge(dut.clk)
    watch = OutputWatch(dut, "host_out")
    await reset_midstream(dut, [tx_cmd, tx_host], inputs=["cmd", "host_in"],
                          outputs=["host_out"], watches=[watch])
    reset_at = tb._cycle()
    await ReadOnly()
    st = tb.status()
    assert not (st["busy"] or st["done"] or st["error"] or st["phase"]), f"after reset: {st}"
    await RisingEdge(dut.clk)

    # The fresh program: every result depends on a piece of state the reset must restore. The
    # channels' magnitudes spread over the precision classes, so that the QUANT's counts depend
    # on the QPU's base and thresholds.
    mags = np.geomspace(2, 12000, C).astype(np.int64)
    x = np.stack([rng.integers(-m, m + 1, T) for m in mags], axis=1)
    ld, host = _load(cfg, "ABUF", 16, [x[:, c] for c in range(C)])
    fresh = [ld, isa.Cmd("SKIP", dict(count=1)), _store("ABUF", 16, C),
             _layernorm(T, C, a=16, dst=40), _store("ABUF", 40, C),
             isa.Cmd("QUANT", dict(src=16, nch=C, gdst=8)),
             _store("CNT", 0, len(isa.COUNTERS)), isa.Cmd("END", {})]
    words = await tb.run(fresh, host, timeout=50_000)
    since_reset = tb._cycle() - reset_at
    want = CoreExecutor(cfg, tb.core).run(fresh, host)
    assert len(words) == len(want), f"{len(words)} host words, executor {len(want)}"
    n_data = len(want) - len(isa.COUNTERS)
    assert words[:n_data] == want[:n_data], "stored rows differ from the executor's"
    for i, name in enumerate(isa.COUNTERS):
        g = words[n_data + i]
        if name in isa.CYCLE_COUNTERS:
            assert g <= since_reset, f"counter {name} = {g}, more than the {since_reset} " \
                                     f"cycles since the reset"
        else:
            assert g == want[n_data + i], f"counter {name}: core {g}, executor " \
                                          f"{want[n_data + i]}"
    dut._log.info(f"fresh program: {tb.cycles} cycles")
    await quiet(dut, 200)
    watch.check(words, "host_out")
