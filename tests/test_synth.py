"""Smoke tests of the synthesis and place-and-route flow (``fpga.synth``, ``fpga.pnr``) on the
tiny preset's PE. The area figures themselves come from ``python -m fpga.report_arrays``."""

import pytest

from fpga.synth import SynthError, resources, synth_script, synthesize, synthesize_rtlil
from golden.config import preset

CFG = preset("tiny")


@pytest.fixture(scope="module")
def ecp5(tmp_path_factory):
    return synthesize("pe", CFG, "ecp5", workdir=tmp_path_factory.mktemp("ecp5"))


def test_generic(tmp_path):
    r = synthesize("pe", CFG, "generic", workdir=tmp_path)
    assert r["num_cells"] > 0 and r["resources"]["cells"] == r["num_cells"]
    assert r["resources"]["ff"] > 0
    assert r["transistors"] > 0 and r["transistors_complete"]
    assert r["config_hash"] == CFG.hash() and r["tools"]["yosys"]
    assert not any(k.startswith("$scopeinfo") for k in r["cells"])
    assert r["resources"]["memory_bits"] == 0  # a PE has no memory


def test_memory_bits_parse():
    from fpga.synth import _memory_bits

    dump = ("  cell $mem_v2 $1\n    parameter \\ABITS 6\n    parameter \\SIZE 64\n"
            "    parameter \\WIDTH 32\n  end\n"
            "  cell $mem_v2 $2\n    parameter \\WIDTH 8\n    parameter \\SIZE 10\n  end\n")
    assert _memory_bits(dump) == 64 * 32 + 8 * 10
    assert _memory_bits("") == 0


def test_ecp5(ecp5):
    res = ecp5["resources"]
    assert res["lut4"] > 0 and res["ff"] > 0
    assert res["lut_total"] == res["lut4"] + 2 * res["carry"]
    assert res["dsp"] > 0  # Yosys maps even a 2x8 product to a MULT18X18D
    assert ecp5["seconds"] > 0


def test_ecp5_nodsp(tmp_path, ecp5):
    r = synthesize("pe", CFG, "ecp5", nodsp=True, workdir=tmp_path)
    assert r["resources"]["dsp"] == 0
    assert r["resources"]["lut4"] > ecp5["resources"]["lut4"]
    assert r["resources"]["ff"] == ecp5["resources"]["ff"]


def test_bad_target():
    with pytest.raises(ValueError, match=r"target must be one of \('generic', 'ecp5', "
                                         r"'ice40'\), not 'xilinx'"):
        synthesize("pe", CFG, "xilinx")
    with pytest.raises(ValueError, match="liberty= .* needs target 'generic'"):
        synth_script("dstar_pe", "ecp5", liberty="cells.lib")


def test_bad_unit():
    with pytest.raises(ValueError, match="unit must be one of"):
        synthesize("gpu", CFG, "generic")


