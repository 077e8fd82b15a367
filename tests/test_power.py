"""The energy arithmetic of flows/power.py on a hand-made netlist and library (every figure
computed here by hand), the toggle readers, the part names of flows/gate.py, and `dstar power`'s
refusals. The gate-level measurement itself runs in make regress (tests/test_power_gate.py)."""

import pytest

import dstar_rtl.app.cli
from dstar_rtl.flows.gate import part_of
from dstar_rtl.flows.liberty import parse_liberty, read_liberty
from dstar_rtl.flows.power import energy, toggles_from_coverage, toggles_from_vcd

LIB = """
library(power_test) {
  time_unit : "1ns";
  voltage_unit : "1V";
  leakage_power_unit : "1nW";
  capacitive_load_unit (1, ff);
  nom_voltage : 1.0;
  power_lut_template(p_2) {
    variable_1 : input_transition_time;
    variable_2 : total_output_net_capacitance;
    index_1 ("0.0, 1.0");
    index_2 ("0.0, 10.0");
  }
  power_lut_template(p_1) {
    variable_1 : input_transition_time;
    index_1 ("0.0, 1.0");
  }
  cell(INV) {
    area : 1.0;
    cell_leakage_power : 10.0;
    pin(A) { direction : input; capacitance : 2.0; }
    pin(Y) {
      direction : output;
      function : "!A";
      internal_power() {
        related_pin : "A";
        rise_power(p_2) { values ("1.0, 3.0", "1.0, 3.0"); }
        fall_power(p_2) { values ("0.0, 2.0", "0.0, 2.0"); }
      }
    }
  }
  cell(DFF) {
    area : 4.0;
    cell_leakage_power : 20.0;
    ff(IQ, IQN) { next_state : "D"; clocked_on : "CK"; }
    pin(D) {
      direction : input; capacitance : 1.0;
      internal_power() { rise_power(p_1) { values ("0.5, 0.5"); }
                         fall_power(p_1) { values ("0.5, 0.5"); } }
    }
    pin(CK) {
      direction : input; capacitance : 3.0;
      internal_power() { rise_power(p_1) { values ("2.0, 2.0"); }
                         fall_power(p_1) { values ("1.0, 1.0"); } }
    }
    pin(Q) {
      direction : output; function : "IQ";
      internal_power() { related_pin : "CK";
                         rise_power(p_2) { values ("4.0, 4.0", "4.0, 4.0"); }
                         fall_power(p_2) { values ("2.0, 2.0", "2.0, 2.0"); } }
    }
    pin(QN) {
      direction : output; function : "IQN";
      internal_power() { related_pin : "CK";
                         rise_power(p_2) { values ("6.0, 6.0", "6.0, 6.0"); }
                         fall_power(p_2) { values ("6.0, 6.0", "6.0, 6.0"); } }
    }
  }
}
"""

#: in (bit 2) -> INV in the top -> bit 4 -> DFF D in part "array.pe_0_0" (clock bit 3) -> Q
#: bit 5 -> out; QN unconnected.
NETLIST = {"modules": {"top": {
    "attributes": {"top": 1},
    "ports": {"a": {"direction": "input", "bits": [2]}, "clk": {"direction": "input",
                                                               "bits": [3]},
              "q": {"direction": "output", "bits": [5]}},
    "cells": {
        "$abc$1$inv": {"type": "INV", "connections": {"A": [2], "Y": [4]}},
        "$flatten\\array.\\pe_0_0.$abc$2$ff": {"type": "DFF",
                                               "connections": {"D": [4], "CK": [3],
                                                               "Q": [5]}}},
    "netnames": {}}}}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    p = tmp_path_factory.mktemp("lib") / "power.lib"
    p.write_text(LIB)
    return read_liberty(p)


def test_library_power_data_is_read(lib):
    assert lib["voltage"] == 1.0 and lib["leakage_power_unit"] == "1nW"
    inv = lib["cells"]["INV"]
    assert inv["leakage"] == 10.0
    (g,) = inv["pins"]["Y"]["power"]
    assert g["related"] == "A"
    assert g["rise"](input_transition_time=0.0, total_output_net_capacitance=5.0) == 2.0
    assert lib["cells"]["DFF"]["pins"]["CK"]["power"][0]["related"] is None


