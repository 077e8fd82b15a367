"""cocotb regression of the core: a DiT block over denoising steps bit-exact in both simulators
(``tiny`` in ``make test``; ``fpga``, more steps, a reduction longer than ``max_reduction`` and an
ABUF deeper than the narrow fields in ``make regress``: the executor runs the last two in
``make test``, tests/test_core_program.py)."""

import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.sim.runner import run_cocotb


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_core_tiny(simulator):
    # Verilator: cache, reuse, cache (the state carried across a reuse step); Icarus, about
    # ten times slower per cycle: the cache step (every step on Icarus in make regress).
    steps = "3" if simulator == "verilator" else "1"
    run_cocotb("core", preset("tiny"), simulator, "dstar_rtl.tb.test_core", seed=1,
               extra_env={"DSTAR_STEPS": steps})


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", [
    "verilator", pytest.param("icarus", marks=pytest.mark.slow)])
def test_core_tiny_reduction_pieces(simulator):
    """Every layer's reduction split into pieces (program/compiler.py: a piece's QUANT beside the
    previous piece's GEMMs, each GEMM adding into Y): the cache step bit-exact against the
    unsplit golden block, host words and counters equal to the executor's (on Icarus, which
    runs the testbench in the fast tier with ``test_core_tiny``, in make regress)."""
    run_cocotb("core", preset("tiny"), simulator, "dstar_rtl.tb.test_core", seed=6,
               extra_env={"DSTAR_STEPS": "1", "DSTAR_PIECES": "qk=2,v=3,proj=2,fc1=4,fc2=5"},
               testcase="dit_block_over_steps", tag="pieces")


#: Issue 31's core variants, the cache step each: ``long-reduction``, an MLP of 48 channels at
#: max_reduction 32 (fc2 in its golden layer's 2 pieces, each adding into Y and saturating after
#: each; GELU's rows in 2 VROWs); ``deep-abuf``, an ABUF of 2**14 + 2048 rows (ABUF addresses
#: and LOAD/STORE fields of 15 bits) with the block's activations from row 2**14;
#: ``wide-commands``, an ABUF of 2**16 + 2048 rows (17-bit ABUF fields: 160-bit commands) with
#: the block's activations from row 2**16; ``deep-params``, RBUF and VBUF of 2**14 + 64 rows
#: (GEMM rrow and VROW vb, c of 15 bits); ``long-layernorm``, hidden 32 (8 heads of 4) at
#: max_reduction 16 and ln_row_max 32 (each LayerNorm row read and sent to the VPU twice, every
#: hidden-wide layer in 2 pieces); ``wide-heads``, 2 heads of 32 at T = 4 (d·T = 128 >
#: max_reduction 64: the K/V shifts by token rows, Kᵀ by chunks of 16 channels);
#: ``padded-heads``, hidden 24 in 4 heads of 6 at T = 4 (o laid
#: out in heads of 8, P·V's last column block writing 2 zero channels per head, proj reading
#: them through zero weight rows); ``stored-y`` (issue 47), YBUF at ``ystate_width`` with
#: ``ystate_frac = 1`` (numerics §2.5: the running sums shifted back and rounded out per lane).
VARIANTS = {
    "stored-y": (dict(ystate_frac=1), {}),
    "long-reduction": (dict(max_reduction=32), {"DSTAR_MLP_RATIO": "3"}),
    "deep-abuf": (dict(abuf_rows=(1 << 14) + 2048), {"DSTAR_ABUF_BASE": str(1 << 14)}),
    "wide-commands": (dict(abuf_rows=(1 << 16) + 2048), {"DSTAR_ABUF_BASE": str(1 << 16)}),
    "deep-params": (dict(rbuf_rows=(1 << 14) + 64, vbuf_rows=(1 << 14) + 64), {}),
    "long-layernorm": (dict(max_reduction=16, ln_row_max=32, abuf_rows=4096, xbuf_rows=1024,
                            ybuf_rows=1024, wmem_rows=4096, gmem_rows=4096),
                       {"DSTAR_HIDDEN": "32", "DSTAR_HEADS": "8"}),
    "wide-heads": (dict(abuf_rows=4096, xbuf_rows=2048, ybuf_rows=2048, wmem_rows=8192,
                        gmem_rows=4096, rbuf_rows=256, vbuf_rows=128),
                   {"DSTAR_HIDDEN": "64", "DSTAR_HEADS": "2", "DSTAR_MLP_RATIO": "1"}),
    "padded-heads": (dict(abuf_rows=4096, xbuf_rows=1024, ybuf_rows=1024, wmem_rows=2048,
                          gmem_rows=2048),
                     {"DSTAR_HIDDEN": "24", "DSTAR_HEADS": "4"}),
}


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_core_tiny_variant(variant, simulator):
    """Bit-exact against the golden block, host words and counters equal to the executor's."""
    overrides, env = VARIANTS[variant]
    run_cocotb("core", preset("tiny", **overrides), simulator, "dstar_rtl.tb.test_core", seed=2,
               extra_env={"DSTAR_STEPS": "1", **env}, testcase="dit_block_over_steps",
               tag=variant)


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", [
    "verilator", pytest.param("icarus", marks=pytest.mark.slow)])
