"""``dstar profile``'s input checks and outputs, with the sampling patched out (the real quick
sweep runs in tests/test_digits.py)."""


import pytest

import dstar_rtl.analysis.profile
import dstar_rtl.app.cli
import dstar_rtl.app.commands.profile
from dstar_rtl.app.reports import profile_report

REP = {"runs": [{"sar": False, "name": "fmdq only",
                 "summary": {"avg_bits": {"mean": 4.5}, "psnr_db": {"mean": 40.0}}}],
       "seconds": 1.0}


@pytest.fixture(autouse=True)
def only_profile(monkeypatch):
    monkeypatch.setattr(dstar_rtl.app.cli, "COMMAND_MODULES", ("dstar_rtl.app.commands.profile",))


def _stub(monkeypatch, runner, files, names, rep):
    """``dstar_rtl.analysis.profile.<runner>`` returns ``rep``; ``<files>`` gives stub text for
    each of
    ``<names>``; returns the list the runner appends its sweep argument to."""
    calls = []

    def run(cfg, sweep, weights=None, log=print):
        calls.append(sweep)
        return rep
    monkeypatch.setattr(dstar_rtl.analysis.profile, runner, run)
    monkeypatch.setattr(dstar_rtl.app.commands.profile, "_typed", lambda kind, e, r, cfg: r)
    monkeypatch.setattr(profile_report, files, lambda r, d: {
        p: f"{p.name}\n" for p in getattr(profile_report, names)(d)})
    return calls


@pytest.fixture
def fake_run(monkeypatch):
    """``run_profile`` returns a stub report; the report files are stub text."""
    return _stub(monkeypatch, "run_profile", "report_files", "report_names", REP)


