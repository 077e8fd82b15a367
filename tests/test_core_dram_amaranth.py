"""The core's DRAM engine (rtl/core_dram.py) in Amaranth's simulator behind an AXI4 RAM model
(sim/amaranth_axi.py) with random latency and back-pressure: transfers of every buffer equal
the ISA executor (host words, DRAM bytes, event counters); a differential layer over steps with
its weights, requantization rows, inputs, outputs and state moved through DRAM beside the
engines equals the executor and golden.differential.DiffLinear; an error response stops the
core with ``dram``; the dispatcher refuses what the ISA refuses."""

import numpy as np
import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.golden.differential import DiffLinear
from dstar_rtl.golden.layouts import VPU_OPS, pack, unpack
from dstar_rtl.program.compiler import FREE, FULL, make_cmd, rbuf_words, weight_words
from dstar_rtl.program.dram import Dram
from dstar_rtl.program.executor import CoreError, CoreExecutor
from dstar_rtl.program.isa import (
    COUNTERS,
    CYCLE_COUNTERS,
    DRAM_ADDR_BITS,
    DRAM_BUFFERS,
    beat_bytes,
    bytes_to_rows,
    core_for,
    dram_beats,
    dram_row_bytes,
    host_words_per_row,
    row_layout,
    rows_tensor,
    rows_to_bytes,
    store_counters,
    tensor_rows,
    words_to_row,
)
from dstar_rtl.rtl.core import Core
from dstar_rtl.sim.amaranth_core import run_core

_DUTS = {}


def _dut(width, **kw):
    cfg = preset("tiny", dram_width=width, **kw)
    key = cfg.hash()
    if key not in _DUTS:
        _DUTS[key] = Core(cfg, core=core_for(cfg))
    return _DUTS[key]


def _xfer(cfg, op, buf, addr, count, beat, **sem):
    return make_cmd(cfg, op, buf=DRAM_BUFFERS.index(buf), addr=addr, count=count, dram=beat,
                    **sem)


def _both(dut, cmds, image: dict, *, seed=0, latency=(1, 1), stall=0.0):
    """Run ``cmds`` + END on the executor and on the RTL, each with a DRAM holding ``image``
    (``{byte address: bytes}``); the host words must be equal (the counters' but the cycle
    counters, when the program ends with STORE CNT), and so must every DRAM byte."""
    cfg = dut.cfg
    size = beat_bytes(cfg) << DRAM_ADDR_BITS
    drams = [Dram(size), Dram(size)]
    for d in drams:
        for a, data in image.items():
            d.write(a, data)
    prog = list(cmds) + [make_cmd(cfg, "END")]
    ex = CoreExecutor(cfg, core_for(cfg), dram=drams[0])
    want = ex.run(prog)
    r = run_core(dut, prog, [], expect_out=len(want), dram=drams[1], seed=seed,
                 latency=latency, axi_stall=stall, limit=400_000)
    assert r.error == "none", (r.error, r.error_index)
    got = list(r.host_out)
    if prog[-2].op == "STORE" and prog[-2].args == store_counters().args:
        base = len(got) - len(COUNTERS)
        assert got[base + COUNTERS.index("busy_D")] > 0
        for i, name in enumerate(COUNTERS):
            if name in CYCLE_COUNTERS:
                got[base + i] = want[base + i]
    assert got == want
    top = max(d.used for d in drams)
    assert drams[1].read(0, top) == drams[0].read(0, top)
    return r, ex


@pytest.mark.parametrize("width,latency,stall", [(32, (1, 1), 0.0), (64, (0, 7), 0.3),
                                                 (128, (3, 12), 0.5)])
