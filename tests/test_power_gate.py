"""Gate-level simulation and energy (make regress): the INT8 array and the MPU mapped to the
Nangate45 cells pass their RTL testbenches bit for bit, two independent transition counts of the
same netlist agree (Verilator's toggle coverage and the waveform read with pyvcd), and
``dstar power`` writes its three files with both arrays checked against golden."""

import json

import pytest

import dstar_rtl.app.cli
from dstar_rtl.bench.resources import NANGATE, unit_config
from dstar_rtl.golden.config import preset

#: The library is the user's (never in the project): the Nangate45 copy beside it, as `dstar
#: power` defaults to; without it these fail naming the missing file.
pytestmark = [pytest.mark.slow, pytest.mark.cocotb]


def _netlist(unit, cfg):
    from dstar_rtl.flows.gate import gate_sources
    from dstar_rtl.flows.synth import synthesize
    res = synthesize(unit, cfg, "asic", liberty=NANGATE, parts=True, reuse=True)
    return gate_sources(res["workdir"])


@pytest.mark.parametrize("unit, module", [("baseline", "dstar_rtl.tb.test_baseline"),
                                          ("mpu", "dstar_rtl.tb.test_mpu")])
def test_gate_level_netlist_passes_the_rtl_testbench(unit, module):
    from dstar_rtl.sim.runner import run_cocotb
    cfg = unit_config(unit, preset("tiny"))
    run_cocotb(unit, cfg, "verilator", module, seed=3, netlist=_netlist(unit, cfg), tag="gate")


def test_two_transition_counts_agree():
    """The same run (same seed, testbench and netlist) counted by Verilator's toggle coverage
    and from its VCD: the coverage counts every evaluation within a time step (the testbench's
    writes land after the clock edge's), so it may count more, within a few percent."""
    from dstar_rtl.flows.power import toggles_from_coverage, toggles_from_vcd
    from dstar_rtl.sim.runner import run_cocotb
    cfg = unit_config("baseline", preset("tiny"))
    g = _netlist("baseline", cfg)
    a = run_cocotb("baseline", cfg, "verilator", "dstar_rtl.tb.test_baseline", seed=1, netlist=g,
                   testcase="random_tiles", waves=True, tag="vcd")
    b = run_cocotb("baseline", cfg, "verilator", "dstar_rtl.tb.test_baseline", seed=1, netlist=g,
                   testcase="random_tiles", toggles=True, tag="toggles")
    vcd, _ = toggles_from_vcd(a.test_dir / "dump.vcd", g.top, g.ports)
    cov = toggles_from_coverage(b.test_dir / "coverage.dat", g.top, g.ports)
    tv, tc = sum(vcd.values()), sum(cov.values())
    assert tv > 10_000 and tv <= tc <= 1.1 * tv
    same = sum(1 for k in vcd if vcd[k] == cov.get(k))
    assert same >= 0.4 * len(vcd)


def test_dstar_power_on_tiny(tmp_path, capsys):
    rc = dstar_rtl.app.cli.main(["power", "--preset", "tiny", "--weights", "random", "--model",
                                 "tiny",
                         "--no-image", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    rep = json.loads((tmp_path / "energy.json").read_text())
    assert (tmp_path / "energy.md").is_file() and (tmp_path / "energy.png").is_file()
    assert set(rep["pj_per_mac"]["dstar"]) == {"trained_tiles", "2", "4", "6", "8"}
    assert set(rep["pj_per_mac"]["int8"]) == {"trained_tiles", "8"}
    assert rep["workload"]["macs"] > 0
    assert all(r["checked"] and r["drain_beats_checked"] > 0
               for r in rep["precision_sweep"]["runs"].values())
    for a in rep["arrays"].values():
        assert a["checked"] and a["drain_beats_checked"] > 0
        t = a["energy"]["total"]
        assert t["internal"] > 0 and t["switching"] > 0 and t["leakage"] > 0
        assert a["energy"]["unknown_cells"].get("$mem_v2") == 1   # the weight buffer
    assert rep["command"].startswith("dstar power --preset tiny")
    assert set(rep["pes"]) == {"tiny"} and set(rep["pes"]["tiny"]) == {"slice", "int8"}
    for kind, r in rep["pes"]["tiny"].items():     # 16 dense tiles of 64 beats
        assert r["events"]["beats"] == 1024 and r["run_cycles"] > 1024
        assert 0 < r["idle_fj_per_cycle"] * r["run_cycles"] < r["total_fj"]
    assert "One PE alone" in (tmp_path / "energy.md").read_text()
