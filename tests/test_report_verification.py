"""REPORT.md's verification table is built from the runner's own verdicts (``verdict.json``,
sim/runner.py), never from the simulator's ``results.xml``: a run whose verdict is missing,
failing, has skipped or missing tests, or is stale shows as not passing, and says why. The
verdicts reach REPORT.md through ``dstar measure verification``'s record, not a local build/."""

import json

import pytest

import dstar_rtl.app.reports.summary as rs
import dstar_rtl.sim.regression as regression
from dstar_rtl.sim import runner

TOOLS = {"amaranth": "0.5.10", "yosys": "0.70", "cocotb": "2.1.0", "verilator": "5.048",
         "icarus": "Icarus Verilog version 11.0"}
HASH = "b9ae36267cee72c7"


@pytest.fixture
def sim_root(tmp_path, monkeypatch):
    """An empty ``build/sim`` and an empty ``reports/`` (REPORT.md then holds only the
    verification table), with fixed tool versions."""
    monkeypatch.setattr(runner, "tool_versions", lambda simulator=None: {
        t: v for t, v in TOOLS.items() if t not in runner.SIMULATORS or t == simulator},
        raising=False)
    monkeypatch.setattr(regression, "SIM_BUILD", tmp_path / "sim")
    monkeypatch.setattr(rs, "REPORTS", tmp_path / "reports")
    (tmp_path / "reports").mkdir()
    return tmp_path / "sim"


def _run(root, unit, simulator, module, seed, cases, verdict=True, folder=HASH, **changes):
    """A run folder as sim/runner.py leaves it: ``results.xml`` with ``cases`` (name -> None,
    "failure" or "skipped") and, unless ``verdict`` is False, its ``verdict.json`` (the runner's
    judgement; ``changes`` overrides fields, ``identity`` entries to fake a stale run)."""
    short = module.rsplit(".", 1)[-1]
    d = root / f"{unit}-tiny-{folder}" / "runs" / f"{simulator}-{short}-{seed}"
    d.mkdir(parents=True)
    body = "".join(f'<testcase classname="{module}" name="{n}">' + (f"<{k} />" if k else "") +
                   "</testcase>" for n, k in cases.items())
    (d / "results.xml").write_text(f'<testsuites><testsuite name="{module}">{body}</testsuite>'
                                   "</testsuites>")
    if not verdict:
        return d
    expected = changes.pop("expected", sorted(cases))
    identity = runner.run_identity(unit, HASH, simulator, module)
    identity.update(changes.pop("identity", {}))
    v = dict(unit=unit, preset="tiny", config_hash=HASH, simulator=simulator, module=module,
             run=f"{short}-{seed}", expected=expected,
             passed=[n for n, k in cases.items() if k is None],
             failed=[n for n, k in cases.items() if k == "failure"],
             skipped=[n for n, k in cases.items() if k == "skipped"],
             missing=[n for n in expected if n not in cases], extra=[], exit_code=0,
             results=True, time="2026-12-01T12:00:00+0000", unix_time=1.8e9,
             key=runner.run_key(identity), identity=identity)
    v["pass"] = not (v["failed"] or v["skipped"] or v["missing"])
    v["reason"] = None if v["pass"] else "the runner's message"
    v.update(changes)
    (d / runner.VERDICT).write_text(json.dumps(v))
    return d


def _fabricate(root):
    both = {"a": None, "b": None}
    _run(root, "pe", "icarus", "dstar_rtl.tb.test_pe", 1,
         both)                              # passes
    _run(root, "pe", "verilator", "dstar_rtl.tb.test_pe", 1, {"a": None,
                                                              "b": "skipped"})    # skipped
    _run(root, "mpu", "icarus", "dstar_rtl.tb.test_mpu", 1, {"a": None}, expected=["a",
                                                                                   "b"])  # missing
    _run(root, "mpu", "verilator", "dstar_rtl.tb.test_mpu", 1, {"a": "failure",
                                                                "b": None})  # failed
    _run(root, "vpu", "icarus", "dstar_rtl.tb.test_vpu", 1, both, identity={"sources": "0" * 64})
    _run(root, "vpu", "verilator", "dstar_rtl.tb.test_vpu", 1, both,
         identity={"tools": {**runner.tool_versions("verilator"), "verilator": "5.040"}})
    _run(root, "qpu", "icarus", "dstar_rtl.tb.test_qpu", 1, both,
         verdict=False)             # no verdict
    # a verdict that says pass although a test was skipped is not believed
    _run(root, "qpu", "verilator", "dstar_rtl.tb.test_qpu", 1, {"a": None, "b": "skipped"},
         **{"pass": True})


