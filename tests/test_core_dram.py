"""The core's DRAM port at the ISA level (program/isa.py "DRAM image", program/executor.py,
program/dram.py): DLOAD and DSTORE move every buffer's rows through their DRAM image and back
unchanged, write exactly the image's bytes, count their beats and rows, refuse what the ISA
refuses (no port, rows past a buffer, beats past the port), and the hazard checker sees a
transfer that overlaps an engine's rows without a semaphore."""

import numpy as np
import pytest

from dstar_rtl.golden.config import ConfigError, preset
from dstar_rtl.golden.fmdq import quantize_subchannels
from dstar_rtl.golden.layouts import pack
from dstar_rtl.golden.schedule import schedule_tile
from dstar_rtl.program.compiler import FULL, make_cmd
from dstar_rtl.program.dram import Dram
from dstar_rtl.program.executor import CoreError, CoreExecutor
from dstar_rtl.program.hazards import hazards
from dstar_rtl.program.isa import (
    DRAM_ADDR_BITS,
    DRAM_BUFFERS,
    DSTORABLE,
    beat_bytes,
    bytes_to_rows,
    core_for,
    dram_beats,
    dram_row_bytes,
    format_cmd,
    parse_cmd,
    row_layout,
    rows_to_bytes,
)

FILL = 0xA5      # what DRAM holds around a transfer: a DSTORE must leave it


def _core(name="tiny", width=32, **kw):
    cfg = preset(name, dram_width=width, **kw)
    return cfg, core_for(cfg)


