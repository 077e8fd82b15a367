"""The cocotb runner cannot pass by accident: a run passes only when at least one test was
expected and every expected test ran and passed and the simulator exited cleanly, every run leaves
the runner's verdict beside its results, and the build cache is keyed on every file elaboration
loads and on the versions of the tools that make a model."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.sim import runner
from dstar_rtl.sim.runner import check_results, expected_tests, run_cocotb
from dstar_rtl.sim.sources import ROOT, digest, elaboration_sources, import_closure

NO_TESTS = """\
import cocotb


async def helper(dut):
    await cocotb.triggers.Timer(1)
"""


def _xml(tmp_path, cases):
    """A JUnit file as cocotb writes it; ``cases`` maps a test name to None, "failure",
    "error" or "skipped"."""
    body = "".join(f'<testcase classname="tb.m" name="{n}">' + (f"<{k} />" if k else "") +
                   "</testcase>" for n, k in cases.items())
    f = tmp_path / "results.xml"
    f.write_text(f'<testsuites><testsuite name="tb.m" tests="{len(cases)}">{body}</testsuite>'
                 "</testsuites>")
    return f


def _check(xml, expected, code=0):
    return check_results(xml, expected, code, "tb.m on icarus", xml.parent / "sim.log")


def test_every_expected_test_passed(tmp_path):
    assert _check(_xml(tmp_path, {"a": None, "b": None}), ["a", "b"]) == (2, 0)


@pytest.mark.parametrize("cases, expected, code, match", [
    ({}, ["a"], 0, "ran \\[\\], expected \\['a'\\]"),              # no test ran
    ({"a": None}, ["a", "b"], 0, "expected \\['a', 'b'\\]"),          # one missing
    ({"a": None, "a2": None}, ["a"], 0, "ran \\['a', 'a2'\\]"),       # one extra
    ({"a": None, "b": "skipped"}, ["a", "b"], 0, "skipped.*\\['b'\\]"),
    ({"a": "failure"}, ["a"], 0, "1 of 1 cocotb tests failed"),
    ({"a": "error"}, ["a"], 0, "1 of 1 cocotb tests failed"),
    ({"a": None}, ["a"], 139, "simulator exited with 139"),           # crashed after the tests
])
def test_a_run_that_is_not_a_clean_pass_fails(tmp_path, cases, expected, code, match):
    with pytest.raises(AssertionError, match=match):
        _check(_xml(tmp_path, cases), expected, code)


def test_missing_results_fail(tmp_path):
    with pytest.raises(AssertionError, match="no results from tb.m on icarus"):
        _check(tmp_path / "results.xml", ["a"])


def test_expected_tests_come_from_the_module():
    names = expected_tests("dstar_rtl.tb.test_mpu")
    assert names[:4] == ["random_tiles", "every_exponent", "arbitrary_groups", "cycles"]
    assert len(set(names)) == len(names)
    assert expected_tests("dstar_rtl.tb.test_mpu", ["cycles"]) == ["cycles"]
    with pytest.raises(ValueError,
                       match="testcase \\['no_such_test'\\] not in dstar_rtl.tb.test_mpu"):
        expected_tests("dstar_rtl.tb.test_mpu", ["no_such_test"])


def test_unknown_testcase_is_refused_before_any_build(monkeypatch):
    monkeypatch.setattr(runner, "build", lambda *a, **k: pytest.fail("built anyway"))
    with pytest.raises(ValueError, match="no_such_test"):
        run_cocotb("mpu", preset("tiny"), "icarus", "dstar_rtl.tb.test_mpu",
                   testcase=["no_such_test"])


@pytest.fixture
def no_tests_module(tmp_path, monkeypatch):
    """A cocotb module on ``sys.path`` that defines no ``@cocotb.test``."""
    name = "tb_without_tests"
    (tmp_path / f"{name}.py").write_text(NO_TESTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    yield name
    sys.modules.pop(name, None)


def test_a_module_without_tests_is_refused(no_tests_module):
    with pytest.raises(ValueError, match=f"{no_tests_module} defines no cocotb test"):
        expected_tests(no_tests_module)
    with pytest.raises(ValueError, match="testcase selects no test of dstar_rtl.tb.test_mpu"):
        expected_tests("dstar_rtl.tb.test_mpu", [])


def test_a_run_of_a_module_without_tests_fails_before_any_build(no_tests_module, monkeypatch):
    monkeypatch.setattr(runner, "build", lambda *a, **k: pytest.fail("built anyway"))
    with pytest.raises(ValueError, match=f"{no_tests_module} defines no cocotb test"):
        run_cocotb("pe", preset("tiny"), "icarus", no_tests_module, seed=1)


def test_an_empty_run_fails(tmp_path):
    """Expecting nothing and getting nothing is not a pass."""
    with pytest.raises(AssertionError, match="no tests expected of tb.m on icarus"):
        _check(_xml(tmp_path, {}), [])


# ------------------------------------------------------------------ the run's verdict, on file

class _FakeSimulator:
    """Stands in for cocotb's runner: writes ``cases`` (see :func:`_xml`) as the results and
    exits with ``code``."""

    def __init__(self, cases, code=0):
        self.cases, self.code = cases, code

    def test(self, *, results_xml, test_dir, **_):
        _xml(test_dir, self.cases)
        assert str(test_dir / "results.xml") == results_xml
        if self.code:
            raise SystemExit(self.code)


def _fake_run(tmp_path, monkeypatch, cases, code=0, expected=("a", "b"), **kw):
    """``run_cocotb`` of pe at tiny on a fake icarus (no build, no simulator)."""
    import cocotb_tools.runner

    monkeypatch.setattr(runner, "expected_tests", lambda m, t: list(expected))
    monkeypatch.setattr(runner, "build", lambda *a, **k: tmp_path / "pe-tiny-x" / "icarus")
    monkeypatch.setattr(cocotb_tools.runner, "get_runner", lambda sim: _FakeSimulator(cases, code))
    return run_cocotb("pe", preset("tiny"), "icarus", "dstar_rtl.tb.test_pe", seed=3, **kw)


def _verdict(tmp_path):
    return json.loads((tmp_path / "pe-tiny-x" / "runs" / "icarus-test_pe-3" /
                       runner.VERDICT).read_text())


def test_a_passing_run_leaves_its_verdict(tmp_path, monkeypatch):
    res = _fake_run(tmp_path, monkeypatch, {"a": None, "b": None})
    assert res.tests == 2 and res.failed == 0
    v = _verdict(tmp_path)
    assert v["pass"] is True and v["reason"] is None
    assert (v["unit"], v["preset"], v["config_hash"], v["simulator"], v["module"]) == (
        "pe", "tiny", preset("tiny").hash(), "icarus", "dstar_rtl.tb.test_pe")
    assert v["expected"] == v["passed"] == ["a", "b"]
    assert v["failed"] == v["skipped"] == v["missing"] == v["extra"] == [] and v["exit_code"] == 0
    assert v["time"] and v["unix_time"] > 0
    identity = runner.run_identity("pe", preset("tiny").hash(), "icarus", "dstar_rtl.tb.test_pe")
    assert v["identity"] == identity and v["key"] == runner.run_key(identity)


@pytest.mark.parametrize("cases, code, expected, match, field, value", [
    ({"a": None, "b": "skipped"}, 0, ("a", "b"), "skipped", "skipped", ["b"]),
    ({"a": None}, 0, ("a", "b"), "expected \\['a', 'b'\\]", "missing", ["b"]),
    ({"a": "failure", "b": None}, 0, ("a", "b"), "1 of 2", "failed", ["a"]),
    ({"a": None, "b": None}, 139, ("a", "b"), "exited with 139", "exit_code", 139),
    ({}, 0, (), "no tests expected", "expected", []),
])
def test_a_failing_run_leaves_a_failing_verdict(tmp_path, monkeypatch, cases, code, expected,
                                                match, field, value):
    with pytest.raises(AssertionError, match=match):
        _fake_run(tmp_path, monkeypatch, cases, code, expected)
    v = _verdict(tmp_path)
    assert v["pass"] is False and v[field] == value and v["reason"]


def test_a_run_that_does_not_finish_leaves_no_verdict(tmp_path, monkeypatch):
    """The verdict of an earlier run is gone before the next run starts."""
    _fake_run(tmp_path, monkeypatch, {"a": None, "b": None})
    import cocotb_tools.runner

    class Crash:
        def test(self, **_):
            raise KeyboardInterrupt
    monkeypatch.setattr(cocotb_tools.runner, "get_runner", lambda sim: Crash())
    with pytest.raises(KeyboardInterrupt):
        run_cocotb("pe", preset("tiny"), "icarus", "dstar_rtl.tb.test_pe", seed=3)
    assert not (tmp_path / "pe-tiny-x" / "runs" / "icarus-test_pe-3" / runner.VERDICT).exists()


def test_a_run_that_writes_no_results_does_not_pass_on_an_earlier_runs(tmp_path, monkeypatch):
    """A passing run's results.xml is still there when the next run of the same test writes
    none (a simulator that exits 0 without running cocotb): that run fails."""
    _fake_run(tmp_path, monkeypatch, {"a": None, "b": None})
    import cocotb_tools.runner

    class Silent:
        def test(self, **_):
            pass
    monkeypatch.setattr(cocotb_tools.runner, "get_runner", lambda sim: Silent())
    with pytest.raises(AssertionError, match="no results from dstar_rtl.tb.test_pe on icarus"):
        run_cocotb("pe", preset("tiny"), "icarus", "dstar_rtl.tb.test_pe", seed=3)
    assert _verdict(tmp_path)["pass"] is False


@pytest.mark.cocotb
def test_real_run_missing_a_test_fails(monkeypatch):
    """A real Icarus run that passes its one test still fails when another was expected, and
    its verdict says so (then the run is removed: a failure on purpose is no run to report)."""
    monkeypatch.setattr(runner, "expected_tests", lambda m, t: ["cycles", "ghost"])
    run_dir = runner.unit_dir("mpu", preset("tiny")) / "runs" / "icarus-test_mpu-runner-1"
    try:
        with pytest.raises(AssertionError,
                           match="ran \\['cycles'\\], expected \\['cycles', 'ghost'\\]"):
            run_cocotb("mpu", preset("tiny"), "icarus", "dstar_rtl.tb.test_mpu",
                       testcase=["cycles"],
                       seed=1, tag="runner")
        v = json.loads((run_dir / runner.VERDICT).read_text())
        assert v["pass"] is False and v["passed"] == ["cycles"] and v["missing"] == ["ghost"]
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


# ------------------------------------------------------------------------------- build cache key

def test_cache_key_covers_the_golden_modules_elaboration_reads():
    files = {str(f.relative_to(ROOT / "dstar_rtl")) for f in elaboration_sources()}
    for f in ("golden/vpu.py", "golden/schedule.py", "golden/fmdq.py", "golden/sar.py",
              "golden/config.py", "golden/layouts.py", "golden/bitonic.py", "program/isa.py",
              "rtl/core.py", "gen/generate.py"):
        assert (ROOT / "dstar_rtl" / f).is_file(), f
        assert f in files, f


def test_cache_key_leaves_out_the_command_line_testbenches_and_flows():
    """The command line (``app/cli.py``, ``app/commands/*.py``) is not elaboration: a help
    string
    must not rebuild every model; nor are the testbenches or the FPGA flow. The files checked
    must exist, so that a move cannot leave this test checking nothing."""
    files = set(elaboration_sources())
    pkg = ROOT / "dstar_rtl"
    cli = [pkg / "app" / "cli.py", *sorted((pkg / "app" / "commands").glob("*.py"))]
    tbs = sorted((pkg / "tb").glob("*.py"))
    flows = sorted((pkg / "flows").glob("*.py"))
    assert cli[0].is_file() and len(cli) >= 5, cli
    assert len(tbs) >= 5 and len(flows) >= 3, (tbs, flows)
    assert not files & {*cli, *tbs, *flows}, sorted(files & {*cli, *tbs, *flows})
    # nothing from those packages at all, whatever is added to them later
    assert not [f for f in files if f.relative_to(pkg).parts[0] in ("app", "tb", "flows")]


def test_cache_key_follows_imports_inside_functions(tmp_path):
    top = tmp_path / "dstar_rtl"
    pkg = top / "rtl"
    pkg.mkdir(parents=True)
    (top / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .b import x\n"
                              "    from dstar_rtl.golden import c\n")
    (pkg / "b.py").write_text("x = 1\n")
    (top / "golden").mkdir()
    (top / "golden" / "__init__.py").write_text("")
    (top / "golden" / "c.py").write_text("import numpy\n")
    got = {str(f.relative_to(top)) for f in import_closure(["dstar_rtl.rtl.a"], tmp_path)}
    assert got == {"__init__.py", "rtl/__init__.py", "rtl/a.py", "rtl/b.py",
                   "golden/__init__.py", "golden/c.py"}
    before = digest(import_closure(["dstar_rtl.rtl.a"], tmp_path), tmp_path)
    (top / "golden" / "c.py").write_text("import numpy  # edited\n")
    assert digest(import_closure(["dstar_rtl.rtl.a"], tmp_path), tmp_path) != before


def test_cache_key_is_a_superset_of_what_elaboration_loads():
    """Elaborate the units that import the most (in a fresh interpreter) and compare the project
    modules it loaded with the key's files."""
    code = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "from dstar_rtl.golden.config import preset\n"
        "from dstar_rtl.gen.generate import to_rtlil\n"
        "for u in ('uart_core', 'vpu', 'pe'):\n"
        "    to_rtlil(u, preset('tiny'))\n"
        "print(json.dumps(sorted(m for m in set(sys.modules) - before)))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    from dstar_rtl.sim.sources import module_file
    loaded = {module_file(m) for m in json.loads(out.splitlines()[-1])} - {None}
    assert loaded and loaded <= set(elaboration_sources()), loaded - set(elaboration_sources())


# ------------------------------------------------------------------- tool versions in the keys

@pytest.fixture
def versions(monkeypatch):
    """Tool versions the runner reads, as a dict a test can change."""
    v = {"amaranth": "0.5.0", "yosys": "0.50", "cocotb": "2.0.0", "verilator": "5.040",
         "icarus": "Icarus Verilog version 12.0"}
    monkeypatch.setattr(runner, "read_version", lambda tool: v[tool], raising=False)
    return v


def test_verilog_is_regenerated_for_another_amaranth_or_yosys(tmp_path, monkeypatch, versions):
    made = []

    def generate(unit, cfg, path):
        made.append(unit)
        path.write_text("module dstar_pe; endmodule\n")
    monkeypatch.setattr(runner, "BUILD_ROOT", tmp_path)
    monkeypatch.setattr(runner, "generate", generate)
    cfg = preset("tiny")
    for _ in range(2):
        runner.ensure_verilog("pe", cfg)
    assert len(made) == 1                               # the same tools: kept
    versions["amaranth"] = "0.5.1"
    runner.ensure_verilog("pe", cfg)
    runner.ensure_verilog("pe", cfg)
    assert len(made) == 2
    versions["yosys"] = "0.51"
    runner.ensure_verilog("pe", cfg)
    assert len(made) == 3
    versions["verilator"] = versions["cocotb"] = "9"    # no part of the Verilog
    runner.ensure_verilog("pe", cfg)
    assert len(made) == 3


def test_a_model_is_rebuilt_for_another_simulator_or_cocotb(tmp_path, monkeypatch, versions):
    import cocotb_tools.runner

    built = []

    class Simulator:
        def build(self, **kw):
            built.append(kw["build_dir"])
    monkeypatch.setenv("PATH", os.environ["PATH"])     # build() puts the simulators in front
    v = tmp_path / "pe-tiny-x" / "dstar_pe.v"
    v.parent.mkdir()
    v.write_text("module dstar_pe; endmodule\n")
    monkeypatch.setattr(runner, "BUILD_ROOT", tmp_path)
    monkeypatch.setattr(runner, "ensure_verilog", lambda unit, cfg: v)
    monkeypatch.setattr(runner, "unit_dir", lambda unit, cfg: v.parent)
    monkeypatch.setattr(cocotb_tools.runner, "get_runner", lambda sim: Simulator())
    cfg = preset("tiny")
    for _ in range(2):
        runner.build("pe", cfg, "icarus")
    assert len(built) == 1                              # the same tools: kept
    versions["icarus"] = "Icarus Verilog version 12.1"
    runner.build("pe", cfg, "icarus")
    runner.build("pe", cfg, "icarus")
    assert len(built) == 2
    versions["cocotb"] = "2.0.1"
    runner.build("pe", cfg, "icarus")
    assert len(built) == 3
    versions["verilator"] = "5.042"                     # another simulator's
    runner.build("pe", cfg, "icarus")
    assert len(built) == 3


def test_keys_are_stable_for_the_same_versions_and_change_with_any(tmp_path, versions):
    v = tmp_path / "x.v"
    v.write_text("module x; endmodule\n")

    def keys():
        return (runner.verilog_key(), runner.build_recipe(v, "verilator"),
                runner.build_recipe(v, "icarus"),
                runner.run_key(runner.run_identity("pe", "h", "icarus", "dstar_rtl.tb.test_pe")))
    first = keys()
    assert keys() == first
    for tool, changes in (("amaranth", (1, 0, 0, 1)), ("yosys", (1, 0, 0, 1)),
                          ("cocotb", (0, 1, 1, 1)), ("verilator", (0, 1, 0, 0)),
                          ("icarus", (0, 0, 1, 1))):
        before = keys()
        versions[tool] += "+1"
        after = keys()
        assert tuple(int(a != b) for a, b in zip(before, after)) == changes, tool


def test_versions_are_read_once_per_process(monkeypatch):
    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout="Tool 9.99\n", stderr="")
    runner.read_version.cache_clear()
    try:
        monkeypatch.setattr(runner.subprocess, "run", run)
        for _ in range(3):
            assert runner.read_version("icarus") == "Tool 9.99"
            assert runner.read_version("verilator").endswith("(Tool 9.99)")
        assert calls == [["iverilog", "-V"], ["verilator", "--version"]]
    finally:
        runner.read_version.cache_clear()
    import amaranth
    assert runner.read_version("amaranth") == amaranth.__version__
    with pytest.raises(ValueError, match="tool must be one of"):
        runner.read_version("gcc")
