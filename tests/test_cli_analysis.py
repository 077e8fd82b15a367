"""``dstar trace | fmdq | sar | dit`` in-process: outputs on success (missing folders created);
on bad input exit status 2, exactly one line on stderr and no output file."""

import json
import os

import numpy as np
import pytest

import dstar_rtl.app.cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ANALYSIS_MODULES = ("dstar_rtl.app.commands.trace", "dstar_rtl.app.commands.fmdq",
                    "dstar_rtl.app.commands.sar",
                    "dstar_rtl.app.commands.dit", "dstar_rtl.app.commands.dit_int")


@pytest.fixture(autouse=True)
def only_analysis(monkeypatch):
    # Register only this module's subcommands: these tests must not depend on the elaboration
    # stack (Amaranth, Yosys) that other subcommands import.
    monkeypatch.setattr(dstar_rtl.app.cli, "COMMAND_MODULES", ANALYSIS_MODULES)


def run_dstar(capsys, *argv):
    rc = dstar_rtl.app.cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("trace") / "t.npz"
    assert dstar_rtl.app.cli.main(["trace", "--model", "tiny", "--steps", "3", "--seed", "1",
                         "-o", str(p)]) == 0
    return p


def test_trace_fmdq_sar_outputs(tmp_path, capsys, trace_file):
    from dstar_rtl.analysis.trace import load_trace

    tr = load_trace(trace_file)
    assert tr["blocks.0.attn.qkv.x"].shape == (3, 16, 16)

    rc, out, err = run_dstar(capsys, "fmdq", trace_file, "--json", tmp_path / "f.json",
                         "--plot", tmp_path / "f.png")
    assert rc == 0 and err == ""
    assert "blocks.0.mlp.fc2" in out and "average bits" in out
    res = json.loads((tmp_path / "f.json").read_text())
    assert 0 < res["summary"]["avg_bits"] <= 8
    assert res["layers"]["x_embed"]["base_log2"] == 6
    assert (tmp_path / "f.png").read_bytes()[:8] == PNG_MAGIC

    rc, out, err = run_dstar(capsys, "sar", trace_file, "--thr", "2e-3",
                             "--json", tmp_path / "s.json", "--plot", tmp_path / "s.png")
    assert rc == 0 and err == ""
    assert "blocks.0.attn" in out and "work removed" in out
    res = json.loads((tmp_path / "s.json").read_text())
    assert res["thr"] == 2e-3
    mask = np.array(res["layers"]["blocks.0.attn"]["mask"])
    assert mask.shape == (2, 4, 4) and mask.diagonal(axis1=1, axis2=2).all()
    assert (tmp_path / "s.png").read_bytes()[:8] == PNG_MAGIC
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]  # no temporaries left


def test_fmdq_options(tmp_path, capsys, trace_file):
    rc, _, _ = run_dstar(capsys, "fmdq", trace_file, "--base-log2", "3",
                         "--json", tmp_path / "a.json")
    assert rc == 0
    assert {d["base_log2"] for d in json.loads((tmp_path / "a.json").read_text())["layers"]
            .values()} == {3}
    rc, out, _ = run_dstar(capsys, "fmdq", trace_file, "--profile-base", "--preset", "fpga")
    assert rc == 0 and "x_embed" in out


def test_dit_command(tmp_path, capsys):
    rc, out, err = run_dstar(capsys, "dit", "--model", "tiny", "--steps", "2", "--json",
                         tmp_path / "d.json")
    assert rc == 0 and err == ""
    assert "PSNR" in out and "blocks.0.attn.qkv[qk]" in out
    st = json.loads((tmp_path / "d.json").read_text())
    assert st["steps"] == 2 and 0 < st["summary"]["avg_bits"] <= 8


def _bad_files(tmp_path):
    text = tmp_path / "text.npz"
    text.write_text("not a trace")
    nan = tmp_path / "nan.npz"
    with open(nan, "wb") as f:
        np.savez(f, **{"l.x": np.array([[[np.nan]]])})
    with open(tmp_path / "xonly.npz", "wb") as f:
        np.savez(f, **{"l.x": np.ones((1, 4, 4))})


BAD = [
    ("missing trace", ["fmdq", "{d}/nope.npz"], "no such file"),
    ("text trace", ["fmdq", "{d}/text.npz"], "not a NumPy .npz archive"),
    ("nan trace", ["sar", "{d}/nan.npz"], "NaN"),
    ("sar without attention", ["sar", "{d}/xonly.npz"], "no attention probabilities"),
    ("base too big", ["fmdq", "{t}", "--base-log2", "99"], "base_log2"),
    ("base and profile", ["fmdq", "{t}", "--base-log2", "3", "--profile-base"], "either"),
    ("too wide", ["fmdq", "{t}", "--set", "max_reduction=8"], "max_reduction"),
    ("unknown param", ["fmdq", "{t}", "--set", "bogus=1"], "bogus"),
    ("bad thr", ["sar", "{t}", "--thr", "2"], "sar_thr"),
    ("bad interval", ["sar", "{t}", "--interval", "0"], "sar_interval"),
    ("bad block", ["sar", "{t}", "--block", "0"], "rows"),
    ("out folder is a file", ["fmdq", "{t}", "--json", "{d}/text.npz/x.json"],
     "is a file, not a directory"),
    ("out is a folder", ["fmdq", "{t}", "--json", "{d}"], "it is a directory"),
    ("plot is the json", ["fmdq", "{t}", "--json", "{d}/o.x", "--plot", "{d}/o.x"],
     "same file"),
    ("json is the trace", ["sar", "{d}/nan.npz", "--json", "{d}/nan.npz"], "is the input"),
    ("trace out is a folder", ["trace", "--model", "tiny", "-o", "{d}"], "it is a directory"),
    ("trace out under a file", ["trace", "--model", "tiny", "-o", "{d}/text.npz/t.npz"],
     "is a file, not a directory"),
    ("dit json under a file", ["dit", "--model", "tiny", "--json", "{d}/text.npz/d.json"],
     "is a file, not a directory"),
    ("dit negative label", ["dit", "--model", "tiny", "--label", "-1"], "--label"),
    ("trace steps", ["trace", "--steps", "0", "-o", "{d}/t.npz"], "--steps"),
    ("trace seed", ["trace", "--seed", "-1", "-o", "{d}/t.npz"], "--seed"),
    ("trace too wide", ["trace", "--set", "max_reduction=16", "-o", "{d}/t.npz"],
     "max_reduction"),
    ("dit label", ["dit", "--model", "tiny", "--steps", "1", "--label", "99"], "label"),
    ("dit too wide", ["dit", "--model", "tiny", "--steps", "1", "--set", "max_reduction=16"],
     "max_reduction"),
]


