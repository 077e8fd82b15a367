"""The core's compiler (program/compiler.py) and ISA-level executor (program/executor.py):
the compiled program run on the executor equals IntDiTBlock bit for bit at every step (SAR with
cache and reuse steps, every block kept, interval 1, presets tiny and fpga), the command words and
assembly round-trip, programs that do not fit are refused, core errors carry their codes, and the
event counters follow the rules of program/executor.py."""

import numpy as np
import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.golden.dit_int import LAYERS, IntDiTBlock
from dstar_rtl.golden.dit_int8 import Int8DiTBlock
from dstar_rtl.golden.fmdq import quantize_subchannels, to_fixed
from dstar_rtl.golden.layouts import VPU_OPS
from dstar_rtl.golden.schedule import schedule_tile
from dstar_rtl.models.dit import DiTSpec, init_params
from dstar_rtl.program.compiler import (
    FREE,
    FULL,
    P_READY,
    S_READY,
    Emitter,
    compile_block,
    emit_vrow,
    make_cmd,
)
from dstar_rtl.program.executor import CoreError, CoreExecutor
from dstar_rtl.program.isa import (
    BUFFERS,
    COUNTERS,
    SEMAPHORES,
    CoreConfig,
    abuf_bits,
    assemble,
    cmd_bits,
    cmd_layout,
    core_for,
    core_preset,
    disassemble,
    encode,
    format_cmd,
    host_words_per_row,
    parse_cmd,
    row_to_words,
)

SPEC = DiTSpec(image_size=8, patch=2, hidden=16, heads=2, depth=1)   # N 16, D 16, d 8, M 32
STEPS = 5


def _sar_mask(cfg):
    """Diagonal kept; head 0 drops its top-right block, head 1 its bottom-left one (and, with 4
    blocks, one more each)."""
    nb = SPEC.tokens // cfg.tile
    mask = np.ones((SPEC.heads, nb, nb), bool)
    mask[0, 0, nb - 1] = mask[1, nb - 1, 0] = False
    if nb > 2:
        mask[0, 2, 0] = mask[1, 1, 3] = False
    return mask


def _inputs(cfg, params, steps, seed=7, spec=SPEC):
    """(x, mod) per step as tests/test_dit_int.py makes them: a random state and the adaLN
    vectors of a random conditioning, both converted to the act format."""
    rng = np.random.default_rng(seed)
    out = []
    for step in range(steps):
        h = rng.normal(0, 1, (spec.tokens, spec.hidden)) * (1 + 0.1 * step)
        c = rng.normal(0, 1, spec.hidden)
        mod = (c / (1 + np.exp(-c))) @ params["blocks.0.adaLN.W"] + params["blocks.0.adaLN.b"]
        x, _ = to_fixed(h, cfg.act_width, cfg.act_frac)
        m, _ = to_fixed(mod.reshape(6, -1), cfg.act_width, cfg.act_frac)
        out.append((x, m))
    return out


def _run(name, sar=True, interval=2, words=False, pieces=None, spec=SPEC, abuf_base=0,
         **overrides):
    """Compile (``pieces``: compile_block's), run init and STEPS steps on the executor beside the
    golden block (``spec``: SPEC or one with its tokens, hidden and heads; ``overrides``: of the
    preset's configuration). Returns
    ``(prog, ex, [(golden BlockStep, parsed output, counter delta, semaphores)])``."""
    cfg = preset(name, **overrides)
    params = init_params(spec, 1)
    # With a stored Y (every preset's) the pieces are the golden block's too (numerics §2.5).
    gp = pieces if cfg.ystate_frac is not None else None
    blk = IntDiTBlock(params, 0, spec, cfg, _sar_mask(cfg) if sar else None, interval=interval,
                      pieces=gp)
    gold = IntDiTBlock(params, 0, spec, cfg, blk.mask, interval=interval, pieces=gp)
    core = core_for(cfg)
    prog = compile_block(blk, core, pieces, abuf_base=abuf_base)
    ex = CoreExecutor(cfg, core)
    init, step = prog.init_commands(), prog.step_commands()
    if words:
        init, step = assemble(cfg, init), assemble(cfg, step)
    ex.run(init, prog.init_host_words())
    res = []
    for x, m in _inputs(cfg, params, STEPS, spec=spec):
        before = dict(ex.counters)
        out = ex.run(step, prog.step_host_words(x, m))
        delta = {k: ex.counters[k] - before[k] for k in COUNTERS}
        res.append((gold.step(x, m), prog.parse_step_output(out), delta, list(ex.sem)))
    return prog, ex, res


