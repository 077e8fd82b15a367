"""``dstar render``: every committed report's Markdown is what today's code renders from its
stored result (so a change to a renderer re-renders the reports in the same commit, and the
numbers cannot move without a measurement), a changed Markdown is caught, bad input is one
line."""

import shutil

import pytest

import dstar_rtl.app.cli
import dstar_rtl.app.commands.render as rd
from dstar_rtl.gen.paths import REPORTS


def test_every_committed_report_renders_as_committed(capsys):
    assert dstar_rtl.app.cli.main(["render", "--all", "--check"]) == 0, capsys.readouterr().err
    assert f"{len(rd.NAMES)} reports render as committed" in capsys.readouterr().out


def test_a_report_that_differs_is_named_and_rendering_restores_it(tmp_path, monkeypatch, capsys):
    js, md = rd.files("state-quality")
    shutil.copy(REPORTS / js, tmp_path / js)
    (tmp_path / md).write_text((REPORTS / md).read_text().replace("passes", "fails", 1))
    orig = rd.render
    monkeypatch.setattr(rd, "REPORTS", tmp_path)
    monkeypatch.setattr(rd, "render", lambda n: orig(n, tmp_path))
    assert dstar_rtl.app.cli.main(["render", "state-quality", "--check"]) == 1
    assert f"not what today's code renders: {tmp_path.name}/{md}" in capsys.readouterr().err
    assert dstar_rtl.app.cli.main(["render", "state-quality"]) == 0
    assert (tmp_path / md).read_text() == (REPORTS / md).read_text()


@pytest.mark.parametrize("argv, frag", [
    (["render"], "name reports"),
    (["render", "nope"], "not a report: nope"),
    (["render", "--all", "vpu"], "name reports"),
])
def test_bad_input_is_one_line(argv, frag, capsys):
    assert dstar_rtl.app.cli.main(argv) == 2
    err = capsys.readouterr().err
    assert frag in err and err.count("\n") == 1
