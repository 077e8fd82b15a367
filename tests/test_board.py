"""Board tops (flows/board.py) and ``dstar build``: its argument handling, and its outputs and
errors with every tool patched out. The bitstream flow itself runs in ``make reports`` / by hand
(minutes of place and route), not here."""

import json

import pytest

import dstar_rtl.app.cli
import dstar_rtl.app.reports.board
from dstar_rtl.flows.board import BOARDS, ULX3STop
from dstar_rtl.golden.config import preset
from dstar_rtl.program.isa import core_for


def test_ulx3s_top_prepares_with_uart_pins_and_clock():
    from amaranth_boards.ulx3s import ULX3S_85F_Platform

    cfg = preset("tiny")
    plan = ULX3S_85F_Platform().prepare(ULX3STop(cfg, core_for(cfg)), name="dstar_ulx3s")
    lpf = plan.files["dstar_ulx3s.lpf"]
    assert 'SITE "M1"' in lpf and 'SITE "L4"' in lpf          # the FTDI UART rx, tx
    assert "FREQUENCY" in lpf and "25000000" in lpf
    assert "UartCore" in plan.files["dstar_ulx3s.il"] or "uart" in plan.files["dstar_ulx3s.il"]
    assert "EHXPLLL" not in plan.files["dstar_ulx3s.il"]      # the default clock: no PLL


def test_bad_board_and_baud_are_one_line(capsys):
    assert dstar_rtl.app.cli.main(["build", "--board", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dstar: error:") and "nope" in err and "\n" not in err
    assert set(BOARDS) == {"ulx3s"}


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_bad_baud_is_refused():
    with pytest.raises(ValueError, match="baud"):
        ULX3STop(preset("tiny"), core_for(preset("tiny")), baud=0)


# ----------------------------------------------------- dstar build: input checks and outputs
def _build(capsys, *argv):
    rc = dstar_rtl.app.cli.main(["build", "--board", "ulx3s", *map(str, argv)])
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
    (["--timeout", "0"], "--timeout must be a positive number of minutes, not 0"),
    (["--timeout", "-5"], "--timeout must be a positive number of minutes"),
])
def test_build_bad_input_is_refused_before_any_work(tmp_path, capsys, monkeypatch, argv, frag):
    """``--baud 0`` used to exit 2 only after creating the output folder (and a baud rate the
    clock cannot make after elaborating the core)."""
    import dstar_rtl.flows.board
    def never(*a, **k):
        raise AssertionError("the build started on bad input")
    monkeypatch.setattr(dstar_rtl.flows.board, "build", never)
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

    import dstar_rtl.flows.board
    import dstar_rtl.flows.pnr
    import dstar_rtl.flows.synth
    state = SimpleNamespace(timing=True, pack_fails=False, pnr_timeout=None, pnr_hangs=False)

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
        state.pnr_timeout = kw.get("timeout")
        if state.pnr_hangs:
            raise dstar_rtl.flows.pnr.PnrError(f"nextpnr-ecp5 timed out after {kw['timeout']} "
                                               f"s; log: "
                                               f"{workdir / 'nextpnr.log'}")
        (workdir / "board.config").write_text("cfg")
        return dict(fmax_mhz=30.0 if state.timing else 20.0, timing_pass=state.timing,
                    utilisation={}, log=str(workdir / "nextpnr.log"), tools={})

    real_run = subprocess.run

    def run(args, cwd=None, **kw):
        if "--bit" not in args:             # not ecppack: e.g. a tool's version for provenance
            return real_run(args, cwd=cwd, **kw)
        if state.pack_fails:
            return subprocess.CompletedProcess(args, 1, "", "ecppack: bad config\n")
        (cwd / args[-1]).write_bytes(b"BIT")
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(dstar_rtl.flows.board, "_platform", lambda board: Platform())
    monkeypatch.setattr(dstar_rtl.flows.board, "synthesize_rtlil", synth)
    monkeypatch.setattr(dstar_rtl.flows.board, "place_and_route", pnr)
    monkeypatch.setattr(dstar_rtl.flows.board.subprocess, "run", run)
    monkeypatch.setattr(dstar_rtl.app.reports.board, "REPORTS", tmp_path / "reports")
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


