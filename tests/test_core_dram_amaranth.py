"""The core's DRAM engine (rtl/core_dram.py) in Amaranth's simulator behind an AXI4 RAM model
(sim/amaranth_axi.py) with random latency and back-pressure: transfers of every buffer equal
the ISA executor (host words, DRAM bytes, event counters); a differential layer over steps with
its weights, requantization rows, inputs, outputs and state moved through DRAM beside the
engines equals the executor and golden.differential.DiffLinear; an error response stops the
core with ``dram``; the dispatcher refuses what the ISA refuses. The programs run in make
regress here (the fast tier runs them on both simulators, tb/test_core_dram.py)."""

import numpy as np
import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.golden.layouts import unpack
from dstar_rtl.program.compiler import make_cmd
from dstar_rtl.program.dram import Dram
from dstar_rtl.program.executor import CoreError, CoreExecutor
from dstar_rtl.program.isa import (
    COUNTERS,
    CYCLE_COUNTERS,
    DRAM_ADDR_BITS,
    beat_bytes,
    bytes_to_rows,
    core_for,
    dram_beats,
    dram_row_bytes,
    host_words_per_row,
    row_layout,
    rows_tensor,
)
from dstar_rtl.rtl.core import Core
from dstar_rtl.sim.amaranth_core import run_core
from dstar_rtl.sim.dram_programs import (
    every_buffer_program,
    group_stream_program,
    layer_program,
    tiled_layer_program,
    transfer,
)

_DUTS = {}


def _dut(width, **kw):
    cfg = preset("tiny", dram_width=width, **kw)
    key = cfg.hash()
    if key not in _DUTS:
        _DUTS[key] = Core(cfg, core=core_for(cfg))
    return _DUTS[key]


def _xfer(cfg, op, buf, addr, count, beat):
    return transfer(cfg, op, buf, addr, count, beat)


def _both(dut, prog, *, seed=0, latency=(1, 1), stall=0.0):
    """Run ``prog`` (a :class:`sim.dram_programs.DramProgram`) on the executor and on the RTL,
    each with a DRAM holding its image; the host words must be equal (the counters' but the
    cycle counters: the program ends with STORE CNT, END), and so must every DRAM byte."""
    cfg = dut.cfg
    size = beat_bytes(cfg) << DRAM_ADDR_BITS
    drams = [Dram(size), Dram(size)]
    for d in drams:
        for a, data in prog.image.items():
            d.write(a, data)
    ex = CoreExecutor(cfg, core_for(cfg), dram=drams[0])
    want = ex.run(prog.cmds)
    r = run_core(dut, prog.cmds, [], expect_out=len(want), dram=drams[1], seed=seed,
                 latency=latency, axi_stall=stall, limit=400_000)
    assert r.error == "none", (r.error, r.error_index)
    got = list(r.host_out)
    base = len(got) - len(COUNTERS)
    assert got[base + COUNTERS.index("busy_D")] > 0
    for i, name in enumerate(COUNTERS):
        if name in CYCLE_COUNTERS:
            got[base + i] = want[base + i]
    assert got == want
    top = max(d.used for d in drams)
    assert drams[1].read(0, top) == drams[0].read(0, top)
    return r


@pytest.mark.slow
@pytest.mark.parametrize("width,latency,stall", [(32, (1, 1), 0.0), (128, (3, 12), 0.5)])
def test_every_buffer_through_dram(width, latency, stall):
    """sim.dram_programs.every_buffer_program: the bursts split at 16 beats and at 4 KiB."""
    dut = _dut(width)
    r = _both(dut, every_buffer_program(dut.cfg, width), seed=width, latency=latency,
              stall=stall)
    assert all(n <= 16 for _a, n in r.axi.reads + r.axi.writes)
    assert any(a % 4096 == 0 for a, _n in r.axi.reads)


@pytest.mark.slow
@pytest.mark.parametrize("width,latency,stall", [(32, (0, 10), 0.5)])
def test_a_layer_with_everything_in_dram(width, latency, stall):
    """sim.dram_programs.layer_program; each step's y in DRAM is the golden layer's."""
    dut = _dut(width)
    cfg = dut.cfg
    prog = layer_program(cfg, 5)
    r = _both(dut, prog, seed=width + 1, latency=latency, stall=stall)
    lay, yrows = prog.extra["layer"], prog.extra["yrows"]
    n = dram_row_bytes(cfg, "ABUF")
    for s, x in enumerate(prog.extra["xs"]):
        res = lay.step(x)
        at = prog.extra["out_beats"][s] * beat_bytes(cfg)
        rows = bytes_to_rows(cfg, "ABUF", r.dram.read(at, yrows * n))
        got = rows_tensor([unpack(row_layout(cfg, "ABUF"), w)["v"] for w in rows],
                          len(x), cfg.tile)
        np.testing.assert_array_equal(got, res.y, err_msg=f"y, step {s}")