def run_dstar(capsys, *argv):
    rc = dstar_rtl.app.cli.main(["profile", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_missing_out_dir_is_created(tmp_path, capsys, fake_run):
    """``--out-dir`` used to refuse a folder that did not exist."""
    out = tmp_path / "a" / "b"
    rc, text, err = run_dstar(capsys, "--quick", "--out-dir", out)
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["profile.json", "profile.md", "profile.png"]
    assert text.startswith(f"wrote {out / 'profile.json'}")


def test_report_files_appear_together(tmp_path, capsys, monkeypatch, fake_run):
    """profile.json, .md and .png used to be written one after the other."""
    def files(rep, d):
        js, md, png = profile_report.report_names(d)

        def fail(f):
            raise OSError(28, "No space left on device")
        return {js: "{}", md: "# x", png: fail}
    monkeypatch.setattr(profile_report, "report_files", files)
    rc, text, err = run_dstar(capsys, "--quick", "--out-dir", tmp_path / "new")
    assert rc == 1 and text == ""
    assert err == (f"dstar: error: cannot write {tmp_path / 'new' / 'profile.png'}: No space "
                   f"left on device\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, frag", [
    (["--out-dir", "{d}/file"], "is a file, not a directory"),
    (["--out-dir", "{d}/file/sub"], "is a file, not a directory"),
    (["--out-dir", "{d}/dir"], "profile.json: it is a directory"),
    (["--seeds", "1"], "--seeds must be >= 2"),
    (["--steps", "0"], "--steps must be >= 1"),
    (["--sar-thr", "0.1,2"], "--sar-thr values must be in [0, 1)"),
    (["--sar-interval", "0"], "--sar-interval values must be >= 1"),
    (["--sar-interval", "x"], "--sar-interval: takes comma-separated integers, not 'x'"),
    (["--sar-thr", "0.1,,"], "--sar-thr: takes comma-separated numbers"),
    (["--set", "bogus=1"], "unknown parameter 'bogus'"),
])
def test_bad_input_is_one_line_before_any_work(tmp_path, capsys, fake_run, argv, frag):
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir" / "profile.json").mkdir(parents=True)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    argv = [a.format(d=tmp_path) for a in argv]
    if "--out-dir" not in argv:
        argv += ["--out-dir", tmp_path / "out"]
    rc, out, err = run_dstar(capsys, *argv)
    assert rc == 2 and out == "" and not fake_run
    assert err.count("\n") == 1 and err.startswith("dstar: error: ") and frag in err, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_real_report_files_render():
    """The files the command writes come from dstar_rtl.analysis.profile.report_files: JSON,
    Markdown and a
    PNG writer (exercised on the stored report)."""
    import io
    from pathlib import Path

    from dstar_rtl.results.profile import Profile

    path = Path(__file__).resolve().parent.parent / "reports" / "profile.json"
    rep = Profile.load(path)
    files = profile_report.report_files(rep, "d")
    js, md, png = profile_report.report_names("d")
    assert files[js] == path.read_text() and files[md].startswith("# FMDQ and SAR")
    buf = io.BytesIO()
    files[png](buf)
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ dstar profile --sweep

SWEEP_REP = {"seconds": 1.0, "message": "operating point thr 2,7,31 base -1: 4.0 bits"}


@pytest.fixture
def fake_sweep(monkeypatch):
    """``run_sweep`` returns a stub report; the sweep files are stub text."""
    return _stub(monkeypatch, "run_sweep", "sweep_report_files", "sweep_report_names",
                 SWEEP_REP)


def test_sweep_writes_its_three_files(tmp_path, capsys, fake_sweep):
    rc, text, err = run_dstar(capsys, "--sweep", "--thr2", "1,2", "--base-offsets=-2,0",
                          "--sweep-seeds", "2", "--jobs", "1", "--out-dir", tmp_path / "r")
    assert rc == 0, err
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == [
        "profile_sweep.json", "profile_sweep.md", "profile_sweep.png"]
    (sw,) = fake_sweep
    assert sw.thr2 == (1, 2) and sw.base_offsets == (-2, 0) and sw.seeds == 2 and sw.workers == 1
    assert sw.confirm_seeds == 5 and sw.confirm_steps == 20
    assert text.startswith(f"wrote {tmp_path / 'r' / 'profile_sweep.json'}")
    assert SWEEP_REP["message"] in text


@pytest.mark.parametrize("argv, frag", [
    (["--sweep", "--thr2", "8", "--thr4", "7"], "threshold point thr=[8, 7, 31] of the grid: thr "
                                                 "must be strictly increasing"),
    (["--sweep", "--thr6", "127"], "thr must be strictly increasing"),
    (["--sweep", "--thr2", "x"], "--thr2: takes comma-separated integers, not 'x'"),
    (["--sweep", "--base-offsets=-1,-1"], "--base-offsets lists a value twice"),
    (["--sweep", "--sweep-seeds", "0"], "--sweep-seeds must be an integer >= 1"),
    (["--sweep", "--sweep-steps", "0"], "--sweep-steps must be an integer >= 1"),
    (["--sweep", "--seeds", "1"], "--seeds must be an integer >= 2 for a confidence interval"),
    (["--sweep", "--steps", "0"], "--steps must be an integer >= 1"),
    (["--sweep", "--jobs", "0"], "--jobs must be an integer >= 1"),
    (["--sweep", "--max-confirm", "0"], "--max-confirm must be an integer >= 1"),
    (["--sweep", "--min-agreement", "1.5"], "--min-agreement must be in (0, 1]"),
    (["--sweep", "--min-psnr", "nan"], "--min-psnr must be a finite number"),
    (["--sweep", "--sar-thr", "0.1"], "--sar-thr does not apply with --sweep"),
    (["--sweep", "--sar-interval", "2"], "--sar-interval does not apply with --sweep"),
    (["--thr2", "2"], "--thr2 applies only with --sweep"),
    (["--base-offsets=-1"], "--base-offsets applies only with --sweep"),
    (["--sweep", "--out-dir", "{d}/file"], "is a file, not a directory"),
    (["--sweep", "--out-dir", "{d}/dir"], "profile_sweep.json: it is a directory"),
    (["--sweep", "--quick", "--thr4", "1"], "thr must be strictly increasing"),
])
def test_sweep_bad_input_is_one_line_before_any_work(tmp_path, capsys, fake_run, fake_sweep,
                                                     argv, frag):
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir" / "profile_sweep.json").mkdir(parents=True)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    argv = [a.format(d=tmp_path) for a in argv]
    if "--out-dir" not in argv:
        argv += ["--out-dir", tmp_path / "out"]
    rc, out, err = run_dstar(capsys, *argv)
    assert rc == 2 and out == "" and not fake_run and not fake_sweep
    assert err.count("\n") == 1 and err.startswith("dstar: error: ") and frag in err, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