def test_every_buffer_through_dram(width, latency, stall):
    """DLOAD rows of every buffer from a random image (one transfer across a 4 KiB boundary,
    bursts split), DSTORE the four storable ones elsewhere, STORE three to the host and the
    counters."""
    dut = _dut(width)
    cfg = dut.cfg
    B = beat_bytes(cfg)
    rng = np.random.default_rng(width)
    image = {0: rng.integers(0, 256, 16384, dtype=np.uint8).tobytes()}
    page = 4096 // B
    loads = [("ABUF", 5, 37, page - 3), ("XBUF", 3, 20, 7), ("YBUF", 0, 11, 2 * page - 1),
             ("GMEM", 7, 9, 40), ("WMEM", 2, 33, 90), ("RBUF", 1, 6, 130), ("VBUF", 4, 5, 150),
             ("MASK", 0, 7, 170)]
    cmds = [_xfer(cfg, "DLOAD", *t) for t in loads]
    out = 3 * page - 5
    for buf, addr, count, _b in loads[:4]:
        cmds.append(_xfer(cfg, "DSTORE", buf, addr, count, out))
        out += dram_beats(cfg, buf, count) + 1
    cmds += [make_cmd(cfg, "STORE", buf=b, addr=a, count=n) for b, a, n in
             ((0, 5, 37), (1, 3, 20), (2, 0, 11))]
    cmds.append(store_counters())
    r, ex = _both(dut, cmds, image, seed=width, latency=latency, stall=stall)
    # The model saw the bursts split at 4 KiB and at 16 beats.
    assert all(n <= 16 for _a, n in r.axi.reads + r.axi.writes)
    assert any(a % 4096 == 0 for a, _n in r.axi.reads)


