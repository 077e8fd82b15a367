"""Cycle model of the DSTAR core: a command-level event simulation of the dispatcher and the four
engines, driven by the exact work of every command (:mod:`perf.core_work`).

Why a command-level model: every engine's duration is an affine function of work the golden
model knows exactly (host words, groups written or replayed, VPU rows and beats), so the only
things to model are those durations and the rules that overlap them, which are the instruction
set's own (program/isa.py):

* **dispatcher**: a command enters the head register, is checked for two cycles and issues on
  the third at the earliest (``dispatch`` = 4 cycles between back-to-back issues); SKIP'd
  commands pass at one per cycle;
* **H and V** (and BARRIER, END) issue once every engine is idle, and nothing issues while H
  or V runs (the next command is taken and checked meanwhile); a VROW with ``overlap`` issues
  once H and V are idle, and only the dispatcher's own commands wait for it (the ABUF write
  cycles it yields to M are not modelled);
  **Q and M** run together; a ``wait`` issues once every named semaphore has been signalled
  (signals land when the signalling command completes);
* **M** is two halves: replay (one group per cycle, the MPU's tile flow forbids two tiles'
  last groups closer than ``tile_period``, ``L + rows`` plus a measured offset) and drain
  (``T`` beats through the VPU, one tile after another); a GEMM issues when the replay half is
  free and the drain queue (2 jobs) has room.

The D engine (a core with a DRAM port) is not modelled yet: a program with DLOAD or DSTORE is
refused rather than timed wrong.

Durations (:class:`Timing`) are affine in the work, with constants from the RTL's structure and
a few cycles of offset measured once on isolated commands
(:func:`bench.perf_validate.calibrate`).
:func:`simulate` returns a run's cycles and busy cycles per engine, :func:`buffer_bytes` the
bytes it moves per buffer (P-cache traffic included), :func:`model_program` both for a whole
program. Validation against the RTL core's own counters is in
:mod:`app.benches.perf_validate` (``reports/perf_model.md``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from dstar_rtl.golden.bitonic import network
from dstar_rtl.golden.config import Config
from dstar_rtl.golden.layouts import VPU_OPS, gmem_layout, layout_width
from dstar_rtl.program.isa import BUFFERS, SEMAPHORES, core_for, host_words_per_row, row_width

from .core_work import Work
from .timing import BINS_FIXED, array_tile_period

__all__ = ["Timing", "RunCycles", "simulate", "buffer_bytes", "model_program", "ENGINES",
           "INT8_QUANT_FIXED"]

ENGINES = ("H", "Q", "M", "V")
#: The INT8 quantizer's cycles beyond its two passes (rtl/core_quant_int8.py).
INT8_QUANT_FIXED = 4


@dataclass(frozen=True)
class Timing:
    """Cycle constants of one core configuration (see the module docstring for the rules).

    Host engine: LOAD ``words + load_fixed`` (``zero``: ``rows + load_fixed``); STORE
    ``rows·(words_per_row + store_row_extra) + store_fixed``.
    Q: QUANT ``max(groups, quant_passes·nch) + quant_fixed`` (``quant_passes`` reads of the
    tile: 1 for the QPU, 2 for the INT8 core's quantizer), with exponent bins ``bin_cycles +
    quant_fixed`` (:meth:`quant_work`); QCFG ``qcfg`` cycles.
    M: a GEMM of ``G`` groups alone is busy ``G + gemm_fixed`` cycles; its last group leaves
    the replay half ``replay_fixed`` cycles after ``G`` groups, and its drain ends
    ``gemm_fixed - replay_fixed`` cycles after that; the replay half takes the next GEMM
    ``G + replay_busy`` cycles after it started. A drain job leaves the 2-entry queue
    ``queue_release`` cycles before its drain ends. Consecutive tiles' last groups are at least
    ``tile_period`` apart; drains are at least ``drain_period`` apart. ``idle_latency``: cycles
    from the last engine going idle to the issue of a command that needs all idle.
    V: VROW ``vrow_fixed[k] + vrow_lat[k]·nb + rows·c(nb)``, ``nb = beats / rows`` (the beats
    of one row; ``vrow_lat``: the last row's latency that grows with its length, softmax_mx's
    output pass after the last row's exponentials),
    ``k`` = operation and walk (:meth:`vrow_key`), ``c`` the cycles per row, piecewise linear
    through the measured points ``vrow_curve[k]`` (``[[nb, cycles], ...]``), extended beyond
    the last with the slope of the last two (below the first: the first).
    ``signal_latency``: cycles from a command's last busy cycle to its semaphore signal being
    usable by a waiting command.
    """

    tile: int
    words: dict
    dispatch: int = 4
    issue_latency: int = 3
    load_fixed: int = 1
    store_row_extra: int = 2
    store_fixed: int = 1
    qcfg: int = 0
    quant_fixed: int = 0
    quant_passes: int = 1
    gemm_fixed: int = 0
    replay_fixed: int = 0
    replay_busy: int = 0
    queue_release: int = 0
    idle_latency: int = 0
    tile_period: int = 0
    drain_period: int = 1
    signal_latency: int = 0
    vrow_fixed: dict = field(default_factory=dict)
    vrow_curve: dict = field(default_factory=dict)
    vrow_lat: dict = field(default_factory=dict)

    @classmethod
    def structural(cls, cfg: Config, **overrides) -> "Timing":
        """The constants that follow from the RTL's structure for ``cfg`` (the host engine's law
        of rtl/core_host.py, host words per row; the arrays' tile period of
        :func:`perf.timing.array_tile_period` for a GEMM alone and between tiles; drains of ``T``
        beats; the sorter's depth, one register per network stage, for a QUANT, or with
        exponent bins :data:`perf.timing.BINS_FIXED` beside the bins' own cycles of the work), with
        ``overrides`` for the measured values (:func:`bench.perf_validate.calibrate`)."""
        words = {b: host_words_per_row(cfg, b) for b in BUFFERS}
        D = array_tile_period(cfg)
        base = dict(tile=cfg.tile, words=words, tile_period=D, gemm_fixed=D,
                    quant_fixed=(BINS_FIXED if cfg.packer == "bins"
                                 else len(network(cfg.sort_n))), drain_period=cfg.tile)
        if cfg.datapath == "int8":       # rtl/core_quant_int8.py: 2·nch + 4 cycles
            base.update(quant_passes=2, quant_fixed=INT8_QUANT_FIXED)
        base.update(overrides)
        return cls(**base)

    def to_dict(self) -> dict:
        return asdict(self)

    def with_(self, **kw) -> "Timing":
        return replace(self, **kw)

    # ------------------------------------------------------------------ durations
    def host(self, w: Work) -> int:
        a = w.args
        count = a.get("count", 0)
        if count == 0:
            return 0
        buf = BUFFERS[a["buf"]]
        if w.op == "LOAD":
            return (count if a.get("zero") else count * self.words[buf]) + self.load_fixed
        return count * (self.words[buf] + self.store_row_extra) + self.store_fixed

    def quant_work(self, w: Work) -> int:
        """A QUANT's cycles that follow its data: with exponent bins the bins' cycles for the
        tile (:func:`golden.schedule.bin_cycles`), else the longer of its groups and its
        ``quant_passes`` reads of the tile."""
        if w.packer_cycles is not None:
            return w.packer_cycles
        return max(w.n("gmem_writes"), self.quant_passes * w.args["nch"])

    def quant(self, w: Work) -> int:
        if w.op == "QCFG":
            return self.qcfg
        return self.quant_work(w) + self.quant_fixed

    @staticmethod
    def vrow_key(w: Work) -> str:
        """``op/walk`` of a VROW: the operation and its walk (``tok``: token rows, ``sub``:
        sub-channels, ``cols = 1``), which have different rates."""
        if "vop_name" in w.args:
            return w.args["vop_name"]
        return f"{VPU_OPS[w.args['vop']]}/{'sub' if w.args.get('cols') else 'tok'}"

    def vrow(self, w: Work) -> int:
        op = self.vrow_key(w)
        rows, beats = w.n("vpu_rows"), w.n("vpu_beats")
        if rows == 0:
            return int(round(self.vrow_fixed.get(op, 0)))
        nb = beats / rows
        return int(round(self.vrow_fixed.get(op, 0) + self.vrow_lat.get(op, 0) * nb
                         + rows * _per_row(self.vrow_curve.get(op, ()), nb)))


def _per_row(curve, nb: float) -> float:
    """Cycles per row of ``nb`` beats on the piecewise-linear ``curve`` ``[[nb, cycles], ...]``
    (sorted by ``nb``; no curve: one cycle a beat)."""
    if not curve:
        return nb
    if len(curve) == 1 or nb <= curve[0][0]:
        return curve[0][1]
    for (x0, y0), (x1, y1) in zip(curve, curve[1:]):
        if nb <= x1:
            break
    return y0 + (y1 - y0) * (nb - x0) / (x1 - x0)


@dataclass
class RunCycles:
    """Model result of one run: ``cycles`` from the first command's entry to the dispatcher
    to END (``span`` between two chosen commands, see :func:`simulate`), ``busy`` per engine,
    the issue time of every command (``issue``)."""

    cycles: int
    busy: dict
    issue: list
    complete: list
    intervals: dict

    def between(self, a: int, b: int) -> tuple:
        """``(cycles, busy per engine)`` from the issue of command ``a`` to the issue of
        command ``b``: what two counter reads at ``a`` and ``b`` see."""
        lo, hi = self.issue[a], self.issue[b]
        busy = {e: _union([(max(s, lo), min(x, hi)) for s, x in iv if min(x, hi) > max(s, lo)])
                for e, iv in self.intervals.items()}
        return hi - lo, busy


class _M:
    """The matrix engine's two halves."""

    def __init__(self, t: Timing):
        self.t = t
        self.replay_free = 0      # first cycle the replay half can take a GEMM
        self.last_group = -10**9  # transfer time of the previous tile's last group
        self.drain_end = -10**9
        self.pending = []         # drain end times not yet reached (queue occupancy)

    def can_issue(self) -> int:
        """Earliest issue time from the engine's side (replay free, queue room)."""
        t = self.replay_free
        if len(self.pending) >= 2:
            t = max(t, sorted(self.pending)[-2])
        return t

    def issue(self, s: int, groups: int) -> tuple:
        """Issue a GEMM at ``s``: returns ``(busy start, completion)``."""
        t = self.t
        start = s + 1
        lg = max(start + groups + t.replay_fixed - 1, self.last_group + t.tile_period)
        self.last_group = lg
        self.replay_free = max(start + groups + t.replay_busy, lg - t.replay_fixed + 1)
        drain_lat = t.gemm_fixed - t.replay_fixed
        end = max(lg + drain_lat, self.drain_end + t.drain_period)
        self.drain_end = end
        self.pending = [e for e in self.pending if e > s] + [end - t.queue_release]
        return start, end


def _union(intervals) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def simulate(t: Timing, works: list) -> RunCycles:
    """Simulate one run (``works``: :class:`~perf.core_work.Work` per command, ending with END)
    from idle. Times are cycles from the first command entering the dispatcher's head."""
    head = blocked = 0
    free = dict.fromkeys(ENGINES, 0)     # engine idle from this cycle on (M: all drains done)
    m = _M(t)
    sig = {s: [] for s in range(SEMAPHORES)}      # semaphore signal times
    used = dict.fromkeys(range(SEMAPHORES), 0)
    intervals = {e: [] for e in ENGINES}
    issue, complete = [], []
    for i, w in enumerate(works):
        if w.skipped:
            issue.append(None)
            complete.append(None)
            head += 1
            continue
        s = head + t.issue_latency
        for b in range(SEMAPHORES):
            if w.wait >> b & 1:
                times = sorted(sig[b])
                if used[b] >= len(times):
                    raise ValueError(f"command {i} ({w.op}) waits on semaphore {b}, which no "
                                     f"earlier command signals: the program would deadlock")
                s = max(s, times[used[b]] + t.signal_latency)
                used[b] += 1
        e = w.engine
        if e == "D":
            raise ValueError(f"command {i} ({w.op}): the cycle model has no D engine yet "
                             f"(a core with a DRAM port, issue 49); model a program without "
                             f"DRAM transfers")
        ovl = w.op == "VROW" and w.args.get("overlap", 0)
        s = max(s, blocked)
        if ovl:
            s = max(s, free["H"] + t.idle_latency, free["V"] + t.idle_latency)
        elif w.op in ("BARRIER", "END") or e in ("H", "V"):
            s = max(s, max(free.values()) + t.idle_latency)
        elif e == "-":
            s = max(s, free["V"] + t.idle_latency)
        elif e == "Q":
            s = max(s, free["Q"])
        elif e == "M":
            s = max(s, m.can_issue())
        start, end = s, s
        if e == "H":
            d = t.host(w)
            start, end = s + 1, s + 1 + d
        elif e == "Q":
            d = t.quant(w)
            start, end = s + 1, s + 1 + d
        elif e == "V":
            d = t.vrow(w)
            start, end = s + 1, s + 1 + d
        elif e == "M":
            start, end = m.issue(s, w.n("groups_replayed"))
        if e in ENGINES:
            intervals[e].append((start, end))
            free[e] = max(free[e], end)
            for b in range(SEMAPHORES):
                if w.signal >> b & 1:
                    sig[b].append(end)
        elif w.signal:
            for b in range(SEMAPHORES):
                if w.signal >> b & 1:
                    sig[b].append(s)
        issue.append(s)
        complete.append(end)
        head = s + 1
        if e in ("H", "V") and not ovl:
            blocked = end + t.idle_latency
    cycles = issue[-1] + 1 if issue and issue[-1] is not None else head
    return RunCycles(cycles, {e: _union(intervals[e]) for e in ENGINES}, issue, complete,
                     intervals)


def buffer_bytes(cfg: Config, works: list) -> dict:
    """Bytes read and written per buffer by one run (row widths of program/isa.py; GMEM at
    its group record width), with the P-cache traffic separately."""
    rw = {b: row_width(cfg, b) for b in ("ABUF", "XBUF", "YBUF", "WMEM")}
    gw = layout_width(gmem_layout(cfg))
    tot: dict = {}

    def add(k, rows, width):
        tot[k] = tot.get(k, 0) + rows * width / 8

    for w in works:
        ev = w.ev
        for b in ("ABUF", "XBUF", "YBUF"):
            add(f"{b}.read", ev.get(f"{b.lower()}_reads", 0), rw[b])
            add(f"{b}.write", ev.get(f"{b.lower()}_writes", 0), rw[b])
        add("WMEM.write", ev.get("wmem_writes", 0), rw["WMEM"])
        add("WMEM.read", ev.get("lanes_valid", 0), rw["WMEM"])
        add("GMEM.write", ev.get("gmem_writes", 0), gw)
        add("GMEM.read", ev.get("groups_replayed", 0), gw)
        add("PCACHE.write", ev.get("pcache_groups_written", 0), gw)
        add("PCACHE.read", ev.get("pcache_groups_read", 0), gw)
        add("HOST.in", ev.get("host_words_in", 0), 32)
        add("HOST.out", ev.get("host_words_out", 0), 32)
    return {k: math.ceil(v) for k, v in tot.items()}


def model_program(t: Timing, cfg: Config, runs) -> list:
    """The model on a whole program: ``runs`` is ``[(commands, host words)]`` from a reset core
    (e.g. :meth:`program.layer.LayerProgram.init` and ``.step``, or a compiled DiT block
    with its SAR masks). Returns per run ``{"cycles", "busy": {engine: cycles}, "bytes":
    {buffer.read/write: bytes}}`` (P-cache traffic as ``PCACHE.*``)."""

    from .core_work import trace_work
    out = []
    for works in trace_work(cfg, core_for(cfg), runs):
        r = simulate(t, works)
        out.append(dict(cycles=r.cycles, busy=r.busy, bytes=buffer_bytes(cfg, works)))
    return out
