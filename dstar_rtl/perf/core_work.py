"""What each command of a core program does, from the ISA executor: the input of the performance
model (:mod:`perf.perf_model`).

:func:`trace_work` runs programs on :class:`program.executor.CoreExecutor` and records, for every
command in the stream, its decoded form and the event counters it added (groups written or
replayed, VPU rows and beats, buffer rows, host words). Group counts come from the golden
schedule on the actual data, so a layer's work is exact, not estimated. Commands discarded by
SKIP are recorded as ``skipped`` (the dispatcher still takes them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dstar_rtl.golden.config import Config
from dstar_rtl.program.executor import CoreExecutor
from dstar_rtl.program.isa import COUNTERS, ENGINE, Cmd, CoreConfig

__all__ = ["Work", "trace_work"]


@dataclass
class Work:
    """One command of the stream: ``op``, its fields, semaphore masks, ``engine`` (``H``, ``Q``,
    ``M``, ``V`` or ``-`` for the dispatcher's own), ``skipped`` and the counter deltas ``ev``
    (event counters only; 0 entries left out), and for a QUANT through the exponent bins
    ``packer_cycles``, the cycles the bins take its tile
    (:func:`golden.schedule.bin_cycles`)."""

    op: str
    args: dict
    wait: int = 0
    signal: int = 0
    skipped: bool = False
    ev: dict = field(default_factory=dict)
    packer_cycles: int | None = None

    @property
    def engine(self) -> str:
        """The engine that runs it; VPARAM, like NOP/END/BARRIER/STEP/SKIP, executes in the
        dispatcher (``-``), although the instruction set files it under V."""
        return "-" if self.op == "VPARAM" else ENGINE.get(self.op, "-")

    def n(self, name: str) -> int:
        return self.ev.get(name, 0)


class _Recorder(CoreExecutor):
    """The executor with a hook on issue: the counter deltas of each command."""

    def _issue(self, cmd: Cmd, out: list):
        before = dict(self.counters)
        self.packer_cycles = None
        super()._issue(cmd, out)
        ev = {k: self.counters[k] - before[k] for k in COUNTERS if self.counters[k] != before[k]}
        ev.pop("commands", None)
        self.log[self._index] = Work(cmd.op, dict(cmd.args), cmd.wait, cmd.signal, False, ev,
                                     self.packer_cycles if cmd.op == "QUANT" else None)


def trace_work(cfg: Config, core: CoreConfig, runs, outputs: list | None = None) -> list:
    """Execute ``runs`` (a list of ``(commands, host words)``, one executor state carried
    through) and return one list of :class:`Work` per run, one entry per command in the stream;
    each run's stored words are appended to ``outputs`` when given. Raises
    :class:`program.executor.CoreError` when a program is wrong."""
    ex = _Recorder(cfg, core)
    result = []
    for cmds, host in runs:
        ex.log = {}
        words = ex.run(cmds, host)
        if outputs is not None:
            outputs.append(words)
        ops = [c if isinstance(c, Cmd) else None for c in cmds]
        run = []
        for i, c in enumerate(cmds):
            if i in ex.log:
                run.append(ex.log[i])
            else:
                op = ops[i].op if ops[i] is not None else "?"
                run.append(Work(op, dict(ops[i].args) if ops[i] is not None else {},
                                skipped=True))
        result.append(run)
    return result
