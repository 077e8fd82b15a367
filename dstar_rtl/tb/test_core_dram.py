"""cocotb tests of the core's DRAM port (docs/core.md §9) behind cocotbext-axi's AXI RAM, every
channel paused at random: the programs of :mod:`sim.dram_programs` (every buffer through DRAM;
a differential layer over steps with its operands, outputs and state moved beside the engines,
and one with its activations and state by token tiles; group streams out and back; a layer in
passes behind the deterministic DRAM of tb.dram_model) return the executor's host words (the
cycle counters of STORE CNT excepted) and leave the executor's bytes in DRAM; an error response
stops the core with ``dram``."""

import cocotb

from dstar_rtl.program import isa
from dstar_rtl.program.compiler import make_cmd
from dstar_rtl.program.dram import Dram
from dstar_rtl.program.executor import CoreExecutor
from dstar_rtl.sim.dram_programs import (
    every_buffer_program,
    group_stream_program,
    layer_passes_program,
    layer_program,
    tiled_layer_program,
    transfer,
)
from dstar_rtl.sim.dram_timing import DramTiming

from .array_tb import config_from_env
from .core_tb import CoreTB


async def _check(tb, prog, what):
    """Run ``prog`` on the core and on the executor, both DRAMs holding its image (and both
    given its host words, ``extra["host_words"]``, if it has any); compare."""
    cfg = tb.cfg
    dram = Dram(isa.beat_bytes(cfg) << isa.DRAM_ADDR_BITS)
    for a, data in prog.image.items():
        dram.write(a, data)
        tb.ram.write(a, data)
    host = prog.extra.get("host_words", [])
    want = CoreExecutor(cfg, tb.core, dram=dram).run(prog.cmds, host)
    got = await tb.run(prog.cmds, host)
    assert len(got) == len(want), f"{what}: {len(got)} host words, expected {len(want)}"
    base = len(got) - len(isa.COUNTERS)
    assert got[base + isa.COUNTERS.index("busy_D")] > 0, f"{what}: D never busy"
    for i, name in enumerate(isa.COUNTERS):
        if name in isa.CYCLE_COUNTERS:
            got[base + i] = want[base + i]
    assert got == want, f"{what}: host words differ from the executor"
    top = dram.used
    assert bytes(tb.ram.read(0, top)) == dram.read(0, top), f"{what}: DRAM differs"
    tb.dut._log.info(f"{what}: {tb.cycles} cycles, {len(prog.cmds)} commands, "
                     f"{top} DRAM bytes equal")


@cocotb.test()
async def every_buffer_through_dram(dut):
    tb = CoreTB(dut, dram_pause=0.3)
    await tb.reset()
    await _check(tb, every_buffer_program(tb.cfg, cocotb.RANDOM_SEED), "every buffer")


@cocotb.test()
async def a_layer_with_everything_in_dram(dut):
    tb = CoreTB(dut, gap=0.1, stall=0.2, cmd_gap=0.1, dram_pause=0.3)
    await tb.reset()
    await _check(tb, layer_program(tb.cfg, cocotb.RANDOM_SEED), "layer")


@cocotb.test()
async def a_layer_with_its_activations_by_token_tiles(dut):
    """Input, output and state of a layer all by token tiles through DRAM beside the GEMMs."""
    tb = CoreTB(dut, cmd_gap=0.1, dram_pause=0.3)
    await tb.reset()
    await _check(tb, tiled_layer_program(tb.cfg, cocotb.RANDOM_SEED), "tiled layer")


@cocotb.test()
async def group_streams_through_dram(dut):
    """Each tile's group stream out and back: both copies' GEMMs agree with each other and
    with the executor."""
    tb = CoreTB(dut, dram_pause=0.3)
    await tb.reset()
    prog = group_stream_program(tb.cfg, cocotb.RANDOM_SEED)
    await _check(tb, prog, "group streams")


@cocotb.test()
async def a_layer_in_passes_behind_a_deterministic_dram(dut):
    """A layer in two reduction pieces over every token tile (each piece's weights loaded
    before it, the state by token tiles) behind tb.dram_model at half a beat a cycle and 12
    cycles of latency: the executor's host words and DRAM bytes; the same cycles when run
    again; no faster than the DRAM's bandwidth allows."""
    cfg = config_from_env()
    timing = DramTiming(latency=12, bytes_per_cycle=isa.beat_bytes(cfg) / 2)
    tb = CoreTB(dut, dram_timing=timing)
    await tb.reset()
    prog = layer_passes_program(cfg, cocotb.RANDOM_SEED, "chans", 2, steps=2)
    runs = []
    for k in range(2):
        if k:
            await tb.reset()
        before = tb.ram.beats
        await _check(tb, prog, f"layer in passes, run {k}")
        beats = tb.ram.beats - before
        assert tb.cycles * timing.bytes_per_cycle >= beats * isa.beat_bytes(cfg), \
            f"{beats} beats in {tb.cycles} cycles: faster than the DRAM"
        runs.append(tb.cycles)
    assert runs[0] == runs[1], f"cycles differ between two runs: {runs}"


@cocotb.test()
async def an_error_response_stops_the_core(dut):
    """The RAM answers one beat's read with SLVERR (its read raises there): the DLOAD's
    ``dram`` error, and no host word after it."""
    tb = CoreTB(dut)
    await tb.reset()
    cfg = tb.cfg
    bad = 40 * isa.beat_bytes(cfg)
    read = tb.ram.read_if._read

    async def failing(address, length):
        if address == bad:
            raise IndexError(f"no memory at {address:#x}")
        return await read(address, length)

    tb.ram.read_if._read = failing
    cmds = [make_cmd(cfg, "NOP"), transfer(cfg, "DLOAD", "ABUF", 0, 2, 40),
            make_cmd(cfg, "STORE", buf=0, addr=0, count=1), make_cmd(cfg, "END")]
    st = await tb.run_until_error(cmds)
    assert (isa.ERRORS[st["error"]], st["error_index"]) == ("dram", 1), st
    assert tb.out.words == []