@pytest.fixture(scope="module")
def tiny_sar():
    return _run("tiny")


def _check_equal(prog, res, cache_pattern):
    assert [g.cache_step for g, *_ in res] == cache_pattern
    for g, got, _delta, sem in res:
        exp = prog.expected(g)
        assert set(got) == set(exp) == {"out", "o"} | {f"{k}.{v}" for k in LAYERS
                                                         for v in ("y", "xhat", "Y")}
        for k in exp:
            assert got[k].shape == exp[k].shape, (g.step, k)
            np.testing.assert_array_equal(got[k], exp[k], err_msg=f"step {g.step} {k}")
        assert sem == [0] * SEMAPHORES   # every semaphore balanced by the end of the step


# ------------------------------------------------------------------------- bit for bit
def test_tiny_sar_equals_golden(tiny_sar):
    prog, ex, res = tiny_sar
    _check_equal(prog, res, [True, False, True, False, True])
    assert not prog.blk.mask.all()
    assert ex.done and ex.error is None


@pytest.mark.parametrize("name, sar, interval, pattern", [
    ("fpga", True, 2, [True, False, True, False, True]),
    ("tiny", False, 2, [True, False, True, False, True]),
    ("tiny", True, 1, [True] * STEPS),
])
def test_equals_golden(name, sar, interval, pattern):
    prog, _ex, res = _run(name, sar, interval, words=(name == "fpga"))
    _check_equal(prog, res, pattern)


#: Reduction pieces of every layer (SPEC: qk, v, proj and fc1 take 16 channels, fc2 32): even,
#: uneven (16 = 5 + 5 + 6), one channel each, and 32 = 6 + 6 + 6 + 7 + 7.
PIECES = {"qk": 2, "v": 3, "proj": 16, "fc1": 4, "fc2": 5}


@pytest.mark.parametrize("name, ystate_frac", [
    pytest.param("tiny", None, marks=pytest.mark.slow), ("fpga", None), ("tiny", 4)])
def test_reduction_pieces_equal_golden(name, ystate_frac):
    """Each layer's reduction split into pieces (compiler docstring) gives, with Y whole, the
    unsplit block's outputs, x̂ and Y at every step, and with a stored Y (the presets') the
    golden block's that runs the same pieces; each piece is one QUANT of its channels."""
    prog, _ex, res = _run(name, pieces=PIECES, ystate_frac=ystate_frac)
    _check_equal(prog, res, [True, False, True, False, True])
    whole = compile_block(IntDiTBlock(init_params(SPEC, 1), 0, SPEC, prog.cfg), prog.core)
    for k, p in PIECES.items():
        nt = SPEC.tokens // prog.cfg.tile
        got = [c.nch for c in prog.step_commands()[slice(*prog.section(k))] if c.op == "QUANT"]
        one = [c.nch for c in whole.step_commands()[slice(*whole.section(k))] if c.op == "QUANT"]
        cin = prog.blk.layers[k].W.shape[0]
        assert one == [cin] * nt and len(got) == nt * p and sum(got) == nt * cin, k
        assert max(got) - min(got) <= 1, k


@pytest.mark.parametrize("name, max_reduction, mlp_ratio, pieces", [
    ("tiny", 32, 3.0, [24, 24]), ("fpga", 64, 5.0, [40, 40])])
