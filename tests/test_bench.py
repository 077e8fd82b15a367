"""``dstar bench`` end to end: the quick bench on the ``tiny`` preset (a small random-weight DiT)
through both generated arrays, and the command's error paths (bad input: one line, exit status
2, nothing written; a failure during the work: one line, exit status 1, nothing written) and
its outputs (created folder, both files or neither) with the simulation patched out."""

import json

import numpy as np
import pytest

import dstar_rtl.app.cli
from dstar_rtl.golden.config import preset
from dstar_rtl.results.bench import Bench

KEYS = {"kind", "schema", "provenance", "preset", "config", "config_hash", "workload", "simulator",
        "tools", "resources", "simulation", "rows", "totals", "runtime_s"}
ROW_KEYS = {"layer", "kind", "step", "step_kind", "tokens", "cin", "cout", "blocks", "groups",
            "lanes_valid", "dense_beats", "cycles_dstar", "cycles_int8", "cycles_ratio",
            "lut_ratio", "tput_per_lut_ratio", "lane_util", "mean_act_bits", "subchannels",
            "weight_load_cycles"}
QUICK = ["bench", "--preset", "tiny", "--weights", "random", "--model", "tiny", "--quick",
         "--no-synth"]


@pytest.fixture(autouse=True)
def only_bench(monkeypatch):
    monkeypatch.setattr(dstar_rtl.app.cli, "COMMAND_MODULES", ("dstar_rtl.app.commands.bench",))


def run_dstar(capsys, *argv):
    rc = dstar_rtl.app.cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _check_report(rep, simulator):
    assert KEYS <= set(rep)
    assert Bench.from_data(rep).totals.all.cycles_dstar == rep["totals"]["all"]["cycles_dstar"]
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
    rc, out, err = run_dstar(capsys, *QUICK, "--out", tmp_path)
    assert rc == 0, err
    assert "INT8/DSTAR cycles" in out and "every drain beat checked against golden" in out
    rep = json.loads((tmp_path / "bench.json").read_text())
    _check_report(rep, "verilator")
    md = (tmp_path / "bench.md").read_text()
    assert "| layer |" in md and "**total**" in md


@pytest.mark.slow
@pytest.mark.cocotb
def test_quick_bench_icarus(tmp_path, capsys):
    rc, out, err = run_dstar(capsys, *QUICK, "--simulator", "icarus", "--out", tmp_path)
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
    (["bench", "--trace", "{d}/t.npz"], "--trace needs --weights FILE.npz"),
    (["bench", "--trace", "{d}/t.npz", "--weights", "{d}/w_missing.npz"],
     "no 'net.b.weight' for the trace's layer 'net.b'"),
    (["bench", "--trace", "{d}/t.npz", "--weights", "{d}/w_shape.npz"],
     "'net.a.weight' has shape (4, 5); the trace's input has 4 channels"),
    (["bench", "--trace", "{d}/t.npz", "--weights", "{d}/w.npz", "--steps-run", "0,3"],
     "step 3 is outside [0, 2]"),
    (["bench", "--trace", "{d}/file", "--weights", "{d}/w.npz"], "not a NumPy .npz archive"),
    (["bench", "--liberty", "{d}/none.lib"], "none.lib: file not found"),
])
def test_errors_are_one_line(tmp_path, capsys, monkeypatch, argv, message):
    import dstar_rtl.bench.layers
    def never(*a, **k):
        raise AssertionError("the bench ran on bad input")
    monkeypatch.setattr(dstar_rtl.bench.layers, "trace_inputs", never)
    monkeypatch.setattr(dstar_rtl.bench.layers, "run_array", never)
    (tmp_path / "file").write_text("keep")
    _any_dit_files(tmp_path)
    kept = sorted(p.name for p in tmp_path.iterdir())
    argv = [str(a).format(d=tmp_path) for a in argv]
    if "--out" not in argv:
        argv = [*argv, "--out", tmp_path]
    rc, out, err = run_dstar(capsys, *argv)
    assert rc == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("dstar: error: ") and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == kept


