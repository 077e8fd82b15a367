"""bench/unit_power.py: its pure parts (a run's cycles from cocotb's results, the split
into idle and data energy, the parts grouped, the QPU's tiles of the trained DiT), and in make
regress (the last test, marked slow) the gate-level measurement itself: the QPU at tiny mapped to
the Nangate45 cells on a few random tiles, bit-exact against golden, its energy split
consistently."""

import numpy as np
import pytest

from dstar_rtl.bench.resources import NANGATE
from dstar_rtl.bench.unit_power import (
    dit_tiles,
    fj,
    group_parts,
    qpu_energy,
    run_cycles,
    split_energy,
)
from dstar_rtl.flows.liberty import read_liberty
from dstar_rtl.flows.power import bounded_library
from dstar_rtl.golden.config import preset
from dstar_rtl.golden.vectors import qpu_workload

XML = """<?xml version='1.0' encoding='utf-8'?>
<testsuites name="cocotb tests"><testsuite name="tb.t" tests="2">
<testcase classname="tb.t" name="a"><properties>
<property name="sim_time_unit" value="ns" /><property name="sim_time_start" value="0.0" />
<property name="sim_time_stop" value="1245.0" /></properties></testcase>
<testcase classname="tb.t" name="b"><properties>
<property name="sim_time_unit" value="ns" /><property name="sim_time_start" value="1245.001" />
<property name="sim_time_stop" value="8710.001" /></properties></testcase>
</testsuite></testsuites>
"""


def test_run_cycles_from_the_last_stop_time(tmp_path):
    p = tmp_path / "results.xml"
    p.write_text(XML)
    assert run_cycles(p, 10) == 871
    assert run_cycles(p, 5) == 1742
    p.write_text(XML.replace('"ns"', '"us"', 1).replace("1245.0\"", "1.0\"", 1))
    assert run_cycles(p, 10) == 871     # the later stop (8710 ns) still ends the run
    p.write_text("<testsuites><testsuite><testcase name='a'/></testsuite></testsuites>")
    with pytest.raises(ValueError, match="no sim_time_stop"):
        run_cycles(p, 10)


def test_data_energy_is_the_total_less_the_idle_cycles():
    assert fj(dict(internal=1.0, switching=2.0, leakage=0.5, cells=9)) == 3.5
    s = split_energy(1000.0, 2.5, 100, dict(beats=50, rows=0))
    assert s["data_fj"] == pytest.approx(750.0)
    assert s["data_fj_per_event"] == dict(beats=pytest.approx(15.0), rows=None)


def _e(i, s, leak, cells=0):
    return dict(internal=i, switching=s, leakage=leak, cells=cells, sequential=0.0)


def test_parts_grouped_with_the_lanes_together():
    run = {"lane0": _e(10, 5, 1, 100), "lane1": _e(20, 5, 1, 100), "rsqrt": _e(4, 1, 1, 50),
           "top": _e(100, 50, 2, 300), "inputs": _e(0, 7, 0)}
    idle = {"lane0": _e(0.1, 0, 0.01), "lane1": _e(0.1, 0, 0.01), "rsqrt": _e(0.05, 0, 0.01),
            "top": _e(0.3, 0.1, 0.02)}
    g = group_parts(run, idle, 10)
    assert list(g) == ["top", "lanes", "inputs", "rsqrt"]          # by total energy
    assert g["lanes"]["instances"] == 2 and g["lanes"]["cells"] == 200
    assert g["lanes"]["total_fj"] == pytest.approx(42)
    assert g["lanes"]["idle_fj_per_cycle"] == pytest.approx(0.22)
    assert g["lanes"]["data_fj"] == pytest.approx(42 - 2.2)
    assert g["inputs"]["idle_fj_per_cycle"] == 0 and g["inputs"]["data_fj"] == 7
    assert sum(p["total_fj"] for p in g.values()) == pytest.approx(
        sum(fj(p) for p in run.values()))


LIB = """
library(bound_test) {
  time_unit : "1ns"; voltage_unit : "1V"; leakage_power_unit : "1nW";
  capacitive_load_unit (1, ff); nom_voltage : 1.0;
  power_lut_template(p_2) {
    variable_1 : input_transition_time; variable_2 : total_output_net_capacitance;
    index_1 ("0.0, 1.0"); index_2 ("0.0, 10.0");
  }
  cell(INV) {
    area : 1.0; cell_leakage_power : 10.0;
    pin(A) { direction : input; capacitance : 2.0; }
    pin(Y) {
      direction : output; function : "!A";
      internal_power() {
        related_pin : "A";
        rise_power(p_2) { values ("1.0, 3.0", "2.0, 4.0"); }
        fall_power(p_2) { values ("0.0, 2.0", "0.0, 2.0"); }
      }
    }
  }
}
"""


def test_bounded_tables_stop_at_their_largest_index(tmp_path):
    (tmp_path / "t.lib").write_text(LIB)
    lib = read_liberty(tmp_path / "t.lib")
    g = lib["cells"]["INV"]["pins"]["Y"]["power"][0]
    b = bounded_library(lib)["cells"]["INV"]["pins"]["Y"]["power"][0]
    inside = dict(input_transition_time=0.5, total_output_net_capacitance=5.0)
    assert b["rise"](**inside) == g["rise"](**inside) == 2.5
    far = dict(input_transition_time=101.0, total_output_net_capacitance=1000.0)
    assert g["rise"](**far) == pytest.approx(302.0)                    # extrapolated
    assert b["rise"](**far) == 4.0 and b["fall"](**far) == 2.0          # the tables' corner
    below = dict(input_transition_time=0.0, total_output_net_capacitance=-5.0)
    assert b["rise"](**below) == g["rise"](**below)                  # below: as before
    assert b["related"] == "A" and lib["cells"]["INV"]["pins"]["Y"]["power"][0] is g


def test_qpu_tiles_of_the_trained_dit():
    cfg = preset("fpga")
    tiles, desc = dit_tiles(cfg, steps=(1, 2))
    assert all(t.shape[0] == cfg.tile and t.shape[1] <= cfg.max_reduction for t in tiles)
    per = {d["layer"]: d["tiles"] for d in desc["layers"]}
    full = desc["tokens"] // cfg.tile
    # The SAR cache-only layer steps on cache steps only (step 2 here, not step 1).
    assert per["blocks.0.attn.qkv[qk]"] == full and per["blocks.0.mlp.fc1"] == 2 * full
    assert len(tiles) == sum(per.values())
    assert any(np.any(t) for t in tiles) and desc["steps"] == [1, 2]


@pytest.mark.slow
@pytest.mark.cocotb
def test_qpu_energy_at_tiny_splits_into_idle_and_data():
    cfg = preset("tiny")
    wl = qpu_workload(cfg, np.random.default_rng(5), tiles=3, kinds=("mixed", "outlier"))
    r = qpu_energy(cfg, NANGATE, [dx for dx, _ in wl.tiles], tag="unit-power-test")
    assert r["passed"] and r["run_cycles"] > 0
    assert r["events"]["subchannels"] == len(wl.words) and r["events"]["groups"] == len(wl.groups)
    assert r["data_fj"] > 0 and r["idle_fj_per_cycle"] > 0
    assert r["idle_fj_per_cycle"] * r["run_cycles"] < r["total_fj"]
    assert all(v > 0 for v in r["data_fj_per_event"].values())
    assert r["unbounded"]["total_fj"] >= r["total_fj"]
    assert {"front", "packer", "top"} <= set(r["parts"])