def test_build_timeout_stops_a_tool_with_one_line_and_no_output(tmp_path, capsys, fake_flow):
    """``--timeout`` reaches the tools in seconds; a router stopped there fails the build."""
    fake_flow.pnr_hangs = True
    out, files = _outputs(tmp_path)
    rc, text, err = _build(capsys, "--timeout", "1.5", "-o", out)
    assert fake_flow.pnr_timeout == 90
    assert rc == 1
    assert err.splitlines()[-1].startswith(
        "dstar: error: place and route failed: nextpnr-ecp5 timed out after 90")
    assert not any(f.exists() for f in files)


def test_build_missing_timing_is_status_1_with_the_outputs(tmp_path, capsys, fake_flow):
    fake_flow.timing = False
    out, files = _outputs(tmp_path)
    rc, text, err = _build(capsys, "-o", out)
    assert rc == 1 and err.splitlines()[-1].startswith("dstar: error: timing not met")
    assert all(f.is_file() for f in files)
    assert json.loads(files[3].read_text())["timing_pass"] is False


# ------------------------------------------------ the core's clock (PLL) and the DSP refusal
def test_pll_params_make_the_clock_exactly_within_the_pll_limits():
    from dstar_rtl.flows.board import PLL_PFD_MHZ, PLL_VCO_MHZ, pll_params

    for mhz in (40, 50, 60, 62.5, 75, 100):
        p = pll_params(25, mhz)
        assert 25 * p["clkfb_div"] / p["clki_div"] == pytest.approx(mhz, abs=1e-9)
        assert p["fout_mhz"] == pytest.approx(mhz)
        assert PLL_PFD_MHZ[0] <= 25 / p["clki_div"] <= PLL_PFD_MHZ[1]
        assert PLL_VCO_MHZ[0] <= p["vco_mhz"] == mhz * p["clkop_div"] <= PLL_VCO_MHZ[1]
    # ecppll's choice for 50 MHz: no input division, feedback x2, VCO at 600 MHz
    assert {k: pll_params(25, 50)[k] for k in ("clki_div", "clkfb_div", "clkop_div")} == \
        {"clki_div": 1, "clkfb_div": 2, "clkop_div": 12}
    with pytest.raises(ValueError, match=r"cannot be made exactly .*\(nearest: 46.88 MHz\)"):
        pll_params(25, 48)


