"""``dstar profile``'s input checks and outputs, with the sampling patched out (the real quick
sweep runs in tests/test_digits.py)."""

import json

import pytest

import gen.cli
import golden.profile

REP = {"runs": [{"sar": False, "name": "fmdq only",
                 "summary": {"avg_bits": {"mean": 4.5}, "psnr_db": {"mean": 40.0}}}],
       "seconds": 1.0}


@pytest.fixture(autouse=True)
def only_profile(monkeypatch):
    monkeypatch.setattr(gen.cli, "COMMAND_MODULES", ("gen.cmd_profile",))


@pytest.fixture
def fake_run(monkeypatch):
    """``run_profile`` returns a stub report; the report files are stub text."""
    calls = []

    def run(cfg, sweep, weights=None, log=print):
        calls.append(sweep)
        return REP
    monkeypatch.setattr(golden.profile, "run_profile", run)
    monkeypatch.setattr(golden.profile, "report_files", lambda rep, d: {
        p: f"{p.name}\n" for p in golden.profile.report_names(d)})
    return calls


def dstar(capsys, *argv):
    rc = gen.cli.main(["profile", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_missing_out_dir_is_created(tmp_path, capsys, fake_run):
    """``--out-dir`` used to refuse a folder that did not exist."""
    out = tmp_path / "a" / "b"
    rc, text, err = dstar(capsys, "--quick", "--out-dir", out)
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["profile.json", "profile.md", "profile.png"]
    assert text.startswith(f"wrote {out / 'profile.json'}")


def test_report_files_appear_together(tmp_path, capsys, monkeypatch, fake_run):
    """profile.json, .md and .png used to be written one after the other."""
    def files(rep, d):
        js, md, png = golden.profile.report_names(d)

        def fail(f):
            raise OSError(28, "No space left on device")
        return {js: "{}", md: "# x", png: fail}
    monkeypatch.setattr(golden.profile, "report_files", files)
    rc, text, err = dstar(capsys, "--quick", "--out-dir", tmp_path / "new")
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
    rc, out, err = dstar(capsys, *argv)
    assert rc == 2 and out == "" and not fake_run
    assert err.count("\n") == 1 and err.startswith("dstar: error: ") and frag in err, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_real_report_files_render():
    """The files the command writes come from golden.profile.report_files: JSON, Markdown and a
    PNG writer (exercised on the stored report)."""
    import io
    from pathlib import Path

    rep = json.loads((Path(__file__).resolve().parent.parent / "reports" / "profile.json")
                     .read_text())
    files = golden.profile.report_files(rep, "d")
    js, md, png = golden.profile.report_names("d")
    assert json.loads(files[js]) == rep and files[md].startswith("# FMDQ and SAR")
    buf = io.BytesIO()
    files[png](buf)
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
