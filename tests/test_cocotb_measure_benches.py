"""The measurement testbenches (the ``dstar measure`` / ``dstar bench`` drivers' cocotb modules) in
the fast tier, on the simulator(s) no other fast test runs them on, at ``tiny`` with a small
workload, through their drivers (``tb.test_mpu_speed`` directly: ``dstar measure arrays`` builds
it at ``-O2`` in a private build folder). Every testbench checks its outputs against golden
inside, so a pass is a bit-exact run. Each reuses the default (``-O0``, no waves) build of its
unit at ``tiny`` that the units' regressions already make, so the cost is the run alone.

:data:`FAST_RUNS` is the project rule's ledger ("every testbench runs on Verilator and Icarus in
the fast tier"): for every ``tb/test_*.py`` module, the fast tests that run it on each simulator.
:func:`test_every_testbench_runs_on_both_simulators_in_the_fast_tier` fails when a testbench on
disk has no entry (or an entry names a test that is gone or marked slow).
"""

import ast
import json
from pathlib import Path

import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.sim.runner import SIMULATORS, run_cocotb

ROOT = Path(__file__).resolve().parent.parent
CFG = preset("tiny")
HERE = "tests/test_cocotb_measure_benches.py"


# ------------------------------------------------------------------------------ the runs
@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_baseline_block(simulator):
    """``bench.core.measure_baseline`` (``tb.test_baseline_block``) on a one-tile-per-head
    block (every matrix section, one or two tiles each): every drain beat checked."""
    from dstar_rtl.bench.core import MATRIX_SECTIONS, measure_baseline

    T = CFG.tile
    perf = dict(spec=dict(tokens=T, hidden=T, heads=1, head_dim=T, mlp=T), mask_kept=1)
    got = measure_baseline(CFG, perf, simulator)
    assert set(got) == set(MATRIX_SECTIONS)
    assert all(c > 0 for c in got.values())


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_mpu_speed(simulator, tmp_path):
    """``tb.test_mpu_speed`` as ``dstar measure arrays`` runs it (its knobs), two short tiles on
    the regression's build instead of a private ``-O2`` one: the stream checked beat for beat."""
    out = tmp_path / "speed.json"
    run_cocotb("mpu", CFG, simulator, "dstar_rtl.tb.test_mpu_speed", seed=1, tag="speed",
               extra_env={"DSTAR_SPEED_JSON": str(out), "DSTAR_SPEED_TILES": "2",
                          "DSTAR_SPEED_CHANNELS": "8"})
    r = json.loads(out.read_text())
    assert r["checked"] and r["tiles"] == 2 and r["channels"] == 8
    assert r["cycles"] >= r["run_cycles"] > 0 and r["cycles_per_s"] > 0


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_vpu_cycles(simulator):
    """``bench.vpu.measure`` (``tb.test_vpu_cycles``) as ``dstar measure vpu`` runs it
    (every operation, three row lengths, three rows each: about a second on tiny), every output
    checked against golden."""
    from dstar_rtl.bench.vpu import lengths, measure
    from dstar_rtl.golden.layouts import VPU_OPS

    r = measure(CFG, simulator)
    assert r["simulator"] == simulator and set(r["table"]) == set(VPU_OPS)
    for op, by_n in r["table"].items():
        assert set(by_n) == {str(n) for n in lengths(CFG)}, op
        assert all(c["latency"] > 0 and c["interval"] > 0 for c in by_n.values()), op


@pytest.mark.cocotb
def test_core_perf_icarus():
    """``bench.core.measure`` (``tb.test_core_perf``) on Icarus, one cache step: every
    section's outputs checked against the golden block (Verilator: tests/test_cocotb_core.py)."""
    from dstar_rtl.bench.core import measure

    perf = measure(CFG, steps=1, optimize=False, simulator="icarus", model_speed=False)
    assert [s["cache"] for s in perf["steps"]] == [True] and perf["sim"]["model"] is None
    s = perf["steps"][0]
    assert s["cycles"] == sum(x["cycles"] for x in s["sections"]) > 0


@pytest.mark.cocotb
def test_core_programs_icarus():
    """``sim.core_programs.run_programs`` (``tb.test_core_programs``) on Icarus: one
    layer's
    init and one counter-read step, every stored word checked against the ISA executor
    (Verilator: tests/test_perf_model.py)."""
    from dstar_rtl.program.isa import core_for
    from dstar_rtl.sim.core_programs import counter_reads, run_programs
    from dstar_rtl.sim.perf_workloads import plain_program, shapes

    prog = plain_program(CFG, shapes(CFG, "validation", steps=1)[0]).program
    out = run_programs(CFG, core_for(CFG), [prog], "icarus", tag="fast")
    words = out[prog.name]
    assert len(words) == len(prog.runs)
    reads = counter_reads(CFG, prog.runs[1][0], words[1])
    assert len(reads) == 4 and reads[-1]["cycles"] > reads[0]["cycles"]


@pytest.mark.cocotb
def test_qpu_rate_verilator():
    """``bench.qpu.run_rate`` (``tb.test_qpu_rate``) on Verilator, two difference tiles:
    both output streams compared with golden beat for beat (Icarus, and a changed beat failing:
    tests/test_cocotb_qpu.py)."""
    import numpy as np

    from dstar_rtl.bench.qpu import rate_job, run_rate
    from dstar_rtl.golden.vectors import qpu_workload_from_tiles

    rng = np.random.default_rng(3)
    tiles = [rng.integers(-300, 300, (CFG.tile, 6)) for _ in range(2)]
    job = rate_job(qpu_workload_from_tiles(CFG, tiles))
    r = run_rate(CFG, job, "verilator")
    assert len(r["group_cycles"]) == job["groups"] > 0


