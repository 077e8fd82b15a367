"""The core's cycle model (perf/perf_model.py): its rules on hand-made command streams, and its
calibration and validation against the RTL core's own counters (tiny preset on Verilator in
``make test``; the full set of shapes and the fpga preset in ``make regress``)."""

import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.perf.core_work import Work, trace_work
from dstar_rtl.perf.perf_model import Timing, buffer_bytes, simulate
from dstar_rtl.program.isa import BUFFERS, core_for
from dstar_rtl.sim.perf_workloads import isolated, layer_steps, shapes

CFG = preset("tiny")
T = Timing.structural(CFG)
H = BUFFERS.index("ABUF")


def quant(g, **k):
    return Work("QUANT", dict(nch=8), ev=dict(gmem_writes=g), **k)


def gemm(g, **k):
    return Work("GEMM", {}, ev=dict(groups_replayed=g), **k)


def end():
    return Work("END", {})


def test_back_to_back_commands_cost_the_dispatch_interval():
    r = simulate(T, [Work("NOP", {})] * 5 + [end()])
    assert [b - a for a, b in zip(r.issue, r.issue[1:])] == [T.dispatch] * 5


def test_host_engine_runs_alone_and_follows_its_law():
    store = Work("STORE", dict(buf=H, count=3))
    r = simulate(T, [quant(40), store, end()])
    assert r.busy["H"] == 3 * (T.words["ABUF"] + T.store_row_extra) + T.store_fixed
    assert r.issue[1] >= r.complete[0]              # waited for Q to finish


def test_quant_and_gemm_overlap_under_semaphores():
    seq = [quant(30, signal=1), quant(30, signal=1), gemm(30, wait=1, signal=2),
           gemm(30, wait=1), end()]
    r = simulate(T, seq)
    assert r.issue[1] >= r.complete[0]              # one QUANT at a time
    assert r.issue[2] >= r.complete[0]              # the GEMM waits for its groups
    assert r.issue[2] < r.complete[1]               # ... and runs while the next QUANT does
    assert r.cycles < sum(r.busy.values()) + 5 * T.dispatch


def test_an_overlapped_vrow_runs_beside_q_and_m_only():
    """A VROW with ``overlap`` lets the QUANT and GEMM after it issue at once; the same VROW
    without it makes them wait for its end; the dispatcher's own commands (NOP) wait for it
    either way, and a VROW after it waits for the V engine."""
    def run(ovl):
        sm = Work("VROW", dict(vop_name="softmax_mx/tok", overlap=ovl),
                  ev=dict(vpu_rows=16, vpu_beats=256))
        return simulate(T, [sm, quant(30), gemm(30), Work("NOP", {}),
                            Work("VROW", dict(vop_name="softmax_mx/tok", overlap=ovl),
                                 ev=dict(vpu_rows=4, vpu_beats=16)), end()])
    a, b = run(1), run(0)
    assert a.issue[1] < a.complete[0] and a.issue[2] < a.complete[0]
    assert b.issue[1] >= b.complete[0]
    assert a.issue[3] >= a.complete[0] and a.issue[4] >= a.complete[0]
    assert a.cycles < b.cycles


def test_gemm_stream_respects_the_tile_period():
    r = simulate(T, [gemm(1) for _ in range(6)] + [end()])
    assert r.busy["M"] >= 5 * T.tile_period


def test_unsatisfiable_wait_is_refused():
    with pytest.raises(ValueError, match="semaphore 0"):
        simulate(T, [gemm(4, wait=1), end()])


def test_work_trace_counts_every_command_and_the_skips():
    cfg = CFG
    init, steps = layer_steps(cfg, shapes(cfg, "validation", steps=1)[0])
    works = trace_work(cfg, core_for(cfg), [init, steps[0]])
    assert len(works[1]) == len(steps[0][0])
    q = [w for w in works[1] if w.op == "QUANT"]
    g = [w for w in works[1] if w.op == "GEMM"]
    assert sum(w.n("gmem_writes") for w in q) > 0
    assert all(w.n("groups_replayed") > 0 for w in g)
    by = buffer_bytes(cfg, works[1])
    assert by["GMEM.read"] >= by["GMEM.write"] > 0


def test_isolated_program_keeps_skip_ranges():
    from dstar_rtl.program.isa import Cmd
    cmds = [Cmd("SKIP", dict(count=2)), Cmd("NOP", {}), Cmd("NOP", {}), Cmd("END", {})]
    iso = isolated(cmds)
    assert iso[1].op == "SKIP" and iso[1].args["count"] == 4
    assert [c.op for c in iso[2:7]] == ["STORE", "NOP", "STORE", "NOP", "STORE"]


