"""``dstar synth`` and ``dstar estimate`` in-process: summaries and JSON on success (a missing
folder is created); on bad input exit status 2, exactly one line on stderr, nothing on stdout and
no output file (and no Yosys run); a Yosys failure is one line and exit status 1. The synthesis
runs are the tiny PE (a few seconds each) in a private build folder."""

import json
import os

import pytest

import dstar_rtl.app.cli
import dstar_rtl.flows.synth
from dstar_rtl.flows.estimate import estimate
from dstar_rtl.golden.config import preset


@pytest.fixture(autouse=True)
def only_synth(monkeypatch, tmp_path_factory):
    monkeypatch.setattr(dstar_rtl.app.cli, "COMMAND_MODULES", ("dstar_rtl.app.commands.synth",))
    # Synthesis writes to a private build root, never to the shared build/fpga.
    monkeypatch.setattr(dstar_rtl.flows.synth, "BUILD_ROOT",
                        tmp_path_factory.getbasetemp() / "fpga")


def run_dstar(capsys, *argv):
    rc = dstar_rtl.app.cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _liberty(path):
    """A minimal Liberty library: buffer, inverter, NAND2, NOR2 and a D flip-flop."""
    def comb(name, area, pins, fn):
        arcs = "".join(
            f'timing() {{ related_pin : "{p}"; cell_rise(scalar) {{ values("0.1"); }} '
            f'cell_fall(scalar) {{ values("0.1"); }} rise_transition(scalar) '
            f'{{ values("0.05"); }} fall_transition(scalar) {{ values("0.05"); }} }} '
            for p in pins)
        ins = "".join(f"pin({p}) {{ direction : input; capacitance : 0.01; }} " for p in pins)
        return (f'cell({name}) {{ area : {area}; {ins}pin(Y) {{ direction : output; '
                f'function : "{fn}"; {arcs}}} }}\n')
    path.write_text(
        'library(mini) {\n time_unit : "1ns"; capacitive_load_unit(1, pf);\n'
        + comb("BUF", 1.0, ["A"], "A") + comb("INV", 1.0, ["A"], "A'")
        + comb("NAND2", 1.5, ["A", "B"], "(A&B)'") + comb("NOR2", 1.5, ["A", "B"], "(A|B)'")
        + 'cell(DFF) { area : 5.0; ff(IQ, IQN) { clocked_on : "C"; next_state : "D"; } '
          'pin(C) { direction : input; clock : true; capacitance : 0.01; } '
          'pin(D) { direction : input; capacitance : 0.01; } '
          'pin(Q) { direction : output; function : "IQ"; } }\n}\n')
    return path


def test_estimate_prints_and_writes(tmp_path, capsys):
    rc, out, err = run_dstar(capsys, "estimate", "mpu", "--json", tmp_path / "e.json")
    assert rc == 0 and err == ""
    assert "peak: 64 2-bit x 8-bit digit-MACs per cycle" in out
    assert "ECP5 -nodsp" in out and "generic CMOS transistors" in out
    assert "PE (2-bit slice)" in out
    got = json.loads((tmp_path / "e.json").read_text())
    want = estimate("mpu", preset("tiny"))
    assert got["ecp5"] == want["ecp5"] and got["ecp5_nodsp"] == want["ecp5_nodsp"]
    assert got["config"]["rows"] == 4 and got["config_hash"] == preset("tiny").hash()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]


@pytest.mark.parametrize("unit, frag", [("baseline", "16 8-bit x 8-bit MACs"),
                                        ("qpu", "4 values quantized"),
                                        ("vpu", "4 elements per cycle"),
                                        ("qpu_mpu", "64 2-bit x 8-bit digit-MACs")])
def test_estimate_every_unit(capsys, unit, frag):
    rc, out, err = run_dstar(capsys, "estimate", unit)
    assert rc == 0 and err == "" and frag in out