@pytest.mark.parametrize("argv, frag", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_one_line_no_output(tmp_path, capsys, trace_file, argv, frag):
    _bad_files(tmp_path)
    before = set(os.listdir(tmp_path))
    argv = [a.format(d=tmp_path, t=trace_file) for a in argv]
    # Every command also asks for every output it can write.
    extra = {"fmdq": ["--json", tmp_path / "o.json", "--plot", tmp_path / "o.png"],
             "sar": ["--json", tmp_path / "o.json", "--plot", tmp_path / "o.png"],
             "dit": ["--json", tmp_path / "o.json"], "trace": []}[argv[0]]
    if "--json" in argv:
        extra = []
    rc, out, err = run_dstar(capsys, *argv, *extra)
    assert rc == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dstar: error: "), err
    assert frag in lines[0]
    assert out == ""
    assert set(os.listdir(tmp_path)) == before


def test_missing_output_folders_are_created(tmp_path, capsys, trace_file):
    """A missing output folder is what users expect to be made (it was refused before)."""
    out = tmp_path / "new" / "deeper"
    rc, _, err = run_dstar(capsys, "fmdq", trace_file, "--json", out / "f.json", "--plot",
                       out / "png" / "f.png")
    assert rc == 0 and err == ""
    assert json.loads((out / "f.json").read_text())["summary"]
    assert (out / "png" / "f.png").read_bytes()[:8] == PNG_MAGIC
    rc, _, err = run_dstar(capsys, "trace", "--model", "tiny", "--steps", "1", "-o",
                       tmp_path / "t" / "t.npz")
    assert rc == 0 and (tmp_path / "t" / "t.npz").is_file()


def test_a_failing_output_leaves_no_output_and_no_folder(tmp_path, capsys, trace_file,
                                                         monkeypatch):
    """The JSON and the plot appear together or not at all: when drawing the plot fails after
    the JSON was made, neither file, no temporary and no new folder is left."""
    import matplotlib.figure

    def boom(self, *a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", boom)
    out = tmp_path / "new"
    rc, out_text, err = run_dstar(capsys, "fmdq", trace_file, "--json", out / "f.json", "--plot",
                              out / "f.png")
    assert rc == 1 and out_text == ""
    assert err.splitlines() == [f"dstar: error: cannot write {out / 'f.png'}: No space left on "
                                f"device"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, frag", [
    (["--preset", "tiny", "--preset", "fpga", "--base-log2", "9"], "base_log2 must be in [0, 8]"),
    (["--json", "{d}/r.x", "--md", "{d}/r.x"], "two outputs of this command are the same file"),
    (["--md", "{d}/file/r.md"], "is a file, not a directory"),
    (["--label", "99"], "--label must be in [0, 4]"),
])
def test_dit_int_checks_every_run_before_the_first(tmp_path, capsys, monkeypatch, argv, frag):
    """dit-int's per-preset base check used to run inside the work, after the float run."""
    import dstar_rtl.models.dit_int_compare
    def never(*a, **k):
        raise AssertionError("a run started on bad input")
    monkeypatch.setattr(dstar_rtl.models.dit_int_compare, "compare_int", never)
    (tmp_path / "file").write_text("x")
    rc, out, err = run_dstar(capsys, "dit-int", "--model", "tiny", "--steps", "1",
                         *[a.format(d=tmp_path) for a in argv])
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and frag in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


@pytest.mark.parametrize("command", ["trace", "dit", "dit-int"])
def test_a_layer_too_wide_is_refused_before_sampling(tmp_path, capsys, monkeypatch, command):
    """max_reduction used to be checked after the float run (trace) or inside the work."""
    import dstar_rtl.models.dit
    import dstar_rtl.models.dit_int_compare
    def never(*a, **k):
        raise AssertionError("sampling started on bad input")
    for mod, name in ((dstar_rtl.models.dit, "record_trace"), (dstar_rtl.models.dit, "compare"),
                      (dstar_rtl.models.dit_int_compare, "compare_int")):
        monkeypatch.setattr(mod, name, never)
    out = ["-o", tmp_path / "t.npz"] if command == "trace" else ["--json", tmp_path / "o.json"]
    rc, text, err = run_dstar(capsys, command, "--model", "tiny", "--set", "max_reduction=8", *out)
    assert rc == 2 and text == ""
    assert err.count("\n") == 1 and "has 16 input channels; max_reduction of 'tiny' is 8" in err
    assert list(tmp_path.iterdir()) == []
