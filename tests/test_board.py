"""Board tops (fpga/board.py) and ``dstar build``: its argument handling, and its outputs and
errors with every tool patched out. The bitstream flow itself runs in ``make reports`` / by hand
(minutes of place and route), not here."""

import json

import pytest

import gen.cli
from fpga.board import BOARDS, ULX3STop
from golden.config import preset
from golden.core_isa import core_for


def test_ulx3s_top_prepares_with_uart_pins_and_clock():
    from amaranth_boards.ulx3s import ULX3S_85F_Platform

    cfg = preset("tiny")
    plan = ULX3S_85F_Platform().prepare(ULX3STop(cfg, core_for(cfg)), name="dstar_ulx3s")
    lpf = plan.files["dstar_ulx3s.lpf"]
    assert 'SITE "M1"' in lpf and 'SITE "L4"' in lpf          # the FTDI UART rx, tx
    assert "FREQUENCY" in lpf and "25000000" in lpf
    assert "UartCore" in plan.files["dstar_ulx3s.il"] or "uart" in plan.files["dstar_ulx3s.il"]


def test_bad_board_and_baud_are_one_line(capsys):
    assert gen.cli.main(["build", "--board", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dstar: error:") and "nope" in err and "\n" not in err
    assert set(BOARDS) == {"ulx3s"}


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_bad_baud_is_refused():
    with pytest.raises(ValueError, match="baud"):
        ULX3STop(preset("tiny"), core_for(preset("tiny")), baud=0)


# ----------------------------------------------------- dstar build: input checks and outputs
def _build(capsys, *argv):
    rc = gen.cli.main(["build", "--board", "ulx3s", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv, frag", [
    (["--baud", "0"], "baud must be a positive integer, not 0"),
    (["--baud", "-9600"], "baud must be a positive integer"),
    (["--baud", "100000000"], "too fast for the 25 MHz clock"),
    (["--baud", "7000000"], "off the nearest rate"),
    (["--set", "vpu_lanes=8"], "the core needs rows == cols == vpu_lanes"),
    (["-o", "{d}/file"], "is a file, not a directory"),
    (["-o", "{d}/file/sub"], "is a file, not a directory"),
])
def test_build_bad_input_is_refused_before_any_work(tmp_path, capsys, monkeypatch, argv, frag):
    """``--baud 0`` used to exit 2 only after creating the output folder (and a baud rate the
    clock cannot make after elaborating the core)."""
    import fpga.board

    def never(*a, **k):
        raise AssertionError("the build started on bad input")
    monkeypatch.setattr(fpga.board, "build", never)
    (tmp_path / "file").write_text("x")
    argv = [a.format(d=tmp_path) for a in argv]
    if "-o" not in argv:
        argv += ["-o", tmp_path / "out"]
    rc, out, err = _build(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dstar: error: ") and frag in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


@pytest.fixture
def fake_flow(monkeypatch, tmp_path):
    """The board flow with every tool replaced: a platform that prepares two files, synthesis,
    place and route (``timing`` says whether it meets 25 MHz) and ecppack (``pack_fails``)."""
    import subprocess
    from types import SimpleNamespace

    import fpga.board
    import fpga.pnr
    import fpga.synth

    state = SimpleNamespace(timing=True, pack_fails=False)

    class Platform:
        default_clk_frequency = 25e6

        def prepare(self, top, name):
            top._MustUse__silence = True
            return SimpleNamespace(files={f"{name}.il": "rtlil", f"{name}.lpf": "LOCATE ..."})

    def synth(il, top, target, *, workdir, timeout=None, primitives=False):
        workdir.mkdir(parents=True)
        return dict(resources=dict(lut4=1, ff=2, dsp=3, bram=4), flow="flat", seconds=1.0,
                    netlist=str(workdir / "n.json"), tools={"yosys": "0.70"})

    def pnr(netlist, *, workdir, **kw):
        workdir.mkdir(parents=True)
        (workdir / "board.config").write_text("cfg")
        return dict(fmax_mhz=30.0 if state.timing else 20.0, timing_pass=state.timing,
                    utilisation={}, log=str(workdir / "nextpnr.log"), tools={})

    def run(args, cwd=None, **kw):
        if state.pack_fails:
            return subprocess.CompletedProcess(args, 1, "", "ecppack: bad config\n")
        (cwd / args[-1]).write_bytes(b"BIT")
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(fpga.board, "_platform", lambda board: Platform())
    monkeypatch.setattr(fpga.synth, "synthesize_rtlil", synth)
    monkeypatch.setattr(fpga.pnr, "place_and_route", pnr)
    monkeypatch.setattr(fpga.board.subprocess, "run", run)
    monkeypatch.setattr(fpga.board, "REPORTS", tmp_path / "reports")
    return state


def _outputs(tmp_path):
    out = tmp_path / "new" / "out"
    return out, [out / "dstar_ulx3s.bit", out / "dstar_ulx3s.lpf", out / "build.json",
                 tmp_path / "reports" / "board-ulx3s-tiny.json"]


def test_build_writes_its_outputs_together(tmp_path, capsys, fake_flow):
    out, files = _outputs(tmp_path)
    rc, text, err = _build(capsys, "-o", out)
    assert rc == 0, err
    assert all(f.is_file() for f in files)
    assert files[0].read_bytes() == b"BIT" and files[1].read_text() == "LOCATE ..."
    assert json.loads(files[2].read_text())["cycles_per_bit"] == 217
    assert "Fmax 30.0 MHz at 25 MHz (met)" in text


def test_build_failure_is_one_line_and_leaves_no_output(tmp_path, capsys, fake_flow):
    fake_flow.pack_fails = True
    out, files = _outputs(tmp_path)
    rc, text, err = _build(capsys, "-o", out)
    assert rc == 1
    assert err.splitlines()[-1] == "dstar: error: ecppack failed: ecppack: bad config"
    assert not any(f.exists() for f in files)
    assert sorted(p.name for p in out.iterdir()) == ["pnr", "synth"]   # the tools' work folders


def test_build_missing_timing_is_status_1_with_the_outputs(tmp_path, capsys, fake_flow):
    fake_flow.timing = False
    out, files = _outputs(tmp_path)
    rc, text, err = _build(capsys, "-o", out)
    assert rc == 1 and err.splitlines()[-1].startswith("dstar: error: timing not met")
    assert all(f.is_file() for f in files)
    assert json.loads(files[3].read_text())["timing_pass"] is False
