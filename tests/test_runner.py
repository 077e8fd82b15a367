"""The cocotb runner cannot pass by accident: a run passes only when every expected test ran and
passed and the simulator exited cleanly, and the build cache is keyed on every file elaboration
loads."""

import json
import subprocess
import sys

import pytest

from golden.config import preset
from sim import runner
from sim.runner import check_results, expected_tests, run_cocotb
from sim.sources import ROOT, digest, elaboration_sources, import_closure


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
    names = expected_tests("tb.test_mpu")
    assert names[:4] == ["random_tiles", "every_exponent", "arbitrary_groups", "cycles"]
    assert len(set(names)) == len(names)
    assert expected_tests("tb.test_mpu", ["cycles"]) == ["cycles"]
    with pytest.raises(ValueError, match="testcase \\['no_such_test'\\] not in tb.test_mpu"):
        expected_tests("tb.test_mpu", ["no_such_test"])


def test_unknown_testcase_is_refused_before_any_build(monkeypatch):
    monkeypatch.setattr(runner, "build", lambda *a, **k: pytest.fail("built anyway"))
    with pytest.raises(ValueError, match="no_such_test"):
        run_cocotb("mpu", preset("tiny"), "icarus", "tb.test_mpu", testcase=["no_such_test"])


@pytest.mark.cocotb
def test_real_run_missing_a_test_fails(monkeypatch):
    """A real Icarus run that passes its one test still fails when another was expected."""
    monkeypatch.setattr(runner, "expected_tests", lambda m, t: ["cycles", "ghost"])
    with pytest.raises(AssertionError,
                       match="ran \\['cycles'\\], expected \\['cycles', 'ghost'\\]"):
        run_cocotb("mpu", preset("tiny"), "icarus", "tb.test_mpu", testcase=["cycles"], seed=1,
                   tag="runner")


# ------------------------------------------------------------------------------- build cache key

def test_cache_key_covers_the_golden_modules_elaboration_reads():
    files = {str(f.relative_to(ROOT)) for f in elaboration_sources()}
    for f in ("golden/vpu.py", "golden/schedule.py", "golden/fmdq.py", "golden/sar.py",
              "golden/config.py", "golden/layouts.py", "golden/bitonic.py", "golden/core_isa.py",
              "rtl/core.py", "gen/generate.py"):
        assert f in files, f
    # the command line is not elaboration: a help string must not rebuild every model
    assert not any(f.startswith(("gen/cmd_", "gen/cli", "tb/", "fpga/")) for f in files)


def test_cache_key_follows_imports_inside_functions(tmp_path):
    pkg = tmp_path / "rtl"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .b import x\n    from golden import c\n")
    (pkg / "b.py").write_text("x = 1\n")
    (tmp_path / "golden").mkdir()
    (tmp_path / "golden" / "__init__.py").write_text("")
    (tmp_path / "golden" / "c.py").write_text("import numpy\n")
    got = {str(f.relative_to(tmp_path)) for f in import_closure(["rtl.a"], tmp_path)}
    assert got == {"rtl/__init__.py", "rtl/a.py", "rtl/b.py", "golden/__init__.py",
                   "golden/c.py"}
    before = digest(import_closure(["rtl.a"], tmp_path), tmp_path)
    (tmp_path / "golden" / "c.py").write_text("import numpy  # edited\n")
    assert digest(import_closure(["rtl.a"], tmp_path), tmp_path) != before


def test_cache_key_is_a_superset_of_what_elaboration_loads():
    """Elaborate the units that import the most (in a fresh interpreter) and compare the project
    modules it loaded with the key's files."""
    code = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "from golden.config import preset\n"
        "from gen.generate import to_rtlil\n"
        "for u in ('uart_core', 'vpu', 'pe'):\n"
        "    to_rtlil(u, preset('tiny'))\n"
        "print(json.dumps(sorted(m for m in set(sys.modules) - before)))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    from sim.sources import module_file
    loaded = {module_file(m) for m in json.loads(out.splitlines()[-1])} - {None}
    assert loaded and loaded <= set(elaboration_sources()), loaded - set(elaboration_sources())
