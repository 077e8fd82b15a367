"""Smoke tests of the synthesis and place-and-route flow (``flows.synth``, ``flows.pnr``) on the
tiny preset's PE. The area figures themselves come from ``dstar measure arrays``."""

from pathlib import Path

import pytest
from _initial import preset

from dstar_rtl.flows.synth import SynthError, resources, synth_script, synthesize, synthesize_rtlil

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
    from dstar_rtl.flows.synth import _memory_bits

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
                                         r"'ice40', 'asic'\), not 'xilinx'"):
        synthesize("pe", CFG, "xilinx")
    with pytest.raises(ValueError, match="liberty= .* needs target 'generic' or 'asic'"):
        synth_script("dstar_pe", "ecp5", liberty="cells.lib")
    with pytest.raises(ValueError, match="target 'asic' needs liberty="):
        synth_script("dstar_pe", "asic")
    with pytest.raises(ValueError, match="options of the 'asic' target"):
        synth_script("dstar_pe", "generic", booth=True)


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
    from dstar_rtl.flows.pnr import parse_fmax_log, place_and_route

    r = synthesize("pe", CFG, "ecp5", nodsp=True, workdir=tmp_path / "syn")
    p = place_and_route(r["netlist"], workdir=tmp_path / "pnr", freq_mhz=50)
    assert p["fmax_mhz"] > 0 and p["timing_pass"] in (True, False)
    assert p["utilisation"]["TRELLIS_FF"]["used"] == r["resources"]["ff"]
    assert p["critical_path"]["delay_ns"] > 0
    log = (tmp_path / "pnr" / "nextpnr.log").read_text()
    assert parse_fmax_log(log)["clk"]["achieved"] == pytest.approx(p["fmax_mhz"], abs=0.01)


def test_abc9_assertion_falls_back_to_abc(tmp_path):
    """Yosys 0.70's abc9 asserts (abc_ops_reintegrate.cc) on the flattened select-datapath MPU
    (here 2×2); the flow then maps LUTs with abc, and says so."""
    r = synthesize("mpu", preset("tiny", rows=2, cols=2, digit_product="select"), "ecp5",
                   workdir=tmp_path)
    assert r["flow"] == "abc (abc9 asserted)"
    assert r["resources"]["lut4"] > 0 and r["resources"]["ff"] > 0
    assert "ERROR: Assert" in (tmp_path / "yosys_abc9.log").read_text()
    assert "abc -lut 4" in r["script"] and "abc9" not in r["script"]
    assert synthesize("pe", CFG, "ecp5", workdir=tmp_path / "pe")["flow"] == "flat"


# ------------------------------------------------------------------------------- ASIC target
# tests/data/tiny_cells.lib: a small library written for these tests (made-up areas and delays).
TINY_LIB = Path(__file__).parent / "data" / "tiny_cells.lib"
TINY_SEQ = {"DFF": 4.5, "DFFR": 5.25}


def test_asic_script_passes():
    s = synth_script("dstar_pe", "asic", liberty="cells.lib")
    lines = s.splitlines()
    assert lines[:2] == ["read_rtlil design.il", "hierarchy -check -top dstar_pe"]
    assert "synth -top dstar_pe -flatten -run :fine" in lines
    assert "synth -run check:" in lines
    for cmd in ("dfflibmap -liberty cells.lib", "abc -liberty cells.lib",
                "tee -q -o stat.json stat -json -liberty cells.lib", "write_json netlist.json"):
        assert cmd in lines
    assert lines.index("dfflibmap -liberty cells.lib") < lines.index("abc -liberty cells.lib")
    # RAMs stay macros: memory_map only on ROMs; with memories="ff" on everything.
    assert "memory_map t:$mem_v2 r:WR_PORTS=0 %i" in lines
    assert "memory_map" in synth_script("dstar_pe", "asic", liberty="c.lib",
                                        memories="ff").splitlines()
    hier = synth_script("dstar_mpu", "asic", liberty="c.lib", parts=True, booth=True)
    assert "synth -top dstar_mpu -booth -run :fine" in hier.splitlines()
    assert "abc -liberty c.lib -D 1000" in synth_script("t", "asic", liberty="c.lib",
                                                         delay_target=1000)
    with pytest.raises(ValueError, match="memories must be one of"):
        synth_script("t", "asic", liberty="c.lib", memories="sram")


