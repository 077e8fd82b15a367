"""``dstar report``: REPORT.md and reports/units/*.json from the committed reports (measures
nothing), one-line errors."""

import json
import os

import pytest

import dstar_rtl.app.cli
from dstar_rtl.app.reports.summary import collect_units
from dstar_rtl.app.reports.verification import verification
from dstar_rtl.golden.config import preset


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One ``dstar report`` into a folder that does not exist yet (reading the verdicts of
    build/sim takes most of its time): ``(REPORT.md path, stdout)``."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("report")
    out, buf = root / "missing" / "R.md", io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert dstar_rtl.app.cli.main(["report", "-o", str(out)]) == 0
    return out, buf.getvalue()


def test_report_writes_markdown_and_unit_files(report):
    out, stdout = report
    text = out.read_text()
    assert text.startswith("# DSTAR RTL: report")
    assert "## Resources and Fmax" in text and "## Verification" in text
    assert "## A whole DiT sampled on the core" in text      # reports/sample.json
    units = collect_units()
    assert units, "reports/ holds measured synthesis results"
    for u in units:
        assert u["resources"] and u["config_hash"], u
    files = sorted((out.parent / "reports" / "units").glob("*.json"))
    assert len(files) >= len({(u["unit"], u["preset"], u["target"]) for u in units})
    d = json.loads(files[0].read_text())
    assert {"unit", "preset", "target", "resources", "verification", "source"} <= set(d)
    assert "wrote" in stdout
    assert text.index("## The whole DSTAR core against the whole INT8 core") < \
        text.index("## Resources and Fmax")                  # the design's figure comes first


def test_the_bench_is_counted_as_a_design(report):
    """REPORT.md sets DSTAR's MPU and the QPU it needs (same configuration) against the INT8
    array per µm², from the two committed measurements, beside the MPU-alone figure."""
    from dstar_rtl.gen.paths import ROOT

    bench = json.loads((ROOT / "reports" / "bench.json").read_text())
    from dstar_rtl.app.reports.packing import Packing

    rows = Packing.load(ROOT / "reports" / "qpu_packing.json").rows
    qpu = [r.asic.area for r in rows if r.config_hash == bench["config_hash"] and r.asic]
    text = report[0].read_text()
    if not qpu:           # the two reports measured different configurations: said, not mixed
        assert "the QPU it needs is not counted (no `reports/qpu_packing.json` row" in text
        return
    a, areas = bench["totals"]["all"], bench["areas"]
    ratio = (areas["mpu"]["area"] + qpu[0]) / areas["baseline"]["area"]
    assert f"per µm² is **{a['cycles_ratio'] / ratio:.2f}×** the INT8 array's" in text
    assert a["cycles_ratio"] / ratio < a["tput_per_area_ratio"]       # the MPU alone flatters
    default = bench["config_hash"] == preset(bench["preset"]).hash()
    assert ("This is the configuration a user gets by default" in text) is default
    assert ("not the `%s` preset a user gets by default today" % bench["preset"] in text) \
        is not default


def test_verification_rows_are_well_formed():
    """Rows of the runs in build/sim (any, or none): a row passes or says why not."""
    for v in verification():
        assert v["simulator"] in ("verilator", "icarus") and v["tests"] >= v["failed"] >= 0
        assert v["passing"] is (v["why"] == ""), v
        assert not v["passing"] or v["passed"] == v["tests"] > 0, v


def test_report_creates_a_missing_folder(report):
    out = report[0]
    assert out.read_text().startswith("# DSTAR RTL: report")
    assert list((out.parent / "reports" / "units").glob("*.json"))
    assert not [p for p in out.parent.parent.rglob(".*")]          # no temporaries left


@pytest.mark.parametrize("where, frag", [("{d}", "it is a directory"),
                                         ("{d}/file/R.md", "is a file, not a directory")])
def test_report_bad_output_is_one_line(tmp_path, capsys, where, frag):
    (tmp_path / "file").write_text("x")
    assert dstar_rtl.app.cli.main(["report", "-o", where.format(d=tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("dstar: error: cannot write") and err.count("\n") == 1 and frag in err
    assert out == "" and sorted(os.listdir(tmp_path)) == ["file"]


def test_report_files_appear_together(tmp_path, capsys, monkeypatch):
    """When one of REPORT.md's files cannot be written, none of them is: no REPORT.md, no
    reports/units/*.json, no folder."""
    import dstar_rtl.app.reports.summary as rs

    real = rs.report_files

    def with_a_failing_plot(out):
        files, summary = real(out)

        def fail(f):
            raise OSError(28, "No space left on device")
        files[rs.side_folder(out) / "sweep.png"] = fail
        return files, summary
    monkeypatch.setattr(rs, "report_files", with_a_failing_plot)
    assert dstar_rtl.app.cli.main(["report", "-o", str(tmp_path / "new" / "R.md")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err
    assert list(tmp_path.iterdir()) == []


def test_the_core_by_part_says_when_it_is_not_todays_default(report):
    """A core-area report measured before a default switch is labelled, not passed off as the
    configuration a user gets."""
    from dstar_rtl.app.reports.core_area import CoreArea
    from dstar_rtl.gen.paths import ROOT

    area = CoreArea.load(ROOT / "reports" / "core_area.json")
    text = report[0].read_text()
    for name, r in area.presets.items():
        label = f"`{name}` (config `{r.config_hash}`, not today's default"
        assert (label in text) is (r.config_hash != preset(name).hash()), name


def test_the_opening_names_the_models_dstar_wins_on_with_every_byte_charged():
    from dataclasses import replace

    from dstar_rtl.app.reports.summary import _state_headline
    from dstar_rtl.gen.paths import REPORTS
    from dstar_rtl.results.projection import Projection

    proj = Projection.load(REPORTS / "projection.json")
    r0 = next(r for r in proj.rows if r.energy is not None)

    def row(model, wl, speedup, energy, fits=True):
        return replace(r0, model=model, workload=replace(r0.workload, name=wl),
                       speedup=speedup, energy=replace(r0.energy, dstar_over_int8=energy),
                       on_chip_sram_bytes=3 * 2**20,
                       memory=replace(r0.memory, hbm_capacity_bytes=40e9),
                       dstar=replace(r0.dstar, state_bytes=1.5e9, hbm_used_bytes=2e9,
                                     fits_hbm=fits))
    rows = (row("DiT-XL/2 512", "ours", 1.04, 1.02), row("Flux.1-dev 1K", "ours", 1.5, 0.8, False))
    md = "\n".join(_state_headline(replace(proj, rows=rows)))
    assert "faster and cheaper on Flux.1-dev 1K; not on DiT-XL/2 512" in md
    assert "| Flux.1-dev 1K | 3,072 | 1.50 | 2.0 (**does not fit**) | 1.50× (0.80) |" in md
    assert _state_headline(replace(proj, rows=())) == [] and _state_headline(None) == []


def test_a_row_measured_on_another_configuration_is_marked():
    from dstar_rtl.app.reports.summary import _config_cell

    assert _config_cell("tiny", preset("tiny").hash()) == "default"
    assert _config_cell("tiny", preset("tiny", rows=8, cols=8, vpu_lanes=8).hash(), rows=8,
                        cols=8, vpu_lanes=8) == "default"
    assert "not today's" in _config_cell("tiny", preset("fpga").hash())
    assert "unrecorded" in _config_cell("tiny", None)
    assert "not today's" in _config_cell("tiny", "0123456789abcdef", rows=0)   # a bad override
