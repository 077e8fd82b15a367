"""Rate measurement of the generated QPU (not a pass/fail check of numbers): streams a workload
with no input gaps and an always-ready output, and writes per-transfer cycle stamps to the JSON
file named by ``DSTAR_RATE_OUT``. The workload comes from ``DSTAR_RATE_IN`` (JSON: sub-channel
words as hex strings, the number of groups and reconstructions to expect, and every group and
reconstruction beat golden gives, :func:`bench.qpu.rate_job`): both output streams are
compared beat for beat, a missing or extra beat included."""

import json
import os
import time
from pathlib import Path

import cocotb

from dstar_rtl.gen.outputs import data_json

from .qpu_tb import QPUTB


@cocotb.test()
async def stream_workload(dut):
    spec = json.loads(open(os.environ["DSTAR_RATE_IN"]).read())
    words = [int(w, 16) for w in spec["words"]]
    tb = QPUTB(dut)
    await tb.reset()
    start = time.perf_counter()
    await tb.run(words, spec["groups"], spec["recon"])
    wall = time.perf_counter() - start
    tb.check_stream(tb.out.words, [int(w, 16) for w in spec["expected_groups"]], "group")
    tb.check_stream(tb.recon.words, [int(w, 16) for w in spec["expected_recon"]],
                    "reconstruction")
    Path(os.environ["DSTAR_RATE_OUT"]).write_text(
        data_json(dict(in_cycles=tb.src.cycles, group_cycles=tb.out.cycles,
                       total_cycles=tb.out.cycle, wall_seconds=wall)))
