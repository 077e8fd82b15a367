"""The experiments behind ``reports/`` and what each one depends on: the registry that knows
what is stale (issue 48).

Each :class:`Experiment` names the commands that measure it (as ``make reports`` runs them),
the result files they write, the experiments whose results it reads (``needs``), and its code:
the project modules its commands import (their import closure, :func:`sim.sources.
import_closure`), with the RTL's elaboration sources and the testbenches when it elaborates,
simulates or synthesizes the RTL, and the tools' versions. A run through the registry
(``dstar measure --all`` or ``--stale``) records each experiment's fingerprint of that code and
a sequence number in ``reports/ledger.json``. An experiment is **stale** when it was never
recorded, when its fingerprint differs from today's (its code, the RTL, a tool or the trained
weights changed), or when an experiment it needs ran after it or is stale itself; rerunning
the stale ones in registry order brings every result back to current.

:data:`EXPERIMENTS` is in the order ``make reports`` runs them (every ``needs`` before its
user), which is the order ``--all`` and ``--stale`` run them.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import data_json, json_text, write_together
from dstar_rtl.gen.paths import ROOT
from dstar_rtl.gen.progress import say

__all__ = ["MEASUREMENTS", "Experiment", "run_provenance", "EXPERIMENTS", "LEDGER", "fingerprint",
           "stale", "run_experiments", "run_experiments_report", "order", "read_ledger", "REPORT"]

#: ``dstar measure NAME``: name → (module, what it writes). Each module has a ``MEASUREMENT``
#: (:class:`app.measurement.Measurement`) or, until converted, its own ``main(argv, prog)``.
MEASUREMENTS = {
    "arrays": ("dstar_rtl.app.reports.arrays",
               "reports/arrays.*: MPU and INT8 array area, Fmax and simulation speed"),
    "qpu-rate": ("dstar_rtl.app.benches.qpu",
                 "reports/qpu_rate.*: QPU groups per cycle and MPU waits"),
    "qpu-area": ("dstar_rtl.app.reports.qpu",
                 "reports/qpu_area.*: the QPU's area by part (and the rate)"),
    "vpu": ("dstar_rtl.app.reports.vpu", "reports/vpu.*: VPU cycles, accuracy, resources and Fmax"),
    "core": ("dstar_rtl.app.reports.core", "reports/core.*: the core's cycles on a DiT block"),
    "core-area": ("dstar_rtl.app.reports.core_area",
                  "reports/core_area.*: the core's ECP5 area by part"),
    "asic": ("dstar_rtl.app.reports.asic", "reports/asic_area.*: standard-cell area (Nangate45)"),
    "pe-levers": ("dstar_rtl.app.reports.pe_levers",
                  "reports/pe_levers.*: the slice PE's levers alone"),
    "packing": ("dstar_rtl.app.reports.packing",
                "reports/qpu_packing.*: open groups, lane utilization against QPU area"),
    "sizes": ("dstar_rtl.app.benches.sizes", "reports/sweep.*: array resources against size"),
    "perf": ("dstar_rtl.app.benches.perf_validate",
             "reports/perf_model.*: the core's cycle model calibrated and validated on the RTL"),
    "state-quality": ("dstar_rtl.app.reports.state_quality",
                      "reports/state_quality.*: the stored Y's cost in quality (IntDiT)"),
    "projection": ("dstar_rtl.app.reports.projection",
                   "reports/projection.*: the paper-scale projection"),
    "compare": ("dstar_rtl.app.reports.compare",
                "reports/compare.*: the whole DSTAR core against the whole INT8 core"),
    "reference": ("dstar_rtl.app.reports.reference",
                  "reports/reference.*: the reference DiT family compiled on fpga and paper"),
    "pe-area": ("dstar_rtl.app.reports.pe_area",
                "reports/pe_area.*: the DSTAR and INT8 PEs in standard cells, lever by lever"),
    "bench": ("dstar_rtl.app.benches.layers",
              "reports/bench.*: the MPU against the INT8 array on a DiT's layers (RTL cycles)"),
    "power": ("dstar_rtl.app.reports.power",
              "reports/energy.*: gate-level energy per MAC, per image and of the paper chip"),
    "design-sweep": ("dstar_rtl.app.sweeps.measure",
                     "reports/design_sweep.*: the design-space sweep, per µm² against size"),
    "verification": ("dstar_rtl.app.reports.verification",
                     "reports/verification.json: the cocotb regression's verdicts (build/sim)"),
    "estimate": ("dstar_rtl.app.benches.estimate_calibration",
                 "flows/estimate_calibration.json: the estimate model's fit (--calibrate|--refit)"),
}


#: The registry's record of the last run of each experiment, beside the results it describes.
LEDGER = ROOT / "reports" / "ledger.json"

#: The trained weights: an input of every experiment whose code loads them.
WEIGHTS = ("dstar_rtl/models/data",)


#: Modules in every typed measurement's import closure that measure nothing: the registry
#: (what of it makes an experiment, its commands, is hashed on its own, and another
#: experiment's entry is not an input of this one), and the results' format and the runner,
#: which write and read a result without making its figures. A change to them is checked
#: without measuring again: every stored result is loaded as its type and renders as
#: committed (``dstar render --all --check``, tests/test_render.py, tests/test_results.py).
NOT_MEASURING = ("dstar_rtl/app/experiments.py", "dstar_rtl/results/base.py",
                 "dstar_rtl/app/measurement.py")


@dataclass(frozen=True)
class Experiment:
    """One measurement: ``commands`` (argument lists; ``dstar`` runs this interpreter's
    ``dstar``, ``make`` the checkout's Makefile), the result files it writes (``outputs``,
    relative to the checkout), the experiments whose results it reads (``needs``), its code
    (``modules``) and whether it elaborates the RTL (``rtl``: the elaboration sources, the
    testbenches and the simulators' and Yosys's versions count too)."""

    name: str
    commands: tuple
    outputs: tuple
    needs: tuple = ()
    modules: tuple = ()
    rtl: bool = True


def _measure(name: str, *opts: str, needs=(), rtl=True) -> Experiment:
    """``dstar measure name opts``: its result is the JSON :data:`MEASUREMENTS` names."""
    stem = MEASUREMENTS[name][1].split(":")[0].split("/")[-1].split(".")[0]
    return Experiment(name, (("dstar", "measure", name, *opts),), (f"reports/{stem}.json",),
                      tuple(needs), (MEASUREMENTS[name][0],), rtl)


_BENCH = ("--preset", "fpga", "--weights", "trained", "--seed", "0", "--steps", "20",
          "--steps-run", "all", "--block", "0", "--operating-point",
          "reports/profile_sweep.json", "--simulator", "verilator")


def _registry() -> dict:
    exps = [
        _measure("arrays", "--pnr-baseline"),        # both arrays' Fmax, side by side
        _measure("qpu-rate"),
        _measure("qpu-area", needs=("qpu-rate",)),
        _measure("vpu"),
        _measure("core"),
        _measure("core-area"),
        _measure("asic"),
        _measure("pe-levers", "--mpu", "--reuse"),
        _measure("sizes", "--reuse"),
        Experiment("profile", (("dstar", "profile"),), ("reports/profile.json",),
                   modules=("dstar_rtl.app.commands.profile",), rtl=False),
        Experiment("profile-sweep", (("dstar", "profile", "--sweep", "--seeds", "10",
                                      "--jobs", "2"),), ("reports/profile_sweep.json",),
                   modules=("dstar_rtl.app.commands.profile",), rtl=False),
        _measure("packing", "--reuse", needs=("profile-sweep",)),
        _measure("bench", *_BENCH, "--fmax", needs=("profile-sweep", "sizes")),
        Experiment("bench-acc26", (("dstar", "measure", "bench", *_BENCH, "--set", "acc_width=26",
                                    "--set", "overflow_detect=True", "--out",
                                    "reports/bench-acc26"),),
                   ("reports/bench-acc26/bench.json",), ("profile-sweep", "sizes"),
                   ("dstar_rtl.app.benches.layers",)),
        _measure("design-sweep", "--reuse", "--jobs", "2", needs=("asic", "bench")),
        _measure("perf"),
        _measure("state-quality", "--jobs", "2", needs=("profile-sweep",), rtl=False),
        _measure("compare", "--reuse", "--jobs", "2",
                 needs=("perf", "profile", "profile-sweep", "bench")),
        _measure("projection", needs=("perf", "profile", "profile-sweep", "bench", "compare"),
                 rtl=False),
        _measure("pe-area", "--reuse", needs=("bench", "compare")),
        _measure("reference"),
        # dstar power writes the paper chip from the projection; the projection then takes its
        # energy per image from the energy.json just measured.
        Experiment("power", (("dstar", "power"), ("dstar", "measure", "projection")),
                   ("reports/energy.json", "reports/projection.json"), ("compare", "projection"),
                   ("dstar_rtl.app.reports.power", "dstar_rtl.app.reports.projection")),
        Experiment("dit-int", (("dstar", "dit-int", "--model", "small", "--steps", "8", "--seed",
                                "0", "--preset", "tiny", "--preset", "fpga", "--sar", "both",
                                "--json", "reports/dit_int.json", "--md",
                                "reports/dit_int.md"),), ("reports/dit_int.json",),
                   modules=("dstar_rtl.app.commands.dit_int",), rtl=False),
        Experiment("sample", (("dstar", "sample", "--backend", "verilator", "--preset", "fpga",
                               "--fit-buffers", "--steps", "10", "--jobs", "2", "--out",
                               "reports"),), ("reports/sample.json",),
                   modules=("dstar_rtl.app.commands.sample",)),
        Experiment("board", (("dstar", "build", "--board", "ulx3s", "--preset", "tiny"),),
                   ("reports/board-ulx3s-tiny.json",), modules=("dstar_rtl.app.commands.build",)),
        Experiment("verification", (("make", "test"), ("dstar", "measure", "verification")),
                   ("reports/verification.json",), modules=("dstar_rtl.app.reports.verification",)),
    ]
    return {e.name: e for e in exps}


EXPERIMENTS = _registry()


def order(names) -> list:
    """``names`` in registry order."""
    want = set(names)
    return [n for n in EXPERIMENTS if n in want]


@lru_cache(maxsize=None)
def _code_files(modules: tuple, rtl: bool) -> tuple:
    from dstar_rtl.sim.sources import elaboration_sources, import_closure
    files = set(import_closure(modules)) - {ROOT / f for f in NOT_MEASURING}
    if rtl:
        files |= set(elaboration_sources()) | set((ROOT / "dstar_rtl" / "tb").glob("*.py"))
    if any(f.name == "digits.py" and f.parent.name == "models" for f in files):
        for d in WEIGHTS:
            files |= {p for p in (ROOT / d).glob("*") if p.is_file()}
    return tuple(sorted(files))


@lru_cache(maxsize=None)
def tool_versions(rtl: bool) -> tuple:
    """``((tool, version), ...)`` of the tools an experiment's results depend on: Amaranth, and
    Yosys, cocotb and both simulators when it elaborates the RTL (``rtl``)."""
    return _tools(rtl)


@lru_cache(maxsize=None)
def _tools(rtl: bool) -> tuple:
    from dstar_rtl.sim.runner import read_version
    names = ("amaranth", "yosys", "cocotb", "verilator", "icarus") if rtl else ("amaranth",)
    return tuple((t, read_version(t)) for t in names)


@lru_cache(maxsize=None)
def _code_digest(modules: tuple, rtl: bool) -> str:
    from dstar_rtl.sim.sources import digest
    return digest(_code_files(modules, rtl))


def fingerprint(e: Experiment) -> str:
    """SHA-256 of what ``e`` is made of today: its code files (paths and contents, read once
    per process), its commands and the tools' versions."""
    h = hashlib.sha256(_code_digest(e.modules, e.rtl).encode())
    h.update(data_json([list(c) for c in e.commands]).encode())
    h.update(data_json(_tools(e.rtl)).encode())
    return h.hexdigest()