@pytest.fixture(scope="module")
def asic_pe(tmp_path_factory):
    return synthesize("pe", CFG, "asic", liberty=TINY_LIB,
                      workdir=tmp_path_factory.mktemp("asic_pe"))


def test_asic_area_split(asic_pe):
    r = asic_pe["resources"]
    assert r["area"] > 0 and r["sequential_area"] > 0 and r["combinational_area"] > 0
    assert r["combinational_area"] + r["sequential_area"] == pytest.approx(r["area"])
    # the same as Yosys's own stat -liberty, and sequential = the library's ff cells
    assert r["area"] == pytest.approx(r["yosys_area"])
    assert r["sequential_area"] == pytest.approx(r["yosys_sequential_area"])
    cells = asic_pe["cells"]
    assert set(cells) <= {"BUF", "INV", "NAND2", "NOR2", "AND2", "OR2", "XOR2", "XNOR2",
                          "MUX2", "DFF", "DFFR"}
    assert r["sequential_area"] == pytest.approx(sum(a * cells.get(c, 0)
                                                     for c, a in TINY_SEQ.items()))
    assert r["ff"] == sum(cells.get(c, 0) for c in TINY_SEQ) > 0
    assert asic_pe["liberty"]["name"] == "dstar_tiny"
    assert asic_pe["liberty"]["file"] == "tiny_cells.lib"
    import hashlib
    assert asic_pe["liberty"]["sha256"] == hashlib.sha256(TINY_LIB.read_bytes()).hexdigest()
    t = asic_pe["timing"]
    assert t["delay"] > 0.1 and t["levels"] >= 1 and t["unit"] == "1ns"
    assert r["ram_bits"] == 0 and "modules" not in asic_pe


def test_asic_gz_liberty(tmp_path, asic_pe):
    import gzip
    import hashlib

    gz = tmp_path / "tiny_cells.lib.gz"
    gz.write_bytes(gzip.compress(TINY_LIB.read_bytes()))
    r = synthesize("pe", CFG, "asic", liberty=gz, workdir=tmp_path / "run")
    assert r["resources"]["area"] == pytest.approx(asic_pe["resources"]["area"])
    assert r["liberty"]["sha256"] == hashlib.sha256(gz.read_bytes()).hexdigest()
    assert r["liberty"]["file"] == "tiny_cells.lib.gz" and r["liberty"]["name"] == "dstar_tiny"
    # Yosys saw the decompressed text in its work directory
    assert (tmp_path / "run" / "cells.lib").read_bytes() == TINY_LIB.read_bytes()


def test_asic_booth_baseline_pe(tmp_path):
    a = synthesize("baseline_pe", CFG, "asic", liberty=TINY_LIB, workdir=tmp_path / "a")
    b = synthesize("baseline_pe", CFG, "asic", liberty=TINY_LIB, booth=True,
                   workdir=tmp_path / "b")
    assert b["booth"] and not a["booth"]
    assert "-booth" in b["script"] and "-booth" not in a["script"]
    assert a["resources"]["ff"] == b["resources"]["ff"]
    assert a["resources"]["area"] != b["resources"]["area"]


def test_asic_parts_sum_to_total(tmp_path):
    """The baseline array with 2x2 PEs, hierarchy kept: the modules' areas sum to the total,
    the weight memory stays a macro (bits counted, no area)."""
    r = synthesize("baseline", preset("tiny", rows=2, cols=2), "asic", liberty=TINY_LIB,
                   parts=True, workdir=tmp_path)
    mods = r["modules"]
    assert sum(1 for m in mods if ".pe_" in m) == 4
    for k in ("area", "combinational", "sequential"):
        key = {"area": "area"}.get(k, f"{k}_area")
        assert sum(m[k] for m in mods.values()) == pytest.approx(r["resources"][key])
    assert sum(m["ff"] for m in mods.values()) == r["resources"]["ff"]
    assert r["resources"]["area"] == pytest.approx(r["resources"]["yosys_area"])
    assert r["resources"]["ram_bits"] > 0 and r["resources"]["macros"] == {"$mem_v2": 1}
    assert [m["name"] for m in r["memories"]["list"] if not m["rom"]] == ["weights"]
    from dstar_rtl.bench.asic import parts_of
    parts = parts_of(r)
    assert parts["PEs"]["modules"] == 4
    assert sum(p["area"] for p in parts.values()) == pytest.approx(r["resources"]["area"])


