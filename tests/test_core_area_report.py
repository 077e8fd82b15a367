"""``dstar measure core-area``: the report names the configuration it measured (a preset's
variant, e.g. the one the core estimator is calibrated on, is not passed off as the default), and
a variant that does not exist is refused before any synthesis."""

import dstar_rtl.app.cli
from dstar_rtl.app.reports.core_area import render


def _res(variant):
    from dstar_rtl.app.reports.core_area import CoreArea
    from dstar_rtl.results.base import Provenance
    from dstar_rtl.results.core_area import CoreParts
    from dstar_rtl.results.quantities import Resources

    part = Resources(lut4=10, ff=5, carry=1, dsp=0, bram=0, lutram=0)
    return CoreArea(Provenance.unrecorded(date="2026-12-02"), presets={"tiny": CoreParts(
        preset="tiny", variant=variant, config_hash="abc", parts={"VPU": part}, total=part,
        seconds=1.0, tools={"yosys": "0.70"}, workdir="w")}, steps=())


def test_the_report_names_the_variant_and_the_configuration():
    assert "## `tiny` preset, variant `initial` (config `abc`)" in render(_res("initial"))
    assert "## `tiny` preset (config `abc`)" in render(_res(None))


def test_an_unknown_variant_is_refused_before_any_work(capsys, monkeypatch):
    import dstar_rtl.app.reports.core_area as core_area

    def never(*a, **k):
        raise AssertionError("synthesis started on bad input")
    monkeypatch.setattr(core_area, "synthesize_core", never)
    assert dstar_rtl.app.cli.main(["measure", "core-area", "--variant", "nope"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "argument --variant: invalid choice" in err
