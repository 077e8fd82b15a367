"""``dstar measure pe-area``: every lever is one synthesis of the lever's configuration, the rate
and the ratio to INT8 follow from the workload, and bad input is refused before any synthesis.
The synthesis is replaced by a fake whose area is a function of the configuration (no Yosys in
the fast tier)."""


import pytest

import dstar_rtl.app.cli
import dstar_rtl.app.reports.pe_area as pe_area
import dstar_rtl.bench.pe_area as bench_pe_area
from dstar_rtl.golden.config import preset


def _fake_synthesize(calls):
    def synth(unit, cfg, target, *, liberty, reuse, booth):
        calls.append((unit, cfg.hash(), target, booth))
        area = 100.0 * cfg.lanes + 10.0 * cfg.acc_bits + 7.0 * cfg.pe_stages
        if unit == "baseline_pe":
            assert cfg.datapath == "int8"
            area = 500.0 + 3.0 * cfg.pe_stages - 10.0 * (cfg.weight_hop == 1)
        return dict(resources=dict(area=area, combinational_area=area * 0.7,
                                   sequential_area=area * 0.3, ff=int(area) // 20),
                    timing=dict(delay=(1.0 if unit == "baseline_pe" else 2.0)
                                - 0.1 * cfg.pe_stages), seconds=0.1)
    return synth


@pytest.fixture
def reports(tmp_path):
    from dataclasses import replace

    from dstar_rtl.gen.paths import REPORTS
    from dstar_rtl.results.bench import Bench

    b = Bench.load(REPORTS / "bench.json")     # a real result, its totals set to known figures
    b = replace(b, totals=replace(b.totals, all=replace(b.totals.all, mean_act_bits=4.0,
                                                        lane_util=0.5)))
    (tmp_path / "bench.json").write_text(b.to_json())
    from dstar_rtl.results.compare import Compare

    c = Compare.load(REPORTS / "compare.json")     # the paper workload set to known figures
    c = replace(c, paper=replace(c.paper, workload=replace(c.paper.workload, name="ours",
                                                           bits=2.0, fill=1.0)))
    (tmp_path / "compare.json").write_text(c.to_json())
    return tmp_path


def test_each_lever_is_its_own_configuration_and_the_ratios_follow(reports, monkeypatch):
    calls = []
    monkeypatch.setattr(bench_pe_area, "synthesize", _fake_synthesize(calls))
    liberty = reports / "cells.lib"
    liberty.write_text("library (x) { }\n")
    assert dstar_rtl.app.cli.main(["measure", "pe-area", "--liberty", str(liberty),
                           "--out", str(reports), "--inputs", str(reports)]) == 0
    rec = pe_area.PeArea.load(reports / "pe_area.json")
    n = len(pe_area.DSTAR_LEVERS) + len(pe_area.INT8_LEVERS)
    assert len(calls) == 2 * n and all(c[2] == "asic" and c[3] for c in calls)
    assert len({c[1] for c in calls if c[0] == "pe"}) == 2 * len(pe_area.DSTAR_LEVERS)
    for name, wl in (("fpga", (4.0, 0.5)), ("paper", (2.0, 1.0))):
        rows = rec.presets[name].rows
        by = {f"{r.kind}/{r.lever}": r for r in rows}
        bits, fill = wl
        for row in rows:
            cfg = preset(name, **row.overrides)
            if row.kind == "dstar":
                assert row.values_per_cycle == pytest.approx(cfg.lanes * fill / (bits / 2))
                assert row.area_um2 == pytest.approx(
                    100 * cfg.lanes + 10 * cfg.acc_bits + 7 * cfg.pe_stages)
            else:
                assert row.values_per_cycle == 1.0
            assert row.per_um2_vs_int8 == pytest.approx(
                by["int8/default"].um2_per_value / row.um2_per_value, abs=1e-3)
        narrow = by["dstar/accumulator as wide as INT8's, saturating"]
        assert narrow.acc_bits == preset(name).baseline_acc_width
        assert narrow.overrides["overflow_detect"] is True
        assert by["int8/default"].overrides == {"datapath": "int8"}
        assert preset(name, datapath="int8").pe_stages == 0    # the INT8 core's own choice
        # Registered operands shrink the fake INT8 PE, its path no longer than DSTAR's: a lever
        # the INT8 default leaves unused, which the report names.
        assert [r.lever for r in pe_area.unused_int8_levers(rows)] == [
            "operands registered at every PE"]
    md = (reports / "pe_area.md").read_text()
    assert "| DSTAR | lanes 8 |" in md and "| INT8 | pe_stages 1 |" in md
    assert "INT8 levers that make its PE smaller" in md


def test_bad_input_is_refused_before_any_synthesis(reports, monkeypatch, capsys):
    def never(*a, **k):
        raise AssertionError("synthesis started on bad input")
    monkeypatch.setattr(bench_pe_area, "synthesize", never)
    missing = reports / "nope.lib"
    assert dstar_rtl.app.cli.main(["measure", "pe-area", "--liberty", str(missing),
                           "--out", str(reports), "--inputs", str(reports)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "nope.lib: file not found" in err
    (reports / "bench.json").unlink()
    liberty = reports / "cells.lib"
    liberty.write_text("library (x) { }\n")
    assert dstar_rtl.app.cli.main(["measure", "pe-area", "--liberty", str(liberty), "--presets",
                                   "fpga",
                           "--out", str(reports), "--inputs", str(reports)]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "bench.json not found" in err
    assert not (reports / "pe_area.json").exists() and not (reports / "pe_area.md").exists()