def _report(tmp_path):
    """Record ``build/sim`` (``dstar measure verification``) into the test's reports/, then
    ``dstar report``'s files."""
    from dstar_rtl.app.reports.verification import MEASUREMENT
    assert MEASUREMENT.main(["--out", str(tmp_path / "reports")]) == 0
    return rs.report_files(tmp_path / "REPORT.md")


def _lines(md):
    """The table's rows: (unit, simulator) -> the Markdown line."""
    rows = {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) > 4 and cells[0] in ("pe", "mpu", "vpu", "qpu"):
            sim = next(c for c in cells if c in ("icarus", "verilator"))
            rows[cells[0], sim] = line
    return rows


def test_a_skipped_run_is_not_a_pass(sim_root, tmp_path):
    """The run cocotb reports as 1 passed, 1 skipped, 0 failed: the results.xml-based table
    counted it a pass (0 failures); the runner failed it, and so does the table."""
    d = sim_root / f"pe-tiny-{HASH}" / "runs" / "verilator-test_pe-1"
    d.mkdir(parents=True)
    (d / "results.xml").write_text(
        '<testsuites><testsuite name="dstar_rtl.tb.test_pe">'
        '<testcase classname="dstar_rtl.tb.test_pe" name="a">'
        '</testcase><testcase classname="dstar_rtl.tb.test_pe" name="b"><skipped /></testcase>'
        "</testsuite></testsuites>")
    (d / "verdict.json").write_text(json.dumps({
        "unit": "pe", "preset": "tiny", "config_hash": HASH, "simulator": "verilator",
        "module": "dstar_rtl.tb.test_pe", "expected": ["a", "b"], "passed": ["a"], "failed": [],
        "skipped": ["b"], "missing": [], "extra": [], "exit_code": 0, "results": True,
        "pass": False, "reason": "cocotb tests skipped", "unix_time": 1.8e9,
        "key": "0" * 64, "identity": {}}))
    md = _report(tmp_path)[0][tmp_path / "REPORT.md"]
    (line,) = _lines(md).values()
    assert "**not passing**" in line and "skipped: b" in line, line


def test_only_a_clean_current_verdict_passes(sim_root, tmp_path):
    _fabricate(sim_root)
    files, summary = _report(tmp_path)
    md = files[tmp_path / "REPORT.md"]
    rows = _lines(md)
    assert len(rows) == 6, md            # the two runs made on other sources or tools: left out
    assert "| pass |" in rows["pe", "icarus"]
    for key, why in [(("pe", "verilator"), "skipped: b"), (("mpu", "icarus"), "missing: b"),
                     (("mpu", "verilator"), "failed: a"),
                     (("qpu", "icarus"), "no verdict"), (("qpu", "verilator"), "skipped: b")]:
        assert "**not passing**" in rows[key] and why in rows[key], (key, rows[key])
        assert "| pass |" not in rows[key]
    assert "1 of 6 runs pass. (2 older runs in the build folder" in md
    assert summary["verification"] == 6 and summary["verification_passing"] == 1


def test_verification_rows_say_why(sim_root):
    _fabricate(sim_root)
    rows = {(r["unit"], r["simulator"]): r for r in regression.verification()}
    assert [k for k, r in rows.items() if r["passing"]] == [("pe", "icarus")]
    assert rows["pe", "icarus"]["why"] == ""
    assert (rows["pe", "icarus"]["tests"], rows["pe", "icarus"]["passed"]) == (2, 2)
    assert (rows["mpu", "icarus"]["tests"], rows["mpu", "icarus"]["missing"]) == (2, 1)
    assert (rows["pe", "verilator"]["skipped"], rows["pe", "verilator"]["passed"]) == (1, 1)
    assert all(r["why"] for k, r in rows.items() if k != ("pe", "icarus"))