def test_energy_by_hand(lib):
    """Transitions: a 4, the inverter's output 4, the clock 10, Q 2, over 10 ns at 1 V.

    - INV: output load = DFF D's 1.0 fF; its input's transition is 0 (an ideal input), so
      rise 1 + (3-1)·1/10 = 1.2 and fall 0.2: 0.7 fJ a transition, 4 → 2.8 fJ; leakage 10 nW ·
      10 ns = 0.1 fJ.
    - DFF: D 4 · 0.5 = 2.0; CK 10 · 1.5 = 15.0; Q 2 · 3.0 = 6.0 (no load: the output port);
      QN unconnected switches with Q: 2 · 6.0 = 12.0; 35.0 fJ internal; leakage 0.2 fJ.
    - Switching ½·C·V²: a 4 · ½ · 2.0 (INV A) = 4.0, clock 10 · ½ · 3.0 = 15.0 (both the inputs'),
      bit 4: 4 · ½ · 1.0 = 2.0 (the top's INV drives it), Q unloaded.
    """
    toggles = {2: 4, 4: 4, 3: 10, 5: 2}
    e = energy(NETLIST, lib, toggles, 10.0)
    top, pe, inp = (e["parts"][k] for k in ("top", "array.pe_0_0", "inputs"))
    assert top["internal"] == pytest.approx(2.8) and top["leakage"] == pytest.approx(0.1)
    assert top["switching"] == pytest.approx(2.0) and top["cells"] == 1
    assert pe["internal"] == pytest.approx(35.0) and pe["leakage"] == pytest.approx(0.2)
    assert pe["switching"] == 0 and pe["cells"] == 1 and pe["sequential"] == pytest.approx(35.0)
    assert top["sequential"] == 0
    assert inp["switching"] == pytest.approx(19.0) and inp["internal"] == 0
    assert e["total"]["internal"] == pytest.approx(37.8)
    assert e["unit"] == "fJ" and e["unknown_cells"] == {}
    # No transition: leakage only.
    quiet = energy(NETLIST, lib, {}, 10.0)["total"]
    assert quiet["internal"] == quiet["switching"] == 0 and quiet["leakage"] == pytest.approx(0.3)


def test_part_names():
    assert part_of("$flatten\\array.\\pe_0_1.$abc$7$x") == "array.pe_0_1"
    assert part_of("$flatten\\front.$and$3") == "front"
    assert part_of("$abc$1$n") == "top"


def _cov_line(o, count, page="v_toggle/top"):
    fields = {"f": "gate.v", "l": "1", "t": "toggle", "page": page, "o": o, "h": "top"}
    body = "".join(f"\x01{k}\x02{v}" for k, v in fields.items())
    return f"C '{body}' {count}\n"


def test_toggles_from_verilator_coverage(tmp_path):
    """Both directions add; a port bit that is also a wire n<bit> counts once (from the wire);
    Verilator's encoded names (``__05F`` for ``_``) decode; other modules' points are ignored."""
    cov = tmp_path / "coverage.dat"
    cov.write_text("# SystemC::Coverage-3\n" + "".join([
        _cov_line("n7:0->1", 3), _cov_line("n7:1->0", 2),
        _cov_line("drain___05Fdata[1]:0->1", 5), _cov_line("drain___05Fdata[1]:1->0", 5),
        _cov_line("drain___05Fdata[0]:0->1", 4), _cov_line("n9:0->1", 1),
        _cov_line("A:0->1", 100, page="v_toggle/INV")]))
    ports = {"drain__data": {"bits": [9, 11]}}
    assert toggles_from_coverage(cov, "top", ports) == {7: 5, 9: 1, 11: 10}


def test_toggles_from_vcd(tmp_path):
    """The first value is not a transition, x is not counted, a vector counts per bit."""
    vcd = tmp_path / "d.vcd"
    vcd.write_text("$timescale 1ps $end\n$scope module $rootio $end\n$var wire 1 # n7 $end\n"
                   "$upscope $end\n$scope module top $end\n$var wire 1 ! n7 $end\n"
                   "$var wire 2 \" v [1:0] $end\n$upscope $end\n$enddefinitions $end\n"
                   "#0\n0!\nb00 \"\n#1000\n1!\nb11 \"\n#2000\nx!\nb10 \"\n#3000\n0!\n")
    t, dur = toggles_from_vcd(vcd, "top", {"v": {"bits": [20, 21]}})
    assert t == {7: 1, 20: 2, 21: 1} and dur == pytest.approx(3.0)


