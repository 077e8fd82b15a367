"""The whole-model compiler (program.model) on the ISA executor: every stored tensor equal to
the integer model at every step (resident, streamed, two batch rows, no reuse), a new trajectory
after an odd number of steps, the transfers of reuse steps, the memory-map errors, the wide
address fields, and a corrupted word named by the comparison the cocotb loop uses."""

import numpy as np
import pytest

from dstar_rtl.golden.config import ConfigError, preset
from dstar_rtl.golden.layouts import VPU_OPS
from dstar_rtl.models.dit import DIT_MODELS, calibrate_masks, init_params, start_noise
from dstar_rtl.models.dit_int_model import IntDiT
from dstar_rtl.program import isa
from dstar_rtl.program.executor import CoreExecutor
from dstar_rtl.program.model import compile_model, resident_depths
from dstar_rtl.program.sampling import CoreSampler, assert_equal

SPEC = DIT_MODELS["tiny"]


@pytest.fixture(scope="module")
def params():
    return init_params(SPEC, 0)


@pytest.fixture(scope="module")
def digits():
    """The trained digits DiT at ``fpga`` (the integer model) and its resident depths."""
    from dstar_rtl.models.digits import load_trained

    spec, p = load_trained()
    model = IntDiT(spec, p, preset("fpga"))
    return model, resident_depths(model)


def _sample(host, ex, seed, label):
    """One trajectory of the shared host loop on the executor (every row's stored tensors
    checked); returns the per-step host words stored, counters dropped."""
    host.started(ex.run(host.start(seed, label), []))
    stored = []
    while not host.done:
        cmds, words = host.step_program()
        out = ex.run(cmds, words)
        assert host.finish_step(out, f"step {host.i} ")["counters"]["commands"] > 0
        stored.append(out[:-len(isa.COUNTERS)])       # the counters run on
    return stored


@pytest.mark.parametrize("stream, rows, overrides", [
    ((), 1, {}),                                     # YBUF streams what does not fit
    (("WMEM", "XBUF", "YBUF"), 2, {"sar_interval": 1}),
    ((), 2, {"gmem_rows": 2048, "ybuf_rows": 2048}),    # two rows, everything resident
    ((), 1, {"datapath": "int8"}),                   # the INT8 core: dense, no state
    (("WMEM",), 2, {"datapath": "int8", "sar_interval": 1}),
    # Through the DRAM port: every object, what does not fit (two rows), the INT8 core's
    # weights (the last two in make regress).
    (("WMEM", "XBUF", "YBUF"), 1, {"dram_width": 32}),
    # ... and in passes: qk over column blocks, each MLP chunk's fc1 pass, GELU and fc2 piece.
    (("WMEM", "XBUF", "YBUF"), 1, {"dram_width": 32, "mlp_chunks": 2}),
    # the INT8 core in passes over column blocks, a WMEM of two 64-row windows (make regress;
    # the fast tier checks its program for hazards, tests/test_hazards.py)
    pytest.param(("WMEM",), 1, {"datapath": "int8", "dram_width": 32, "wmem_rows": 192},
                 marks=pytest.mark.slow),
    pytest.param((), 2, {"dram_width": 64, "sar_interval": 1}, marks=pytest.mark.slow),
    pytest.param(("WMEM",), 1, {"datapath": "int8", "dram_width": 64},
                 marks=pytest.mark.slow),
])
def test_the_program_equals_the_integer_model(params, stream, rows, overrides):
    cfg = preset("tiny", **overrides)
    masks = calibrate_masks(SPEC, cfg, 3, 1000, params=params)
    prog = compile_model(IntDiT(SPEC, params, cfg, masks), isa.core_for(cfg), rows=rows,
                         stream=stream)
    if stream:
        assert all(len(prog.streamed[b]) == len(prog.layers) for b in stream)
    if {"mlp_chunks", "wmem_rows"} & set(overrides):      # some layers run in passes
        assert any(len(p) > 1 for p in prog.passes.values())
    ex = CoreExecutor(cfg, isa.core_for(cfg))
    host = CoreSampler(prog, [IntDiT(SPEC, params, cfg, masks) for _ in range(rows)], 3, 2.0,
                       dram=ex.dram)
    if cfg.dram_width:       # nothing streams through the host: the DRAM holds it
        assert prog.dram_map and not any(op == "LOAD" and key.endswith((".W", ".xhat", ".Y"))
                                         for op, _r, key, *_ in prog.transfers(True))
        host.load_dram()
    ex.run(prog.init, prog.init_words)
    first = _sample(host, ex, seed=0, label=1)
    again = _sample(host, ex, seed=0, label=1)      # after 3 steps: the phase back to a cache step
    assert first == again


