"""Board tops (fpga/board.py) and ``dstar build``'s argument handling. The bitstream flow itself
runs in ``make reports`` / by hand (minutes of place and route), not here."""

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