def test_estimate_paper_is_cheap(capsys):
    import time

    t0 = time.perf_counter()
    rc, out, _ = run_dstar(capsys, "estimate", "mpu", "--preset", "paper")
    assert rc == 0 and "peak: 16,384 2-bit x 8-bit digit-MACs" in out
    assert time.perf_counter() - t0 < 5


def test_synth_ecp5_json_and_reuse(tmp_path, capsys):
    # The --json folder does not exist: it is created.
    rc, out, err = run_dstar(capsys, "synth", "pe", "--target", "ecp5", "--variant", "initial",
                             "--json", tmp_path / "new" / "s.json")
    assert rc == 0
    assert "LUT total" in out and "MULT18X18D" in out and "flip-flops" in out
    lines = err.splitlines()
    assert lines[0].split("] ", 1)[1].startswith("start synth pe")
    assert lines[-1].split("] ", 1)[1].startswith("end   synth pe")
    res = json.loads((tmp_path / "new" / "s.json").read_text())
    assert res["resources"]["dsp"] == 4 and res["config"]["lanes"] == 4
    assert f"{res['resources']['lut_total']:,}" in out

    rc, out, err = run_dstar(capsys, "synth", "pe", "--target", "ecp5", "--variant", "initial",
                             "--reuse")
    assert rc == 0 and "[reused]" in out and "reused the result" in err


def test_synth_generic_liberty(tmp_path, capsys):
    lib = _liberty(tmp_path / "mini.lib")
    rc, out, err = run_dstar(capsys, "synth", "pe", "--target", "generic", "--liberty", lib,
                         "--json", tmp_path / "g.json")
    assert rc == 0
    assert "transistors" in out and "area" in out and "mini.lib" in out
    res = json.loads((tmp_path / "g.json").read_text())
    assert res["resources"]["area"] > 0 and res["transistors"] > 0
    assert f"{res['transistors']:,}" in out


def test_synth_asic_gz_json(tmp_path, capsys):
    import gzip
    from pathlib import Path

    src = Path(__file__).parent / "data" / "tiny_cells.lib"
    gz = tmp_path / "tiny_cells.lib.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    rc, out, err = run_dstar(capsys, "synth", "baseline_pe", "--target", "asic", "--liberty", gz,
                         "--booth", "--json", tmp_path / "new" / "a.json")
    assert rc == 0, err
    assert "library dstar_tiny (tiny_cells.lib.gz" in out and "critical path" in out
    res = json.loads((tmp_path / "new" / "a.json").read_text())
    r = res["resources"]
    assert r["combinational_area"] + r["sequential_area"] == pytest.approx(r["area"])
    assert f"{r['area']:,.1f}" in out and res["booth"] and res["target"] == "asic"
    assert res["liberty"]["file"] == "tiny_cells.lib.gz"
    assert not [n for n in os.listdir(tmp_path / "new") if n.startswith(".")]


def test_synth_yosys_failure_is_one_line(tmp_path, monkeypatch, capsys):
    from dstar_rtl.flows.synth import SynthError

    def fail(*a, **k):
        raise SynthError("yosys failed (exit 1): ERROR: boom; log: /x/yosys.log")
    monkeypatch.setattr(dstar_rtl.flows.synth, "synthesize", fail)
    rc, out, err = run_dstar(capsys, "synth", "pe", "--json", tmp_path / "new" / "s.json")
    assert rc == 1 and out == ""
    assert err.splitlines()[-1] == "dstar: error: yosys failed (exit 1): ERROR: boom; log: " \
                                   "/x/yosys.log"
    assert "Traceback" not in err and list(tmp_path.iterdir()) == []