def _random_rows(ex, buf, rows, rng):
    """Fill ``rows`` of ``buf`` with random in-range values (GMEM: real group streams)."""
    cfg, T = ex.cfg, ex.T
    if buf == "GMEM":
        x = rng.integers(-3000, 3000, (cfg.max_reduction, T))
        qz = quantize_subchannels(x, cfg, r0=cfg.act_frac - cfg.base_log2)
        groups = schedule_tile(qz.q, qz.b, qz.e, cfg).groups
        for i, r in enumerate(rows):
            ex.gmem[r] = groups[i % len(groups)]
        return
    for r in rows:
        if buf == "RBUF":
            ex.rbuf["m"][r] = rng.integers(1 << (cfg.mult_width - 1), 1 << cfg.mult_width, T)
            ex.rbuf["sh"][r] = rng.integers(0, cfg.sh_max + 1, T)
            ex.rbuf["bias"][r] = rng.integers(-(1 << 15), 1 << 15, T)
        elif buf == "MASK":
            ex.mask[r] = int(rng.integers(0, 1 << max(1, cfg.max_reduction // T)))
        elif buf == "WMEM":
            ex.wmem[r] = rng.integers(-128, 128, cfg.cols)
        else:
            width = {"ABUF": cfg.act_width, "VBUF": cfg.act_width, "XBUF": cfg.xhat_width,
                     "YBUF": cfg.ystate_width}[buf]
            getattr(ex, buf.lower())[r] = rng.integers(-(1 << (width - 1)), 1 << (width - 1), T)


def _xfer(cfg, op, buf, addr, count, dram, **kw):
    return make_cmd(cfg, op, buf=DRAM_BUFFERS.index(buf), addr=addr, count=count, dram=dram,
                    **kw)


def _words(ex, buf, rows):
    """The packed rows (:func:`program.isa.dram_row_layout`) of ``rows`` of ``buf``."""
    cfg = ex.cfg
    if buf == "GMEM":
        return [ex.gmem[r].word(cfg) for r in rows]
    lay = row_layout(cfg, buf)
    if buf == "RBUF":
        return [pack(lay, {k: ex.rbuf[k][r] for k in ("m", "sh", "bias")}) for r in rows]
    if buf == "MASK":
        return [pack(lay, {"bits": ex.mask[r]}) for r in rows]
    if buf == "WMEM":
        return [pack(lay, {"w": ex.wmem[r]}) for r in rows]
    return [pack(lay, {"v": getattr(ex, buf.lower())[r]}) for r in rows]


@pytest.mark.parametrize("name,width", [("tiny", 32), ("fpga", 64)])
@pytest.mark.parametrize("buf", DRAM_BUFFERS)
def test_every_buffer_goes_to_dram_and_back(name, width, buf):
    """DLOAD of an image puts its rows in the buffer; a DSTORE (of the buffers that have one)
    writes the same image back, and nothing else."""
    cfg, core = _core(name, width)
    rng = np.random.default_rng(DRAM_BUFFERS.index(buf) + width)
    src = CoreExecutor(cfg, core)
    count, beat = 5, 3
    _random_rows(src, buf, range(count), rng)
    want = _words(src, buf, range(count))
    image = rows_to_bytes(cfg, buf, want)
    Bb, beats = beat_bytes(cfg), dram_beats(cfg, buf, count)
    assert len(image) == count * dram_row_bytes(cfg, buf) and beats == -(-len(image) // Bb)
    ex = CoreExecutor(cfg, core)
    ex.dram.write(0, bytes([FILL]) * ((beat + beats + 2) * Bb))
    ex.dram.write(beat * Bb, image)
    ex.run([_xfer(cfg, "DLOAD", buf, 9, count, beat)])
    assert _words(ex, buf, range(9, 9 + count)) == want
    assert ex.counters["dram_read_beats"] == beats
    row_counter = {"ABUF": "abuf_writes", "XBUF": "xbuf_writes", "YBUF": "ybuf_writes",
                   "WMEM": "wmem_writes", "GMEM": "gmem_writes"}.get(buf)
    if row_counter:
        assert ex.counters[row_counter] == count
    if buf not in DSTORABLE:
        with pytest.raises(CoreError) as e:
            ex.run([_xfer(cfg, "DSTORE", buf, 9, count, 0)])
        assert e.value.code == "operand"
        return
    # Back out to other beats: the same image, and only the image's bytes written.
    out = beat + beats + 4
    ex.dram.write(out * Bb, bytes([FILL]) * ((beats + 2) * Bb))
    ex.run([_xfer(cfg, "DSTORE", buf, 9, count, out)])
    assert ex.dram.read(out * Bb, len(image)) == image
    assert set(ex.dram.read(out * Bb + len(image), (beats + 2) * Bb - len(image))) == {FILL}
    assert set(ex.dram.read((out - 1) * Bb, Bb)) == {0}
    assert ex.counters["dram_write_beats"] == beats


def test_the_image_is_the_rows_bytes_in_order():
    cfg, core = _core("tiny", 32)
    ex = CoreExecutor(cfg, core)
    ex.xbuf[0:3] = [[1, -1, 2, -2], [3, 4, 5, 6], [-7, 0, 0, 7]]
    ex.run([_xfer(cfg, "DSTORE", "XBUF", 0, 3, 0)])
    n = dram_row_bytes(cfg, "XBUF")                  # 68 bits: 9 bytes
    assert n == 9
    rows = bytes_to_rows(cfg, "XBUF", ex.dram.read(0, 3 * n))
    w = cfg.xhat_width
    first = sum((v & ((1 << w) - 1)) << (w * i) for i, v in enumerate([1, -1, 2, -2]))
    assert rows[0] == first
    assert dram_beats(cfg, "XBUF", 3) == 7           # 27 bytes in 4-byte beats


def test_zero_count_moves_nothing():
    cfg, core = _core()
    ex = CoreExecutor(cfg, core)
    ex.run([_xfer(cfg, "DLOAD", "ABUF", 0, 0, 0), _xfer(cfg, "DSTORE", "ABUF", 0, 0, 0)])
    assert ex.counters["dram_read_beats"] == ex.counters["dram_write_beats"] == 0
    assert ex.dram.used == 0


def test_without_a_port_the_transfers_are_unknown_opcodes():
    cfg = preset("tiny")
    assert cfg.dram_width == 0
    ex = CoreExecutor(cfg, core_for(cfg))
    assert ex.dram is None
    with pytest.raises(CoreError) as e:
        ex.run([make_cmd(cfg, "NOP"), _xfer(cfg, "DLOAD", "ABUF", 0, 1, 0)])
    assert e.value.code == "opcode" and e.value.index == 1
    assert ex.counters["commands"] == 1             # the refused command is not counted


@pytest.mark.parametrize("op", ["DLOAD", "DSTORE"])
def test_address_errors(op):
    cfg, core = _core()
    ex = CoreExecutor(cfg, core)
    with pytest.raises(CoreError) as e:
        ex.run([_xfer(cfg, op, "YBUF", core.ybuf_rows - 1, 2, 0)])
    assert e.value.code == "address"
    ex.reset()
    last = (1 << DRAM_ADDR_BITS) - 1
    with pytest.raises(CoreError) as e:
        ex.run([_xfer(cfg, op, "ABUF", 0, 1, last)])      # two beats from the last one
    assert e.value.code == "address" and "beats" in str(e.value)


def test_a_group_stream_from_dram_multiplies_the_same():
    """A P-cache-like round trip: QUANT a tile, DSTORE its groups, DLOAD them elsewhere; the
    GEMM of the reloaded groups writes what the GEMM of the originals wrote."""
    cfg, core = _core("tiny", 64)
    T = cfg.tile
    ex = CoreExecutor(cfg, core)
    rng = np.random.default_rng(3)
    ex.abuf[0:8] = rng.integers(-2000, 2000, (8, T))
    ex.wmem[0:8] = rng.integers(-128, 128, (8, T))
    ex.rbuf["m"][0], ex.rbuf["sh"][0] = 1 << (cfg.mult_width - 1), 12
    ex.run([make_cmd(cfg, "QUANT", src=0, nch=8, gdst=0)])
    n = ex.counters["gmem_writes"]
    ex.run([_xfer(cfg, "DSTORE", "GMEM", 0, n, 40),
            _xfer(cfg, "DLOAD", "GMEM", 100, n, 40),
            make_cmd(cfg, "GEMM", gsrc=0, wbase=0, rrow=0, dst=64),
            make_cmd(cfg, "GEMM", gsrc=100, wbase=0, rrow=0, dst=64 + T)])
    np.testing.assert_array_equal(ex.abuf[64:64 + T], ex.abuf[64 + T:64 + 2 * T])
    assert [g.record()["last"] for g in ex.gmem[100:100 + n]][-1] == 1


def test_transfers_assemble_and_parse():
    cfg, _ = _core("fpga", 64)
    c = _xfer(cfg, "DSTORE", "GMEM", 7, 12, 123456, wait=1 << 5, signal=1 << 4)
    line = format_cmd(c)
    assert "buf=GMEM" in line and "dram=123456" in line
    assert parse_cmd(cfg, line) == c


def test_dram_width_is_checked():
    with pytest.raises(ConfigError, match="dram_width must be 0 .* not 48"):
        preset("tiny", dram_width=48)
    # A configuration without a port keeps its hash (the parameter came later).
    assert preset("fpga").hash() == preset("fpga", dram_width=0).hash()
    assert preset("fpga").hash() != preset("fpga", dram_width=64).hash()


def test_dram_refuses_bytes_outside_it():
    d = Dram(16)
    d.write(12, b"\x01\x02\x03\x04")
    assert d.read(10, 6) == b"\x00\x00\x01\x02\x03\x04"
    with pytest.raises(ValueError, match="outside 0..15"):
        d.write(14, b"abc")


def _hazard_program(cfg, wait):
    """A QUANT that updates x̂ rows 0..7 and a DSTORE of those rows behind it: safe only if
    the DSTORE waits for the QUANT's signal."""
    return [make_cmd(cfg, "QUANT", signal=FULL, src=0, xsrc=0, nch=8, gdst=0, diff=1),
            _xfer(cfg, "DSTORE", "XBUF", 0, 8, 0, wait=FULL if wait else 0),
            make_cmd(cfg, "NOP", wait=0 if wait else FULL),
            make_cmd(cfg, "END")]


def test_a_transfer_beside_an_engine_is_checked_for_hazards():
    cfg, core = _core("tiny", 32)
    found = hazards(cfg, core, [(_hazard_program(cfg, wait=False), [])])
    assert found and found[0][1].buffer == "XBUF" and found[0][1].kind == "RAW"
    assert hazards(cfg, core, [(_hazard_program(cfg, wait=True), [])]) == []


def test_a_group_stream_moves_its_groups_and_a_header():
    """DSTORE with ``groups`` writes the header beat (the stream's rows) and the groups through
    the first ``last`` one, not the rows reserved for them; DLOAD with ``groups`` brings exactly
    those back; a DLOAD whose ``count`` is below the header's rows is ``dram``; ``groups`` on
    another buffer is ``operand``."""
    cfg, core = _core("tiny", 32)
    T, B = cfg.tile, beat_bytes(cfg)
    ex = CoreExecutor(cfg, core)
    rng = np.random.default_rng(9)
    ex.abuf[0:8] = rng.integers(-2000, 2000, (8, T)) * (rng.random((8, 1)) < 0.5)
    ex.run([make_cmd(cfg, "QUANT", src=0, nch=8, gdst=0)])
    n = ex.counters["gmem_writes"]
    assert 1 <= n < 32
    ex.run([_xfer(cfg, "DSTORE", "GMEM", 0, 32, 10, groups=1)])
    assert int.from_bytes(ex.dram.read(10 * B, B), "little") == n
    assert ex.counters["dram_write_beats"] == 1 + dram_beats(cfg, "GMEM", n)
    ex.run([_xfer(cfg, "DLOAD", "GMEM", 40, 32, 10, groups=1)])
    assert [g.word(cfg) for g in ex.gmem[40:40 + n]] == [g.word(cfg) for g in ex.gmem[0:n]]
    assert ex.counters["dram_read_beats"] == 1 + dram_beats(cfg, "GMEM", n)
    assert ex.counters["gmem_writes"] == 2 * n
    with pytest.raises(CoreError) as e:
        ex.run([_xfer(cfg, "DLOAD", "GMEM", 40, n - 1, 10, groups=1)])
    assert e.value.code == "dram"
    ex.reset()
    with pytest.raises(CoreError) as e:
        ex.run([_xfer(cfg, "DSTORE", "ABUF", 0, 4, 0, groups=1)])
    assert e.value.code == "operand"