def test_yosys_error_is_one_line(tmp_path):
    with pytest.raises(SynthError) as info:
        synthesize_rtlil("this is not rtlil\n", "top", "generic", workdir=tmp_path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("yosys failed")
    assert msg.endswith(f"log: {tmp_path.resolve() / 'yosys.log'}")
    assert (tmp_path / "yosys.log").exists()


def test_resources_classes():
    r = resources("ecp5", {"LUT4": 10, "CCU2C": 2, "TRELLIS_FF": 5, "MULT18X18D": 1,
                           "DP16KD": 3, "PFUMX": 4})
    assert (r["lut4"], r["carry"], r["lut_total"], r["ff"], r["dsp"], r["bram"],
            r["widemux"]) == (10, 2, 14, 5, 1, 3, 4)
    r = resources("ice40", {"SB_LUT4": 7, "SB_DFFE": 2, "SB_DFFSR": 1, "SB_CARRY": 3,
                            "SB_MAC16": 1, "SB_RAM40_4K": 2})
    assert (r["lut4"], r["ff"], r["carry"], r["dsp"], r["bram"]) == (7, 3, 3, 1, 2)


# A minimal Liberty library (a buffer is needed by ABC's mapper; scalar delays for `&nf`).
def _liberty() -> str:
    def comb(name, area, pins, fn):
        arcs = "".join(
            f'timing() {{ related_pin : "{p}"; cell_rise(scalar) {{ values("0.1"); }} '
            f'cell_fall(scalar) {{ values("0.1"); }} rise_transition(scalar) '
            f'{{ values("0.05"); }} fall_transition(scalar) {{ values("0.05"); }} }} '
            for p in pins)
        ins = "".join(f"pin({p}) {{ direction : input; capacitance : 0.01; }} " for p in pins)
        return (f'cell({name}) {{ area : {area}; {ins}pin(Y) {{ direction : output; '
                f'function : "{fn}"; {arcs}}} }}\n')
    return ('library(mini) {\n time_unit : "1ns"; capacitive_load_unit(1, pf);\n'
            + comb("BUF", 1.0, ["A"], "A") + comb("INV", 1.0, ["A"], "A'")
            + comb("NAND2", 1.5, ["A", "B"], "(A&B)'") + comb("NOR2", 1.5, ["A", "B"], "(A|B)'")
            + 'cell(DFF) { area : 5.0; ff(IQ, IQN) { clocked_on : "C"; next_state : "D"; } '
              'pin(C) { direction : input; clock : true; capacitance : 0.01; } '
              'pin(D) { direction : input; capacitance : 0.01; } '
              'pin(Q) { direction : output; function : "IQ"; } }\n}\n')


def test_liberty_area(tmp_path):
    lib = tmp_path / "mini.lib"
    lib.write_text(_liberty())
    r = synthesize("pe", CFG, "generic", liberty=lib, workdir=tmp_path / "run")
    assert set(r["liberty_cells"]) <= {"BUF", "INV", "NAND2", "NOR2", "DFF"}
    assert r["liberty_cells"]["DFF"] == r["resources"]["ff"]
    assert r["resources"]["sequential_area"] == 5.0 * r["resources"]["ff"]
    assert r["resources"]["area"] > r["resources"]["sequential_area"]


@pytest.mark.slow
def test_ice40(tmp_path):
    r = synthesize("pe", CFG, "ice40", workdir=tmp_path / "dsp")
    assert r["resources"]["lut4"] > 0 and r["resources"]["dsp"] > 0
    r = synthesize("pe", CFG, "ice40", nodsp=True, workdir=tmp_path / "nodsp")
    assert r["resources"]["dsp"] == 0


@pytest.mark.slow
def test_pnr(tmp_path):
    from fpga.pnr import parse_fmax_log, place_and_route

    r = synthesize("pe", CFG, "ecp5", nodsp=True, workdir=tmp_path / "syn")
    p = place_and_route(r["netlist"], workdir=tmp_path / "pnr", freq_mhz=50)
    assert p["fmax_mhz"] > 0 and p["timing_pass"] in (True, False)
    assert p["utilisation"]["TRELLIS_FF"]["used"] == r["resources"]["ff"]
    assert p["critical_path"]["delay_ns"] > 0
    log = (tmp_path / "pnr" / "nextpnr.log").read_text()
    assert parse_fmax_log(log)["clk"]["achieved"] == pytest.approx(p["fmax_mhz"], abs=0.01)


def test_abc9_assertion_falls_back_to_abc(tmp_path):
    """Yosys 0.70's abc9 asserts (rtlil.cc:3091) on the flattened QPU with 2 rows and 4 lanes;
    the flow then maps LUTs with abc, and says so."""
    r = synthesize("qpu", preset("tiny", rows=2, cols=2), "ecp5", workdir=tmp_path)
    assert r["flow"] == "abc (abc9 asserted)"
    assert r["resources"]["lut4"] > 0 and r["resources"]["ff"] > 0
    assert (tmp_path / "yosys_abc9.log").read_text().count("rtlil.cc") >= 1
    assert "abc -lut 4" in r["script"] and "abc9" not in r["script"]
    assert synthesize("pe", CFG, "ecp5", workdir=tmp_path / "pe")["flow"] == "flat"
