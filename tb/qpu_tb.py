"""Testbench of the QPU (and of the QPU → MPU chain): configuration writer, sub-channel driver,
group / reconstruction / drain monitors, counter read-back and scoreboards against golden."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import RisingEdge

from golden.layouts import (counters_layout, group_layout, pack, qpu_config_layout, unpack,
                            weight_load_layout)

from .array_tb import config_from_env
from .streams import StreamSink, StreamSource, reset, start_clock

__all__ = ["QPUTB"]


class QPUTB:
    """Owns the clock, reset and streams of a ``dstar_qpu`` or ``dstar_qpu_mpu`` DUT."""

    def __init__(self, dut, gap: float = 0.0, stall: float = 0.0, chain: bool = False):
        self.dut = dut
        self.cfg = config_from_env()
        self.chain = chain
        seed = cocotb.RANDOM_SEED
        self.src = StreamSource(dut, "subch", dut.clk, gap, random.Random(seed))
        out = "drain" if chain else "groups"
        self.out = StreamSink(dut, out, dut.clk, stall, random.Random(seed + 1))
        self.recon = StreamSink(dut, "recon", dut.clk, stall, random.Random(seed + 2))
        dut.config__valid.value = 0
        dut.counters_clear.value = 0
        if chain:
            dut.wload__valid.value = 0
        start_clock(dut)

    async def reset(self):
        await reset(self.dut)

    async def configure(self, base_log2, thr):
        self.dut.config__payload.value = pack(qpu_config_layout(self.cfg),
                                              dict(base_log2=base_log2, thr=list(thr)))
        self.dut.config__valid.value = 1
        await RisingEdge(self.dut.clk)
        self.dut.config__valid.value = 0

    async def load_weights(self, W):
        lay = weight_load_layout(self.cfg)
        for c, row in enumerate(W):
            self.dut.wload__payload.value = pack(lay, dict(w=list(row), channel=c))
            self.dut.wload__valid.value = 1
            await RisingEdge(self.dut.clk)
        self.dut.wload__valid.value = 0

    async def run(self, words, n_out: int, n_recon: int):
        timeout = 60 * (len(words) + n_out) + 500
        rx = cocotb.start_soon(self.out.receive(n_out, timeout))
        rr = cocotb.start_soon(self.recon.receive(n_recon, timeout))
        await self.src.send(words)
        await rx
        await rr
        for _ in range(4):
            await RisingEdge(self.dut.clk)

    def counters(self) -> dict:
        return unpack(counters_layout(), self.dut.counters.value.to_unsigned())

    def check_stream(self, got, expected, what, layout=None):
        assert len(got) == len(expected), f"{what}: got {len(got)} beats, expected {len(expected)}"
        for n, (g, e) in enumerate(zip(got, expected)):
            if g != e:
                detail = ""
                if layout is not None:
                    detail = f": got {unpack(layout, g)}, expected {unpack(layout, e)}"
                raise AssertionError(f"{what} beat {n} differs{detail}")

    def check_groups(self, expected):
        self.check_stream(self.out.words, expected, "group", group_layout(self.cfg))
