"""dstar measure state-quality (app/reports/state_quality.py): its points, its refusals and its
table; the measurement itself is make reports' (minutes)."""

import pytest

import dstar_rtl.app.cli
from dstar_rtl.app.reports.state_quality import CHUNKS, FRACS, PIECES, markdown, points
from dstar_rtl.golden.config import YSTATE_FRAC_CHOSEN


def test_every_fraction_at_the_operating_point_and_one_finer():
    pts = points(-2)
    assert [(o, g) for _, o, g, _ in pts[:-2]] == [(o, g) for o in (-2, -1, -2) for g in FRACS]
    assert pts[0][0] == "base -2, Y whole" and pts[7][0] == "base -1, stored Y, g = 4"
    assert pts[-3][0] == "base -2, max_reduction 64, stored Y, g = 4"
    assert pts[-3][3] == PIECES and not pts[0][3]
    # the MLP in chunks, at the chosen fraction and two bits finer
    assert [p[1:] for p in pts[-2:]] == [(-2, g, CHUNKS) for g in (YSTATE_FRAC_CHOSEN,
                                                                    YSTATE_FRAC_CHOSEN + 2)]


@pytest.mark.parametrize("argv, msg", [
    (["--seeds", "1"], "--seeds and --steps must be >= 2"),
    (["--jobs", "0"], "--jobs >= 1"),
    (["--operating-point", "/nonexistent.json"], "--operating-point /nonexistent.json")])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, argv, msg):
    rc = dstar_rtl.app.cli.main(["measure", "state-quality", *argv, "--out",
                                 str(tmp_path / "o")])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1 and msg in err
    assert not (tmp_path / "o").exists()


def test_the_table_says_which_point_keeps_the_rule():
    from dstar_rtl.app.reports.state_quality import StateQuality
    from dstar_rtl.results.base import Provenance, plain

    ci = dict(mean=41.0, lo=40.2, hi=41.8, n=10)
    s = dict(psnr_db=ci, avg_bits=dict(ci, mean=3.5), agrees_with_float=ci,
             agreement_count=[10, 10], agreement_exact=dict(lo=0.7, hi=1.0), quant_correct=ci,
             share_saturated=ci, mix={}, layer_types={})
    point = dict(name="base -2, Y whole", base_offset=-2, ystate_frac=None, ystate_width=33,
                 max_reduction=256, summary=s, passes=True)
    rec = StateQuality.from_data(dict(
        kind="state-quality", schema=1,
        provenance=plain(Provenance.unrecorded("dstar measure state-quality", "today")),
        points=[point, dict(point, name="base -2, stored Y, g = 2", ystate_frac=2,
                            ystate_width=20, summary=dict(s, psnr_db=dict(ci, lo=39.9)),
                            passes=False)],
        seconds=1.0, preset="fpga", thr=[2, 7, 31], steps=20, seeds=10, acc_bits=33))
    md = markdown(rec)
    assert "| base -2, Y whole | 33 | 3.50 | 41.00 [40.20, 41.80] | 10/10 | passes |" in md
    assert "| base -2, stored Y, g = 2 | 20 | 3.50 | 41.00 [39.90, 41.80] | 10/10 | fails |" in md
