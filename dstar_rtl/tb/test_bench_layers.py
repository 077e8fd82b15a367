"""``dstar bench`` on one array (MPU or INT8 baseline): the differential layers of a DiT, block of
``cols`` output channels by block, every drain beat checked against golden.

Knobs (environment):

- ``DSTAR_BENCH_WORKLOAD``: a JSON file written by :func:`bench.layers.write_workload`:
  ``{"unit": "mpu"|"baseline", "layers": [{"id", "stream": [beat, ...], "blocks": [{"W":
  [[w, ...], ...], "expected": [drain beat, ...]}, ...]}, ...]}``. ``stream`` is the layer's
  input beats for all its token tiles (MPU: the FMDQ group stream; baseline: one dense INT8 beat
  per input channel and tile); it is replayed once per block of output channels after that
  block's weights are loaded.
- ``DSTAR_BENCH_RESULT``: where the measured cycles go (JSON): per layer the stream cycles of
  every block (first beat offered to last drain beat received, no gaps, no back-pressure, as
  ``tb/test_baseline_block.py`` counts them) and the weight-load cycles; ``run_cycles``: the
  clock cycles of the whole run from time 0 (reset and weight loads included).

The beats and the expected drain beats come from the golden schedule and executor
(:func:`golden.schedule.execute`) or, for the baseline, ``A @ W`` in integers; the scoreboard is
:meth:`tb.array_tb.ArrayTB.check` (bit-exact, field by field on a mismatch).
"""

import json
import os
import time

import cocotb
from cocotb.triggers import RisingEdge
from cocotb.utils import get_sim_time

from dstar_rtl.gen.outputs import data_json

from .array_tb import ArrayTB


@cocotb.test()
async def layers(dut):
    wl = json.loads(open(os.environ["DSTAR_BENCH_WORKLOAD"]).read())
    baseline = wl["unit"] == "baseline"
    tb = ArrayTB(dut, baseline=baseline)
    await RisingEdge(dut.clk)
    t0 = get_sim_time(unit="ps")
    await RisingEdge(dut.clk)
    period = get_sim_time(unit="ps") - t0
    await tb.reset()
    wall0 = time.perf_counter()
    out, total, beats = [], 0, 0
    for layer in wl["layers"]:
        cycles, load = [], 0
        for blk in layer["blocks"]:
            s0 = get_sim_time(unit="ps")
            await tb.load_weights(blk["W"])
            load += round((get_sim_time(unit="ps") - s0) / period)
            await tb.run(layer["stream"], len(blk["expected"]))
            tb.check(blk["expected"])
            cycles.append(tb.sink.cycle)
            beats += len(blk["expected"])
        total += sum(cycles)
        out.append(dict(id=layer["id"], cycles=cycles, load_cycles=load,
                        input_beats=len(layer["stream"]) * len(layer["blocks"])))
        dut._log.info(f"{layer['id']}: {len(layer['blocks'])} blocks, {sum(cycles)} cycles, "
                      f"checked")
    wall = time.perf_counter() - wall0
    run_cycles = round(get_sim_time(unit="ps") / period)   # reset and weight loads included
    res = dict(unit=wl["unit"], layers=out, cycles=total, drain_beats_checked=beats,
               run_cycles=run_cycles, wall_s=wall, simulator=cocotb.SIM_NAME,
               simulator_version=cocotb.SIM_VERSION, cocotb=cocotb.__version__, checked=True)
    path = os.environ.get("DSTAR_BENCH_RESULT")
    if path:
        with open(path, "w") as fh:
            fh.write(data_json(res))