def test_int8_core_tiny(simulator):
    """The INT8 core (``datapath = "int8"``, numerics §2.8): the same block and testbench against
    ``Int8DiTBlock``, a cache and a reuse step (the testbench runs on Icarus in the fast tier
    with the DSTAR core; the INT8 core on Icarus in make regress)."""
    run_cocotb("core", preset("tiny", datapath="int8"), simulator, "dstar_rtl.tb.test_core", seed=4,
               extra_env={"DSTAR_STEPS": "2"}, testcase="dit_block_over_steps", tag="int8")


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_int8_core_fpga(simulator):
    run_cocotb("core", preset("fpga", datapath="int8"), simulator, "dstar_rtl.tb.test_core", seed=5,
               extra_env={"DSTAR_STEPS": "4"}, tag="int8-fpga")


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_core_fpga(simulator):
    run_cocotb("core", preset("fpga"), simulator, "dstar_rtl.tb.test_core", seed=2,
               extra_env={"DSTAR_STEPS": "4"}, tag="fpga")


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_core_tiny_long(simulator):
    run_cocotb("core", preset("tiny"), simulator, "dstar_rtl.tb.test_core", seed=3,
               extra_env={"DSTAR_STEPS": "8", "DSTAR_WORKLOAD_SEED": "7"}, tag="long")


@pytest.mark.cocotb
def test_core_perf_record():
    """The perf bench on ``tiny`` (Verilator): its record is consistent (figures are for
    reports/core.md, not asserted here)."""
    from dstar_rtl.bench.core import MATRIX_SECTIONS, baseline_side_by_side, measure
    from dstar_rtl.program.compiler import compile_block
    from dstar_rtl.program.isa import core_for
    from dstar_rtl.program.workloads import block_workload

    cfg = preset("tiny")
    perf = measure(cfg, steps=2, optimize=False)
    make_block, _ = block_workload(cfg, 1)
    names = [n for n, _, _ in compile_block(make_block(), core_for(cfg)).sections]
    assert [s["cache"] for s in perf["steps"]] == [True, False]
    for s in perf["steps"]:
        assert [x["name"] for x in s["sections"]] == names
        assert s["cycles"] == sum(x["cycles"] for x in s["sections"])
        for x in s["sections"]:
            c = x["counters"]
            assert all(v >= 0 for v in c.values()), x["name"]
            assert c.get("lanes_valid", 0) <= cfg.lanes * c.get("groups_replayed", 0)
            assert x["cycles"] > 0
    reuse = {x["name"]: x["counters"] for x in perf["steps"][1]["sections"]}
    assert not reuse["qk"].get("groups_replayed") and not reuse["attn.cache"].get("busy_Q")
    assert reuse["attn.pv"]["pcache_groups_read"] > 0
    side = baseline_side_by_side(cfg, perf, 0)
    assert {r["section"] for r in side} == set(MATRIX_SECTIONS)
    assert perf["sim"]["cycles_per_s"] > 0


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_core_dram_port(simulator):
    """The DRAM port (docs/core.md §9) behind cocotbext-axi's AXI RAM with random pauses on
    every channel: every buffer through DRAM, a differential layer over steps with its operands
    and state moved beside the engines, an error response (tb/test_core_dram.py)."""
    run_cocotb("core", preset("tiny", dram_width=32), simulator, "dstar_rtl.tb.test_core_dram",
               seed=4)
