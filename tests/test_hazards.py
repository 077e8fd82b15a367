"""The hazard check of program/hazards.py: the compiled DiT block (cache and reuse steps, tiny
and fpga) and the whole model have no two commands that may overlap on the same rows; a program
with one ordering taken away, or with the software pipeline's two halves made one, has them, and
the check names the pair."""

import dataclasses

import numpy as np
import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.golden.dit_int import IntDiTBlock
from dstar_rtl.golden.layouts import VPU_OPS
from dstar_rtl.models.dit import DiTSpec, init_params
from dstar_rtl.program.compiler import S_READY, compile_block
from dstar_rtl.program.hazards import accesses, check_program, hazards
from dstar_rtl.program.isa import Cmd, core_preset

SPEC = DiTSpec(image_size=8, patch=2, hidden=16, heads=2, depth=1)   # N 16, D 16, d 8


def _runs(name, edit=None, pieces=None):
    cfg = preset(name)
    params = init_params(SPEC, 1)
    T = cfg.tile
    nb = SPEC.tokens // T
    mask = np.ones((SPEC.heads, nb, nb), bool)
    mask[0, 0, nb - 1] = mask[1, nb - 1, 0] = False
    blk = IntDiTBlock(params, 0, SPEC, cfg, mask, interval=2, pieces=pieces)
    core = core_preset(name)
    prog = compile_block(blk, core, pieces)
    step = prog.step_commands()
    if edit is not None:
        step = edit(prog, step)
    rng = np.random.default_rng(1)
    runs = [(prog.init_commands(), prog.init_host_words())]
    for _ in range(2):                          # a cache step and a reuse step
        x = rng.integers(-3000, 3000, (SPEC.tokens, SPEC.hidden))
        m = rng.integers(-3000, 3000, (6, SPEC.hidden))
        runs.append((step, prog.step_host_words(x, m)))
    return cfg, core, prog, runs


def _softmaxes(step):
    return [i for i, c in enumerate(step) if c.op == "VROW" and c.overlap]


@pytest.mark.parametrize("name", ["tiny", "fpga"])
def test_compiled_block_has_no_hazard(name):
    cfg, core, prog, runs = _runs(name)
    assert check_program(cfg, core, runs) == 0
    acc = accesses(cfg, core, runs)[1]
    # The check saw the overlapped softmaxes and what they touch.
    sm = [a for a in acc if a.cmd.op == "VROW" and a.cmd.overlap]
    assert sm and all("ABUF" in a.reads and "ABUF" in a.writes and "RMAX" in a.reads
                      for a in sm)


def test_reduction_pieces_have_no_hazard():
    """Layers split into reduction pieces (the QUANT of a piece beside the GEMMs of the one
    before, in the two group slots) keep the check clean."""
    pieces = {"qk": 2, "v": 3, "fc1": 4, "fc2": 5}
    cfg, core, prog, runs = _runs("tiny", pieces=pieces)
    whole = _runs("tiny")[2]
    nt = SPEC.tokens // cfg.tile
    assert (sum(c.op == "QUANT" for c in prog.step_commands())
            == sum(c.op == "QUANT" for c in whole.step_commands())
            + nt * sum(p - 1 for p in pieces.values()))
    assert check_program(cfg, core, runs) == 0


def test_a_missing_wait_is_a_hazard():
    """The second softmax without its wait for the scores: the GEMMs that write them may still
    run, a read after write on ABUF between a GEMM and the VROW."""
    def drop(prog, step):
        i = _softmaxes(step)[1]
        step = list(step)
        step[i] = dataclasses.replace(step[i], wait=step[i].wait & ~S_READY)
        return step
    cfg, core, prog, runs = _runs("tiny", drop)
    found = [h for r, h in hazards(cfg, core, runs) if r == 1]
    i = _softmaxes(runs[1][0])[1]
    assert any(h.second == i and h.kind == "RAW" and h.buffer == "ABUF"
               and runs[1][0][h.first].op == "GEMM" for h in found), found
    with pytest.raises(ValueError, match="data hazard"):
        check_program(cfg, core, runs)


def test_one_half_for_every_query_tile_is_a_hazard():
    """The scores and P of every query tile in the same half: the next tile's S GEMMs overwrite
    the scores the softmax still reads (WAR), and the softmax overwrites the P that QUANT reads."""
    def one_half(prog, step):
        N = SPEC.tokens
        S, P = prog.regions["S"], prog.regions["P"]
        out = []
        for c in step:
            a = dict(c.args)
            if c.op == "GEMM" and S.base + N <= a["dst"] < S.base + 2 * N:
                a["dst"] -= N
            if c.op == "VROW" and VPU_OPS[a["vop"]] == "softmax_mx":
                a["a"] = S.base + (a["a"] - S.base) % N
                a["dst"] = P.base + (a["dst"] - P.base) % N
            if c.op == "QUANT" and P.base <= a["src"] < P.base + 2 * N:
                a["src"] = P.base + (a["src"] - P.base) % N
            out.append(Cmd(c.op, a, c.wait, c.signal))
        return out
    cfg, core, prog, runs = _runs("tiny", one_half)
    kinds = {(h.kind, h.buffer) for r, h in hazards(cfg, core, runs) if r == 1}
    assert ("WAR", "ABUF") in kinds


