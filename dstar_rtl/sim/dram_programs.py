"""Core programs that exercise the DRAM port (docs/core.md §9), shared by the Amaranth-simulator
tests (tests/test_core_dram_amaranth.py) and the cocotb testbench (tb/test_core_dram.py): each
is commands and the DRAM image they start from; the ISA executor gives the expected host words
and DRAM bytes.

* :func:`every_buffer_program`: DLOAD rows of every buffer from a random image (one transfer
  across a 4 KiB boundary), DSTORE the storable ones elsewhere, STORE three to the host and the
  counters.
* :func:`layer_program`: a differential layer (2 token tiles, 2 column blocks) over two steps
  whose weights, RBUF rows, inputs and outputs move through DRAM beside the Q and M engines (the
  next step's input comes in and the last step's output goes out while a step runs), its state
  stored to DRAM at the end, then a modulate VROW with VBUF operands and a softmax with MASK
  rows from DRAM.
* :func:`tiled_layer_program`: a differential layer whose input, output and state all move
  by token tiles through DRAM (program.compiler.emit_layer's StateStream).
* :func:`layer_passes_program`: a differential layer in passes (output column blocks, or
  reduction pieces over every token tile), each pass's weights loaded before it, its state by
  token tiles through DRAM (program.compiler.emit_layer ``blocks``/``chans``).
* :func:`group_stream_program`: QUANT tiles of random activations into GMEM, each group
  stream out to DRAM as a group stream (header and its groups only) and back into other GMEM
  rows, GEMMs from both copies; the outputs stored to the host must agree, and a stream whose
  header names more rows than its DLOAD takes sets ``dram`` (the executor says where).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.differential import DiffLinear
from dstar_rtl.golden.layouts import VPU_OPS, pack
from dstar_rtl.program.compiler import FREE, FULL, make_cmd, rbuf_words, weight_words
from dstar_rtl.program.isa import (
    BUFFERS,
    DRAM_BUFFERS,
    beat_bytes,
    dram_beats,
    dram_row_bytes,
    host_words_per_row,
    row_layout,
    rows_to_bytes,
    store_counters,
    tensor_rows,
    words_to_row,
)

__all__ = ["DramProgram", "every_buffer_program", "layer_program", "group_stream_program",
           "tiled_layer_program", "layer_passes_program", "transfer"]


@dataclass
class DramProgram:
    """``cmds`` (ending with END), ``image`` (``{byte address: bytes}`` DRAM holds before), and
    what a check of the results needs (``extra``)."""

    cmds: list
    image: dict
    extra: dict = field(default_factory=dict)


def transfer(cfg: Config, op: str, buf: str, addr: int, count: int, beat: int, **kw):
    """A DLOAD or DSTORE of ``count`` rows of ``buf`` from row ``addr`` at DRAM beat ``beat``
    (``kw``: ``wait``, ``signal``, ``groups``)."""
    return make_cmd(cfg, op, buf=DRAM_BUFFERS.index(buf), addr=addr, count=count, dram=beat,
                    **kw)


def every_buffer_program(cfg: Config, seed: int) -> DramProgram:
    """Module docstring."""
    B = beat_bytes(cfg)
    rng = np.random.default_rng(seed)
    image = {0: rng.integers(0, 256, 16384, dtype=np.uint8).tobytes()}
    page = 4096 // B
    loads = [("ABUF", 5, 37, page - 3), ("XBUF", 3, 20, 7), ("YBUF", 0, 11, 2 * page - 1),
             ("GMEM", 7, 9, 40), ("WMEM", 2, 33, 90), ("RBUF", 1, 6, 130), ("VBUF", 4, 5, 150),
             ("MASK", 0, 7, 170)]
    cmds = [transfer(cfg, "DLOAD", *t) for t in loads]
    out = 3 * page - 5
    for buf, addr, count, _b in loads[:4]:
        cmds.append(transfer(cfg, "DSTORE", buf, addr, count, out))
        out += dram_beats(cfg, buf, count) + 1
    cmds += [make_cmd(cfg, "STORE", buf=BUFFERS.index(b), addr=a, count=n)
             for b, a, n in (("ABUF", 5, 37), ("XBUF", 3, 20), ("YBUF", 0, 11))]
    cmds += [store_counters(), make_cmd(cfg, "END")]
    return DramProgram(cmds, image)


def _rows_of_words(cfg, buf, host_words):
    """Host words of rows of ``buf`` → the packed rows (their DRAM image's integers)."""
    k, lay = host_words_per_row(cfg, buf), row_layout(cfg, buf)
    return [pack(lay, words_to_row(cfg, buf, host_words[i:i + k]))
            for i in range(0, len(host_words), k)]


def layer_program(cfg: Config, seed: int, steps: int = 2) -> DramProgram:
    """Module docstring. ``extra``: ``layer`` (the DiffLinear), ``xs`` (the inputs of the
    steps), ``out_beats`` (the DRAM beat of each step's output), ``yrows`` (its rows)."""
    rng = np.random.default_rng(seed)
    T = cfg.tile
    N, cin, cout = 2 * T, 8, 2 * T
    nt, nob = N // T, cout // T
    W = rng.integers(-127, 128, (cin, cout))
    lay = DiffLinear(W, rng.uniform(0.002, 0.02, cout), cfg, bias=rng.uniform(-1, 1, cout))
    x0 = rng.integers(-3000, 3000, (N, cin))
    xs = [x0] + [x0 + rng.integers(-60, 60, (N, cin)) for _ in range(steps - 1)]
    Bb = beat_bytes(cfg)
    image, at = {}, {}

    def put(name, buf, rows):
        beat = sum(-(-len(v) // Bb) for v in image.values()) + 4 * len(image)
        data = rows_to_bytes(cfg, buf, rows)
        image[beat * Bb] = data
        at[name] = beat

    def vrows(buf, values):
        return [pack(row_layout(cfg, buf), {"v": r}) for r in values]

    put("W", "WMEM", _rows_of_words(cfg, "WMEM", weight_words(cfg, lay)))
    put("R", "RBUF", _rows_of_words(cfg, "RBUF", rbuf_words(cfg, lay)))
    for s, x in enumerate(xs):
        put(f"x{s}", "ABUF", vrows("ABUF", tensor_rows(x, T)))
    vb = rng.integers(-300, 300, (2 * cout // T, T))
    put("V", "VBUF", vrows("VBUF", vb))
    put("M", "MASK", [pack(row_layout(cfg, "MASK"), {"bits": b}) for b in (0b01, 0b11)])
    base = sum(-(-len(v) // Bb) for v in image.values()) + 64     # outputs from here
    yrows = nt * cout
    gap = dram_beats(cfg, "ABUF", yrows) + 1                      # beats per output
    th = cfg.thresholds
    xa = (0, 64)                  # ABUF: x of even / odd steps
    ya = (128, 192)               # ABUF: y of even / odd steps
    cmds = [transfer(cfg, "DLOAD", "WMEM", 0, nob * cin, at["W"]),
            transfer(cfg, "DLOAD", "RBUF", 0, nob, at["R"]),
            make_cmd(cfg, "LOAD", buf=BUFFERS.index("XBUF"), addr=0, count=nt * cin, zero=1),
            make_cmd(cfg, "LOAD", buf=BUFFERS.index("YBUF"), addr=0, count=nt * nob * T,
                     zero=1),
            transfer(cfg, "DLOAD", "ABUF", xa[0], nt * cin, at["x0"]),
            make_cmd(cfg, "BARRIER")]
    out_beats = [base + s * gap for s in range(steps)]
    for s in range(steps):
        if s + 1 < steps:        # the next input comes in beside this step
            cmds.append(transfer(cfg, "DLOAD", "ABUF", xa[(s + 1) % 2], nt * cin,
                                 at[f"x{s + 1}"]))
        if s:                    # the last output goes out beside it
            cmds.append(transfer(cfg, "DSTORE", "ABUF", ya[(s - 1) % 2], yrows,
                                 out_beats[s - 1]))
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
    state = base + steps * gap
    y_last = ya[(steps - 1) % 2]
    cmds += [transfer(cfg, "DSTORE", "ABUF", y_last, yrows, out_beats[-1]),
             transfer(cfg, "DSTORE", "XBUF", 0, nt * cin, state),
             transfer(cfg, "DSTORE", "YBUF", 0, nt * nob * T,
                      state + dram_beats(cfg, "XBUF", nt * cin) + 1),
             transfer(cfg, "DLOAD", "VBUF", 0, len(vb), at["V"]),
             transfer(cfg, "DLOAD", "MASK", 0, 2, at["M"]),
             make_cmd(cfg, "BARRIER"),
             make_cmd(cfg, "VROW", vop=VPU_OPS.index("modulate"), R=N, n=cout, a=y_last, C=cout,
                      vb=0, c=cout // T, dst=300),
             make_cmd(cfg, "VROW", vop=VPU_OPS.index("softmax"), R=T, n=N, a=y_last, C=N,
                      vb=0, dst=400),
             make_cmd(cfg, "STORE", buf=BUFFERS.index("ABUF"), addr=300, count=yrows),
             make_cmd(cfg, "STORE", buf=BUFFERS.index("ABUF"), addr=400, count=N),
             store_counters(), make_cmd(cfg, "END")]
    return DramProgram(cmds, image, dict(layer=lay, xs=xs, out_beats=out_beats, yrows=yrows))


def group_stream_program(cfg: Config, seed: int, tiles: int = 3) -> DramProgram:
    """Module docstring (the DSTAR datapath's groups; the INT8 core's work alike)."""
    rng = np.random.default_rng(seed)
    T = cfg.tile
    nch = min(cfg.max_reduction, 4 * T)
    rows = 4 * nch                                  # compiler.group_rows: the worst case
    abuf = BUFFERS.index("ABUF")
    cmds, image = [], {}
    x = rng.integers(-3000, 3000, (tiles * nch, T))
    xs = rng.integers(-3000, 3000, (tiles * nch, T)) * (rng.random((tiles * nch, 1)) < 0.4)
    image[0] = rows_to_bytes(cfg, "ABUF", [pack(row_layout(cfg, "ABUF"), {"v": r})
                                          for r in np.concatenate([x, xs])])
    w = rng.integers(-128, 128, (nch, T))
    wb = dram_beats(cfg, "ABUF", 2 * tiles * nch) + 2
    image[wb * beat_bytes(cfg)] = rows_to_bytes(cfg, "WMEM", [
        pack(row_layout(cfg, "WMEM"), {"w": r}) for r in w])
    rrow = {"m": [1 << (cfg.mult_width - 1)] * T, "sh": [12] * T, "bias": [0] * T}
    rbb = wb + dram_beats(cfg, "WMEM", nch) + 2
    image[rbb * beat_bytes(cfg)] = rows_to_bytes(cfg, "RBUF", [pack(row_layout(cfg, "RBUF"),
                                                                    rrow)])
    cmds += [transfer(cfg, "DLOAD", "ABUF", 0, 2 * tiles * nch, 0),
             transfer(cfg, "DLOAD", "WMEM", 0, nch, wb),
             transfer(cfg, "DLOAD", "RBUF", 0, 1, rbb), make_cmd(cfg, "BARRIER")]
    stream_at = rbb + 8
    span = 1 + dram_beats(cfg, "GMEM", rows)
    gemms_a, gemms_b = [], []
    for k in range(2 * tiles):          # dense tiles, then sparse ones (few groups)
        g0, g1 = (k % 2) * rows, 2 * rows + (k % 2) * rows
        beat = stream_at + k * (span + 1)
        cmds += [make_cmd(cfg, "QUANT", src=k * nch, nch=nch, gdst=g0),
                 make_cmd(cfg, "BARRIER"),
                 transfer(cfg, "DSTORE", "GMEM", g0, rows, beat, groups=1),
                 transfer(cfg, "DLOAD", "GMEM", g1, rows, beat, groups=1),
                 make_cmd(cfg, "BARRIER"),
                 make_cmd(cfg, "GEMM", gsrc=g0, wbase=0, rrow=0, dst=1024 + k * T),
                 make_cmd(cfg, "GEMM", gsrc=g1, wbase=0, rrow=0, dst=1536 + k * T),
                 make_cmd(cfg, "BARRIER")]
        gemms_a.append(1024 + k * T)
        gemms_b.append(1536 + k * T)
    cmds += [make_cmd(cfg, "STORE", buf=abuf, addr=1024, count=2 * tiles * T),
             make_cmd(cfg, "STORE", buf=abuf, addr=1536, count=2 * tiles * T),
             store_counters(), make_cmd(cfg, "END")]
    # A DLOAD that takes fewer rows than the last stream holds: the ``dram`` error.
    short = [transfer(cfg, "DLOAD", "GMEM", 0, 0, stream_at, groups=1), make_cmd(cfg, "END")]
    return DramProgram(cmds, image, dict(words=2 * tiles * T, short=short))


def tiled_layer_program(cfg: Config, seed: int, steps: int = 2, tokens: int = 4) -> DramProgram:
    """A differential layer (``tokens`` token tiles, 2 column blocks, 2 pieces) over ``steps``
    steps with **everything** moved by token tiles through DRAM by :func:`program.compiler.
    emit_layer`: each step's input tiles come in and its output tiles go out beside the
    GEMMs with the state's (three windows each), nothing of the layer's activations or state
    resident. ``extra``: ``layer``, ``xs``, ``out`` (per step the DRAM beat of the output's tile
    0 and the beats between tiles)."""
    from dstar_rtl.program.compiler import Emitter, Region, StateStream, TileStream, emit_layer

    T = cfg.tile
    N, cin, cout = tokens * T, 2 * T, 2 * T
    nt, nob = N // T, cout // T
    lay, xs = _random_layer(cfg, seed, N, cin, cout, steps, 2)
    W = lay.W
    Bb = beat_bytes(cfg)

    def stride(buf, rows):
        return -(-rows * dram_row_bytes(cfg, buf) // Bb)

    image, at = {}, 0

    def place(buf, rows, data=None):
        """A DRAM object of ``nt`` tiles of ``rows`` rows each: its first beat."""
        nonlocal at
        first = at
        if data is not None:
            for t in range(nt):
                image[(first + t * stride(buf, rows)) * Bb] = rows_to_bytes(
                    cfg, buf, data[t * rows:(t + 1) * rows])
        at += nt * stride(buf, rows) + 2
        return first

    wrows = [pack(row_layout(cfg, "WMEM"), {"w": W[c, j * T:(j + 1) * T]})
             for j in range(nob) for c in range(cin)]
    image[at * Bb] = rows_to_bytes(cfg, "WMEM", wrows)
    wbeat = at
    at += dram_beats(cfg, "WMEM", len(wrows)) + 2
    rrows = _rows_of_words(cfg, "RBUF", rbuf_words(cfg, lay))
    image[at * Bb] = rows_to_bytes(cfg, "RBUF", rrows)
    rbeat = at
    at += dram_beats(cfg, "RBUF", len(rrows)) + 2
    ins = [place("ABUF", cin, [pack(row_layout(cfg, "ABUF"), {"v": r})
                               for r in tensor_rows(x, T)]) for x in xs]
    outs = [place("ABUF", cout) for _ in xs]
    xbeat, ybeat = place("XBUF", cin), place("YBUF", cout)
    # Buffers: three windows of each; GMEM's two slots.
    win = {b: tuple(i * 64 for i in range(3)) for b in ("XBUF", "YBUF")}
    ain_w, aout_w = tuple(256 + i * 64 for i in range(3)), tuple(512 + i * 64 for i in range(3))
    R = {"slot0": Region("GMEM", "s0", 0, 4 * cin), "slot1": Region("GMEM", "s1", 512, 4 * cin),
         "x": Region("ABUF", "x", ain_w[0], cin), "L.y": Region("ABUF", "y", aout_w[0], cout),
         "L.xhat": Region("XBUF", "xh", 0, cin), "L.Y": Region("YBUF", "Y", 0, cout),
         "L.W": Region("WMEM", "W", 0, nob * cin), "L.r": Region("RBUF", "r", 0, nob)}
    e = Emitter(cfg)
    e.dram("DLOAD", "WMEM", R["L.W"], wbeat)
    e.dram("DLOAD", "RBUF", R["L.r"], rbeat)
    e("BARRIER")
    for s in range(steps):
        st = StateStream(TileStream(win["XBUF"], xbeat, stride("XBUF", cin)),
                         TileStream(win["YBUF"], ybeat, stride("YBUF", cout)),
                         TileStream(ain_w, ins[s], stride("ABUF", cin)),
                         TileStream(aout_w, outs[s], stride("ABUF", cout)))
        emit_layer(e, cfg, lay, N, R, "L", "x", pieces=2, stream=st)
    cmds = e.cmds + [store_counters(), make_cmd(cfg, "END")]
    return DramProgram(cmds, image, dict(layer=lay, xs=xs,
                                         out=[(b, stride("ABUF", cout)) for b in outs]))


def layer_passes_program(cfg: Config, seed: int, split: str, passes: int = 2,
                         steps: int = 3, tokens: int = 3) -> DramProgram:
    """A differential layer (``tokens`` token tiles, ``2·T`` inputs and ``4·T`` outputs) run as
    ``passes`` passes of :func:`program.compiler.emit_layer` (``split``: ``"blocks"``, each pass
    a range of output column blocks, or ``"chans"``, each a reduction piece over every token
    tile, the golden layer in the same pieces) over ``steps`` steps: each pass's weights and
    RBUF rows loaded into one window before it, ``x̂`` and ``Y`` by token tiles through DRAM,
    the input and output in ABUF (a piece reads its own input tensor; every piece but the last
    writes its discarded output into one tile's rows, ``ostride`` 0). ``extra``: the layer,
    the inputs, the host words and the output's ABUF rows (each step's stored to the host)."""
    from dstar_rtl.golden.schedule import piece_bounds
    from dstar_rtl.program.compiler import Emitter, Region, StateStream, TileStream, emit_layer

    if split not in ("blocks", "chans"):
        raise ValueError(f"split must be 'blocks' or 'chans', not {split!r}")
    T = cfg.tile
    N, cin, cout = tokens * T, 2 * T, 4 * T
    nt, nb = N // T, cout // T
    lay, xs = _random_layer(cfg, seed, N, cin, cout, steps,
                            passes if split == "chans" else None)
    W = lay.W
    Bb = beat_bytes(cfg)
    image, at = {}, 0

    def obj(buf, rows):
        """A DRAM object of ``rows`` rows of ``buf`` (rows given: their image): its beat."""
        nonlocal at
        first = at
        n = rows if isinstance(rows, int) else len(rows)
        if not isinstance(rows, int):
            image[first * Bb] = rows_to_bytes(cfg, buf, rows)
        at += dram_beats(cfg, buf, n) + 1
        return first

    def beats(buf, rows):
        b, r = divmod(rows * dram_row_bytes(cfg, buf), Bb)
        if r:
            raise ValueError(f"{rows} rows of {buf} are not whole {Bb}-byte beats")
        return b

    wrow = lambda j, c: pack(row_layout(cfg, "WMEM"), {"w": W[c, j * T:(j + 1) * T]})  # noqa
    rrows = _rows_of_words(cfg, "RBUF", rbuf_words(cfg, lay))
    bounds = piece_bounds(nb if split == "blocks" else cin, passes)
    work = []          # per pass: (blocks, chans, weight beat, rbuf beat, weight rows)
    for a, n in bounds:
        blk, ch = ((a, a + n), (0, cin)) if split == "blocks" else ((0, nb), (a, n))
        rows = [wrow(j, c) for j in range(*blk) for c in range(ch[0], ch[0] + ch[1])]
        work.append((blk, ch, obj("WMEM", rows), obj("RBUF", rrows[blk[0]:blk[1]]),
                     len(rows)))
    xbeat = obj("XBUF", nt * cin)          # zero state: DRAM reads as zero where unwritten
    ybeat = obj("YBUF", nt * cout)
    image[xbeat * Bb] = bytes(beats("XBUF", nt * cin) * Bb)
    image[ybeat * Bb] = bytes(beats("YBUF", nt * cout) * Bb)
    win = {b: tuple(i * 4 * T for i in range(3)) for b in ("XBUF", "YBUF")}
    if split == "blocks":      # every pass reads the whole input; a piece reads its own
        ins = dict.fromkeys(range(passes), Region("ABUF", "x", nt * cout, nt * cin))
    else:
        ins = {p: Region("ABUF", f"x{p}", nt * cout + p * nt * cin, nt * ch[1])
               for p, (_, ch, *_r) in enumerate(work)}
    loaded = list(dict.fromkeys(ins.values()))
    scratch = Region("ABUF", "partial", nt * (cout + 2 * cin), cout)   # a piece's partial y
    out = Region("ABUF", "y", 0, nt * cout)
    e = Emitter(cfg)
    for s, x in enumerate(xs):
        for p, reg in enumerate(loaded):               # the inputs from the host
            e.transfer("LOAD", "ABUF", reg, key=(s, p))
        for p, (blk, ch, wbeat, rbeat, wrows) in enumerate(work):
            R = {"slot0": Region("GMEM", "s0", 0, 4 * cin),
                 "slot1": Region("GMEM", "s1", 4 * cin, 4 * cin),
                 "x": ins[p], "L.xhat": Region("XBUF", "xh", 0, cin),
                 "L.Y": Region("YBUF", "Y", 0, cout), "L.W": Region("WMEM", "W", 0, wrows),
                 "L.r": Region("RBUF", "r", 0, blk[1] - blk[0])}
            last = p == len(work) - 1
            R["L.y"] = (Region("ABUF", "y", out.base + blk[0] * T, out.rows)
                        if split == "blocks" or last else scratch)
            e.dram("DLOAD", "WMEM", R["L.W"], wbeat)
            e.dram("DLOAD", "RBUF", R["L.r"], rbeat)
            e("BARRIER")
            st = StateStream(
                TileStream(win["XBUF"], xbeat + beats("XBUF", ch[0]), beats("XBUF", cin)),
                TileStream(win["YBUF"], ybeat + beats("YBUF", blk[0] * T), beats("YBUF", cout)),
                xhat_out=split == "chans" or last)
            emit_layer(e, cfg, lay, N, R, "L", "x", stream=st, blocks=blk,
                       chans=ch if split == "chans" else None,
                       ostride=0 if R["L.y"] is scratch else None)
        e.transfer("STORE", "ABUF", out, key=(s, "y"))
    cmds = e.cmds + [store_counters(), make_cmd(cfg, "END")]
    host = []
    for s, x in enumerate(xs):
        for p in range(len(loaded)):
            ch = work[p][1]
            for row in tensor_rows(x[:, ch[0]:ch[0] + ch[1]], T):
                host += _words_of_row(cfg, row)
    return DramProgram(cmds, image, dict(layer=lay, xs=xs, host_words=host, out=out,
                                         tags=e.tags))


def _random_layer(cfg: Config, seed: int, N: int, cin: int, cout: int, steps: int, pieces):
    """A random differential layer (``pieces`` reduction pieces; None: the least) and ``steps``
    inputs of ``N`` tokens, each a small change of the one before."""
    rng = np.random.default_rng(seed)
    W = rng.integers(-127, 128, (cin, cout))
    lay = DiffLinear(W, rng.uniform(0.002, 0.02, cout), cfg, bias=rng.uniform(-1, 1, cout),
                     pieces=pieces)
    x0 = rng.integers(-3000, 3000, (N, cin))
    return lay, [x0] + [x0 + rng.integers(-60, 60, (N, cin)) for _ in range(steps - 1)]


def _words_of_row(cfg: Config, row) -> list:
    from dstar_rtl.program.isa import row_to_words

    return row_to_words(cfg, "ABUF", {"v": row})