def run_dstar(capsys, *argv):
    rc = dstar_rtl.app.cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv, match", [
    (["--layers", "fc3"], "--layers: fc3 is not a layer kind"),
    (["--clock-ns", "0"], "--clock-ns must be positive"),
    (["--steps-run", "12"], r"--steps-run: steps must lie in \[0, 9\]"),
    (["--no-image", "--liberty", "missing.lib"], "--liberty missing.lib: file not found"),
    (["--weight-seed", "-1"], "--weight-seed must be >= 0"),
    (["--projection", "missing.json"], "the energy per image runs the whole-core comparison's "
                                       "fpga cores"),
    (["--no-image", "--projection", "missing.json", "--clock-ns", "-1"],
     "--clock-ns must be positive")])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, argv, match):
    import re
    out_dir = tmp_path / "out"
    rc, out, err = run_dstar(capsys, "power", "--preset", "tiny", "--weights", "random",
                             "--model", "tiny", "--out", out_dir, *argv)
    assert rc == 2 and re.search(match, err) and len(err.strip().splitlines()) == 1, err
    assert not out_dir.exists()


def test_parse_liberty_keeps_power_templates():
    lib = parse_liberty(LIB)
    assert {g["type"] for g in lib["groups"]} >= {"power_lut_template", "cell"}


@pytest.mark.parametrize("name", ["tiny", "fpga"])
@pytest.mark.parametrize("bits", [2, 4, 6, 8])
def test_precision_workload_holds_one_precision(name, bits):
    """Every sub-channel of every tile quantizes at ``bits`` (so the stream has ``bits/2``
    slices per sub-channel packed ``lanes`` to a group), and the expected drain is the
    product of the dequantized tiles (golden.schedule.execute, checked by the MPU's tests)."""
    import numpy as np

    from dstar_rtl.golden.config import preset
    from dstar_rtl.golden.fmdq import quantize_subchannels
    from dstar_rtl.golden.vectors import precision_differences, precision_workload
    cfg = preset(name)
    rng = np.random.default_rng(bits)
    dx = precision_differences(rng, cfg, cfg.tile, 40, bits)
    assert (quantize_subchannels(dx.T, cfg).b == bits).all()
    w = precision_workload(cfg, rng, bits, 2, cfg.max_reduction)
    per_tile = cfg.max_reduction * bits // 2 / cfg.lanes
    assert all(abs(g - per_tile) <= 2 for g in w.groups_per_tile)
    assert len(w.expected) == 2 * cfg.rows


def test_precision_workload_refuses_other_precisions():
    import numpy as np

    from dstar_rtl.golden.config import preset
    from dstar_rtl.golden.vectors import precision_differences
    with pytest.raises(ValueError, match=r"bits must be one of \(2, 4, 6, 8\), not 3"):
        precision_differences(np.random.default_rng(0), preset("tiny"), 4, 4, 3)


@pytest.mark.parametrize("text, match", [
    (None, r"--projection .*missing\.json: .*cannot read .*missing\.json"),
    ("{", r"--projection .*p\.json: .*p\.json is not JSON"),
    ('{"models": []}', r"--projection .*p\.json: .*a result of kind None, not 'projection'")])
def test_the_image_inputs_are_checked_before_any_work(tmp_path, capsys, text, match):
    import re
    path = tmp_path / ("missing.json" if text is None else "p.json")
    if text is not None:
        path.write_text(text)
    out_dir = tmp_path / "out"
    rc, out, err = run_dstar(capsys, "power", "--projection", path, "--out", out_dir)
    assert rc == 2 and re.search(match, err) and len(err.strip().splitlines()) == 1, err
    assert not out_dir.exists()


def test_a_quiet_cycle_is_energy_with_only_the_clock_moving(lib):
    """The direct idle cycle equals :func:`energy` with the clock net's two transitions."""
    from dstar_rtl.flows.power import clock_energy
    fast, slow = clock_energy(NETLIST, lib, 3, 2.0), energy(NETLIST, lib, {3: 2}, 2.0)
    for part, p in slow["parts"].items():
        for k, v in p.items():
            assert fast["parts"][part][k] == pytest.approx(v), (part, k)
    # By hand: the DFF's clock pin 2 · 1.5 fJ, the clock net 2 · ½ · 3.0 fF · 1 V².
    assert fast["total"]["internal"] == pytest.approx(3.0)
    assert fast["parts"]["inputs"]["switching"] == pytest.approx(3.0)