def test_a_stale_testbench_or_an_unreadable_verdict_does_not_pass(sim_root):
    both = {"a": None, "b": None}
    _run(sim_root, "pe", "icarus", "dstar_rtl.tb.test_pe", 1, both,
         identity={"testbench": "1" * 64})
    d = _run(sim_root, "mpu", "icarus", "dstar_rtl.tb.test_mpu", 1, both)
    (d / runner.VERDICT).write_text("{not json")
    _run(sim_root, "vpu", "icarus", "dstar_rtl.tb.test_vpu", 1, both, key="0" * 64)   # a forged key
    rows = {r["unit"]: r for r in regression.verification()}
    assert not any(r["passing"] for r in rows.values())
    assert "stale: testbench" in rows["pe"]["why"]
    assert "unreadable verdict" in rows["mpu"]["why"]
    assert "stale" in rows["vpu"]["why"]


def test_the_latest_run_of_a_name_is_the_one_shown(sim_root):
    """A later failing run of the same unit, preset, simulator and run name (in another
    configuration's folder) hides an earlier passing one."""
    both = {"a": None, "b": None}
    _run(sim_root, "pe", "icarus", "dstar_rtl.tb.test_pe", 1, both)
    _run(sim_root, "pe", "icarus", "dstar_rtl.tb.test_pe", 1, {"a": None, "b": "skipped"},
         folder="f" * 16, unix_time=1.9e9)
    rows = regression.verification()
    assert len(rows) == 1 and not rows[0]["passing"] and "skipped" in rows[0]["why"]


def test_no_runs_is_said(sim_root, tmp_path, capsys):
    """Nothing recorded: the report says so; nothing to record: the command refuses (exit 2)
    and writes nothing."""
    import dstar_rtl.app.cli
    files, summary = rs.report_files(tmp_path / "REPORT.md")
    assert "Not recorded yet" in files[tmp_path / "REPORT.md"]
    assert summary["verification"] == 0
    assert dstar_rtl.app.cli.main(["measure", "verification", "--sim-root", str(tmp_path),
                           "--out", str(tmp_path / "reports")]) == 2
    assert "no cocotb run on today's sources in" in capsys.readouterr().err
    assert not (tmp_path / "reports" / "verification.json").exists()


def test_a_record_made_on_other_sources_is_marked_stale(sim_root, tmp_path):
    _run(sim_root, "pe", "icarus", "dstar_rtl.tb.test_pe", 1, {"a": None, "b": None})
    md = _report(tmp_path)[0][tmp_path / "REPORT.md"]
    assert "**Stale**: recorded on RTL" not in md and "1 of 1 runs pass." in md
    f = tmp_path / "reports" / "verification.json"
    f.write_text(json.dumps(dict(json.loads(f.read_text()), sources="0" * 64)))
    md = rs.report_files(tmp_path / "REPORT.md")[0][tmp_path / "REPORT.md"]
    assert "**Stale**: recorded on RTL" in md
    # verification.md is the record as made: the same whatever today's sources (the render
    # check of make test, which records it again, must not depend on them).
    from dstar_rtl.app.reports.verification import Verification, markdown
    rec = Verification.load(f)
    assert "**Stale**" not in markdown(rec) and "1 of 1 runs pass." in markdown(rec)


def test_runs_left_over_from_other_sources_are_counted_and_left_out(sim_root, tmp_path):
    """The record is the regression just run: a stale leftover is not a failing row of it."""
    from dstar_rtl.app.reports.verification import record

    both = {"a": None, "b": None}
    _run(sim_root, "pe", "icarus", "dstar_rtl.tb.test_pe", 1, both)
    _run(sim_root, "vpu", "icarus", "dstar_rtl.tb.test_vpu", 1, both,
         identity={"sources": "0" * 64})
    _run(sim_root, "mpu", "icarus", "dstar_rtl.tb.test_mpu", 1, {"a": "failure", "b": None})
    rec = record()
    assert (rec.runs, rec.passing, rec.older) == (2, 1, 1)
    assert {r.unit for r in rec.rows} == {"pe", "mpu"}
    md = _report(tmp_path)[0][tmp_path / "REPORT.md"]
    assert "1 of 2 runs pass. (1 older runs in the build folder" in md