def read_ledger(path: Path = LEDGER) -> dict:
    """``{name: {"fingerprint", "ran", "seq"}}`` (empty when there is none)."""
    if not path.is_file():
        return {}
    try:
        led = json.loads(path.read_text())
        return led["experiments"] if isinstance(led.get("experiments"), dict) else {}
    except (OSError, ValueError, AttributeError):
        raise UserError(f"{path} is not a ledger of `dstar measure` (delete it to start "
                        f"again)") from None


def stale(ledger: dict | None = None, prints: dict | None = None, root: Path = ROOT) -> dict:
    """``{name: [reasons]}`` of every stale experiment, in registry order (module docstring).
    ``prints``: today's fingerprints by name (computed when not given); ``root``: where the
    outputs are looked for (the checkout)."""
    led = read_ledger() if ledger is None else ledger
    prints = prints if prints is not None else {n: fingerprint(e)
                                                for n, e in EXPERIMENTS.items()}
    out: dict = {}
    for name, e in EXPERIMENTS.items():
        rec, why = led.get(name), []
        if rec is None:
            why.append("never run through the registry (`dstar measure --all/--stale/--only`)")
        else:
            if rec.get("fingerprint") != prints[name]:
                why.append("its code, the RTL, a tool or the weights changed")
            missing = [o for o in e.outputs if not (root / o).is_file()]
            if missing:
                why.append(f"{', '.join(missing)} missing")
        for n in e.needs:
            if n in out:
                why.append(f"needs {n}, which is stale")
            elif rec is not None and led.get(n, {}).get("seq", -1) > rec.get("seq", -1):
                why.append(f"needs {n}, which ran after it")
        if why:
            out[name] = why
    return out


