"""``dstar bench`` end to end: the quick bench on the ``tiny`` preset (a small random-weight DiT)
through both generated arrays, and the command's error path (one line, non-zero exit, nothing
written)."""

import json

import pytest

import gen.cli
from golden.config import preset

KEYS = {"generated", "command", "preset", "config", "config_hash", "workload", "simulator",
        "tools", "resources", "simulation", "rows", "totals", "runtime_s"}
ROW_KEYS = {"layer", "kind", "step", "step_kind", "tokens", "cin", "cout", "blocks", "groups",
            "lanes_valid", "dense_beats", "cycles_dstar", "cycles_int8", "cycles_ratio",
            "lut_ratio", "tput_per_lut_ratio", "lane_util", "mean_act_bits", "subchannels",
            "weight_load_cycles"}
QUICK = ["bench", "--preset", "tiny", "--weights", "random", "--model", "tiny", "--quick",
         "--no-synth"]


@pytest.fixture(autouse=True)
def only_bench(monkeypatch):
    monkeypatch.setattr(gen.cli, "COMMAND_MODULES", ("gen.cmd_bench",))


def dstar(capsys, *argv):
    rc = gen.cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _check_report(rep, simulator):
    assert KEYS <= set(rep)
    assert rep["preset"] == "tiny" and rep["config_hash"] == preset("tiny").hash()
    assert rep["simulator"] == simulator
    assert simulator in rep["tools"]["simulator"].lower()   # cocotb's name, e.g. "Verilator"
    kinds = {r["kind"] for r in rep["rows"]}
    assert kinds == {"x_embed", "qkv", "proj", "fc1", "fc2", "final.linear"}
    assert {r["step"] for r in rep["rows"]} == {0, 6}
    for r in rep["rows"]:
        assert ROW_KEYS <= set(r)
        assert r["cycles_dstar"] > 0 and r["cycles_int8"] > 0
        assert 0 < r["lane_util"] <= 1
    for u in ("mpu", "baseline"):
        assert rep["simulation"][u]["checked"] is True
        assert rep["simulation"][u]["drain_beats_checked"] > 0
    a = rep["totals"]["all"]
    assert a["cycles_dstar"] == sum(r["cycles_dstar"] for r in rep["rows"])
    assert a["cycles_int8"] == sum(r["cycles_int8"] for r in rep["rows"])
    assert a["cycles_ratio"] == pytest.approx(a["cycles_int8"] / a["cycles_dstar"])
    if a["lut_ratio"] is not None:   # tiny's resources come from reports/sweep.json
        assert a["tput_per_lut_ratio"] == pytest.approx(a["cycles_ratio"] / a["lut_ratio"])


@pytest.mark.cocotb
def test_quick_bench_verilator(tmp_path, capsys):
    rc, out, err = dstar(capsys, *QUICK, "--out", tmp_path)
    assert rc == 0, err
    assert "INT8/DSTAR cycles" in out and "every drain beat checked against golden" in out
    rep = json.loads((tmp_path / "bench.json").read_text())
    _check_report(rep, "verilator")
    md = (tmp_path / "bench.md").read_text()
    assert "| layer |" in md and "**total**" in md


@pytest.mark.slow
@pytest.mark.cocotb
def test_quick_bench_icarus(tmp_path, capsys):
    rc, out, err = dstar(capsys, *QUICK, "--simulator", "icarus", "--out", tmp_path)
    assert rc == 0, err
    _check_report(json.loads((tmp_path / "bench.json").read_text()), "icarus")


@pytest.mark.parametrize("argv, message", [
    (["bench", "--preset", "huge"], "invalid choice: 'huge'"),
    (["bench", "--steps", "4", "--steps-run", "0,5"], "step 5 is outside [0, 3]"),
    (["bench", "--steps-run", "zero"], "comma-separated step numbers"),
    (["bench", "--set", "rows=3"], "cols must be equal to rows"),
    (["bench", "--out", "/nonexistent/dir"], "not a directory"),
    (["bench", "--weights", "/nonexistent/w.npz"], "not found"),
    (["bench", "--preset", "tiny", "--weights", "random"], "max_reduction 64"),
    (["bench", "--weights", "random", "--block", "4"], "block must be in [0, 3]"),
])
def test_errors_are_one_line(tmp_path, capsys, argv, message):
    if "--out" not in argv:
        argv = [*argv, "--out", tmp_path]
    rc, out, err = dstar(capsys, *argv)
    assert rc == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("dstar: error: ") and message in err, err
    assert not list(tmp_path.iterdir())