# --------------------------------------------------------------- any DiT: trace + weights
def _any_dit_files(d):
    """A two-layer "model" as a user brings it: a trace (3 steps, 4 tokens) and weights in the
    (out, in) layout, plus broken variants of the weights."""
    from dstar_rtl.analysis.trace import write_trace

    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, (3, 4, 4)).cumsum(axis=0)          # slowly changing inputs
    write_trace(d / "t.npz", {"net.a.x": x, "net.b.x": np.tanh(x @ rng.normal(0, 1, (4, 8)))})
    w = {"net.a.weight": rng.normal(0, 0.5, (8, 4)), "net.a.bias": rng.normal(0, 0.1, 8),
         "net.b.weight": rng.normal(0, 0.5, (4, 8))}
    np.savez(d / "w.npz", **w)
    np.savez(d / "w_missing.npz", **{k: v for k, v in w.items() if not k.startswith("net.b")})
    np.savez(d / "w_shape.npz", **{**w, "net.a.weight": rng.normal(0, 0.5, (4, 5))})


@pytest.mark.cocotb
def test_any_dit_from_a_trace_and_weights_every_step(tmp_path, capsys):
    """``--trace T.npz --weights W.npz --steps-run all``: each of the trace's layers at each of
    its steps through both generated arrays (Icarus), every drain beat checked."""
    _any_dit_files(tmp_path)
    rc, out, err = run_dstar(capsys, "bench", "--preset", "tiny", "--trace", tmp_path / "t.npz",
                         "--weights", tmp_path / "w.npz", "--steps-run", "all", "--no-synth",
                         "--simulator", "icarus", "--out", tmp_path / "rep")
    assert rc == 0, err
    rep = json.loads((tmp_path / "rep" / "bench.json").read_text())
    assert rep["workload"]["source"] == "trace" and rep["workload"]["steps_run"] == [0, 1, 2]
    assert [(r["layer"], r["step"]) for r in rep["rows"]] == [
        (n, t) for t in range(3) for n in ("net.a", "net.b")]
    assert {r["kind"] for r in rep["rows"]} == {"a", "b"}
    assert [(r["cin"], r["cout"]) for r in rep["rows"][:2]] == [(4, 8), (8, 4)]
    for u in ("mpu", "baseline"):
        assert rep["simulation"][u]["checked"] and rep["simulation"][u]["drain_beats_checked"] > 0
    assert "measured steps all 3" in out


# ------------------------------------------------- outputs, with the simulation patched out
@pytest.fixture
def fake_bench(monkeypatch):
    """``dstar_rtl.app.benches.layers.bench`` replaced by a stub report (no DiT run, no
    simulator)."""
    import dstar_rtl.app.benches.layers
    calls = []

    class Stub:
        def __init__(self, preset):
            self.preset = preset

        def to_json(self):
            return json.dumps({"preset": self.preset})

    def bench(cfg, **kw):
        calls.append(kw)
        return Stub(cfg.name)
    monkeypatch.setattr(dstar_rtl.app.benches.layers, "bench", bench)
    monkeypatch.setattr(dstar_rtl.app.benches.layers, "text", lambda rep: "the table")
    monkeypatch.setattr(dstar_rtl.app.benches.layers, "markdown", lambda rep: "# bench\n")
    return calls


def test_missing_out_folder_is_created(tmp_path, capsys, fake_bench):
    """``--out DIR`` used to refuse a folder that did not exist (``dstar generate`` creates
    one); every command now creates it."""
    out = tmp_path / "new" / "dir"
    rc, text, err = run_dstar(capsys, *QUICK, "--out", out)
    assert rc == 0, err
    assert json.loads((out / "bench.json").read_text())["preset"] == "tiny"
    assert (out / "bench.md").read_text().startswith("#")
    assert text.splitlines()[-1] == "the table"     # the runner prints the bench's text
    assert sorted(p.name for p in out.iterdir()) == ["bench.json", "bench.md"]