@pytest.mark.parametrize("mhz, cpb", [(None, 217), (25, 217), (50, 434), (62.5, 543)])
def test_uart_divisor_follows_the_core_clock(mhz, cpb):
    from dstar_rtl.flows.board import check_build

    assert check_build("ulx3s", preset("tiny"), 115200, mhz) == cpb


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_pll_top_elaborates_with_the_pll_and_the_uart_divisor(monkeypatch):
    """With ``clock_mhz`` the top holds an EHXPLLL with ecppll's dividers, its output is the
    ``sync`` clock (also its feedback), and the UART gets the divisor of the PLL's clock."""
    from amaranth_boards.ulx3s import ULX3S_85F_Platform

    import dstar_rtl.rtl.uart_core
    seen = []
    real = dstar_rtl.rtl.uart_core.UartCore.__init__

    def spy(self, *a, cycles_per_bit, **k):
        seen.append(cycles_per_bit)
        real(self, *a, cycles_per_bit=cycles_per_bit, **k)
    monkeypatch.setattr(dstar_rtl.rtl.uart_core.UartCore, "__init__", spy)
    cfg = preset("tiny")
    plan = ULX3S_85F_Platform().prepare(ULX3STop(cfg, core_for(cfg), clock_mhz=50.0),
                                        name="dstar_ulx3s")
    il = plan.files["dstar_ulx3s.il"]
    cell = il[il.index("cell \\EHXPLLL"):]
    cell = cell[:cell.index("\n  end")]
    for line in ("parameter \\CLKI_DIV 1", "parameter \\CLKFB_DIV 2",
                 "parameter \\CLKOP_DIV 12", "parameter \\FEEDBK_PATH \"CLKOP\"",
                 "connect \\CLKOP \\clk", "connect \\CLKFB \\clk"):
        assert line in cell, line
    assert 'attribute \\FREQUENCY_PIN_CLKI "25"' in il
    assert 'attribute \\FREQUENCY_PIN_CLKOP "50"' in il
    assert "FREQUENCY PORT \"clk25_0__io\" 25000000" in plan.files["dstar_ulx3s.lpf"]
    assert seen == [434]


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_top_without_pll_runs_on_the_board_clock(monkeypatch):
    """The board's own 25 MHz asked for: no PLL, and the UART's divisor from the board clock
    (the top's own logic, elaborated without the core's; the default clock's RTLIL holds no
    EHXPLLL, test_ulx3s_top_prepares_with_uart_pins_and_clock)."""
    from amaranth_boards.ulx3s import ULX3S_85F_Platform

    import dstar_rtl.flows.board
    import dstar_rtl.rtl.uart_core
    seen = []
    real = dstar_rtl.rtl.uart_core.UartCore.__init__

    def spy(self, *a, cycles_per_bit, **k):
        seen.append(cycles_per_bit)
        real(self, *a, cycles_per_bit=cycles_per_bit, **k)

    def no_pll(*a, **k):
        raise AssertionError("a PLL for the board's own clock")
    monkeypatch.setattr(dstar_rtl.rtl.uart_core.UartCore, "__init__", spy)
    monkeypatch.setattr(dstar_rtl.flows.board, "pll_params", no_pll)
    cfg = preset("tiny")
    ULX3STop(cfg, core_for(cfg), clock_mhz=25.0).elaborate(ULX3S_85F_Platform())
    assert seen == [round(25e6 / 115200)]


@pytest.mark.parametrize("argv, frag", [
    (["--clock-mhz", "0"], "clock must be a positive number of MHz, not 0.0"),
    (["--clock-mhz", "-50"], "clock must be a positive number of MHz"),
    (["--clock-mhz", "nan"], "clock must be a positive number of MHz"),
    (["--clock-mhz", "fast"], "invalid float value"),
    (["--clock-mhz", "500"], "outside the ECP5 PLL's output range (10 to 400 MHz)"),
    (["--clock-mhz", "48"], "cannot be made exactly by the ECP5 PLL"),
    (["--clock-mhz", "10", "--baud", "3000000"], "too fast for the 10 MHz clock"),
    # 256 PE blocks (one per lane, 64 PEs of 4 lanes) + the VPU's 47 (8 lanes of a 19 × 26
    # product, 8 softmax output lanes of 20 × 16, two blocks each; its scalar units' 15) + the
    # dispatcher's 2 + the requantizer's 16 (8 lanes of a 33 × 17 product)
    (["--preset", "fpga", "--variant", "initial"],
     "the fpga core needs 321 MULT18X18D DSP blocks with digit_product=multiply and the ulx3s's "
     "device has 156: use --set digit_product=select"),
    (["--preset", "fpga", "--variant", "initial", "--clock-mhz", "50"], "needs 321 MULT18X18D"),
])
def test_build_bad_clock_or_too_many_dsps_is_refused_before_any_work(tmp_path, capsys,
                                                                     monkeypatch, argv, frag):
    import dstar_rtl.flows.board
    def never(*a, **k):
        raise AssertionError("the build started on bad input")
    monkeypatch.setattr(dstar_rtl.flows.board, "build", never)
    rc, out, err = _build(capsys, *argv, "-o", tmp_path / "out")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dstar: error: ") and frag in err, err
    assert list(tmp_path.iterdir()) == []


