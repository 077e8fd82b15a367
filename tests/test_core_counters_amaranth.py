"""The core's 32-bit counters saturate at 2**32 - 1 (rtl/core.py ``Core._counters``, as built),
in Amaranth's simulator.

Counting to 2**32 takes too long to simulate, so the test elaborates the core, finds its counter
registers ``cnt_<name>`` in the elaborated design and deposits values near the top into them
before a program runs; the RTL then counts on from there and ``STORE CNT`` reads them through
the host path. The ``qpu_*`` counters are the QPU's own (tests/test_qpu_amaranth.py).
"""

import numpy as np
from amaranth.hdl import Fragment, Signal
from amaranth.sim import Simulator

from dstar_rtl.golden.config import preset
from dstar_rtl.golden.layouts import VPU_OPS
from dstar_rtl.perf.timing import core_store_latency
from dstar_rtl.program import isa
from dstar_rtl.program.executor import COUNTER_MAX, CoreExecutor
from dstar_rtl.rtl.core import Core
from dstar_rtl.sim.amaranth_streams import stream_get, stream_put


def counter_registers(frag) -> dict:
    """``{name: signal}`` of the core's own counter registers (the ``cnt_<name>`` signals its
    top fragment assigns in the ``sync`` domain)."""
    regs = {}
    for stmt in frag.statements.get("sync", []):
        lhs = getattr(stmt, "lhs", None)
        if isinstance(lhs, Signal) and lhs.name.startswith("cnt_"):
            regs[lhs.name[4:]] = lhs
    return regs


def _program(cfg, rng):
    """LOADs of ABUF, XBUF, YBUF and WMEM rows, a VROW, a QUANT, STOREs back and ``STORE CNT``:
    commands and host words."""
    T, C = cfg.tile, 2 * cfg.tile
    cmds, host = [], []
    widths = {"ABUF": cfg.act_width, "XBUF": cfg.xhat_width, "YBUF": cfg.acc_bits}
    for buf, w in widths.items():
        rows = rng.integers(-(1 << (w - 1)), 1 << (w - 1), (C, T))
        cmds.append(isa.Cmd("LOAD", dict(buf=isa.BUFFERS.index(buf), addr=0, count=C)))
        host += [x for r in rows for x in isa.row_to_words(cfg, buf, {"v": r})]
    wrows = rng.integers(-127, 128, (T, cfg.cols))
    cmds.append(isa.Cmd("LOAD", dict(buf=isa.BUFFERS.index("WMEM"), addr=0, count=T)))
    host += [x for r in wrows for x in isa.row_to_words(cfg, "WMEM", {"w": r})]
    cmds += [isa.Cmd("VROW", dict(vop=VPU_OPS.index("gelu"), cols=0, R=T, n=C, a=0, C=C, c=0,
                                  vb=0, dst=32, sreg=0)),
             isa.Cmd("QUANT", dict(src=0, nch=C, gdst=0))]
    for buf in widths:
        cmds.append(isa.Cmd("STORE", dict(buf=isa.BUFFERS.index(buf), addr=0, count=C)))
    cmds += [isa.store_counters(), isa.Cmd("END", {})]
    return cmds, host


def test_core_counters_saturate_at_32_bits():
    """Every counter of the core's own (not ``qpu_*``) is deposited near 2**32 - 1 before a
    program. Event counters that count start half their executor count below the top and must
    read 2**32 - 1; ``commands`` starts exactly its count below (reads the top: no early clamp),
    ``host_words_in`` one more (reads one below the top); counters that do not count keep their
    value. Cycle counters start one below the top (``cycles`` ten below) and read between their
    start and 2**32 - 1, ``cycles`` and ``busy_H`` exactly 2**32 - 1. A counter that wrapped
    would read a small number."""
    cfg = preset("tiny")
    core = isa.core_for(cfg)
    cmds, host = _program(cfg, np.random.default_rng(7))
    want = CoreExecutor(cfg, core).run(cmds, host)
    n_cnt = len(isa.COUNTERS)
    counts = dict(zip(isa.COUNTERS, want[-n_cnt:]))
    own = [k for k in isa.COUNTERS if not k.startswith("qpu_")]
    events = [k for k in own if k not in isa.CYCLE_COUNTERS]
    counting = [k for k in events if counts[k]]
    assert len(counting) >= 10, f"too few event counters count: {counting}"

    start = {k: COUNTER_MAX - 1 for k in isa.CYCLE_COUNTERS}
    start["cycles"] = COUNTER_MAX - 10
    start.update({k: COUNTER_MAX - max(1, counts[k] // 2) if counts[k] else COUNTER_MAX - 3
                  for k in events})
    start["commands"] = COUNTER_MAX - counts["commands"]
    start["host_words_in"] = COUNTER_MAX - counts["host_words_in"] - 1

    dut = Core(cfg, core=core)
    frag = Fragment.get(dut, None)
    regs = counter_registers(frag)
    assert sorted(regs) == sorted(own)
    words = [isa.encode(cfg, c) for c in cmds]
    got = []

    async def feed_cmds(ctx):
        for k, v in start.items():
            ctx.set(regs[k], v)
        await stream_put(ctx, dut.cmd, words)

    async def feed_host(ctx):
        await stream_put(ctx, dut.host_in, host)

    async def collect(ctx):
        await stream_get(ctx, dut.host_out, len(want), got, limit=50_000,
                         window=2 * core_store_latency(cfg))

    sim = Simulator(frag)
    sim.add_clock(1e-8)
    sim.add_testbench(feed_cmds, background=True)
    sim.add_testbench(feed_host, background=True)
    sim.add_testbench(collect)
    sim.run()

    assert got[:-n_cnt] == want[:-n_cnt], "stored rows differ from the executor's"
    read = dict(zip(isa.COUNTERS, got[-n_cnt:]))
    for k in events:
        assert read[k] == min(COUNTER_MAX, start[k] + counts[k]), \
            f"{k}: read {read[k]}, started at {start[k]}, counted {counts[k]}"
    for k in isa.CYCLE_COUNTERS:
        assert start[k] <= read[k] <= COUNTER_MAX, f"{k}: read {read[k]}, started at {start[k]}"
    assert read["cycles"] == read["busy_H"] == COUNTER_MAX
    assert read["commands"] == COUNTER_MAX and read["host_words_in"] == COUNTER_MAX - 1
    assert sum(read[k] == COUNTER_MAX for k in counting) == len(counting) - 1
