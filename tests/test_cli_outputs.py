"""gen/outputs.py, the one place where ``dstar`` commands check and write their outputs, and the
same bad output on every subcommand: one line, exit status 2, nothing written."""

import argparse
import os
from pathlib import Path

import pytest

import dstar_rtl.app.cli
from dstar_rtl.app.cli import UserError, WorkError
from dstar_rtl.app.experiments import MEASUREMENTS
from dstar_rtl.gen.outputs import check_output_dir, check_outputs, write_together
from dstar_rtl.gen.paths import ROOT


# ------------------------------------------------------------------------------ the helper
def test_check_outputs_refusals(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    cases = [((tmp_path / "dir",), {}, "it is a directory"),
             ((tmp_path / "file" / "x.json",), {}, "is a file, not a directory"),
             ((tmp_path / "file" / "a" / "b" / "x.json",), {}, "is a file, not a directory"),
             ((tmp_path / "o.json", tmp_path / "dir" / ".." / "o.json"), {}, "same file"),
             ((tmp_path / "file",), {"inputs": [tmp_path / "file"]}, "is the input")]
    for paths, kw, frag in cases:
        with pytest.raises(UserError, match=frag):
            check_outputs(*paths, **kw)
    assert check_outputs(None, tmp_path / "new" / "x.json") == [tmp_path / "new" / "x.json"]
    assert sorted(os.listdir(tmp_path)) == ["dir", "file"]     # checking creates nothing


def test_check_output_dir(tmp_path):
    (tmp_path / "file").write_text("x")
    for p in (tmp_path / "file", tmp_path / "file" / "sub"):
        with pytest.raises(UserError, match="is a file, not a directory"):
            check_output_dir(p)
    assert check_output_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()


def test_unwritable_folder_is_refused(tmp_path, monkeypatch):
    """The folder's mode says read-only; the permission check is ``os.access``, which for root
    ignores the mode, so the test answers for it as the kernel would for a normal user."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: (Path(p) != ro or not mode & os.W_OK)
                        and real(p, mode))
    try:
        with pytest.raises(UserError, match="no permission"):
            check_outputs(ro / "new" / "x.json")
        with pytest.raises(UserError, match="no permission"):
            check_output_dir(ro)
    finally:
        ro.chmod(0o700)


def test_write_together_creates_folders_and_writes_all(tmp_path):
    a, b, c = tmp_path / "n" / "a.txt", tmp_path / "n" / "m" / "b.bin", tmp_path / "c.png"
    got = write_together({a: "text", b: b"\x00\x01", c: lambda f: f.write(b"PNG"), None: "x",
                          tmp_path / "skipped": None})
    assert got == [a, b, c]
    assert (a.read_text(), b.read_bytes(), c.read_bytes()) == ("text", b"\x00\x01", b"PNG")
    assert not [p for p in tmp_path.rglob(".dstar-*")]
    mask = os.umask(0)
    os.umask(mask)
    assert a.stat().st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.parametrize("error, raised", [(OSError(28, "No space left on device"), WorkError),
                                           (ValueError("a bug in a writer"), ValueError),
                                           (KeyboardInterrupt(), KeyboardInterrupt)])
def test_write_together_is_all_or_nothing(tmp_path, error, raised):
    """A failing output leaves no output, no temporary, no folder it made, and the files that
    were there before untouched."""
    old = tmp_path / "old.txt"
    old.write_text("before")

    def fail(f):
        f.write(b"half")
        raise error
    with pytest.raises(raised):
        write_together({old: "after", tmp_path / "new" / "deep" / "x.json": "{}",
                        tmp_path / "new" / "y.png": fail})
    assert old.read_text() == "before"
    assert sorted(os.listdir(tmp_path)) == ["old.txt"]


def test_write_together_refuses_one_file_twice(tmp_path):
    with pytest.raises(ValueError, match="same file"):
        write_together({tmp_path / "a": "1", f"{tmp_path}/d/../a": "2"})
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------- every subcommand
#: Every subcommand with its output option; ``{o}`` is where the output goes. File outputs
#: (``FILE``) and folder outputs (``DIR``).
COMMANDS = {
    "generate": (["generate", "pe", "-o", "{o}"], "FILE"),
    "trace": (["trace", "--model", "tiny", "--steps", "1", "-o", "{o}"], "FILE"),
    "fmdq": (["fmdq", "{d}/t.npz", "--json", "{o}"], "FILE"),
    "sar": (["sar", "{d}/t.npz", "--plot", "{o}"], "FILE"),
    "dit": (["dit", "--model", "tiny", "--steps", "1", "--json", "{o}"], "FILE"),
    "dit-int": (["dit-int", "--model", "tiny", "--steps", "1", "--md", "{o}"], "FILE"),
    "synth": (["synth", "pe", "--json", "{o}"], "FILE"),
    "estimate": (["estimate", "core", "--json", "{o}"], "FILE"),
    "report": (["report", "-o", "{o}"], "FILE"),
    "render": (["render", "--all", "--out-dir", "{o}"], "DIR"),
    "build": (["build", "--board", "ulx3s", "-o", "{o}"], "DIR"),
    "bench": (["bench", "--out", "{o}"], "DIR"),
    "power": (["power", "--preset", "tiny", "--weights", "random", "--model", "tiny",
               "--no-image", "--out", "{o}"], "DIR"),
    "profile": (["profile", "--out-dir", "{o}"], "DIR"),
    "sample": (["sample", "--model", "tiny", "--steps", "1", "--out", "{o}"], "DIR"),
    "sweep": (["sweep", "--liberty", "{d}/file", "--out", "{o}"], "DIR"),
    # One measurement stands for all of them: each checks its output folder the same way
    # (gen.outputs.check_output_dir right after parsing); packing's work is blocked in no_work.
    "measure": (["measure", "packing", "--out", "{o}"], "DIR"),
}
#: Subcommands the table leaves out, and why. ``toolchain`` writes no output file (it fills
#: the YoWASP cache, a folder the user does not name), so there is no output to refuse; its
#: bad input is tested below.
NO_OUTPUT = {"toolchain"}


def test_the_table_covers_every_subcommand():
    parser = dstar_rtl.app.cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(COMMANDS) | NO_OUTPUT
    assert not set(COMMANDS) & NO_OUTPUT


@pytest.fixture
def no_work(monkeypatch):
    """Every command's work fails the test at once: bad output paths are refused before it."""
    import dstar_rtl.analysis.profile
    import dstar_rtl.app.benches.layers
    import dstar_rtl.app.reports.packing
    import dstar_rtl.app.reports.summary
    import dstar_rtl.bench.power
    import dstar_rtl.bench.sample
    import dstar_rtl.flows.board
    import dstar_rtl.flows.synth
    import dstar_rtl.gen.generate
    import dstar_rtl.models.dit
    import dstar_rtl.models.dit_int_compare
    def never(*a, **k):
        raise AssertionError("the command started its work on bad input")
    for mod, name in ((dstar_rtl.gen.generate, "to_rtlil"), (dstar_rtl.models.dit, "record_trace"),
                      (dstar_rtl.models.dit, "compare"), (dstar_rtl.models.dit_int_compare,
                                                          "compare_int"),
                      (dstar_rtl.flows.synth, "synthesize"), (dstar_rtl.app.reports.summary,
                                                              "report_files"),
                      (dstar_rtl.flows.board, "build"), (dstar_rtl.app.benches.layers, "bench"),
                      (dstar_rtl.bench.power, "power"),
                      (dstar_rtl.analysis.profile, "run_profile"), (dstar_rtl.bench.sample,
                                                                    "run_samples"),
                      (dstar_rtl.app.reports.packing, "load_inputs"),
                      (dstar_rtl.app.reports.packing, "synthesize")):
        monkeypatch.setattr(mod, name, never)


def _run(capsys, tmp_path, argv, o):
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    o = o.format(d=tmp_path)
    rc = dstar_rtl.app.cli.main([a.format(d=tmp_path, o=o) for a in argv])
    out, err = capsys.readouterr()
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    return rc, out, err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_output_under_a_file_is_refused_by_every_command(tmp_path, capsys, no_work, command):
    argv, _ = COMMANDS[command]
    rc, out, err = _run(capsys, tmp_path, argv, "{d}/file/sub/out")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dstar: error: cannot write")
    assert "is a file, not a directory" in err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_wrong_kind_of_output_is_refused_by_every_command(tmp_path, capsys, no_work,
                                                             command):
    """A folder where a file goes, a file where a folder goes."""
    argv, kind = COMMANDS[command]
    rc, out, err = _run(capsys, tmp_path, argv, "{d}/dir" if kind == "FILE" else "{d}/file")
    assert rc == 2 and out == ""
    frag = "it is a directory" if kind == "FILE" else "is a file, not a directory"
    assert err.count("\n") == 1 and frag in err, err


# ------------------------------------------------------------------ every measurement
def _reports_stamp() -> dict:
    reports = ROOT / "reports"
    return {p: p.stat().st_mtime_ns for p in reports.rglob("*")} if reports.is_dir() else {}


@pytest.mark.parametrize("name", list(MEASUREMENTS))
def test_every_measurement_refuses_an_unknown_option_in_one_line(tmp_path, capsys, monkeypatch,
                                                                 name):
    """``dstar measure NAME --bogus-option``: the measurement's own parser refuses it, one line
    and exit status 2 (no usage dump), before any work: nothing is written, neither in the
    current folder nor in ``reports/``."""
    monkeypatch.chdir(tmp_path)
    before = _reports_stamp()
    rc = dstar_rtl.app.cli.main(["measure", name, "--bogus-option"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dstar: error: "), err
    assert "--bogus-option" in err
    assert list(tmp_path.iterdir()) == []
    assert _reports_stamp() == before


def test_toolchain_refuses_bad_jobs_before_any_work(capsys, monkeypatch):
    from dstar_rtl.sim import toolchain

    def never(*a, **k):
        raise AssertionError("the command started its work on bad input")
    monkeypatch.setattr(toolchain, "warm", never)
    monkeypatch.setattr(toolchain, "main", never)
    for argv in (["toolchain", "--jobs", "0"], ["toolchain", "--check", "-j", "-1"],
                 ["toolchain", "--bogus-option"]):
        assert dstar_rtl.app.cli.main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and err.startswith("dstar: error: "), err


def test_toolchain_failure_is_one_line_and_exit_1(capsys, monkeypatch):
    from dstar_rtl.sim import toolchain

    def fail(*a, **k):
        raise RuntimeError("yosys: the YoWASP cache did not keep its compiled code")
    monkeypatch.setattr(toolchain, "warm", fail)
    assert dstar_rtl.app.cli.main(["toolchain"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == ("dstar: error: toolchain: yosys: the YoWASP cache did not keep "
                                 "its compiled code\n")
