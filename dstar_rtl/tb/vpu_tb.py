"""Testbench of the VPU: command and operand drivers, output monitor (nothing may follow the
expected beats within twice :func:`perf.timing.vpu_latency`), and the scoreboard of
:func:`golden.vpu_stream.check_output` (values and per-element saturation flags exact)."""

from __future__ import annotations

import random

import cocotb

from dstar_rtl.golden.vpu_stream import check_output, cmd_word, in_words, out_beats
from dstar_rtl.perf.timing import vpu_latency

from .array_tb import config_from_env
from .streams import StreamSink, StreamSource, reset, start_clock

__all__ = ["VPUTB"]


class VPUTB:
    """Owns the clock, reset and the ``cmd``/``i``/``o`` streams of a ``dstar_vpu`` DUT."""

    def __init__(self, dut, gap: float = 0.0, stall: float = 0.0):
        self.dut = dut
        self.cfg = config_from_env()
        seed = cocotb.RANDOM_SEED
        self.cmd = StreamSource(dut, "cmd", dut.clk, gap, random.Random(seed))
        self.src = StreamSource(dut, "i", dut.clk, gap, random.Random(seed + 1))
        self.out = StreamSink(dut, "o", dut.clk, stall, random.Random(seed + 2),
                              window=2 * vpu_latency(self.cfg))
        self.counts = {}   # per operation: rows, input beats and output beats run
        start_clock(dut)

    async def reset(self):
        await reset(self.dut)

    async def run(self, rows, raw_cmds=()):
        """Send ``raw_cmds`` (packed command words alone), then every row's command and beats;
        collect the outputs and check each row against golden."""
        cfg = self.cfg
        total = sum(out_beats(cfg, r) for r in rows)
        beats = sum(len(in_words(cfg, r)) for r in rows)
        self.out.words.clear()
        rx = cocotb.start_soon(self.out.receive(total, timeout=40 * (beats + total) + 100 *
                                                len(rows) + 500))
        await self.cmd.send(list(raw_cmds))
        for row in rows:
            words = in_words(cfg, row)
            await self.cmd.send([cmd_word(cfg, row)])
            await self.src.send(words)
            c = self.counts.setdefault(row.op, dict(rows=0, in_beats=0, out_beats=0))
            c["rows"] += 1
            c["in_beats"] += len(words)
            c["out_beats"] += out_beats(cfg, row)
        await rx
        k = 0
        for i, row in enumerate(rows):
            nb = out_beats(cfg, row)
            check_output(cfg, row, self.out.words[k:k + nb], where=f"row {i}: ")
            k += nb

    @property
    def error(self) -> int:
        return int(self.dut.error.value)