def test_a_model_wider_than_max_reduction():
    """Hidden 32 in 4 heads of 8 at max_reduction 16 (ln_row_max 32): every hidden-wide layer in
    pieces, every LayerNorm row (the blocks' and the final one) sent twice, the positional
    add and the final modulation in VROW chunks, the K/V shifts by token rows; every stored
    tensor equal to the integer model's over three steps."""
    from dataclasses import replace

    from dstar_rtl.program.model import deepened

    spec = replace(SPEC, hidden=32, heads=4)
    cfg = preset("tiny", max_reduction=16, ln_row_max=32)
    p = init_params(spec, 0)
    cfg, _ = deepened(cfg, resident_depths(IntDiT(spec, p, cfg)))
    prog = compile_model(IntDiT(spec, p, cfg), isa.core_for(cfg))
    ex = CoreExecutor(cfg, isa.core_for(cfg))
    ex.run(prog.init, prog.init_words)
    _sample(CoreSampler(prog, [IntDiT(spec, p, cfg)], 3, 1.0), ex, seed=0, label=1)
    ln = VPU_OPS.index("layernorm")
    vrows = [c for c in prog.step if c.op == "VROW" and not c.cols]
    assert {c.n for c in vrows if c.vop == ln} == {32}          # 2 per block and the final one
    assert len([c for c in vrows if c.vop == ln]) == 2 * spec.depth + 1
    assert max(c.n for c in vrows if c.vop != ln) <= 16


def test_mlp_chunks_of_a_reduction_longer_than_max_reduction():
    """Hidden 32 and an MLP of 64 at max_reduction 16 through DRAM in two MLP chunks: fc2 runs
    in 4 reduction pieces (the least multiple of the chunks that max_reduction allows), two in
    each chunk's pass; every stored tensor equal to the integer model's over three steps."""
    from dataclasses import replace

    spec = replace(SPEC, hidden=32, heads=4)
    cfg = preset("tiny", max_reduction=16, ln_row_max=32, dram_width=32, mlp_chunks=2)
    p = init_params(spec, 0)
    model = IntDiT(spec, p, cfg)
    assert model.blocks[0].layers["fc2"].pieces == 4
    cfg = preset("tiny", max_reduction=16, ln_row_max=32, dram_width=32, mlp_chunks=2,
                 **resident_depths(model))
    prog = compile_model(IntDiT(spec, p, cfg), isa.core_for(cfg))
    assert [q.chans for q in prog.passes["blocks.0.fc2"]] == [(0, 32), (32, 32)]
    ex = CoreExecutor(cfg, isa.core_for(cfg))
    host = CoreSampler(prog, [IntDiT(spec, p, cfg)], 3, 1.0, dram=ex.dram)
    host.load_dram()
    ex.run(prog.init, prog.init_words)
    _sample(host, ex, seed=0, label=1)


def test_the_tiny_core_streams_only_what_does_not_fit(params):
    cfg = preset("tiny")
    prog = compile_model(IntDiT(SPEC, params, cfg), isa.core_for(cfg))
    assert prog.streamed["WMEM"] == [] and prog.streamed["XBUF"] == []
    assert prog.streamed["YBUF"]                    # 576 rows of Y, the core has 512
    assert prog.rows_used("YBUF") <= isa.core_for(cfg).ybuf_rows
    depths = resident_depths(IntDiT(SPEC, params, cfg))
    big = preset("tiny", ybuf_rows=depths["ybuf_rows"])
    assert compile_model(IntDiT(SPEC, params, big), isa.core_for(big)).streamed["YBUF"] == []


