"""``dstar report``: REPORT.md and reports/units/*.json from the committed reports (measures
nothing), one-line errors."""

import json

import gen.cli
from fpga.report_summary import collect_units, verification


def test_report_writes_markdown_and_unit_files(tmp_path, capsys):
    out = tmp_path / "REPORT.md"
    assert gen.cli.main(["report", "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# DSTAR RTL: report")
    assert "## Resources and Fmax" in text and "## Verification" in text
    units = collect_units()
    assert units, "reports/ holds measured synthesis results"
    for u in units:
        assert u["resources"] and u["config_hash"], u
    files = sorted((tmp_path / "reports" / "units").glob("*.json"))
    assert len(files) >= len({(u["unit"], u["preset"], u["target"]) for u in units})
    d = json.loads(files[0].read_text())
    assert {"unit", "preset", "target", "resources", "verification", "source"} <= set(d)
    assert "wrote" in capsys.readouterr().out


def test_verification_rows_are_well_formed():
    for v in verification():
        assert v["simulator"] in ("verilator", "icarus") and v["tests"] >= v["failed"] >= 0


def test_report_bad_output_is_one_line(tmp_path, capsys):
    assert gen.cli.main(["report", "-o", str(tmp_path / "missing" / "R.md")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dstar: error: cannot write") and "\n" not in err
