"""``dstar sweep``: bad input is one line and exit status 2 with nothing written; the Pareto
front and the crossover on hand-made figures; one tiny end-to-end sweep (one DSTAR and the two
INT8 variants at 2 × 2 on the project's own small Liberty, tests/data/tiny_cells.lib, in a
private build folder; the QPU's parts from a stored report on that library)."""

import hashlib
import json
from pathlib import Path

import pytest

import dstar_rtl.app.cli
import dstar_rtl.flows.synth
from dstar_rtl.bench.sweep.design import bench_packing
from dstar_rtl.bench.sweep.figures import crossover, pareto_front
from dstar_rtl.golden.config import preset

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).parent.parent


@pytest.fixture(autouse=True)
def only_sweep(monkeypatch, tmp_path_factory):
    monkeypatch.setattr(dstar_rtl.app.cli, "COMMAND_MODULES", ("dstar_rtl.app.commands.sweep",))
    monkeypatch.setattr(dstar_rtl.flows.synth, "BUILD_ROOT",
                        tmp_path_factory.getbasetemp() / "fpga")


def run_dstar(capsys, *argv):
    rc = dstar_rtl.app.cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("bad", [
    ["--digits", "nibble"], ["--digit-product", "lut"], ["--acc", "24"], ["--lanes", "3"],
    ["--pe-stages", "3"], ["--weight-hop", "0"], ["--act-hop", "0"], ["--act-hop", "rows"],
    ["--act-hop", "x"], ["--sizes", "1"],
    ["--sizes", "4", "--measure-sizes", "8"], ["--jobs", "0"],
    ["--liberty", "no/such.lib"], ["--bench", "no/such.json"]])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, bad):
    out_dir = tmp_path / "out"
    rc, out, err = run_dstar(capsys, "sweep", "--liberty", DATA / "tiny_cells.lib",
                         "--out", out_dir, *bad)
    assert rc == 2
    assert err.startswith("dstar: error: ") and err.count("\n") == 1, err
    assert out == "" and not out_dir.exists()


def test_pareto_front():
    # (area, throughput per area): smaller area and more per area is better.
    pts = [(10, 5.0), (20, 4.0), (20, 6.0), (30, 6.0), (5, 1.0), (40, 9.0), (40, 9.0), (50, 2)]
    assert pareto_front(pts) == [0, 2, 4, 5]
    assert pareto_front([]) == []
    assert pareto_front([(1, 1)]) == [0]


def test_crossover():
    sizes = [4, 8, 16, 32, 64]
    int8 = {n: 10.0 for n in sizes}
    # DSTAR ahead from 16 on (ahead at 4 too, but behind at 8: the crossover is 16).
    got = crossover(sizes, {4: 11, 8: 9, 16: 10.5, 32: 12, 64: 15}, int8)
    assert got["size"] == 16 and got["miss"] is None and got["best_size"] == 64
    assert got["ratios"][64] == 1.5
    # Never ahead: no crossover, and by how much the best size misses.
    got = crossover(sizes, {4: 5, 8: 6, 16: 8, 32: 7, 64: 6}, int8)
    assert got["size"] is None and got["best_size"] == 16 and got["ahead"] == []
    assert got["miss"] == pytest.approx(10 / 6, abs=1e-4)          # at the largest size
    # Ahead only at the smallest sizes, behind at the largest: no crossover either.
    got = crossover(sizes, {4: 12, 8: 11, 16: 9, 32: 9, 64: 8}, int8)
    assert got["size"] is None and got["ahead"] == [4, 8] and got["miss"] == 1.25