@pytest.mark.cocotb
def test_model_matches_the_rtl_core_tiny():
    """Calibrate on the tiny core (Verilator) and validate on two other layer shapes over two
    steps: every compute section and every whole step within 3 % of the RTL's ``cycles`` (ten
    shapes in make regress)."""
    from dstar_rtl.bench.perf_validate import run
    rec = run(CFG, "verilator", n_validation=2, steps=2, block_steps=0, optimize=False)
    assert rec["shapes"] == 2
    s = rec["summary"]
    assert s["compute"]["max"] < 0.03, s
    assert s["step"]["max"] < 0.03, s
    for r in rec["rows"]:
        assert r["model"]["busy_H"] == r["rtl"]["busy_H"]   # the host law is exact


@pytest.mark.cocotb
@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny", "fpga"])
def test_model_matches_the_rtl_core_full(name):
    """The report's set: 10 validation shapes over 3 steps and the DiT block over 4 steps."""
    from dstar_rtl.bench.perf_validate import run
    rec = run(preset(name), "verilator")
    assert rec["shapes"] >= 10
    assert rec["summary"]["step"]["max"] < 0.03, rec["summary"]


@pytest.mark.cocotb
@pytest.mark.slow
def test_program_runner_on_icarus():
    """The program-runner testbench (tb/test_core_programs.py) on Icarus: a layer's isolated
    and plain runs, every stored word checked against the executor; the counters agree with
    Verilator's (the RTL is cycle-exact on both)."""
    from dstar_rtl.sim.core_programs import run_programs
    from dstar_rtl.sim.perf_workloads import isolated_program, plain_program
    s = shapes(CFG, "validation", steps=2)[0]
    progs = [isolated_program(CFG, s), plain_program(CFG, s).program]
    core = core_for(CFG)
    ica = run_programs(CFG, core, progs, "icarus", tag="icarus-check")
    ver = run_programs(CFG, core, progs, "verilator", tag="icarus-check")
    assert ica == ver


def test_vrow_law_interpolates_between_measured_row_lengths():
    """A VROW costs fixed + rows·c(nb), c piecewise linear through the measured points, the
    first below them and the slope of the last two beyond them."""
    t = Timing.structural(CFG, vrow_fixed={"softmax/tok": 5.0},
                          vrow_curve={"softmax/tok": [[1, 28.0], [4, 34.0], [16, 70.0]]})

    def cyc(rows, beats):
        return t.vrow(Work("VROW", dict(vop_name="softmax/tok"),
                           ev=dict(vpu_rows=rows, vpu_beats=beats)))

    assert cyc(2, 2) == 5 + 2 * 28                   # a point
    assert cyc(4, 40) == 5 + 4 * 52                  # nb 10: halfway between 4 and 16
    assert cyc(1, 32) == 5 + 118                     # nb 32: 70 + 3 · 16 beyond the last


def test_vrow_fit_recovers_a_law_from_isolated_commands():
    """Two row counts at one row length tell the fixed cycles apart; every row length gets its
    own cycles per row (app.benches.perf_validate._fit_vrow)."""
    from dstar_rtl.bench.perf_validate import _fit_vrow
    law = {1: 12.0, 4: 13.0, 10: 18.0}
    pts = [(r, r * nb, 7 + r * law[nb]) for r, nb in ((4, 1), (12, 1), (8, 4), (4, 10))]
    fit = _fit_vrow({"kv_amax/tok": pts})
    assert fit["vrow_fixed"]["kv_amax/tok"] == pytest.approx(7)
    assert fit["vrow_lat"]["kv_amax/tok"] == 0
    assert fit["vrow_curve"]["kv_amax/tok"] == [[1.0, 12.0], [4.0, 13.0], [10.0, 18.0]]


def test_vrow_fit_tells_a_latency_growing_with_the_row_apart():
    """Two row counts at two row lengths: the fixed cycles, those per beat of the last row
    (softmax_mx's output pass after the last row's exponentials) and those per row."""
    from dstar_rtl.bench.perf_validate import _fit_vrow
    law = {1: 4.0, 4: 5.5, 10: 10.0}
    pts = [(r, r * nb, 7 + 3 * nb + r * law[nb])
           for r, nb in ((4, 1), (12, 1), (8, 4), (4, 10), (12, 10))]
    fit = _fit_vrow({"softmax_mx/tok": pts})
    assert fit["vrow_fixed"]["softmax_mx/tok"] == pytest.approx(7)
    assert fit["vrow_lat"]["softmax_mx/tok"] == pytest.approx(3)
    assert fit["vrow_curve"]["softmax_mx/tok"] == [[1.0, 4.0], [4.0, 5.5], [10.0, 10.0]]


def test_a_program_with_dram_transfers_is_refused():
    """The model has no D engine yet: a DLOAD is refused by name, not timed as free."""
    from dstar_rtl.program.compiler import make_cmd

    cfg = preset("tiny", dram_width=32)
    cmds = [make_cmd(cfg, "DLOAD", buf=0, addr=0, count=4, dram=0), make_cmd(cfg, "END")]
    works = trace_work(cfg, core_for(cfg), [(cmds, [])])[0]
    with pytest.raises(ValueError, match="no D engine yet"):
        simulate(Timing.structural(cfg), works)
