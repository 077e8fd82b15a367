"""``dstar bench`` end to end: the quick bench on the ``tiny`` preset (a small random-weight DiT)
through both generated arrays, and the command's error paths (bad input: one line, exit status
2, nothing written; a failure during the work: one line, exit status 1, nothing written) and
its outputs (created folder, both files or neither) with the simulation patched out."""

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
    (["bench", "--out", "{d}/file"], "is a file, not a directory"),
    (["bench", "--out", "{d}/file/sub"], "is a file, not a directory"),
    (["bench", "--weights", "/nonexistent/w.npz"], "not found"),
    (["bench", "--weights", "{d}"], "not found"),
    (["bench", "--seed", "-1"], "--seed must be >= 0"),
    (["bench", "--weight-seed", "-1", "--weights", "random"], "--weight-seed must be >= 0"),
    (["bench", "--block", "-1"], "--block must be >= 0"),
    (["bench", "--preset", "tiny", "--weights", "random"], "max_reduction 64"),
    (["bench", "--weights", "random", "--block", "4"], "block must be in [0, 3]"),
])
def test_errors_are_one_line(tmp_path, capsys, monkeypatch, argv, message):
    import sim.bench_layers

    def never(*a, **k):
        raise AssertionError("the bench ran on bad input")
    monkeypatch.setattr(sim.bench_layers, "trace_inputs", never)
    (tmp_path / "file").write_text("keep")
    argv = [str(a).format(d=tmp_path) for a in argv]
    if "--out" not in argv:
        argv = [*argv, "--out", tmp_path]
    rc, out, err = dstar(capsys, *argv)
    assert rc == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("dstar: error: ") and message in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


# ------------------------------------------------- outputs, with the simulation patched out
@pytest.fixture
def fake_bench(monkeypatch):
    """``sim.bench_layers.bench`` replaced by a stub report (no DiT run, no simulator)."""
    import sim.bench_layers

    calls = []

    def bench(cfg, **kw):
        calls.append(kw)
        return {"rows": [], "totals": {}, "preset": cfg.name}
    monkeypatch.setattr(sim.bench_layers, "bench", bench)
    monkeypatch.setattr(sim.bench_layers, "text", lambda rep: "the table")
    monkeypatch.setattr(sim.bench_layers, "markdown", lambda rep: "# bench\n")
    return calls


def test_missing_out_folder_is_created(tmp_path, capsys, fake_bench):
    """``--out DIR`` used to refuse a folder that did not exist (``dstar generate`` creates
    one); every command now creates it."""
    out = tmp_path / "new" / "dir"
    rc, text, err = dstar(capsys, *QUICK, "--out", out)
    assert rc == 0, err
    assert json.loads((out / "bench.json").read_text())["preset"] == "tiny"
    assert (out / "bench.md").read_text().startswith("#")
    assert text.splitlines()[-1] == f"wrote {out / 'bench.json'} and {out / 'bench.md'}"
    assert sorted(p.name for p in out.iterdir()) == ["bench.json", "bench.md"]


def test_outputs_appear_together(tmp_path, capsys, fake_bench, monkeypatch):
    """bench.json and bench.md used to be written one after the other: a failure writing the
    second left the first. Now neither appears, nor the folder made for them."""
    import sim.bench_layers

    def md_that_fails(rep):
        def write(f):
            raise OSError(28, "No space left on device")
        return write
    monkeypatch.setattr(sim.bench_layers, "markdown", md_that_fails)
    rc, text, err = dstar(capsys, *QUICK, "--out", tmp_path / "new")
    assert rc == 1
    assert err.splitlines()[-1] == (f"dstar: error: cannot write {tmp_path / 'new' / 'bench.md'}"
                                    f": No space left on device")
    assert list(tmp_path.iterdir()) == []


def test_simulation_mismatch_is_one_line_status_1(tmp_path, capsys, monkeypatch):
    import sim.bench_layers

    def mismatch(cfg, **kw):
        raise AssertionError("mpu: drain beat 3 of block 0 differs from golden; log: /x/run.log")
    monkeypatch.setattr(sim.bench_layers, "bench", mismatch)
    rc, out, err = dstar(capsys, *QUICK, "--out", tmp_path)
    assert rc == 1 and out == ""
    assert err == ("dstar: error: mpu: drain beat 3 of block 0 differs from golden; log: "
                   "/x/run.log\n")
    assert list(tmp_path.iterdir()) == []