def test_dsp_refusal_passes_the_select_datapath_and_the_tiny_core():
    from dstar_rtl.flows.board import check_build, dsp_blocks
    from dstar_rtl.flows.estimate_core import CORE_MEASURED

    # A measured core's own count; others the estimate's (multiplying PEs: one block per lane).
    assert dsp_blocks(preset("tiny")) == CORE_MEASURED["tiny"]["total"]["dsp"]
    assert dsp_blocks(preset("fpga", variant="initial")) > 156
    assert dsp_blocks(preset("tiny", variant="initial")) < 156
    sel = preset("fpga", variant="initial", digit_product="select", digits="booth")
    assert dsp_blocks(sel) < 156
    assert check_build("ulx3s", sel, 115200, 50) == 434
    assert dsp_blocks(preset("fpga")) < 156      # the default selects: no DSP in the PE array


def test_build_with_the_pll_records_the_core_clock(tmp_path, capsys, fake_flow, monkeypatch):
    """The build constrains place and route to the PLL's clock, takes that clock's Fmax (not
    the board clock's) and records the clock and the UART divisor."""
    import dstar_rtl.flows.pnr
    seen = {}

    def pnr(netlist, *, workdir, freq_mhz, **kw):
        seen["freq"] = freq_mhz
        workdir.mkdir(parents=True)
        (workdir / "board.config").write_text("cfg")
        fmax = {"clk25_0__io": dict(achieved=400.0, constraint=25.0, pass_=True),
                "clk": dict(achieved=51.5, constraint=50.0)}
        return dict(fmax_mhz=400.0, timing_pass=True, utilisation={}, critical_path=None,
                    fmax={k: {"achieved": v["achieved"], "constraint": v["constraint"],
                              "pass": v["achieved"] >= v["constraint"]}
                          for k, v in fmax.items()},
                    log=str(workdir / "nextpnr.log"), tools={})
    monkeypatch.setattr(dstar_rtl.flows.board, "place_and_route", pnr)
    out, files = _outputs(tmp_path)
    rc, text, err = _build(capsys, "-o", out, "--clock-mhz", "50")
    assert rc == 0, err
    assert seen["freq"] == 50.0
    rec = json.loads(files[3].read_text())
    assert rec["clock_mhz"] == 50.0 and rec["pll"] is True and rec["cycles_per_bit"] == 434
    assert rec["fmax_mhz"] == 51.5 and rec["constraint_mhz"] == 50.0
    assert "Fmax 51.5 MHz at 50 MHz (met)" in text


def test_a_boards_renamed_clock_keeps_its_critical_path():
    """On the board nextpnr renames the one clock (``clk25`` becomes the global net
    ``$glbnet$clk``): the name that finds its Fmax also finds its critical path, not the
    asynchronous ones beside it."""
    from dstar_rtl.flows.pnr import _clock_key, _critical_path

    def path(a, b, delay):
        return {"from": a, "to": b, "path": [
            {"type": "clk-to-q", "delay": 0.5, "from": {"cell": "src"}, "to": {"cell": "x"}},
            {"type": "routing", "delay": delay, "net": "n", "from": {"cell": "x"},
             "to": {"cell": "dst"}}]}
    clk = "posedge $glbnet$clk"
    report = {"critical_paths": [path(clk, clk, 20.0), path("<async>", "<async>", 1.0),
                                 path(clk, "<async>", 3.0)]}
    key = _clock_key({"$glbnet$clk": {}}, "clk25")
    assert key == "$glbnet$clk" and _critical_path(report, key)["delay_ns"] == 20.5
    assert _clock_key({"$glbnet$clk": {}, "other": {}}, "clk25") is None   # two: not guessed
    assert _clock_key({"clk$TRELLIS_IO_IN": {}, "x": {}}, "clk") == "clk$TRELLIS_IO_IN"