def test_outputs_appear_together(tmp_path, capsys, fake_bench, monkeypatch):
    """bench.json and bench.md used to be written one after the other: a failure writing the
    second left the first. Now neither appears, nor the folder made for them."""
    import dstar_rtl.app.benches.layers
    def md_that_fails(rep):
        def write(f):
            raise OSError(28, "No space left on device")
        return write
    monkeypatch.setattr(dstar_rtl.app.benches.layers, "markdown", md_that_fails)
    rc, text, err = run_dstar(capsys, *QUICK, "--out", tmp_path / "new")
    assert rc == 1
    assert err.splitlines()[-1] == (f"dstar: error: cannot write {tmp_path / 'new' / 'bench.md'}"
                                    f": No space left on device")
    assert list(tmp_path.iterdir()) == []


def test_simulation_mismatch_is_one_line_status_1(tmp_path, capsys, monkeypatch):
    import dstar_rtl.app.benches.layers
    def mismatch(cfg, **kw):
        raise AssertionError("mpu: drain beat 3 of block 0 differs from golden; log: /x/run.log")
    monkeypatch.setattr(dstar_rtl.app.benches.layers, "bench", mismatch)
    rc, out, err = run_dstar(capsys, *QUICK, "--out", tmp_path)
    assert rc == 1 and out == ""
    assert err == ("dstar: error: mpu: drain beat 3 of block 0 differs from golden; log: "
                   "/x/run.log\n")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------- at a profile operating point
def _operating_point(path, bases, thr=(2, 11, 47)):
    path.write_text(json.dumps({"operating_point": {"name": "test", "thr": list(thr),
                                                    "base_log2": bases}}))
    return path


def test_operating_point_sets_each_layers_thresholds_and_base(tmp_path):
    """The layers quantize with the operating point's thresholds and their own base; the arrays
    keep the preset's configuration."""
    from dstar_rtl.analysis.layer_inputs import LinearSpec
    from dstar_rtl.analysis.profile import load_operating_point
    from dstar_rtl.bench.layers import layer_configs
    from dstar_rtl.golden.config import preset

    cfg = preset("tiny")
    w = np.zeros((4, 4))
    layers = [LinearSpec("a", "a", "a.x", w, np.zeros(4)), LinearSpec("b[v]", "b", "b.x", w,
                                                                       np.zeros(4))]
    op = load_operating_point(_operating_point(tmp_path / "op.json", {"a": 5, "b": 3}))
    got = layer_configs(cfg, layers, op)
    assert (got["a"].thr, got["a"].base_log2, got["b[v]"].base_log2) == ((2, 11, 47), 5, 3)
    assert layer_configs(cfg, layers, None) == {"a": cfg, "b[v]": cfg}
    with pytest.raises(ValueError, match="no base for layer 'b'"):
        layer_configs(cfg, layers, load_operating_point(_operating_point(tmp_path / "o2.json",
                                                                         {"a": 5})))


@pytest.mark.cocotb
def test_any_dit_at_an_operating_point(tmp_path, capsys):
    _any_dit_files(tmp_path)
    op = _operating_point(tmp_path / "op.json", {"net.a": 5, "net.b": 4})
    rc, out, err = run_dstar(capsys, "bench", "--preset", "tiny", "--trace", tmp_path / "t.npz",
                         "--weights", tmp_path / "w.npz", "--steps-run", "0,2", "--no-synth",
                         "--simulator", "icarus", "--operating-point", op,
                         "--out", tmp_path / "rep")
    assert rc == 0, err
    rep = json.loads((tmp_path / "rep" / "bench.json").read_text())
    assert rep["workload"]["operating_point"] == {"name": "test", "thr": [2, 11, 47],
                                                  "base_log2": {"net.a": 5, "net.b": 4}}
    assert all(rep["simulation"][u]["checked"] for u in ("mpu", "baseline"))