# ---------------------------------------------------------------------------- the ledger
#: ``{tb module: {simulator: [fast tests that run it there, "file::function"]}}``.
FAST_RUNS = {
    "dstar_rtl.tb.test_baseline": dict.fromkeys(SIMULATORS, [
        "tests/test_cocotb_arrays.py::test_array_regression"]),
    "dstar_rtl.tb.test_baseline_block": dict.fromkeys(SIMULATORS, [f"{HERE}::test_baseline_block"]),
    "dstar_rtl.tb.test_bench_layers": {
        "verilator": ["tests/test_bench.py::test_quick_bench_verilator"],
        "icarus": ["tests/test_bench.py::test_any_dit_from_a_trace_and_weights_every_step",
                   "tests/test_bench.py::test_any_dit_at_an_operating_point"]},
    "dstar_rtl.tb.test_chain": dict.fromkeys(SIMULATORS, [
        "tests/test_cocotb_qpu.py::test_qpu_regression"]),
    "dstar_rtl.tb.test_core": dict.fromkeys(SIMULATORS,
                                            ["tests/test_cocotb_core.py::test_core_tiny"]),
    "dstar_rtl.tb.test_core_dram": dict.fromkeys(SIMULATORS,
                                                 ["tests/test_cocotb_core.py::test_core_dram_port"]),
    "dstar_rtl.tb.test_core_perf": {
        "verilator": ["tests/test_cocotb_core.py::test_core_perf_record"],
        "icarus": [f"{HERE}::test_core_perf_icarus"]},
    "dstar_rtl.tb.test_core_programs": {
        "verilator": ["tests/test_perf_model.py::test_model_matches_the_rtl_core_tiny"],
        "icarus": [f"{HERE}::test_core_programs_icarus"]},
    "dstar_rtl.tb.test_core_reset": dict.fromkeys(SIMULATORS, [
        "tests/test_cocotb_reset.py::test_reset_mid_stream"]),
    "dstar_rtl.tb.test_mpu": dict.fromkeys(SIMULATORS, [
        "tests/test_cocotb_arrays.py::test_array_regression"]),
    "dstar_rtl.tb.test_mpu_speed": dict.fromkeys(SIMULATORS, [f"{HERE}::test_mpu_speed"]),
    "dstar_rtl.tb.test_pe": dict.fromkeys(SIMULATORS,
                                          ["tests/test_cocotb_pe.py::test_pe_regression"]),
    "dstar_rtl.tb.test_qpu": dict.fromkeys(SIMULATORS,
                                           ["tests/test_cocotb_qpu.py::test_qpu_regression"]),
    "dstar_rtl.tb.test_qpu_rate": {
        "verilator": [f"{HERE}::test_qpu_rate_verilator"],
        "icarus": ["tests/test_cocotb_qpu.py::test_the_rate_bench_checks_both_output_streams"]},
    "dstar_rtl.tb.test_sample": dict.fromkeys(SIMULATORS, [
        "tests/test_cocotb_sample.py::test_tiny_model_on_the_core"]),
    "dstar_rtl.tb.test_uart_core": dict.fromkeys(SIMULATORS, [
        "tests/test_cocotb_uart.py::test_uart_core_layer"]),
    "dstar_rtl.tb.test_uart_vpu": dict.fromkeys(SIMULATORS,
                                                ["tests/test_cocotb_uart.py::test_uart_vpu"]),
    "dstar_rtl.tb.test_vpu": dict.fromkeys(SIMULATORS,
                                           ["tests/test_cocotb_vpu.py::test_vpu_regression"]),
    "dstar_rtl.tb.test_vpu_cycles": dict.fromkeys(SIMULATORS, [f"{HERE}::test_vpu_cycles"]),
    "dstar_rtl.tb.test_vpu_reset": dict.fromkeys(SIMULATORS, [
        "tests/test_cocotb_reset.py::test_reset_mid_stream"]),
}


def _marks(path: str, name: str):
    """The ``pytest.mark`` names decorating test function ``name`` of ``path`` (read from the
    source, not imported), or ``None`` when there is no such function."""
    tree = ast.parse((ROOT / path).read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return {d.attr if isinstance(d, ast.Attribute) else d.func.attr
                    for d in node.decorator_list
                    if "pytest.mark." in ast.unparse(d)}
    return None


def test_every_testbench_runs_on_both_simulators_in_the_fast_tier():
    """:data:`FAST_RUNS` covers exactly the ``tb/test_*.py`` files on disk, each on every
    simulator, and names only existing ``cocotb`` tests not marked ``slow`` (as a whole: the
    marks of single parameters are not read, the entry names the function of the fast ones)."""
    on_disk = {f"dstar_rtl.tb.{p.stem}" for p in (ROOT / "dstar_rtl" / "tb").glob("test_*.py")}
    missing, gone = sorted(on_disk - set(FAST_RUNS)), sorted(set(FAST_RUNS) - on_disk)
    assert not missing, f"testbenches with no fast-tier run listed in FAST_RUNS: {missing}"
    assert not gone, f"FAST_RUNS lists testbenches that are gone: {gone}"
    for tb, by_sim in FAST_RUNS.items():
        assert set(by_sim) == set(SIMULATORS), f"{tb}: listed on {sorted(by_sim)} only"
        for sim, tests in by_sim.items():
            assert tests, f"{tb} has no fast test on {sim}"
            for node in tests:
                marks = _marks(*node.split("::"))
                assert marks is not None, f"{tb} on {sim}: {node} does not exist"
                assert "cocotb" in marks and "slow" not in marks, (
                    f"{tb} on {sim}: {node} is not a fast cocotb test (marks {sorted(marks)})")