def test_liberty_table_lookup():
    from dstar_rtl.flows.liberty import parse_liberty, read_liberty

    lib = read_liberty(TINY_LIB)
    assert lib["cells"]["DFF"]["sequential"] and not lib["cells"]["NAND2"]["sequential"]
    arc = next(a for a in lib["cells"]["INV"]["arcs"] if a["from"] == "A")
    f = arc["delay"][0]
    # corners of the 2x2 table and the midpoint of its first row
    assert f(input_net_transition=0.01, total_output_net_capacitance=0.001) == pytest.approx(0.02)
    assert f(input_net_transition=0.1, total_output_net_capacitance=0.01) == pytest.approx(0.09)
    assert f(input_net_transition=0.01, total_output_net_capacitance=0.0055) == \
        pytest.approx(0.04)
    g = parse_liberty('library(x) { cell(A) { area : 2; pin(Y) { direction : output; } } }')
    assert g["name"] == "x" and g["groups"][0]["attrs"]["area"] == "2"


def test_known_abc9_assertions_are_recognised():
    """Both of Yosys 0.70's abc9 assertions seen here take the abc fallback; other errors not."""
    from dstar_rtl.flows.synth import SynthError, _abc9_assertion

    assert _abc9_assertion(SynthError("ERROR: Assert `x' failed in kernel/rtlil.cc:3091."))
    assert _abc9_assertion(SynthError(
        "ERROR: Assert `wire' failed in passes/techmap/abc_ops_reintegrate.cc:596."))
    assert not _abc9_assertion(SynthError("ERROR: Module `top' not found!"))


def test_abc_mapper_on_request(tmp_path):
    """``abc9=False`` maps the LUTs with ``abc -lut 4`` from the start (the fallback's flow)."""
    r = synthesize("pe", CFG, "ecp5", nodsp=True, workdir=tmp_path, abc9=False)
    assert r["flow"] == "abc" and "abc -lut 4" in r["script"] and "abc9" not in r["script"]
    assert r["resources"]["lut4"] > 0 and r["resources"]["dsp"] == 0


def test_asic_runs_of_one_design_share_one_synthesis():
    """`dstar measure asic`: levers whose overrides equal the preset's default are the same
    design (same configuration hash, work directory): each design is synthesized once, so no two
    parallel jobs write one directory, and every run maps to a design with its signature."""
    from dstar_rtl.bench.asic import RUNS, distinct_runs, lever_config
    unique, index = distinct_runs(RUNS)

    def sig(r):
        unit, name, booth, parts, lever = r
        return unit, lever_config(name, lever).hash(), booth, parts
    assert len({sig(r) for r in unique}) == len(unique) < len(RUNS)
    assert all(sig(r) == sig(unique[i]) for r, i in zip(RUNS, index))


def test_a_stored_run_is_the_same_design_whatever_its_source_positions():
    """Stored runs are looked up by the design, not by where in the Python sources its objects
    were made (issue 48): RTLIL that differs only in ``src`` attributes (another checkout, a
    moved line) is the same design; any other difference is not."""
    from dstar_rtl.flows.synth import same_design

    a = ('attribute \\src "/a/rtl/pe.py:10"\nmodule \\top\n  attribute \\src "/a/rtl/pe.py:12"\n'
         '  wire width 4 \\x\nend\n')
    moved = a.replace("/a/", "/elsewhere/").replace(":12", ":13")
    assert same_design(a, moved)
    assert not same_design(a, moved.replace("width 4", "width 5"))
    assert not same_design(a, a.replace('attribute \\src "/a/rtl/pe.py:12"',
                                        'attribute \\keep 1'))
