"""``dstar estimate core`` (flows/estimate_core.py): the core's estimate composed from the MPU's,
the QPU's and the VPU's parts, structurally counted buffers and the measured control line; and
``dstar measure estimate`` (app/benches/estimate_calibration.py) where it needs no synthesis:
the refit
of the stored measurements, the runs still missing (none), its refusals. No synthesis here."""

import json
import time
from pathlib import Path

import pytest

import dstar_rtl.app.cli
import dstar_rtl.flows.estimate_runs as calibration
from dstar_rtl.flows import estimate_coef
from dstar_rtl.flows.estimate import CALIBRATION, CALIBRATION_RUNS, VALIDATION_RUNS, estimate
from dstar_rtl.flows.estimate_core import (
    COMPUTE_PARTS,
    CORE_MEASURED,
    ENGINE_PARTS,
    control,
    measured_error,
)
from dstar_rtl.golden.config import preset

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def only_synth(monkeypatch):
    monkeypatch.setattr(dstar_rtl.app.cli, "COMMAND_MODULES",
                        ("dstar_rtl.app.commands.synth", "dstar_rtl.app.commands.measure"))


def test_cli_estimate_core(tmp_path, capsys):
    """``dstar generate core`` exists, so ``dstar estimate core`` does too (it was refused)."""
    rc = dstar_rtl.app.cli.main(["estimate", "core", "--json", str(tmp_path / "new" / "core.json")])
    out, err = capsys.readouterr()
    assert rc == 0 and err == ""
    assert out.startswith("estimate core, preset tiny")
    assert "peak: 64 2-bit x 8-bit digit-MACs per cycle" in out
    assert "core control" in out and "generic CMOS transistors >= " in out
    got = json.loads((tmp_path / "new" / "core.json").read_text())
    assert got["ecp5"] == estimate("core", preset("tiny"))["ecp5"]
    assert got["generic"]["lower_bound"] is True and "core" in got["model"]


def test_core_is_composed_of_the_units_parts():
    """The PE array and the QPU parts are the units' own estimates; the MPU's weight memory is
    the core's WMEM (wmem_rows deep), so only its RAM differs; the VPU is the unit without
    acc_requant (narrower lanes, the same row scalars), whose requantization the control's
    DSP blocks hold: the dispatcher's two and T products of acc_bits by mult_width + 1."""
    cfg = preset("fpga")
    core = {p["name"]: p for p in estimate("core", cfg)["parts"]}
    for unit in ("mpu", "qpu", "vpu"):
        for p in estimate(unit, cfg)["parts"]:
            if p["name"] == "array front end, skew, drain":
                assert core[p["name"]]["bram"] > p["bram"]
                continue
            if p["name"] == "VPU lane":
                assert core[p["name"]]["lut"] < p["lut"] and core[p["name"]]["ff"] < p["ff"]
                continue
            assert core[p["name"]] == p, p["name"]
    names = list(core)
    assert any(n.startswith("ABUF bank") for n in names)
    assert core["core control: engines, dispatcher, ports"]["dsp"] == 2 + cfg.tile * 2


def test_control_line_passes_through_the_measured_cores():
    for name, m in CORE_MEASURED.items():
        c = control(preset(name))
        assert c == pytest.approx({k: float(v) for k, v in m["control"].items()})


def test_measured_constants_are_those_of_the_report():
    """CORE_MEASURED is copied from reports/core_area.json: regenerating the report must update
    it (dstar measure core-area)."""
    from dstar_rtl.app.reports.core_area import CoreArea

    rep = CoreArea.load(ROOT / "reports" / "core_area.json")
    for name, m in CORE_MEASURED.items():
        r = rep.presets[name]
        assert r.config_hash == m["config_hash"] == preset(name).hash()
        ctl = {k: sum(getattr(v, f) or 0 for p, v in r.parts.items() if p not in COMPUTE_PARTS)
               for k, f in (("lut", "lut_total"), ("ff", "ff"))}
        ctl["lutram"] = sum(r.parts[p].lutram for p in ENGINE_PARTS)
        assert ctl == m["control"]
        assert {k: getattr(r.total, k) for k in m["total"]} == m["total"]


