"""Cycle measurement of the generated VPU (not a pass/fail check of numbers): for every operation
and row length in ``DSTAR_VPU_BENCH`` (JSON ``{"lengths": [...], "rows": R}``) it sends ``R``
rows back to back with no input gaps and an always-ready output, checks every output against
golden, and writes the cycle of each command and of each output beat to ``DSTAR_RATE_OUT``."""

import json
import os
import time
from pathlib import Path

import cocotb
from cocotb.triggers import RisingEdge
from cocotb.utils import get_sim_time

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.golden.layouts import VPU_OPS
from dstar_rtl.golden.vpu_stream import bench_rows, check_output, cmd_word, in_words, out_beats

from .vpu_tb import VPUTB

PERIOD_NS = 10


@cocotb.test()
async def cycles_per_row(dut):
    spec = json.loads(os.environ["DSTAR_VPU_BENCH"])
    tb = VPUTB(dut)
    await tb.reset()
    cfg = tb.cfg
    results = []
    start = time.perf_counter()
    cycles = 0
    for op in VPU_OPS:
        for n in spec["lengths"]:
            rows = bench_rows(cfg, op, n, spec["rows"], seed=n)
            total = sum(out_beats(cfg, r) for r in rows)
            tb.out.words.clear()
            tb.out.cycles.clear()
            tb.out.cycle = 0
            t0 = get_sim_time(unit="ns")
            rx = cocotb.start_soon(tb.out.receive(total, timeout=100 * total + 2000))
            cmd_cycles = []

            async def commands():
                # Commands run ahead of the data on their own stream (the VPU holds one).
                for row in rows:
                    await tb.cmd.send([cmd_word(cfg, row)])
                    cmd_cycles.append(int((get_sim_time(unit="ns") - t0) // PERIOD_NS) - 1)

            cmds = cocotb.start_soon(commands())
            await tb.src.send([w for row in rows for w in in_words(cfg, row)])
            await cmds
            await rx
            for _ in range(4):
                await RisingEdge(dut.clk)
            k = 0
            last = []
            for row in rows:
                nb = out_beats(cfg, row)
                check_output(cfg, row, tb.out.words[k:k + nb])
                last.append(tb.out.cycles[k + nb - 1])
                k += nb
            cycles += tb.out.cycle
            results.append(dict(op=op, n=n, cmd_cycles=cmd_cycles, last_out_cycles=last,
                                out_cycles=list(tb.out.cycles)))
    wall = time.perf_counter() - start
    Path(os.environ["DSTAR_RATE_OUT"]).write_text(
        data_json(dict(results=results, sim_cycles=cycles, wall_seconds=wall)))
