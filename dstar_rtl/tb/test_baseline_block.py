"""Cycles of the generated INT8 baseline array on a DiT block's matrix work: for each shape in
``DSTAR_BASELINE_SHAPES`` (JSON list of ``[name, tiles, channels]``) a gap-free stream of
``tiles`` dense INT8 tiles of ``channels`` beats, timed from the first beat offered to the last
drain beat and checked against golden. Writes ``{name: cycles}`` as JSON to
``DSTAR_BASELINE_JSON``."""

import json
import os

import cocotb
import numpy as np

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.golden.vectors import baseline_workload

from .array_tb import ArrayTB


@cocotb.test()
async def block_shapes(dut):
    tb = ArrayTB(dut, baseline=True)
    await tb.reset()
    shapes = json.loads(os.environ.get("DSTAR_BASELINE_SHAPES", '[["probe", 2, 8]]'))
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    out = {}
    for name, tiles, channels in shapes:
        wl = baseline_workload(tb.cfg, rng, tiles=tiles, channels=channels)
        await tb.load_weights(wl.W)
        await tb.run(wl.words, len(wl.expected))
        tb.check(wl.expected)
        out[name] = tb.sink.cycle
        dut._log.info(f"{name}: {tiles} tiles x {channels} channels: {tb.sink.cycle} cycles")
    path = os.environ.get("DSTAR_BASELINE_JSON")
    if path:
        with open(path, "w") as fh:
            fh.write(data_json(out))