@pytest.mark.slow
@pytest.mark.parametrize("width,latency,stall", [(32, (1, 3), 0.2)])
def test_group_streams_through_dram(width, latency, stall):
    """sim.dram_programs.group_stream_program: each tile's groups out as a group stream and
    back; the GEMMs of both copies agree (and equal the executor's); a DLOAD too short for a
    stream sets ``dram``."""
    dut = _dut(width)
    prog = group_stream_program(dut.cfg, width)
    r = _both(dut, prog, seed=width + 2, latency=latency, stall=stall)
    n = prog.extra["words"] * host_words_per_row(dut.cfg, "ABUF")
    assert r.host_out[:n] == r.host_out[n:2 * n] and any(r.host_out[:n])
    # Only the streams' groups and headers moved, not the rows reserved for them: the
    # sparse tiles' streams are shorter than the dense ones', all below the reservation.
    moved = sum(n for _a, n in r.axi.writes)
    assert moved < 6 * (1 + dram_beats(dut.cfg, "GMEM", 4 * 16))
    short = run_core(dut, prog.extra["short"], [], dram=r.dram)
    assert (short.error, short.error_index) == ("dram", 0)


def test_an_error_response_stops_the_core():
    dut = _dut(32)
    cfg = dut.cfg
    B = beat_bytes(cfg)
    cmds = [make_cmd(cfg, "NOP"), _xfer(cfg, "DLOAD", "ABUF", 0, 4, 10), make_cmd(cfg, "END")]
    r = run_core(dut, cmds, [], axi_errors={10 * B})
    assert (r.error, r.error_index) == ("dram", 1)
    cmds = [_xfer(cfg, "DSTORE", "XBUF", 0, 4, 20), make_cmd(cfg, "END")]
    r = run_core(dut, cmds, [], axi_errors={20 * B})
    assert (r.error, r.error_index) == ("dram", 0)


@pytest.mark.parametrize("cmd,code", [
    (lambda c: _xfer(c, "DLOAD", "YBUF", 510, 4, 0), "address"),
    (lambda c: _xfer(c, "DSTORE", "WMEM", 0, 1, 0), "operand"),
    (lambda c: _xfer(c, "DLOAD", "ABUF", 0, 2, (1 << DRAM_ADDR_BITS) - 1), "address"),
])
def test_the_dispatcher_refuses_what_the_isa_refuses(cmd, code):
    dut = _dut(32)
    cfg = dut.cfg
    c = cmd(cfg)
    with pytest.raises(CoreError) as e:
        CoreExecutor(cfg, core_for(cfg)).run([c])
    assert e.value.code == code
    r = run_core(dut, [c, make_cmd(cfg, "END")], [])
    assert (r.error, r.error_index) == (code, 0)


def test_a_core_without_a_port_refuses_the_transfers():
    cfg = preset("tiny")
    dut = Core(cfg, core=core_for(cfg))
    assert not hasattr(dut, "dram")
    r = run_core(dut, [_xfer(cfg, "DLOAD", "ABUF", 0, 1, 0), make_cmd(cfg, "END")], [])
    assert (r.error, r.error_index) == ("opcode", 0)


@pytest.mark.slow
@pytest.mark.parametrize("width,latency,stall", [(32, (0, 9), 0.4)])
def test_a_layer_with_its_activations_by_token_tiles(width, latency, stall):
    """sim.dram_programs.tiled_layer_program: input, output and state of a layer in two
    reduction pieces, all by token tiles through DRAM beside the GEMMs; each step's output in
    DRAM is the golden layer's, and the program has no hazard."""
    from dstar_rtl.program.hazards import check_program

    dut = _dut(width)
    cfg = dut.cfg
    prog = tiled_layer_program(cfg, 7)
    assert check_program(cfg, core_for(cfg), [(prog.cmds, [])]) == 0
    r = _both(dut, prog, seed=width + 3, latency=latency, stall=stall)
    lay, T = prog.extra["layer"], cfg.tile
    n = dram_row_bytes(cfg, "ABUF")
    for s, x in enumerate(prog.extra["xs"]):
        res = lay.step(x)
        beat, stride = prog.extra["out"][s]
        rows = [w for t in range(len(x) // T) for w in bytes_to_rows(
            cfg, "ABUF", r.dram.read((beat + t * stride) * beat_bytes(cfg), 2 * T * n))]
        got = rows_tensor([unpack(row_layout(cfg, "ABUF"), w)["v"] for w in rows], len(x), T)
        np.testing.assert_array_equal(got, res.y, err_msg=f"y, step {s}")