def _argv(cmd: tuple) -> list:
    if cmd[0] == "dstar":
        return [sys.executable, "-c", "import sys; from dstar_rtl.app.cli import main; "
                "sys.exit(main(sys.argv[1:]))", *cmd[1:]]
    return list(cmd)


def run_experiments(names, ledger_path: Path = LEDGER, runner=subprocess.run) -> int:
    """Run ``names`` in registry order, each command in a process of its own from the
    checkout; after each experiment whose commands all succeed, record in the ledger (written
    at once) its fingerprint as the run started. Stops at the first failure: one line,
    status 1."""
    for name in order(names):
        e = EXPERIMENTS[name]
        # The code as the run starts: an edit during the run leaves the experiment stale.
        print_ = fingerprint(e)
        for cmd in e.commands:
            say(f"[measure] {name}: {shlex.join(cmd)}")
            t0 = time.perf_counter()
            rc = runner(_argv(cmd), cwd=ROOT).returncode
            if rc != 0:
                raise SystemExit(_fail(f"{name}: `{shlex.join(cmd)}` exited with {rc}"))
            say(f"[measure] {name}: done in {time.perf_counter() - t0:.0f} s")
        _record(ledger_path, name, print_)
    return 0


def _record(ledger_path: Path, name: str, print_: str):
    """Add ``name``'s run to the ledger, read again under a lock at the moment of writing (two
    registry runs at once each keep the other's records)."""
    from dstar_rtl.gen.paths import BUILD
    from dstar_rtl.sim.runner import _locked
    with _locked(BUILD / "ledger.lock"):
        led = read_ledger(ledger_path)
        seq = max((r.get("seq", 0) for r in led.values()), default=0) + 1
        led[name] = dict(fingerprint=print_, seq=seq,
                         ran=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        write_together({ledger_path: json_text(dict(experiments=led))})


#: What renders REPORT.md after a registry run.
REPORT = ("dstar", "report")


def run_experiments_report(runner=subprocess.run) -> int:
    """``dstar report`` after a registry run (REPORT.md from the results just made)."""
    say(f"[measure] {shlex.join(REPORT)}")
    rc = runner(_argv(REPORT), cwd=ROOT).returncode
    if rc != 0:
        raise SystemExit(_fail(f"`dstar report` exited with {rc}"))
    return 0


def _fail(msg: str) -> int:
    print(f"dstar measure: {msg}", file=sys.stderr)
    return 1


def run_provenance(experiment: str | None = None, configs: dict | None = None):
    """This run's :class:`~results.base.Provenance`: the recorded command line, today's date,
    the registry's fingerprint and tool versions of ``experiment`` (when it is one of the
    registry's), the configurations' hashes ``configs``."""
    from dstar_rtl.gen.outputs import command_line
    from dstar_rtl.results.base import Provenance, now

    code, tools = None, {}
    e = EXPERIMENTS.get(experiment) if experiment is not None else None
    if e is not None:
        code = fingerprint(e)
        tools = dict(tool_versions(e.rtl))
    return Provenance(command=command_line(), date=now(), code=code, tools=tools,
                      configs=dict(configs or {}))