def test_without_overlap_nothing_is_checked_against_the_vrows():
    """The same program with every softmax alone (overlap 0) is hazard-free whatever its
    semaphores: a plain VROW waits for every engine and blocks the rest."""
    def plain(prog, step):
        return [dataclasses.replace(c, args={**c.args, "overlap": 0}, wait=c.wait & ~S_READY)
                if c.op == "VROW" and c.overlap else c for c in step]
    cfg, core, prog, runs = _runs("tiny", plain)
    assert hazards(cfg, core, runs) == []


def test_whole_model_step_has_no_hazard():
    """The tiny DiT's step program (every block, the embedding and the final layer, the ABUF
    tensors placed by lifetime) on a cache step: no hazard."""
    from dstar_rtl.models.dit import DIT_MODELS, start_noise
    from dstar_rtl.models.dit_int_model import IntDiT
    from dstar_rtl.program import isa
    from dstar_rtl.program.model import compile_model

    spec = DIT_MODELS["tiny"]
    cfg = preset("tiny")
    model = IntDiT(spec, init_params(spec, 0), cfg)
    prog = compile_model(model, isa.core_for(cfg))
    inputs = model.host_inputs(start_noise(spec, 0)[0], 999, 1)
    runs = [(prog.init, prog.init_words),
            (prog.step, prog.host_words([inputs], prog.initial_state(), True))]
    assert check_program(cfg, isa.core_for(cfg), runs) == 0
    assert any(c.op == "VROW" and c.overlap for c in prog.step)


@pytest.mark.parametrize("overrides, stream", [
    (dict(dram_width=32), ("WMEM", "XBUF", "YBUF")),
    (dict(dram_width=32, mlp_chunks=2), ("WMEM", "XBUF", "YBUF")),
    (dict(dram_width=64, datapath="int8"), ("WMEM",)),
    (dict(dram_width=32, datapath="int8", wmem_rows=192), ("WMEM",)),
])
def test_whole_model_through_dram_has_no_hazard(overrides, stream):
    """The tiny DiT with its weights and state in DRAM (each layer's objects loaded beside the
    layer before it, its state a token tile at a time beside the GEMMs, the P cache as group
    streams): no hazard on a cache step and on the reuse step after it (which skips the qk
    layers and their loads)."""
    from dstar_rtl.models.dit import DIT_MODELS, start_noise
    from dstar_rtl.models.dit_int_model import IntDiT
    from dstar_rtl.program import isa
    from dstar_rtl.program.model import compile_model

    spec = DIT_MODELS["tiny"]
    cfg = preset("tiny", **overrides)
    model = IntDiT(spec, init_params(spec, 0), cfg)
    prog = compile_model(model, isa.core_for(cfg), stream=stream)
    inputs = model.host_inputs(start_noise(spec, 0)[0], 999, 1)
    state = prog.initial_state()
    runs = [(prog.init, prog.init_words)] + [
        (prog.step, prog.host_words([inputs], state, cache)) for cache in (True, False)]
    assert check_program(cfg, isa.core_for(cfg), runs) == 0
    d = [c for c in prog.step if c.op in ("DLOAD", "DSTORE")]
    assert any(c.op == "DSTORE" and c.groups for c in d)          # the P cache, both cores
    state = isa.DRAM_BUFFERS.index("XBUF"), isa.DRAM_BUFFERS.index("YBUF")
    assert any(c.op == "DSTORE" and c.buf in state for c in d) == (cfg.datapath == "dstar")


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [
    {},                                                    # the whole model on chip
    {"dram_width": 64, "mlp_chunks": 2},                   # in DRAM, MLP chunks
    {"dram_width": 64, "datapath": "int8", "wmem_rows": 4608},     # in DRAM, column passes
], ids=["on-chip", "dram-mlp-chunks", "dram-int8-column-passes"])
def test_trained_digits_model_on_fpga_has_no_hazard(overrides):
    """The program `dstar sample` runs on the fpga core (the trained digits DiT, buffers deep
    enough to hold it, 6,240 commands a step; or through DRAM at the least buffers): no hazard
    on a cache step, nor through DRAM on the reuse step after it (about a minute each)."""
    from dstar_rtl.models.digits import load_trained
    from dstar_rtl.models.dit import start_noise
    from dstar_rtl.models.dit_int_model import IntDiT
    from dstar_rtl.program import isa
    from dstar_rtl.program.model import compile_model, resident_depths

    spec, p = load_trained()
    base = preset("fpga", **overrides)
    cfg = preset("fpga", **overrides, **{k: v for k, v in resident_depths(
        IntDiT(spec, p, base)).items() if k not in overrides and v})
    model = IntDiT(spec, p, cfg)
    core = isa.core_for(cfg)
    prog = compile_model(model, core)
    inputs = model.host_inputs(start_noise(spec, 0)[0], 999, 1)
    state = prog.initial_state()
    runs = [(prog.init, prog.init_words)] + [
        (prog.step, prog.host_words([inputs], state, cache))
        for cache in ((True, False) if cfg.dram_width else (True,))]
    assert check_program(cfg, core, runs) == 0