@pytest.mark.slow
def test_tiny_sweep_end_to_end(tmp_path, capsys):
    """The sweep from the command line on a tiny library, end to end (make regress: 13 s of
    make test's 7 minutes; the tests above check its parts)."""
    lib = DATA / "tiny_cells.lib"
    # A stored ASIC report on the same library with the QPU by part (so the sweep does not
    # synthesize the QPU): the figures are made up, only their plumbing is checked.
    # It names the bench's QPU (preset and packer of reports/bench.json), as the sweep asks.
    bench_cfg = json.loads((ROOT / "reports" / "bench.json").read_text())
    packer = bench_packing(bench_cfg["config"])
    qpu_key = f"qpu-{bench_cfg['preset']}"
    asic = tmp_path / "asic_area.json"
    from dstar_rtl.app.reports.asic import AsicReport, AsicUnit, Worktree
    from dstar_rtl.results.asic import PartArea
    from dstar_rtl.results.base import Provenance
    from dstar_rtl.results.quantities import Library

    parts = {p: PartArea(area=a, combinational=a, sequential=0.0, ff=0, modules=1)
             for p, a in (("front", 200.0), ("chunker", 200.0), ("sorter", 300.0),
                          ("packer", 100.0), ("top (glue, stream control)", 200.0))}
    qpu = AsicUnit(area=1000.0, combinational=1000.0, sequential=0.0, ff=0, cells=1, ram_bits=0,
                   rom_bits=0, delay_ns=None, levels=None, seconds=None, booth=False,
                   config_hash=preset(bench_cfg["preset"], **packer).hash(), lever="",
                   same_design_as=None, memories=(), parts=parts)
    asic.write_text(AsicReport(
        Provenance.unrecorded(), liberty=Library("dstar_tiny", "tiny_cells.lib",
                                                 hashlib.sha256(lib.read_bytes()).hexdigest()),
        yosys="0.70", units={qpu_key: qpu}, best={}, ratios={}, levers={}, failed={},
        worktree=Worktree(None, ())).to_json())
    out_dir = tmp_path / "out"
    rc, out, err = run_dstar(capsys, "sweep", "--sizes", 2, "--measure-sizes", 2, "--lanes", 4,
                         "--pe-stages", 1, "--digit-product", "select", "--digits", "booth",
                         "--acc", "derived", "--weight-hop", 1, "--act-hop", 1,
                         "--throughput", "bench",
                         "--liberty", lib, "--asic-area", asic, "--bench",
                         ROOT / "reports" / "bench.json", "--out", out_dir, "--jobs", 1)
    assert rc == 0, err
    assert sorted(p.name for p in out_dir.iterdir()) == ["design_sweep.json", "design_sweep.md",
                                                         "design_sweep.png"]
    rep = json.loads((out_dir / "design_sweep.json").read_text())
    assert rep["liberty"]["name"] == "dstar_tiny"
    kinds = sorted(r["kind"] for r in rep["records"])
    assert kinds == ["dstar", "int8", "int8"]
    d = next(r for r in rep["records"] if r["kind"] == "dstar")
    assert d["area_source"] == "synthesis" and d["array_area"] > 0
    assert d["qpu_area"] > 0
    assert d["core_area"] == pytest.approx(d["array_area"] + d["qpu_area"], abs=0.2)
    bench = json.loads((ROOT / "reports" / "bench.json").read_text())["totals"]["all"]
    assert d["speedup"] == pytest.approx(bench["cycles_int8"] / bench["cycles_dstar"], rel=1e-3)
    assert any(r.get("pareto") for r in rep["records"])
    # The QPU came from the stored report (no QPU synthesis in this test).
    assert rep["qpu"]["area"] == 1000.0 and rep["qpu"]["preset"] == bench_cfg["preset"]
    assert "Crossover" in (out_dir / "design_sweep.md").read_text() or \
        "No crossover" in (out_dir / "design_sweep.md").read_text()
    assert (out_dir / "design_sweep.png").read_bytes()[:4] == b"\x89PNG"
    # The runner prints the report it wrote (the Markdown), progress goes to stderr.
    assert "crossover" in err and out == (out_dir / "design_sweep.md").read_text() + "\n"


def test_act_hop_lever():
    """``act_hop`` is swept with every ``weight_hop`` for both arrays; the configuration names,
    the PE kinds synthesized, the arrays' PE sums and the tile period follow it."""
    from dstar_rtl.bench.sweep.area import _sig, pe_sum
    from dstar_rtl.bench.sweep.design import (
        _measured_variants,
        baseline_variants,
        config_for,
        pe_kinds,
        plan_jobs,
        variants,
    )
    from dstar_rtl.bench.sweep.throughput import tile_period

    d = variants([4], [1], ["select"], ["booth"], ["derived"], ["1", "rows"], ["1", "cols"])
    b = baseline_variants([1], ["1", "rows"], ["1", "cols"])
    assert [v["key"] for v in d] == ["L4 s1 select/booth", "L4 s1 select/booth ahopcols",
                                     "L4 s1 select/booth hoprows",
                                     "L4 s1 select/booth hoprows ahopcols"]
    assert "int8 s1 -booth hoprows ahopcols" in [v["key"] for v in b] and len(b) == 8
    cfg = config_for(d[3], 16)
    assert (cfg.weight_hop, cfg.act_hop) == (16, 16)
    assert config_for(b[2], 8, True).act_hop == 8
    assert pe_kinds(d, b) == [(True, True), (True, False), (False, True), (False, False)]
    assert pe_kinds(d[:1], b[:2]) == [(True, True)]
    # Arrays with act_hop cols are measured for the last datapath only; every PE kind once.
    meas = [v["key"] for v in _measured_variants(d, b)]
    assert "L4 s1 select/booth hoprows ahopcols" in meas
    plan = plan_jobs(d, b, [4])
    pes = [p for p in plan if p[1] == "pe"]
    assert len(pes) == 4 and len({p[0] for p in pes}) == 4
    # Σ PE area: a PE registering w_out costs 8, a_out 4, the rest 1 (made-up areas).
    runs = {_sig(u, ov, bo, pa): dict(area=1 + 8 * (ov.get("weight_hop", 1) == 1)
                                      + 4 * (ov.get("act_hop", 1) == 1))
            for _, u, ov, bo, pa in pes}
    n = 8
    assert pe_sum(d[0], n, runs) == n * n * 13
    assert pe_sum(d[1], n, runs) == n * 13 + n * (n - 1) * 9      # one column registers a_out
    assert pe_sum(d[3], n, runs) == 13 + (n - 1) * 9 + (n - 1) * 5 + (n - 1) ** 2
    # The tile period loses (n - 1) // act_hop cycles of column skew.
    assert tile_period(n, 1, 1, 1) - tile_period(n, 1, 1, n) == n - 1
    assert tile_period(n, 1, n, n) == 1 + 4 + n