def test_reuse_steps_move_no_qk_state(params):
    cfg = preset("tiny")
    prog = compile_model(IntDiT(SPEC, params, cfg), isa.core_for(cfg), stream=("XBUF",))
    keys = {c: {k for _op, _r, k, *_ in prog.transfers(c)} for c in (True, False)}
    assert "blocks.0.qk.xhat" in keys[True] and "blocks.0.qk.xhat" not in keys[False]
    assert "blocks.0.v.xhat" in keys[False]


def test_a_corrupted_word_is_named(params):
    cfg = preset("tiny")
    prog = compile_model(IntDiT(SPEC, params, cfg), isa.core_for(cfg))
    ex = CoreExecutor(cfg, isa.core_for(cfg))
    ex.run(prog.init, prog.init_words)
    model = IntDiT(SPEC, params, cfg)
    inputs = model.host_inputs(start_noise(SPEC, 0)[0], 999, 1)
    ref = model.step(inputs)
    words = ex.run(prog.step, prog.host_words([inputs], prog.initial_state(), True))
    words[-len(isa.COUNTERS) - 1] ^= 1             # the last word of eps
    outs, _ = prog.parse_output(words, True)
    with pytest.raises(AssertionError,
                       match=r"step 0: eps: first difference at index \(14, 15\): got"):
        assert_equal(outs[0], prog.expected(ref, True), "step 0: ")


def test_the_counters_are_checked_against_the_golden(params):
    """A step's QPU counter increments must equal the golden's count of its QUANTs (a changed
    counter word is named), and the start program must store the counters alone."""
    cfg = preset("tiny")
    masks = calibrate_masks(SPEC, cfg, 2, 1000, params=params)
    prog = compile_model(IntDiT(SPEC, params, cfg, masks), isa.core_for(cfg))
    ex = CoreExecutor(cfg, isa.core_for(cfg))
    ex.run(prog.init, prog.init_words)
    host = CoreSampler(prog, [IntDiT(SPEC, params, cfg, masks)], 2)
    start = ex.run(host.start(0, 1), [])
    n = len(isa.COUNTERS)
    with pytest.raises(AssertionError, match=rf"start: {n + 1} words stored, expected the {n}"):
        host.started(start + [0], "s0 ")
    host.started(start)
    cmds, words = host.step_program()
    out = ex.run(cmds, words)
    exp = prog.expected_counters(host.ref)
    assert exp["qpu_subchannels"] > exp["qpu_subchannels_zero"] > 0    # padded patch channels
    at = len(out) - len(isa.COUNTERS) + isa.COUNTERS.index("qpu_subchannels_b8")
    out[at] += 1
    with pytest.raises(AssertionError, match=r"step 0 counters: qpu_subchannels_b8: got \d+, "
                                             r"expected \d+"):
        host.finish_step(out, "step 0 ")


