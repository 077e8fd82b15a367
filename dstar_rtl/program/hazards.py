"""A program's data hazards under the core's concurrency rules, without the RTL.

The ISA executor runs every command alone, so it cannot see a program that is only right when
its commands do not overlap. The core overlaps Q, M and D commands, and a VROW with ``overlap``
runs beside both (program/isa.py); a program is safe only if every pair of commands that may run
at the same time touches disjoint buffer rows, or only reads them. This module checks that, for
any timing.

**What each command touches** is recorded by running the program on the executor with its
buffers behind recording proxies (:class:`_Rec`): the rows of ABUF, XBUF, YBUF, WMEM, GMEM,
VBUF, RBUF and MASK each command reads and writes (a DLOAD or DSTORE too: DRAM itself is the
D engine's alone, whose commands run in order), and SREG and RMAX as one-row buffers (a VROW
reads RMAX when it issues: the vector engine keeps a copy).

**What may overlap** follows from the dispatcher's rules, as a happens-before relation kept as a
vector of per-engine command counts (``known[e] = k``: the first ``k`` commands of engine ``e``
have completed). A command issues after the one before it in the stream; H, a VROW without
``overlap``, BARRIER and END issue once every earlier command has completed, and nothing issues
while H or such a VROW runs; the dispatcher's own commands wait for V; Q, V and H take one
command at a time (D queues its commands and runs them in order, so a transfer issues while
the one before it runs, like a GEMM); a wait on a semaphore is met by its signals, which gives
an order where it is decidable (the first ``k`` signals of one in-order engine, or all of them
when exactly ``k`` precede it; counted from the last command that ran alone when every signal
before it had been taken). M's completions are in order, but a GEMM issues while the one
before it drains, and two GEMMs are never checked against each other (the engine's own
pipeline orders its drain writes and the next replay's reads of GMEM and WMEM, which M never
writes).

:func:`hazards` returns every conflicting pair; :func:`check_program` raises on the first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dstar_rtl.golden.config import Config

from .executor import CoreExecutor
from .isa import SEMAPHORES, Cmd, CoreConfig, decode

__all__ = ["Access", "Hazard", "accesses", "hazards", "check_program"]

#: Executor attributes recorded, with the buffer name they are reported under.
_BUFFERS = {"abuf": "ABUF", "xbuf": "XBUF", "ybuf": "YBUF", "vbuf": "VBUF", "wmem": "WMEM",
            "gmem": "GMEM", "mask": "MASK", "sreg": "SREG", "rmax": "RMAX"}
_ONE_ROW = ("SREG", "RMAX")      # registers: any access is to "row 0"


@dataclass
class Access:
    """One command: its index in the stream, ``op``, engine, and the rows it read and wrote
    (``{buffer: set of rows}``)."""

    index: int
    cmd: Cmd
    engine: str
    reads: dict = field(default_factory=dict)
    writes: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Hazard:
    """Two commands that may run at the same time and touch the same rows, one writing."""

    first: int
    second: int
    kind: str           # "RAW", "WAR" or "WAW" (the second command's access to the first's)
    buffer: str
    rows: tuple         # a few of the rows in common

    def __str__(self):
        return (f"{self.kind} on {self.buffer} rows {list(self.rows)}: command {self.first} and "
                f"command {self.second} may run at the same time")


def _rows(idx, length: int) -> set:
    """The first-axis rows an index selects (an int, a slice, an array, or a tuple of them)."""
    if isinstance(idx, tuple):
        idx = idx[0]
    if isinstance(idx, slice):
        return set(range(*idx.indices(length)))
    if isinstance(idx, (int, np.integer)):
        return {int(idx) % length}
    return {int(v) % length for v in np.asarray(idx).reshape(-1)}


class _Rec:
    """A buffer (an array or a list) behind a proxy that logs the rows of every read and write
    into ``log`` (``{"r"|"w": {buffer: rows}}``), then hands back plain values."""

    def __init__(self, inner, name: str, log: dict):
        self._inner, self._name, self._log = inner, name, log

    def _note(self, kind, idx):
        rows = {0} if self._name in _ONE_ROW else _rows(idx, len(self._inner))
        self._log[kind].setdefault(self._name, set()).update(rows)

    def __getitem__(self, idx):
        self._note("r", idx)
        return self._inner[idx]

    def __setitem__(self, idx, value):
        self._note("w", idx)
        self._inner[idx] = value

    def __len__(self):
        return len(self._inner)

    def __iter__(self):
        self._log["r"].setdefault(self._name, set()).update(range(len(self._inner)))
        return iter(self._inner)

    def __array__(self, dtype=None, copy=None):   # the whole buffer as an operand: a read
        self._log["r"].setdefault(self._name, set()).update(range(len(self._inner)))
        return np.asarray(self._inner, dtype=dtype)

    def __getattr__(self, name):          # copy(), shape, ...: not accesses of a command
        return getattr(self._inner, name)


class _Recorder(CoreExecutor):
    """The executor with its buffers behind :class:`_Rec` proxies and a hook on issue."""

    def reset(self):
        super().reset()
        self._log = {"r": {}, "w": {}}
        for attr, name in _BUFFERS.items():
            object.__setattr__(self, attr, _Rec(getattr(self, attr), name, self._log))
        self.rbuf = {k: _Rec(v, "RBUF", self._log) for k, v in self.rbuf.items()}

    def __setattr__(self, attr, value):
        # A command that replaces a whole register (RMAX) writes it.
        if attr in _BUFFERS and getattr(self, "_log", None) is not None \
                and not isinstance(value, _Rec):
            self._log["w"].setdefault(_BUFFERS[attr], set()).add(0)
            value = _Rec(value, _BUFFERS[attr], self._log)
        object.__setattr__(self, attr, value)

    def _issue(self, cmd: Cmd, out: list):
        self._log["r"].clear()
        self._log["w"].clear()
        super()._issue(cmd, out)
        eng = _engine(cmd)
        self.trace[self._index] = Access(self._index, cmd, eng,
                                         {k: set(v) for k, v in self._log["r"].items()},
                                         {k: set(v) for k, v in self._log["w"].items()})


def _engine(cmd: Cmd) -> str:
    """``H``, ``Q``, ``M``, ``V`` (a VROW with ``overlap``: ``V+``), ``D`` or ``-`` (the
    dispatcher's)."""
    if cmd.op in ("LOAD", "STORE"):
        return "H"
    if cmd.op in ("DLOAD", "DSTORE"):
        return "D"
    if cmd.op in ("QCFG", "QUANT"):
        return "Q"
    if cmd.op == "GEMM":
        return "M"
    if cmd.op == "VROW":
        return "V+" if cmd.args.get("overlap") else "V"
    return "-"


def accesses(cfg: Config, core: CoreConfig, runs) -> list:
    """Run ``runs`` (a list of ``(commands, host words)``, one executor state carried through,
    as :func:`perf.core_work.trace_work`) and return, per run, the :class:`Access` of every
    command that ran (SKIP'd ones left out), in stream order."""
    ex = _Recorder(cfg, core)
    out = []
    for cmds, host in runs:
        ex.trace = {}
        ex.run(cmds, host)
        out.append([ex.trace[i] for i in sorted(ex.trace)])
    return out


_ENG = ("H", "Q", "M", "V", "D", "-")


def _key(e: str) -> str:
    return "V" if e == "V+" else e


def hazards(cfg: Config, core: CoreConfig, runs) -> list:
    """Every pair of commands that may run at the same time under the core's rules and touch a
    common row, one of them writing (module docstring), over ``runs`` as :func:`accesses`
    takes them: a list of ``(run index, Hazard)``, the commands numbered within their run."""
    return [(r, h) for r, acc in enumerate(accesses(cfg, core, runs)) for h in _run_hazards(acc)]


def _run_hazards(acc: list) -> list:
    """The hazards of one run's :class:`Access` list (every run ends idle: END)."""
    count = dict.fromkeys(_ENG, 0)       # commands of each engine so far
    seq = []                             # per command: its number on its engine (1-based)
    issue, done = [], []                 # the vectors known at issue and at completion
    last = {}                            # engine -> index into acc of its latest command
    blocker = None                       # the latest H / plain VROW before the command
    sigs = {s: [] for s in range(SEMAPHORES)}
    waits = dict.fromkeys(range(SEMAPHORES), 0)
    for i, a in enumerate(acc):
        e = _key(a.engine)
        known = dict(issue[-1]) if issue else dict.fromkeys(_ENG, 0)

        def join(v):
            for k in _ENG:
                known[k] = max(known[k], v[k])

        alone = a.engine in ("H", "V") or a.cmd.op in ("BARRIER", "END")
        if alone:
            join(count)
            # Every earlier signal has landed: a semaphore whose waits took all of them starts
            # afresh, its next waits met by the signals after this command.
            for s in range(SEMAPHORES):
                if len(sigs[s]) == waits[s]:
                    sigs[s], waits[s] = [], 0
        if blocker is not None:
            join(done[blocker])
        if e == "-" and "V" in last:                  # the dispatcher's own wait for V
            join(done[last["V"]])
        if e in ("Q", "V", "H") and e in last:        # one command at a time
            join(done[last[e]])
        for s in range(SEMAPHORES):
            if a.cmd.wait >> s & 1:
                waits[s] += 1
                k, before = waits[s], sigs[s]
                engines = {_key(acc[j].engine) for j in before}
                if len(before) == k or (len(engines) == 1
                                        and engines <= {"Q", "V", "M", "H", "D"}):
                    for j in before[:k]:
                        join(done[j])
        count[e] += 1
        seq.append(count[e])
        issue.append(known)
        fin = dict(known)
        fin[e] = max(fin[e], count[e])
        done.append(fin)
        last[e] = i
        if a.engine in ("H", "V"):
            blocker = i
        for s in range(SEMAPHORES):
            if a.cmd.signal >> s & 1:
                sigs[s].append(i)

    out = []
    by_engine = {k: [i for i, a in enumerate(acc) if _key(a.engine) == k] for k in _ENG}
    for j, b in enumerate(acc):
        eb = _key(b.engine)
        for k in ("H", "Q", "M", "V", "D"):
            if k == eb:
                continue          # one engine's own commands are ordered by the engine
            lo = issue[j][k]      # commands 1..lo of engine k completed before b issued
            for i in by_engine[k][lo:]:
                if i >= j:
                    break
                out += _conflicts(acc[i], b)
    return out


def _conflicts(a: Access, b: Access) -> list:
    """The hazards between ``a`` and the later ``b``. A VROW takes RMAX when it issues (the
    vector engine copies it), so its read of RMAX is over before any later command issues."""
    found = []
    a_reads = {k: v for k, v in a.reads.items() if not (k == "RMAX" and a.cmd.op == "VROW")}
    for kind, x, y in (("RAW", a.writes, b.reads), ("WAW", a.writes, b.writes),
                       ("WAR", a_reads, b.writes)):
        for buf in x.keys() & y.keys():
            common = x[buf] & y[buf]
            if common:
                found.append(Hazard(a.index, b.index, kind, buf, tuple(sorted(common)[:4])))
    return found


def check_program(cfg: Config, core: CoreConfig, runs) -> int:
    """Raise ValueError naming the first hazard over ``runs`` (:func:`hazards`); return the
    number of hazards found otherwise (0)."""
    found = hazards(cfg, core, [([c if isinstance(c, Cmd) else decode(cfg, c) for c in cmds],
                                 host) for cmds, host in runs])
    if found:
        r, h = found[0]
        raise ValueError(f"the program has {len(found)} data hazard(s); first, in run {r}: {h}")
    return 0