def test_long_reductions_run_in_pieces(name, max_reduction, mlp_ratio, pieces):
    """An MLP wider than max_reduction (what the attention's rows need at this tile): fc2 runs
    in ceil(M / max_reduction) pieces by default, GELU's rows in VROWs of at most max_reduction
    elements, the other layers (16 channels) whole, and the block equals its golden at every
    step; another split of the long layer is refused (Y saturates after each piece)."""
    spec = DiTSpec(image_size=8, patch=2, hidden=16, heads=2, depth=1, mlp_ratio=mlp_ratio)
    prog, _ex, res = _run(name, spec=spec, max_reduction=max_reduction)
    _check_equal(prog, res, [True, False, True, False, True])
    nt = spec.tokens // prog.cfg.tile
    for k in LAYERS:
        got = [c.nch for c in prog.step_commands()[slice(*prog.section(k))] if c.op == "QUANT"]
        assert got == (pieces if k == "fc2" else [16]) * nt, k
    M = spec.mlp_hidden
    gelu = [c.n for c in prog.step_commands()[slice(*prog.section("gelu"))] if c.op == "VROW"]
    assert sum(gelu) == M and max(gelu) <= max_reduction and len(gelu) == -(-M // max_reduction)
    n = len(pieces)
    with pytest.raises(ValueError, match=rf"pieces\['fc2'\] = {n + 1}: .* exceed max_reduction "
                                         rf"{max_reduction} and run in its golden layer's {n} "
                                         rf"pieces; {n} only"):
        compile_block(prog.blk, prog.core, {"fc2": n + 1})


#: Buffers deep enough for the wider test blocks below (the executor's memories only).
DEEP = {**dict.fromkeys(("abuf_rows", "xbuf_rows", "ybuf_rows", "wmem_rows", "gmem_rows"), 1 << 15),
        "rbuf_rows": 4096, "vbuf_rows": 1024}


@pytest.mark.parametrize("name, hidden, heads, max_reduction", [
    ("tiny", 32, 8, 16), pytest.param("fpga", 128, 16, 64, marks=pytest.mark.slow)])
def test_layernorm_rows_longer_than_max_reduction(name, hidden, heads, max_reduction):
    """A hidden size twice max_reduction (heads of max_reduction / T channels, the widest the
    K/V walk takes) with ln_row_max = hidden: both LayerNorms run as one VROW each (the VPU
    takes each row twice), the hidden-wide layers in two pieces, and the block equals its
    golden at every step; ln_row_max one below refuses the block, naming it."""
    spec = DiTSpec(image_size=8, patch=2, hidden=hidden, heads=heads, depth=1, mlp_ratio=2.0)
    prog, _ex, res = _run(name, False, spec=spec, max_reduction=max_reduction,
                          ln_row_max=hidden, **DEEP)
    _check_equal(prog, res, [True, False, True, False, True])
    ln = [c.n for c in prog.step_commands() if c.op == "VROW" and c.vop == 1]
    assert ln == [hidden, hidden]
    with pytest.raises(ValueError, match=r"spec.hidden \(LayerNorm row\) is "
                                         rf"{hidden}; ln_row_max of '{name}' is {hidden - 1}"):
        _run(name, False, spec=spec, max_reduction=max_reduction, ln_row_max=hidden - 1, **DEEP)


@pytest.mark.parametrize("name, hidden, heads", [
    ("tiny", 24, 4), pytest.param("fpga", 48, 4, marks=pytest.mark.slow)])
def test_heads_the_tile_does_not_divide_are_padded(name, hidden, heads):
    """Head dim 6 at T = 4 (12 at T = 8): o holds each head padded to the next multiple of T,
    proj reads it through zero weight rows (program.heads), and the block equals its golden at
    every step (o and proj's x̂ compared on the real channels); proj cannot be split then."""
    spec = DiTSpec(image_size=8, patch=2, hidden=hidden, heads=heads, depth=1)
    prog, _ex, res = _run(name, False, spec=spec, **DEEP)
    _check_equal(prog, res, [True, False, True, False, True])
    d, T = spec.head_dim, prog.cfg.tile
    dp = prog.head_dim_padded
    assert d % T and dp == d + T - d % T
    assert prog.regions["o"].rows == spec.tokens // T * heads * dp
    assert prog.layers["proj"].W.shape[0] == heads * dp
    with pytest.raises(ValueError, match=r"pieces\['proj'\] = 2: the heads are padded"):
        compile_block(prog.blk, prog.core, {"proj": 2})


@pytest.mark.parametrize("name, hidden", [
    ("tiny", 64), pytest.param("fpga", 128, marks=pytest.mark.slow)])
def test_heads_wider_than_a_sub_channel_row(name, hidden):
    """Heads of d channels with d·T > max_reduction (32·4 at tiny, 64·8 at fpga): the K/V shifts
    take one token row per token, Kᵀ one VROW per token tile and chunk of max_reduction / T
    channels; no VPU row exceeds max_reduction and the block equals its golden at every step."""
    spec = DiTSpec(image_size=8, patch=2, hidden=hidden, heads=2, depth=1, mlp_ratio=1.0)
    prog, _ex, res = _run(name, spec=spec, **DEEP)
    _check_equal(prog, res, [True, False, True, False, True])
    cfg, T = prog.cfg, prog.cfg.tile
    d = spec.head_dim
    assert d * T > cfg.max_reduction
    vrows = [c for c in prog.step_commands() if c.op == "VROW"]
    amax = [c for c in vrows if c.vop == VPU_OPS.index("kv_amax")]
    assert len(amax) == 2 * spec.heads and all(c.cols == 0 and c.R == spec.tokens and c.n == d
                                                for c in amax)
    kq = [c for c in vrows if c.vop == VPU_OPS.index("kv_quant") and c.cols]
    assert len(kq) == spec.heads * spec.tokens // T * -(-d * T // cfg.max_reduction)
    assert all(c.n * T <= cfg.max_reduction for c in kq)
    with pytest.raises(ValueError, match="VROW gelu: a VPU row of 300 elements exceeds "
                                         "max_reduction"):
        emit_vrow(Emitter(cfg), "gelu", R=1, n=300, a=0, C=0, dst=0)


def test_abuf_deeper_than_the_narrow_fields():
    """An ABUF of 2**14 + 2048 rows widens its address fields to 15 bits (every other field and
    every preset unchanged); the block placed from row 2**14 runs bit-exact through the encoded
    command words."""
    prog, _ex, res = _run("tiny", words=True, abuf_base=1 << 14, abuf_rows=(1 << 14) + 2048)
    _check_equal(prog, res, [True, False, True, False, True])
    cfg = prog.cfg
    assert abuf_bits(cfg) == 15 and all(abuf_bits(preset(n)) == 14
                                        for n in ("tiny", "fpga", "paper"))
    assert min(c.src for c in prog.step_commands() if c.op == "QUANT") >= 1 << 14
    assert {f[0]: f[1] for f in cmd_layout(cfg, "VROW")}["dst"] == 15
    assert sum(f[1] for f in cmd_layout(cfg, "VROW")) + 13 <= 128
    with pytest.raises(ValueError, match="abuf_base must be an integer >= 0"):
        compile_block(prog.blk, prog.core, abuf_base=-1)


def test_abuf_beyond_the_128_bit_command():
    """An ABUF of 2**16 + 2048 rows: VROW's three ABUF fields of 17 bits take the 160-bit
    command; the block placed from row 2**16 runs bit-exact through the encoded words, some of
    which use the bits past 128."""
    prog, _ex, res = _run("tiny", words=True, abuf_base=1 << 16, abuf_rows=(1 << 16) + 2048)
    _check_equal(prog, res, [True, False, True, False, True])
    cfg = prog.cfg
    assert abuf_bits(cfg) == 17 and cmd_bits(cfg) == 160
    words = assemble(cfg, prog.step_commands())
    assert max(words) >= 1 << 128 and max(words) < 1 << 160


@pytest.mark.parametrize("pieces, match", [
    ({"fc3": 2}, r"no layer 'fc3'"), ({"fc2": 0}, r"pieces\['fc2'\] = 0: an int in 1\.\.32"),
    ({"v": 17}, r"1\.\.16"), ({"v": 2.0}, r"an int")])
def test_reduction_pieces_refused(pieces, match):
    blk = IntDiTBlock(init_params(SPEC, 1), 0, SPEC, preset("tiny"))
    with pytest.raises(ValueError, match=match):
        compile_block(blk, core_preset("tiny"), pieces)


def test_reduction_pieces_refused_with_a_stored_y():
    cfg = preset("tiny", ystate_frac=2)
    blk = IntDiTBlock(init_params(SPEC, 1), 0, SPEC, cfg)
    with pytest.raises(ValueError, match=r"stored Y \(ystate_frac 2\) is rounded after every"):
        compile_block(blk, core_preset("tiny"), {"fc2": 2})


@pytest.mark.parametrize("name, ystate_frac", [("fpga", 3)])
def test_stored_y_equals_golden(name, ystate_frac):
    """A stored Y (``ystate_frac``, numerics §2.5) other than the presets' (every other test
    here runs theirs): YBUF rows of ``ystate_width`` bits, each GEMM adding the stored sum
    brought back by its channel's shift and writing it back rounded: the executor equals the
    golden block at every step, Y included."""
    prog, _ex, res = _run(name, ystate_frac=ystate_frac)
    _check_equal(prog, res, [True, False, True, False, True])
    assert prog.cfg.ystate_width < prog.cfg.acc_bits
    assert any((np.abs(g.layers["fc1"].Y) > 0).any() for g, *_ in res)


def test_stored_y_in_a_long_reduction_equals_golden():
    """With a reduction longer than max_reduction the stored Y is rounded after each piece, in
    the executor as in the golden layer."""
    prog, _ex, res = _run("tiny", max_reduction=32, ystate_frac=1,
                          spec=DiTSpec(image_size=8, patch=2, hidden=16, heads=2, depth=1,
                                       mlp_ratio=3.0))
    _check_equal(prog, res, [True, False, True, False, True])
    assert prog.blk.layers["fc2"].pieces == 2


def test_reduction_pieces_refused_on_int8():
    cfg = preset("tiny", datapath="int8")
    blk = Int8DiTBlock(init_params(SPEC, 1), 0, SPEC, cfg)
    with pytest.raises(ValueError, match=r"INT8 core cannot split"):
        compile_block(blk, core_preset("tiny"), {"fc2": 2})


# ------------------------------------------------------------------------- encoding
def test_round_trips(tiny_sar):
    prog = tiny_sar[0]
    cfg = prog.cfg
    for cmds in (prog.init_commands(), prog.step_commands()):
        assert disassemble(cfg, assemble(cfg, cmds)) == cmds
        assert [parse_cmd(cfg, format_cmd(c)) for c in cmds] == cmds
    text = prog.memory_map()
    for name in ("qk.W", "K^T", "pcache", "slot0", "mask", "fc2.Y"):
        assert name in text


def test_program_shape(tiny_sar):
    """The step program is the same every step; SKIPs cover exactly the qk layer and the cache
    part of the attention; one STEP with the block's interval and END close it."""
    prog = tiny_sar[0]
    step = prog.step_commands()
    skips = [i for i, c in enumerate(step) if c.op == "SKIP"]
    assert len(skips) == 2
    for i, name in zip(skips, ("qk", "attn.cache")):
        a, b = prog.section(name)
        assert i == a and step[i].count == b - a - 1
    assert [c.op for c in step[-2:]] == ["STEP", "END"] and step[-2].interval == 2
    # The differential layers wait and signal only the slot semaphores; the attention's cache
    # part also the scores' and P's (its softmax VROWs overlap, and only they).
    a, b = prog.section("attn.cache")
    assert {c.wait | c.signal for c in step[:a] + step[b:]} <= {0, FULL, FREE, FULL | FREE}
    masks = {c.wait | c.signal for c in step[a:b]}
    assert {FULL, S_READY | P_READY, P_READY} <= masks <= {0, FULL, FULL | S_READY, S_READY,
                                                           S_READY | P_READY, P_READY}
    ovl = [c for c in step if c.op == "VROW" and c.overlap]
    assert ovl and all(VPU_OPS[c.vop] == "softmax_mx" for c in ovl)


# ------------------------------------------------------------------------- refusals
def test_does_not_fit():
    cfg = preset("tiny")
    blk = IntDiTBlock(init_params(SPEC, 1), 0, SPEC, cfg)
    # ABUF: 14 tensors of (N/T)·D·(their width in units of D) rows (x, ln1, a, qk.y 2, v.y, o,
    # proj.y, h1, ln2, m, fc1.y 2, gelu 2, fc2.y, out) and the double-buffered N-row score and
    # P tiles: 17·64 + 2·2·16 = 1152
    with pytest.raises(ValueError, match=r"ABUF: it needs 1152 rows, the core has 1000"):
        compile_block(blk, CoreConfig(abuf_rows=1000))
    with pytest.raises(ValueError, match=r"GMEM: it needs 768 rows, the core has 700"):
        compile_block(blk, core_preset("tiny", gmem_rows=700))


def test_refuses_dims_and_bias():
    cfg = preset("tiny")
    spec = DiTSpec(image_size=6, patch=2, hidden=16, heads=2, depth=1)    # N = 9
    blk = IntDiTBlock(init_params(spec, 1), 0, spec, cfg)
    with pytest.raises(ValueError, match=r"N \(tokens\) = 9 is not a multiple of .* T = 4"):
        compile_block(blk, core_preset("tiny"))
    blk = IntDiTBlock(init_params(SPEC, 1), 0, SPEC, cfg)
    blk.layers["fc1"].bias_int[3] = 1 << 15
    with pytest.raises(ValueError, match=r"layer 'fc1'.*act_width 16"):
        compile_block(blk, core_preset("tiny"))


def test_group_bound():
    """A tile of nch sub-channels emits at most 4·nch groups (1 if all zero); tiny reaches it."""
    rng = np.random.default_rng(1)
    for name in ("tiny", "fpga"):
        cfg = preset(name)
        for _ in range(40):
            nch = int(rng.integers(1, 40))
            u = rng.integers(-(1 << 12), 1 << 12, (nch, cfg.tile)) >> rng.integers(0, 13, (nch, 1))
            qz = quantize_subchannels(u, cfg)
            assert len(schedule_tile(qz.q, qz.b, qz.e, cfg).groups) <= 4 * nch
        z = np.zeros((5, cfg.tile), np.int64)
        assert len(schedule_tile(z, np.zeros(5, np.int64), np.zeros(5, np.int64), cfg).groups) == 1
    # 8-bit, all four digits non-zero, exponents 0,2,4,6 | 1,3,5,7; no open groups to merge them
    cfg = preset("tiny", variant="initial")
    nch = 6
    q = np.full((nch, cfg.tile), 127, np.int64)
    ts = schedule_tile(q, np.full(nch, 8), np.arange(nch) % 2, cfg)
    assert len(ts.groups) == 4 * nch


# ------------------------------------------------------------------------- core errors
def _err(cmds, host=(), name="tiny", core=None):
    cfg = preset(name)
    ex = CoreExecutor(cfg, core or core_preset(name))
    with pytest.raises(CoreError) as e:
        ex.run(cmds, host)
    return ex, e.value


def test_errors():
    cfg = preset("tiny")
    core = core_preset("tiny")
    nop = make_cmd(cfg, "NOP")
    A = BUFFERS.index("ABUF")
    ex, e = _err([nop, nop, 31])                                     # opcode 31 does not exist
    assert (e.code, e.index) == ("opcode", 2)
    with pytest.raises(CoreError):                                   # sticky until reset
        ex.run([nop])
    ex.reset()
    assert ex.run([nop]) == []
    _ex, e = _err([make_cmd(cfg, "LOAD", buf=A, zero=1, addr=core.abuf_rows - 1, count=2)])
    assert (e.code, e.index) == ("address", 0)
    for vop in (VPU_OPS.index("acc_requant"), VPU_OPS.index("diff_delta"), 12):
        _ex, e = _err([make_cmd(cfg, "VROW", vop=vop, R=4, n=4, C=4)])
        assert e.code == "operand"
    _ex, e = _err([make_cmd(cfg, "VROW", vop=VPU_OPS.index("gelu"), R=4, n=0)])
    assert e.code == "operand"
    _ex, e = _err([make_cmd(cfg, "VROW", vop=VPU_OPS.index("gelu"), R=1, n=65, C=65)])
    assert e.code == "operand"
    _ex, e = _err([nop, make_cmd(cfg, "NOP", wait=FREE)])           # never signalled
    assert (e.code, e.index) == ("semaphore", 1)
    _ex, e = _err([make_cmd(cfg, "NOP", signal=FULL)] * 16)          # counts only to 15
    assert (e.code, e.index) == ("semaphore", 15)
    _ex, e = _err([make_cmd(cfg, "STORE", buf=BUFFERS.index("WMEM"), count=1)])
    assert e.code == "operand"
    _ex, e = _err([make_cmd(cfg, "LOAD", buf=BUFFERS.index("CNT"), zero=1, count=1)])
    assert e.code == "operand"
    _ex, e = _err([make_cmd(cfg, "QUANT", nch=65)])
    assert e.code == "qpu"
    _ex, e = _err([make_cmd(cfg, "QCFG", base_log2=9, thr=[1, 7, 31])])
    assert e.code == "qpu"
    _ex, e = _err([make_cmd(cfg, "GEMM")])                            # reset GMEM has no last
    assert e.code == "address"


def test_shift_error_and_skip():
    """GEMM with a K/V shift larger than RBUF's sh: ``shift``. SKIP on a reuse step discards
    commands undecoded."""
    cfg = preset("tiny")
    A = BUFFERS.index("ABUF")
    row = row_to_words(cfg, "ABUF", {"v": [30000, -5, 7, 0]})
    cmds = [make_cmd(cfg, "LOAD", buf=A, addr=0, count=1),
            make_cmd(cfg, "QUANT", src=0, nch=1, gdst=0),
            make_cmd(cfg, "VROW", vop=VPU_OPS.index("kv_amax"), cols=1, R=1, n=1, a=0, sreg=3),
            make_cmd(cfg, "GEMM", use_sreg=1, sreg=3, dst=8)]
    ex, e = _err(cmds, row)
    assert (e.code, e.index) == ("shift", 3) and ex.sreg[3] == 8    # rnd(30000, 8) = 117
    ex = CoreExecutor(cfg, core_preset("tiny"))
    ex.run([make_cmd(cfg, "STEP", interval=3), make_cmd(cfg, "SKIP", count=2), 31, 31,
            make_cmd(cfg, "STEP", interval=3), make_cmd(cfg, "STEP", interval=3),
            make_cmd(cfg, "SKIP", count=1), make_cmd(cfg, "NOP")])
    assert ex.phase == 0 and ex.counters["commands"] == 6


# ------------------------------------------------------------------------- counters
def _tile_groups(q, b, e, cfg):
    """(groups, slice columns) of one tile by golden.schedule."""
    ts = schedule_tile(q, b, e, cfg)
    return len(ts.groups), ts.counters["slice_columns"]


def _attention_groups(g, blk, cfg):
    """Golden (groups, slice columns) of the Q tiles (per head, query tile) and of the P-cache
    tiles (all N keys; dropped blocks are zero sub-channels), from the golden records."""
    T, N, d = cfg.tile, SPEC.tokens, SPEC.head_dim
    nt = N // T
    qg, pg = {}, {}
    for h in range(SPEC.heads):
        if g.attn.q_qz is not None:
            qz = g.attn.q_qz[h]
            for qa in range(nt):
                sl = slice(qa * d, (qa + 1) * d)
                qg[h, qa] = _tile_groups(qz.q[sl], qz.b[sl], qz.e[sl], cfg)
        rec = g.attn.pcache[h]
        for qa in range(nt):
            q = rec.values[qa * T:(qa + 1) * T].T                     # (keys, queries)
            pg[h, qa] = _tile_groups(q, rec.b[qa].reshape(-1), np.zeros(N, np.int64), cfg)
    return qg, pg


def test_counters_step(tiny_sar):
    """Whole-step counts derived from the golden records: groups replayed (each differential
    tile once per column block, each Q tile once per kept key block, each P tile once per column
    block of V), valid lanes, P-cache traffic, host words, no saturation outside softmax."""
    prog, _ex, res = tiny_sar
    blk, cfg = prog.blk, prog.cfg
    T, N, D, d = cfg.tile, SPEC.tokens, SPEC.hidden, SPEC.head_dim
    nt = N // T
    for g, _got, delta, _sem in res:
        replay = lanes = written = 0
        qpu = dict.fromkeys(("subchannels", "groups", "saturated"), 0)
        for k in LAYERS:
            ls = g.layers[k]
            if ls.updated:
                nb = blk.layers[k].W.shape[1] // T
                replay += ls.counters["groups"] * nb
                lanes += ls.counters["slice_columns"] * nb
                written += ls.counters["groups"]
                for c in qpu:
                    qpu[c] += ls.counters[c]
        qg, pg = _attention_groups(g, blk, cfg)
        kept = {(h, qa): int(blk.mask[h, qa].sum()) for h, qa in qg}
        pv = sum(n for n, _ in pg.values()) * (d // T)
        replay += pv + sum(n * kept[hq] for hq, (n, _) in qg.items())
        lanes += sum(c for _, c in pg.values()) * (d // T) + \
            sum(c * kept[hq] for hq, (_, c) in qg.items())
        assert delta["groups_replayed"] == replay
        assert delta["lanes_valid"] == lanes         # one valid lane per kept slice column
        assert delta["pcache_groups_read"] == pv
        p_written = sum(n for n, _ in pg.values()) if g.cache_step else 0
        assert delta["pcache_groups_written"] == p_written
        assert delta["gmem_writes"] == written + sum(n for n, _ in qg.values()) + p_written
        if g.cache_step:
            qpu["subchannels"] += SPEC.heads * nt * (d + N)       # Q tiles and P tiles
        else:
            assert not qg
        assert delta["qpu_subchannels"] == qpu["subchannels"]
        rows = {b: host_words_per_row(cfg, b) for b in ("ABUF", "VBUF", "XBUF", "YBUF")}
        assert delta["host_words_in"] == (N * D // T) * rows["ABUF"] + 6 * (D // T) * rows["VBUF"]
        ys = sum(prog.regions[f"{k}.Y"].rows for k in LAYERS)
        xs = sum(prog.regions[f"{k}.xhat"].rows for k in LAYERS)
        ab = sum(prog.regions[r].rows for r in ("out", "o", *[f"{k}.y" for k in LAYERS]))
        assert delta["host_words_out"] == (ab * rows["ABUF"] + xs * rows["XBUF"]
                                           + ys * rows["YBUF"])
        sat = g.saturation
        assert delta["y_saturated"] == sum(g.layers[k].y_saturated for k in LAYERS) + \
            sat.get("s", 0) + sat["o"]                  # S and o requantize in GEMMs too
        assert delta["vpu_saturated"] == sum(sat.get(k, 0) for k in (
            "ln1", "mod1", "softmax", "res1", "ln2", "mod2", "gelu", "res2"))
        assert delta["commands"] == len(prog.step_commands()) - \
            (0 if g.cache_step else sum(b - a - 1 for n, a, b in prog.sections
                                        if n in ("qk", "attn.cache")))


def test_counters_sections():
    """One differential layer (fc1) and the VROWs, run section by section."""
    cfg = preset("tiny")
    params = init_params(SPEC, 1)
    blk = IntDiTBlock(params, 0, SPEC, cfg, _sar_mask(cfg))
    gold = IntDiTBlock(params, 0, SPEC, cfg, blk.mask)
    prog = compile_block(blk, core_preset("tiny"))
    ex = CoreExecutor(cfg, core_preset("tiny"))
    ex.run(prog.init_commands(), prog.init_host_words())
    T, N, D, M = cfg.tile, SPEC.tokens, SPEC.hidden, SPEC.mlp_hidden
    (x, m), = _inputs(cfg, params, 1)
    g = gold.step(x, m)
    step, deltas, pos = prog.step_commands(), {}, 0
    host = prog.step_host_words(x, m)
    for name, a, b in prog.sections:
        assert a == pos
        before = dict(ex.counters)
        ex.run(step[a:b], host if a == 0 else ())
        deltas[name] = {k: ex.counters[k] - before[k] for k in COUNTERS}
        pos = b
    assert pos == len(step)
    # fc1: D -> M, nt token tiles, nb column blocks
    nt, nb = N // T, M // T
    f, ls = deltas["fc1"], g.layers["fc1"]
    assert f["commands"] == 1 + nt + nt * nb + 1          # QCFG, QUANTs, GEMMs, BARRIER
    assert f["abuf_reads"] == nt * D                      # each input sub-channel once
    assert f["xbuf_reads"] == f["xbuf_writes"] == nt * D
    assert f["abuf_writes"] == f["ybuf_reads"] == f["ybuf_writes"] == nt * nb * T
    assert f["gmem_writes"] == ls.counters["groups"]
    assert f["groups_replayed"] == ls.counters["groups"] * nb
    assert f["lanes_valid"] == ls.counters["slice_columns"] * nb
    for k, v in ls.counters.items():
        assert f["qpu_" + k] == v, k
    assert f["vpu_rows"] == f["vpu_beats"] == nt * nb * T     # one acc_requant row per token
    assert f["wmem_writes"] == f["host_words_in"] == 0
    # LayerNorm: N rows of D/T beats; gated residual reads two ABUF operands
    for name, reads in (("ln1", 1), ("mod1", 1), ("res1", 2), ("gelu", 1)):
        v = deltas[name]
        beats = N * (M if name == "gelu" else D) // T
        assert (v["vpu_rows"], v["vpu_beats"]) == (N, beats), name
        assert (v["abuf_reads"], v["abuf_writes"]) == (reads * beats, beats), name
    # V into WMEM per head: N rows of d/T beats each, one WMEM row per beat
    d = SPEC.head_dim
    assert deltas["attn.pv"]["wmem_writes"] == SPEC.heads * N * d // T
    # cache part: K^T by sub-channel walk (nt commands of d beats) per head, softmax per tile
    c = deltas["attn.cache"]
    assert c["wmem_writes"] == SPEC.heads * nt * d
    # kv_amax + kv_quant (nt rows each), softmax (T rows per query tile), and one acc_requant
    # row per query of every kept block (Q·Kᵀ)
    assert c["vpu_rows"] == SPEC.heads * (2 * nt + nt * T) + T * int(gold.mask.sum())


def test_store_counters():
    """STORE of CNT: ``commands`` includes the STORE itself, ``host_words_out`` not yet."""
    cfg = preset("tiny")
    ex = CoreExecutor(cfg, core_preset("tiny"))
    C = BUFFERS.index("CNT")
    i = COUNTERS.index("commands")
    out = ex.run([make_cmd(cfg, "NOP"), make_cmd(cfg, "NOP"),
                  make_cmd(cfg, "STORE", buf=C, addr=i, count=3)])
    assert out == [3, 0, 0] and COUNTERS[i + 1:i + 3] == ("host_words_in", "host_words_out")
    assert ex.counters["host_words_out"] == 3
    assert encode(cfg, make_cmd(cfg, "NOP")) == 0


def test_encoding_doc_is_current():
    """docs/core_isa.md is the encoding program/isa.py generates (regenerate with
    ``python -m dstar_rtl.program.isa fpga > docs/core_isa.md``)."""
    from pathlib import Path

    from dstar_rtl.program.isa import encoding_markdown
    doc = Path(__file__).resolve().parent.parent / "docs" / "core_isa.md"
    assert doc.read_text() == encoding_markdown(preset("fpga")), \
        "docs/core_isa.md is stale: python -m dstar_rtl.program.isa fpga > docs/core_isa.md"