def test_every_abuf_tensor_takes_its_own_size(params):
    """The memory map of the tiny model: each ABUF region is exactly as large as the golden
    tensor it holds (tokens / T rows per channel; S and P two query tiles, the halves of the
    software-pipelined softmax: 2·N key columns; the element-wise results a, m and gelu in
    their inputs' rows), and the placement is the peak of the tensors live together, not
    more."""
    cfg = preset("tiny")
    model = IntDiT(SPEC, params, cfg)
    prog = compile_model(model, isa.core_for(cfg))
    ms = IntDiT(SPEC, params, cfg).step(model.host_inputs(start_noise(SPEC, 0)[0], 999, 1))
    T, N = cfg.tile, SPEC.tokens
    pad = -(-ms.inputs.patches.shape[1] // T) * T
    shapes = {"pos": (N, SPEC.hidden), "patches": (N, pad), "x_embed.y": ms.embed.shape,
              "ln": ms.ln.shape, "f": ms.f.shape, "final.linear.y": (N, pad)}
    for i, b in enumerate(ms.blocks):
        shapes[f"h.{i}"] = b.x.shape
        shapes.update({f"blocks.{i}.{k}": getattr(b, k).shape for k in ("ln1", "h1", "ln2")})
        for k, src in (("a", "ln1"), ("m", "ln2"), ("gelu", "fc1")):    # in place
            assert getattr(b, k).shape == (b.layers[src].y if src == "fc1" else
                                           getattr(b, src)).shape
        shapes.update({f"blocks.{i}.{k}.y": ls.y.shape for k, ls in b.layers.items()})
        shapes.update({f"blocks.{i}.o": b.attn.o_tokens.shape, f"blocks.{i}.S": (2 * T, N),
                       f"blocks.{i}.P": (2 * T, N)})
    shapes[f"h.{len(ms.blocks)}"] = ms.blocks[-1].out.shape
    abuf = {n: r for n, r in prog.regions.items() if r.buf == "ABUF"}
    assert set(abuf) == set(shapes)
    for name, (n, c) in shapes.items():
        assert abuf[name].rows == n // T * c, name
    # The most ABUF live at once (first fit reaches it here): while v runs, pos (resident), the
    # block input h.0 (kept for the residual), a (read by qk and v), qk.y (2D) and v.y: 6·D.
    assert prog.rows_used("ABUF") == 6 * N // T * SPEC.hidden


def test_a_model_too_big_names_every_buffer(params, digits):
    with pytest.raises(ValueError, match=r"ABUF needs \d+ rows, the core has 4096 .*"
                                         r"GMEM needs 34816 rows"):
        compile_model(digits[0], isa.core_for(preset("fpga")))
    with pytest.raises(ValueError, match="rows must be an integer in 1..16"):
        compile_model(IntDiT(SPEC, params, preset("tiny")), isa.core_for(preset("tiny")), rows=0)
    with pytest.raises(ValueError, match=r"\['ABUF'\] cannot stream"):
        compile_model(IntDiT(SPEC, params, preset("tiny")), isa.core_for(preset("tiny")),
                      stream=("ABUF",))


def test_wide_buffers_widen_only_their_fields():
    assert isa.addr_bits(preset("fpga")) == isa.ADDR_BITS == 14
    cfg = preset("tiny", gmem_rows=40000)
    assert isa.addr_bits(cfg) == 16
    widths = {n: w for n, w, _d, _s in isa.cmd_layout(cfg, "GEMM")}
    assert widths["gsrc"] == widths["wbase"] == widths["ysrc"] == 16
    assert widths["rrow"] == widths["dst"] == 14
    cmd = isa.Cmd("GEMM", dict(gsrc=39999, wbase=3, ysrc=5, rrow=1, dst=2, accum=1, use_sreg=0,
                               sreg=0, pcache=0, rmax=2))
    assert isa.decode(cfg, isa.encode(cfg, cmd)).args == cmd.args
    assert preset("tiny", xbuf_rows=1 << 24).xbuf_rows == 1 << 24
    with pytest.raises(ConfigError, match="xbuf_rows"):
        preset("tiny", xbuf_rows=(1 << 24) + 1)
    assert isa.abuf_bits(cfg) == 14 and isa.abuf_bits(preset("tiny", abuf_rows=1 << 16)) == 16
    assert isa.abuf_bits(preset("tiny", abuf_rows=1 << 20)) == 20
    with pytest.raises(ConfigError, match="abuf_rows"):
        preset("tiny", abuf_rows=(1 << 20) + 1)
    # RBUF and VBUF (every layer's requantization rows, every block's adaLN vectors) widen
    # GEMM's rrow and VROW's vb (and c, which also addresses VBUF); MASK stays narrow.
    deep = preset("tiny", rbuf_rows=1 << 15, vbuf_rows=1 << 16)
    assert (isa.rbuf_bits(deep), isa.vbuf_bits(deep), isa.rbuf_bits(cfg)) == (15, 16, 14)
    vrow = {n: w for n, w, _d, _s in isa.cmd_layout(deep, "VROW")}
    assert vrow["vb"] == vrow["c"] == 16 and vrow["dst"] == 14
    assert {n: w for n, w, _d, _s in isa.cmd_layout(deep, "GEMM")}["rrow"] == 15
    for buf, limit in (("rbuf_rows", 1 << 16), ("vbuf_rows", 1 << 16), ("mask_rows", 1 << 14)):
        with pytest.raises(ConfigError, match=buf):
            preset("tiny", **{buf: limit + 1})

    def width(c):
        return max(sum(w for _n, w, _d, _s in isa.cmd_layout(c, op)) for op in isa.OPCODES) + 13

    # Up to an ABUF of 2**16 rows (and the deepest wide buffers) commands stay 128 bits; a deeper
    # ABUF (VROW's three ABUF fields) takes the 160-bit command, which holds the deepest core.
    wide = preset("tiny", gmem_rows=1 << 24)
    assert width(wide.replace(abuf_rows=1 << 16)) <= 128 == isa.cmd_bits(wide)
    assert width(wide.replace(abuf_rows=(1 << 16) + 1)) > 128
    deepest = preset("tiny", abuf_rows=1 << 20, gmem_rows=1 << 24, rbuf_rows=1 << 16,
                     vbuf_rows=1 << 16)
    assert isa.cmd_bits(deepest) == 160 >= width(deepest)
    assert all(isa.cmd_bits(preset(n)) == 128 for n in ("tiny", "fpga", "paper"))


def test_eps_drops_the_padding(digits):
    """A patch of 4 values at T = 8 is padded to 8 channels; eps comes back with 4."""
    model, depths = digits
    big = preset("fpga", **depths)
    with pytest.raises(ValueError, match=r"LOAD.addr = \d+ does not fit its 14 bits"):
        compile_model(model, isa.core_for(big))          # the model's cfg has 14-bit fields
    from dstar_rtl.models.digits import load_trained

    spec, p = load_trained()
    model = IntDiT(spec, p, big)
    prog = compile_model(model, isa.core_for(big))
    assert isa.addr_bits(big) == 17
    assert prog.patch_dim == (4, 8)
    assert prog.eps({"eps": np.arange(64 * 8).reshape(64, 8)}).shape == (64, 4)
    assert not any(prog.streamed.values())
    assert np.array_equal(prog.layers["x_embed"].W[4:], np.zeros((4, model.spec.hidden)))


def test_per_layer_bases_reach_the_core(params):
    """An operating point's per-layer bases (golden.dit_int.BASE_KEYS names): every layer's QCFG
    carries its own base, and the program still equals the integer model."""
    cfg = preset("tiny")
    bases = {"x_embed": 5, "blocks.0.attn.qkv": 4, "blocks.0.mlp.fc2": 7, "final.linear": 3}
    model = IntDiT(SPEC, params, cfg, base_log2=bases)
    assert model.blocks[0].bases == dict(qk=4, v=4, proj=cfg.base_log2, fc1=cfg.base_log2, fc2=7)
    assert (model.x_embed.B, model.final.B, model.blocks[0].B) == (5, 3, 4)
    prog = compile_model(model, isa.core_for(cfg))
    assert {c.base_log2 for c in prog.step if c.op == "QCFG"} >= {3, 4, 5, 7}
    ex = CoreExecutor(cfg, isa.core_for(cfg))
    ex.run(prog.init, prog.init_words)
    host = CoreSampler(prog, [IntDiT(SPEC, params, cfg, base_log2=bases)], 2)
    _sample(host, ex, seed=1, label=2)
    with pytest.raises(ValueError, match=r"base_log2 names \['blocks.0.mlp.fc3'\]"):
        IntDiT(SPEC, params, cfg, base_log2={"blocks.0.mlp.fc3": 4})
    with pytest.raises(ValueError, match=r"base_log2 of x_embed must be an integer in \[0, 8\]"):
        IntDiT(SPEC, params, cfg, base_log2={"x_embed": 9})


def test_a_result_over_its_input_starts_with_it_or_ends_with_it():
    """program.model._shared_offsets: a result no longer than its input starts with it, a
    longer one ends with it (its token tile t then covers input tiles up to t only); a chain
    shares one region; an input read after the result is written is refused."""
    from dstar_rtl.program.model import _shared_offsets

    rows = {"m": 8, "fc1": 16, "fc2": 8, "x": 8}
    life = {"m": (0, 1), "fc1": (1, 2), "fc2": (2, 3), "x": (0, 5)}
    at = _shared_offsets([("fc1", "m"), ("fc2", "fc1")], rows, life)
    assert at == {"m": ("m", 8), "fc1": ("m", 0), "fc2": ("m", 0)}
    with pytest.raises(AssertionError, match="read after it is written"):
        _shared_offsets([("fc2", "x")], rows, life)
