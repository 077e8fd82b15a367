"""Run core programs on the generated core (cocotb, ``tb/test_core_programs.py``) and read back
their counters: the RTL side of the performance model's calibration and validation.

A :class:`Program` is a list of runs ``(commands, host words)`` from a reset core. The expected
stored words come from the ISA executor, and the testbench checks every one of them (the cycle
counters of a ``STORE CNT`` excepted), so a measured figure always belongs to a correct run.
:data:`CNT` is a counter read (``STORE CNT``); :func:`counter_reads` picks those reads out of
the stored words.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.golden.config import Config
from dstar_rtl.perf.core_work import trace_work
from dstar_rtl.program.isa import (
    BUFFERS,
    COUNTERS,
    CYCLE_COUNTERS,
    Cmd,
    CoreConfig,
    encode,
    host_words_per_row,
    store_counters,
)
from dstar_rtl.sim.runner import run_cocotb

__all__ = ["Program", "CNT", "END", "run_programs", "counter_reads"]

CNT = store_counters()
END = Cmd("END", {})


@dataclass
class Program:
    """``runs``: ``[(commands, host words)]`` from a reset core, each ending with END."""

    name: str
    runs: list = field(default_factory=list)


def _stores(cfg: Config, cmds, skipped=()) -> list:
    """``(buf, words)`` of every STORE of ``cmds`` in order, leaving out the command indices in
    ``skipped`` (discarded by a SKIP)."""
    out = []
    for i, c in enumerate(cmds):
        if c.op == "STORE" and i not in skipped:
            buf = BUFFERS[c.args["buf"]]
            out.append((buf, c.args["count"] * host_words_per_row(cfg, buf)))
    return out


def counter_reads(cfg: Config, cmds, words, skipped=()) -> list:
    """The ``STORE CNT`` reads of one run as dicts ``{counter: value}``, in program order
    (``skipped``: indices of commands a SKIP discarded, see :func:`perf.core_work.trace_work`)."""
    reads, pos = [], 0
    for buf, n in _stores(cfg, cmds, skipped):
        if buf == "CNT":
            reads.append(dict(zip(COUNTERS, words[pos:pos + n])))
        pos += n
    return reads


def _job(cfg: Config, core: CoreConfig, prog: Program) -> dict:
    outs = []
    works = trace_work(cfg, core, prog.runs, outs)
    runs = []
    for (cmds, host), expect, work in zip(prog.runs, outs, works):
        skipped = {i for i, w in enumerate(work) if w.skipped}
        ignore, pos = [], 0
        for buf, n in _stores(cfg, cmds, skipped):
            if buf == "CNT":
                ignore += [pos + COUNTERS.index(k) for k in CYCLE_COUNTERS]
            pos += n
        runs.append(dict(cmds=[encode(cfg, c) for c in cmds], host=[int(w) for w in host],
                         expect=[int(w) for w in expect], ignore=ignore))
    return dict(name=prog.name, runs=runs)


def run_programs(cfg: Config, core: CoreConfig, programs: list, simulator: str = "verilator",
                 tag: str = "programs", optimize: bool = False) -> dict:
    """Run ``programs`` on the generated core under ``simulator`` (``optimize``: Verilator's
    optimised build, slower to compile, several times faster to run); returns ``{name: [stored
    words of each run]}``. Raises AssertionError when a stored word differs from the executor."""
    names = [p.name for p in programs]
    if len(set(names)) != len(names):
        raise ValueError(f"program names must be unique: {names}")
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "programs.json", Path(d) / "out.json"
        src.write_text(data_json([_job(cfg, core, p) for p in programs]))
        env = {"DSTAR_PROGRAMS": str(src), "DSTAR_PROGRAMS_OUT": str(out)}
        run_cocotb("core", cfg, simulator, "dstar_rtl.tb.test_core_programs", seed=1, tag=tag,
                   optimize=optimize, extra_env=env)
        return json.loads(out.read_text())