def test_bad_operating_point_is_one_line(tmp_path, capsys):
    _any_dit_files(tmp_path)
    op = _operating_point(tmp_path / "op.json", {"net.a": 5})
    rc, out, err = run_dstar(capsys, "bench", "--preset", "tiny", "--trace", tmp_path / "t.npz",
                         "--weights", tmp_path / "w.npz", "--operating-point", op,
                         "--out", tmp_path / "rep")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "no base for layer 'net.b'" in err and not (tmp_path / "rep").exists()


def test_fabric_only_ratio_counts_dsp_blocks_at_the_luts_they_replace():
    """With the ``-nodsp`` resources of both arrays, the totals give the LUT ratio and the
    throughput per LUT with every multiplier in fabric, beside the ratio with DSP blocks."""
    from dstar_rtl.bench.layers import BenchLayer, summarize
    from dstar_rtl.golden.config import preset

    cfg = preset("tiny")
    bl = BenchLayer(name="l", kind="fc1", step=0, cache_step=True, tokens=4, cin=4, cout=4,
                    mpu_stream=[0] * 5, groups=5, lanes_valid=12, groups_per_tile=[5],
                    base_stream=[0] * 4, blocks=[None], subchannels={"b2": 4, "zero": 0})
    sims = {u: {"layers": [{"id": bl.id, "cycles": [c], "load_cycles": 4}]}
            for u, c in (("mpu", 50), ("baseline", 100))}
    res = {"mpu": {"resources": {"lut_total": 300}, "fabric": {"lut_total": 300}},
           "baseline": {"resources": {"lut_total": 100}, "fabric": {"lut_total": 200}}}
    a = summarize(cfg, [bl], sims["mpu"], sims["baseline"], res)["totals"]["all"]
    assert a["cycles_ratio"] == 2.0 and a["lut_ratio"] == 3.0
    assert a["tput_per_lut_ratio"] == pytest.approx(2 / 3)
    assert a["lut_ratio_fabric"] == 1.5 and a["tput_per_lut_fabric_ratio"] == pytest.approx(4 / 3)
    res = {u: {"resources": e["resources"]} for u, e in res.items()}     # no -nodsp run
    a = summarize(cfg, [bl], sims["mpu"], sims["baseline"], res)["totals"]["all"]
    assert a["lut_ratio_fabric"] is None and a["tput_per_lut_fabric_ratio"] is None


def test_array_areas_take_each_array_at_its_best():
    """The bench's cell areas: the MPU as generated, the INT8 array the smaller of its runs
    with and without ``-booth``, both from the project's own small library; the throughput-per-
    area ratio is the speed-up over the area ratio."""
    from pathlib import Path

    from dstar_rtl.bench.layers import _row
    from dstar_rtl.bench.resources import array_areas, unit_config
    from dstar_rtl.flows.synth import synthesize

    lib = Path(__file__).parent / "data" / "tiny_cells.lib"
    cfg = preset("tiny", rows=2, cols=2)
    a = array_areas(cfg, lib)
    base = unit_config("baseline", cfg)          # the INT8 core's own choices
    assert base.pe_stages == preset("tiny", datapath="int8").pe_stages != cfg.pe_stages
    assert a["baseline"]["config_hash"] == base.hash() and a["mpu"]["config_hash"] == cfg.hash()
    runs = [synthesize("baseline", base, "asic", liberty=lib, booth=b, reuse=True)
            for b in (False, True)]
    assert all(r.get("reused") for r in runs)
    assert a["baseline"]["area"] == min(r["resources"]["area"] for r in runs)
    assert a["baseline"]["booth"] == (runs[1]["resources"]["area"] < runs[0]["resources"]["area"])
    assert a["mpu"]["area"] > 0 and a["library"]["sha256"]
    ratio = a["mpu"]["area"] / a["baseline"]["area"]
    r = _row("x", "k", 0, "cache", 2, 2, 2, 1, 10, 40, 20, 100, 250, 2.0, 4, {"b2": 1}, 0,
             area_ratio=ratio, fmax_ratio=0.5)
    assert r["tput_per_area_ratio"] == pytest.approx(2.5 / ratio)
    assert r["tput_per_second_ratio"] == pytest.approx(2.5 * 0.5)