def test_core_estimate_against_the_measured_cores():
    """The composed estimate is within the unit tolerance of the measured cores (in-sample for
    the control line: the check is on the composed parts and the structural RAM counts); the
    DSP blocks (the VPU's lanes and softmax output lanes, its scalar units, the requantizer's
    and the dispatcher's; the PEs have none) exactly, with mul2dsp's rule for a one-bit piece
    (flows.estimate_parts.dsp_blocks)."""
    for name, e in measured_error().items():
        assert abs(e["lut"]) <= 0.05 and abs(e["ff"]) <= 0.02, (name, e)
        assert e["dsp"] == 0, (name, e)
    assert measured_error()["fpga"]["bram"] == 0


def test_every_preset_is_cheap():
    t0 = time.perf_counter()
    for name in ("tiny", "fpga", "paper"):
        e = estimate("core", preset(name))
        assert e["ecp5"]["lut_total"] > 0 and e["generic"]["transistors"] > 0
    assert time.perf_counter() - t0 < 5


# ---------------------------------------------------------------- dstar measure estimate
def test_measure_estimate_refit_reproduces_the_stored_calibration(tmp_path, monkeypatch, capsys):
    """``--refit --write`` fits the stored measurements again (scipy's NNLS) and writes the very
    file that is stored: same coefficients, errors and measurements, byte for byte."""
    stored = estimate_coef.CALIBRATION_FILE.read_text()
    out_file = tmp_path / "estimate_calibration.json"
    monkeypatch.setattr(estimate_coef, "CALIBRATION_FILE", out_file)
    monkeypatch.setattr(calibration, "synth_run", _no_synthesis)
    rc = dstar_rtl.app.cli.main(["measure", "estimate", "--refit", "--write"])
    out, err = capsys.readouterr()
    assert rc == 0
    assert out_file.read_text() == stored
    assert "fitting the measurements stored on" in err and "wrote the calibration" in err
    head = "| run | set | lut | error | lut_nodsp | error | ff | error | transistors | error |"
    assert head in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and line != head]
    assert len(rows) == len(CALIBRATION_RUNS) + len(VALIDATION_RUNS)
    # Every row shows the stored measurement and error; a failed synthesis is a dash.
    for label, kind in (("pe tiny", "fitted"), ("qpu T=6", "fitted"), ("mpu fpga", "held out")):
        m = CALIBRATION["measured"][label]
        e = (CALIBRATION["error"] if kind == "fitted" else CALIBRATION["validation"])[label]
        cells = [f"{m[t]:,} | {100 * e[t]:+.1f} %" if t in m else "– | –"
                 for t in ("lut", "lut_nodsp", "ff", "transistors")]
        assert f"| {label} | {kind} | {' | '.join(cells)} |" in out, label
    assert "ff: " + ", ".join(f"{f} {c}" for f, c in CALIBRATION["coef"]["ff"].items()) in out


def test_measure_estimate_missing_measures_only_what_is_missing(monkeypatch, capsys):
    """Every run has a stored measurement, so ``--calibrate --missing`` synthesizes nothing; it
    refuses stored measurements of another Yosys."""
    monkeypatch.setattr(calibration, "synth_run", _no_synthesis)
    monkeypatch.setattr(calibration, "yosys_version", lambda: CALIBRATION["yosys"])
    rc = dstar_rtl.app.cli.main(["measure", "estimate", "--calibrate", "--missing"])
    out, err = capsys.readouterr()
    assert rc == 0 and "measuring the 0 runs with no stored measurement" in err
    assert f"| mpu tiny | fitted | {CALIBRATION['measured']['mpu tiny']['lut']:,} |" in out
    monkeypatch.setattr(calibration, "yosys_version", lambda: "0.1")
    rc = dstar_rtl.app.cli.main(["measure", "estimate", "--calibrate", "--missing"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err == (f"dstar: error: the stored measurements are of Yosys {CALIBRATION['yosys']}, "
                   f"this is 0.1: run --calibrate without --missing\n")


@pytest.mark.parametrize("argv", [[], ["--write"], ["--calibrate", "--refit"],
                                  ["--refit", "--missing"]])
def test_measure_estimate_refuses_bad_options(argv, capsys):
    rc = dstar_rtl.app.cli.main(["measure", "estimate", *argv])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.startswith("dstar: error: dstar measure estimate: ") and err.count("\n") == 1


def _no_synthesis(*args, **kwargs):
    raise AssertionError("no synthesis in the fast tier")