BAD = [
    ("unknown unit", ["synth", "gpu"], "invalid choice: 'gpu'"),
    ("unknown target", ["synth", "pe", "--target", "xilinx"], "invalid choice: 'xilinx'"),
    ("liberty with ecp5", ["synth", "pe", "--target", "ecp5", "--liberty", "{d}/mini.lib"],
     "needs --target generic or asic, not ecp5"),
    ("liberty with ice40", ["synth", "pe", "--target", "ice40", "--liberty", "{d}/mini.lib"],
     "needs --target generic or asic, not ice40"),
    ("missing liberty", ["synth", "pe", "--target", "generic", "--liberty", "{d}/nope.lib"],
     "nope.lib: file not found"),
    ("asic without liberty", ["synth", "pe", "--target", "asic"],
     "--target asic needs --liberty FILE"),
    ("asic missing liberty", ["synth", "pe", "--target", "asic", "--liberty", "{d}/nope.lib"],
     "nope.lib: file not found"),
    ("asic missing liberty gz", ["synth", "pe", "--target", "asic", "--liberty",
                                 "{d}/nope.lib.gz"], "nope.lib.gz: file not found"),
    ("asic nodsp", ["synth", "pe", "--target", "asic", "--liberty", "{d}/mini.lib", "--nodsp"],
     "not asic"),
    ("booth with ecp5", ["synth", "pe", "--target", "ecp5", "--booth"],
     "options of --target asic, not ecp5"),
    ("parts with generic", ["synth", "pe", "--target", "generic", "--parts"],
     "options of --target asic, not generic"),
    ("asic json is the liberty", ["synth", "pe", "--target", "asic", "--liberty",
                                  "{d}/mini.lib", "--json", "{d}/mini.lib"], "is the input"),
    ("nodsp with generic", ["synth", "pe", "--target", "generic", "--nodsp"],
     "--nodsp maps multipliers to FPGA fabric"),
    ("unknown param", ["synth", "pe", "--set", "bogus=1"], "bogus"),
    ("bad config", ["synth", "mpu", "--set", "cols=3"], "cols must be equal to rows"),
    ("qpu sorter too small", ["synth", "qpu", "--variant", "sort", "--set", "sort_n=2",
                             "--set", "lanes=2"],
     "sort_n must be >= 4"),
    ("synth json under a file", ["synth", "pe", "--json", "{d}/mini.lib/x.json"],
     "is a file, not a directory"),
    ("synth json is dir", ["synth", "pe", "--json", "{d}"], "it is a directory"),
    ("synth json is the liberty", ["synth", "pe", "--target", "generic", "--liberty",
                                   "{d}/mini.lib", "--json", "{d}/mini.lib"], "is the input"),
    ("synth zero timeout", ["synth", "pe", "--timeout", "0"], "--timeout must be a positive"),
    ("synth negative timeout", ["synth", "pe", "--timeout", "-5"],
     "--timeout must be a positive"),
    ("unknown preset", ["synth", "pe", "--preset", "huge"], "invalid choice: 'huge'"),
    ("estimate unknown unit", ["estimate", "gpu"], "invalid choice: 'gpu'"),
    ("estimate unknown param", ["estimate", "mpu", "--set", "bogus=1"], "bogus"),
    ("estimate bad value", ["estimate", "mpu", "--set", "lanes=3"], "lanes must be a power"),
    ("estimate qpu sorter", ["estimate", "qpu", "--variant", "sort", "--set", "sort_n=2",
                            "--set", "lanes=2"],
     "sort_n must be >= 4"),
    ("estimate json under a file", ["estimate", "mpu", "--json", "{d}/mini.lib/x.json"],
     "is a file, not a directory"),
    ("estimate core not square", ["estimate", "core", "--set", "vpu_lanes=8"],
     "the core needs rows == cols == vpu_lanes"),
]


@pytest.mark.parametrize("argv, frag", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_one_line_no_output(tmp_path, capsys, monkeypatch, argv, frag):
    _liberty(tmp_path / "mini.lib")
    ran = []
    monkeypatch.setattr(dstar_rtl.flows.synth, "synthesize_rtlil", lambda *a, **k: ran.append(a))
    before = set(os.listdir(tmp_path))
    argv = [a.format(d=tmp_path) for a in argv]
    if "--json" not in argv:
        argv += ["--json", str(tmp_path / "o.json")]
    rc, out, err = run_dstar(capsys, *argv)
    assert rc == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dstar: error: "), err
    assert frag in lines[0]
    assert out == "" and not ran
    assert set(os.listdir(tmp_path)) == before