def _layer_program(cfg, rng, steps=3):
    """A differential layer (2 token tiles, 2 column blocks) over ``steps`` steps whose
    weights, RBUF rows, inputs and state live in DRAM: x of step s+1 comes in while step s
    runs, y of step s-1 goes out beside it, x̂ and Y go back to DRAM at the end; after the
    last step a modulate VROW (VBUF operands from DRAM) and a softmax (MASK rows from DRAM)."""
    T = cfg.tile
    N, cin, cout = 8, 8, 8
    nt, nob = N // T, cout // T
    W = rng.integers(-127, 128, (cin, cout))
    lay = DiffLinear(W, rng.uniform(0.002, 0.02, cout), cfg, bias=rng.uniform(-1, 1, cout))
    x0 = rng.integers(-3000, 3000, (N, cin))
    xs = [x0] + [x0 + rng.integers(-60, 60, (N, cin)) for _ in range(steps - 1)]
    Bb = beat_bytes(cfg)
    image, at = {}, {}

    def put(name, buf, words):
        b = sum(-(-len(v) // Bb) for v in image.values()) + 4 * len(image)
        data = rows_to_bytes(cfg, buf, words)
        image[b * Bb] = data
        at[name] = (b, len(data))

    def unpack_words(buf, host_words, k):
        lay_ = row_layout(cfg, buf)
        return [pack(lay_, words_to_row(cfg, buf, host_words[i:i + k]))
                for i in range(0, len(host_words), k)]

    put("W", "WMEM", unpack_words("WMEM", weight_words(cfg, lay), host_words_per_row(cfg, "WMEM")))
    put("R", "RBUF", unpack_words("RBUF", rbuf_words(cfg, lay), host_words_per_row(cfg, "RBUF")))
    for s, x in enumerate(xs):
        put(f"x{s}", "ABUF", [pack(row_layout(cfg, "ABUF"), {"v": r})
                              for r in tensor_rows(x, T)])
    vb = rng.integers(-300, 300, (2 * cout // T, T))
    put("V", "VBUF", [pack(row_layout(cfg, "VBUF"), {"v": r}) for r in vb])
    put("M", "MASK", [pack(row_layout(cfg, "MASK"), {"bits": b}) for b in (0b01, 0b11)])
    base = sum(-(-len(v) // Bb) for v in image.values()) + 64     # outputs from here
    gap = dram_beats(cfg, "ABUF", nt * cout) + 1                  # beats per output
    th = cfg.thresholds
    xa = (0, 64)                  # ABUF: x of even / odd steps
    ya = (128, 192)               # ABUF: y of even / odd steps
    yrows = nt * cout
    cmds = [_xfer(cfg, "DLOAD", "WMEM", 0, nob * cin, at["W"][0]),
            _xfer(cfg, "DLOAD", "RBUF", 0, nob, at["R"][0]),
            make_cmd(cfg, "LOAD", buf=1, addr=0, count=nt * cin, zero=1),
            make_cmd(cfg, "LOAD", buf=2, addr=0, count=nt * nob * T, zero=1),
            _xfer(cfg, "DLOAD", "ABUF", xa[0], nt * cin, at["x0"][0]),
            make_cmd(cfg, "BARRIER")]
    out_beats = []
    for s in range(steps):
        if s + 1 < steps:        # the next input comes in beside this step
            cmds.append(_xfer(cfg, "DLOAD", "ABUF", xa[(s + 1) % 2], nt * cin,
                              at[f"x{s + 1}"][0]))
        if s:                    # the last output goes out beside it
            beat = base + (s - 1) * gap
            out_beats.append(beat)
            cmds.append(_xfer(cfg, "DSTORE", "ABUF", ya[(s - 1) % 2], yrows, beat))
        cmds.append(make_cmd(cfg, "QCFG", base_log2=lay.B, thr=[th[2], th[4], th[6]]))
        for tau in range(nt):
            slot = 512 * (tau % 2)
            cmds.append(make_cmd(cfg, "QUANT", signal=FULL, wait=FREE if tau >= 2 else 0,
                                 src=xa[s % 2] + tau * cin, xsrc=tau * cin, nch=cin, gdst=slot,
                                 diff=1))
            for ob in range(nob):
                cmds.append(make_cmd(cfg, "GEMM", wait=FULL if ob == 0 else 0,
                                     signal=FREE if ob == nob - 1 and tau + 2 < nt else 0,
                                     gsrc=slot, wbase=ob * cin, ysrc=(tau * nob + ob) * T,
                                     rrow=ob, dst=ya[s % 2] + tau * cout + ob * T, accum=1))
        cmds.append(make_cmd(cfg, "BARRIER"))
    last = base + (steps - 1) * gap
    out_beats.append(last)
    state = base + steps * gap
    cmds += [_xfer(cfg, "DSTORE", "ABUF", ya[(steps - 1) % 2], yrows, last),
             _xfer(cfg, "DSTORE", "XBUF", 0, nt * cin, state),
             _xfer(cfg, "DSTORE", "YBUF", 0, nt * nob * T,
                   state + dram_beats(cfg, "XBUF", nt * cin) + 1),
             _xfer(cfg, "DLOAD", "VBUF", 0, len(vb), at["V"][0]),
             _xfer(cfg, "DLOAD", "MASK", 0, 2, at["M"][0]),
             make_cmd(cfg, "BARRIER"),
             make_cmd(cfg, "VROW", vop=VPU_OPS.index("modulate"), R=N, n=cout,
                      a=ya[(steps - 1) % 2], C=cout, vb=0, c=cout // T, dst=300),
             make_cmd(cfg, "VROW", vop=VPU_OPS.index("softmax"), R=T, n=N,
                      a=ya[(steps - 1) % 2], C=N, vb=0, dst=400),
             make_cmd(cfg, "STORE", buf=0, addr=300, count=yrows),
             make_cmd(cfg, "STORE", buf=0, addr=400, count=N),
             store_counters()]
    return cmds, image, lay, xs, out_beats, yrows


@pytest.mark.parametrize("width,latency,stall", [(32, (1, 4), 0.2), (64, (0, 10), 0.5)])
def test_a_layer_with_everything_in_dram(width, latency, stall):
    dut = _dut(width)
    cfg = dut.cfg
    cmds, image, lay, xs, out_beats, yrows = _layer_program(cfg, np.random.default_rng(5))
    r, ex = _both(dut, cmds, image, seed=width + 1, latency=latency, stall=stall)
    # The y of each step in DRAM is the golden layer's.
    n = dram_row_bytes(cfg, "ABUF")
    for s, x in enumerate(xs):
        res = lay.step(x)
        rows = bytes_to_rows(cfg, "ABUF", r.dram.read(out_beats[s] * beat_bytes(cfg), yrows * n))
        got = rows_tensor([unpack(row_layout(cfg, "ABUF"), w)["v"] for w in rows], 8, cfg.tile)
        np.testing.assert_array_equal(got, res.y, err_msg=f"y, step {s}")


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
