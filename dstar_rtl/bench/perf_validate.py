"""Calibrate the core's cycle model (:mod:`perf.perf_model`) on the RTL and validate it on other
layer shapes (``dstar measure perf``, :mod:`app.benches.perf_validate`, types and renders the
record).

One cocotb run per preset executes, on the generated core (Verilator's optimised build by
default):

* **calibration**: 4 layer shapes, each step with a counter read after every command
  (:func:`sim.perf_workloads.isolated`): the busy cycles of each command alone give the
  duration offsets (medians of ``busy − work``); the same shapes run plainly fit the overlap
  constants of the matrix engine (coordinate descent over small integer ranges, least total
  error); every VROW operation and walk alone at seven shapes
  (:func:`sim.perf_workloads.vrow_program`) gives the V engine's fixed cycles per
  command and its cycles per row at each row length (least squares per operation and walk);
* **validation**: 10 other layer shapes run plainly (3 steps each: the first quantizes the whole
  input, later ones its change), and the DiT block over a cache and a reuse step. Per step and
  section the model's cycles and busy cycles are compared with the RTL's counters. The
  block's VROWs come at shapes the V engine was not fitted on, so its attention sections are
  out of sample too.

Every stored word of every run is checked against the ISA executor in the testbench.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.perf.core_work import trace_work
from dstar_rtl.perf.perf_model import Timing, buffer_bytes, simulate
from dstar_rtl.program.isa import core_for
from dstar_rtl.sim.core_programs import counter_reads, run_programs
from dstar_rtl.sim.perf_workloads import (
    block_program,
    isolated_program,
    plain_program,
    shapes,
    vrow_program,
)

__all__ = ["measure", "calibrate", "validate", "evaluate", "run", "summarize", "SECTIONS"]

SECTIONS = ("load", "compute", "store")
BUSY = ("busy_H", "busy_Q", "busy_M", "busy_V")


def _cnt_positions(works) -> list:
    return [i for i, w in enumerate(works) if w.op == "STORE" and w.args.get("buf") == 7
            and not w.skipped]


def measure(cfg: Config, simulator: str = "verilator", n_validation: int | None = None,
            steps: int = 3, block_steps: int = 2, optimize: bool = True) -> dict:
    """Run the calibration and validation programs on the RTL. Returns ``{"programs": {name:
    (kind, label, Program, sections)}, "works": {name: [[Work]]}, "reads": {name: [[counter
    dicts] per run]}, "sim_s"}``; kinds: ``iso`` / ``cal`` (calibration layers, isolated and
    plain), ``iso_vrow`` (the V engine's calibration), ``val`` (validation layers), ``block``
    (the DiT block)."""
    core = core_for(cfg)
    progs = {}
    for s in shapes(cfg, "calibration", steps):
        p = isolated_program(cfg, s)
        progs[p.name] = ("iso", s, p, None)
        p = plain_program(cfg, s)
        progs[p.program.name] = ("cal", s, p.program, p.sections)
    for s in shapes(cfg, "validation", steps)[:n_validation]:
        p = plain_program(cfg, s)
        progs[p.program.name] = ("val", s, p.program, p.sections)
    p = vrow_program(cfg)
    progs[p.name] = ("iso_vrow", "vrow", p, None)
    if block_steps:
        plain = block_program(cfg, block_steps)
        progs[plain.program.name] = ("block", "block", plain.program, plain.sections)
    works = {n: trace_work(cfg, core, p.runs) for n, (_k, _s, p, _x) in progs.items()}
    t0 = time.perf_counter()
    out = run_programs(cfg, core, [p for _, _, p, _ in progs.values()], simulator,
                       tag=f"perf-{len(progs)}-{steps}-{block_steps}", optimize=optimize)
    reads = {}
    for n, (_k, _s, p, _x) in progs.items():
        reads[n] = [counter_reads(cfg, cmds, words, {i for i, w in enumerate(wk) if w.skipped})
                    for (cmds, _), words, wk in zip(p.runs, out[n], works[n])]
    return dict(programs=progs, reads=reads, works=works, sim_s=time.perf_counter() - t0,
                simulator=simulator)


def _delta(a: dict, b: dict) -> dict:
    return {k: b[k] - a[k] for k in ("cycles",) + BUSY}


def _isolated(m: dict, kinds=("iso", "iso_vrow")):
    """``(command Work, counter delta)`` of every command of the isolated runs."""
    for name, (kind, _s, prog, _x) in m["programs"].items():
        if kind not in kinds:
            continue
        for r in range(1, len(prog.runs)):
            reads, w = m["reads"][name][r], m["works"][name][r]
            cnts = _cnt_positions(w)
            for k in range(len(cnts) - 1):
                cmd = next(x for x in w[cnts[k] + 1:cnts[k + 1]] if not x.skipped)
                yield cmd, _delta(reads[k], reads[k + 1])


def _fit_vrow(samples: dict) -> dict:
    """Per VROW operation and walk, the law of :meth:`perf.perf_model.Timing.vrow`, ``busy =
    fixed + lat·nb + rows·c(nb)``: least squares over the isolated commands with one unknown
    per command (``fixed``), one per beat of a command's row (``lat``) and one per row length
    (``c(nb)``); two row counts at one row length tell ``fixed + lat·nb`` apart from ``c(nb)``,
    at two row lengths ``fixed`` from ``lat``
    (:data:`sim.perf_workloads.VROW_SHAPES`; an unknown the points cannot tell apart
    is 0, ``lat`` first). Returns the :class:`Timing` dicts ``vrow_fixed``, ``vrow_lat`` and
    ``vrow_curve``."""
    fixed, lat, curve = {}, {}, {}
    for op, pts in samples.items():
        pts = [(r, b / r, d) for r, b, d in pts if r]
        nbs = sorted({nb for _, nb, _ in pts})
        A = np.array([[1.0, nb] + [r if nb == x else 0.0 for x in nbs] for r, nb, _ in pts])
        y = np.array([d for _, _, d in pts], float)
        per_row = list(range(2, A.shape[1]))
        keep = [0, 1]
        for drop in (1, 0):
            if np.linalg.matrix_rank(A[:, keep + per_row]) < len(keep) + len(nbs):
                keep.remove(drop)
        cols = keep + per_row
        sol = np.linalg.lstsq(A[:, cols], y, rcond=None)[0]
        coef = np.zeros(A.shape[1])
        coef[cols] = sol
        fixed[op] = round(float(coef[0]), 3) + 0.0          # (no -0)
        lat[op] = round(float(coef[1]), 3) + 0.0
        curve[op] = [[round(nb, 3), round(float(c), 3)] for nb, c in zip(nbs, coef[2:])]
    return dict(vrow_fixed=fixed, vrow_lat=lat, vrow_curve=curve)


def calibrate(cfg: Config, m: dict) -> Timing:
    """Duration offsets from the isolated runs, overlap constants from the plain calibration
    runs (see the module docstring)."""
    base = Timing.structural(cfg)
    q_off, g_off, cnt_tail, vrow = [], [], [], {}
    for cmd, d in _isolated(m):
        if cmd.engine == "H":
            cnt_tail.append(d["busy_H"] - base.host(cmd))
        else:
            cnt_tail.append(d["busy_H"])
        if cmd.op == "QUANT":
            q_off.append(d["busy_Q"] - base.quant_work(cmd))
        elif cmd.op == "GEMM":
            g_off.append(d["busy_M"] - cmd.n("groups_replayed"))
        elif cmd.op == "VROW":
            vrow.setdefault(Timing.vrow_key(cmd), []).append(
                (cmd.n("vpu_rows"), cmd.n("vpu_beats"), d["busy_V"]))
    iso = next(n for n, (k, _s, _p, _x) in m["programs"].items() if k == "iso")
    cnt = m["works"][iso][1][0]
    tail = statistics.median(cnt_tail)
    if tail != base.host(cnt):
        raise AssertionError(f"the host engine's STORE law is off: a counter read took {tail} "
                             f"cycles, the model says {base.host(cnt)}")
    t = base.with_(quant_fixed=round(statistics.median(q_off)),
                   gemm_fixed=round(statistics.median(g_off)), **_fit_vrow(vrow))
    cal = [n for n, (k, _s, _p, _x) in m["programs"].items() if k == "cal"]
    D = t.tile_period
    grid = dict(replay_fixed=range(0, 4), replay_busy=range(-1, 4), signal_latency=range(0, 3),
                queue_release=range(0, t.gemm_fixed + 1), idle_latency=range(0, 3),
                tile_period=range(D, D + 8))

    def cost(c: Timing) -> int:
        return sum(abs(r["model"]["cycles"] - r["rtl"]["cycles"])
                   + abs(r["model"]["busy_M"] - r["rtl"]["busy_M"])
                   for n in cal for r in _compare(c, m, n) if r["section"] == "compute")

    # Coordinate descent over the small integer grid (each constant in turn, three sweeps).
    best = (cost(t), t)
    for _ in range(3):
        for k, values in grid.items():
            for v in values:
                cand = best[1].with_(**{k: v})
                c = cost(cand)
                if c < best[0]:
                    best = (c, cand)
    return best[1]


def _compare(t: Timing, m: dict, name: str) -> list:
    """Model against RTL per (step, section) of a sectioned program."""
    _kind, _s, prog, sections = m["programs"][name]
    reads, works = m["reads"][name], m["works"][name]
    rows = []
    for r in range(1, len(prog.runs)):
        w, rd = works[r], reads[r]
        sim = simulate(t, w)
        cnts = _cnt_positions(w)
        for k, sec in enumerate(sections):
            cyc, busy = sim.between(cnts[k], cnts[k + 1])
            model = {"cycles": cyc, **{f"busy_{e}": busy[e] for e in busy}}
            rows.append(dict(step=r - 1, section=sec, rtl=_delta(rd[k], rd[k + 1]),
                             model=model))
    return rows


def validate(t: Timing, m: dict, kinds=("val",)) -> list:
    """Per validation program, step and section: RTL and model cycles and busy cycles."""
    out = []
    for name, (kind, s, _prog, _x) in m["programs"].items():
        if kind not in kinds:
            continue
        info = (dict(shape=s.name, tokens=s.tokens, cin=s.cin, cout=s.cout, drift=s.drift)
                if kind != "block" else dict(shape="block"))
        for row in _compare(t, m, name):
            out.append({**info, **row})
    return out


def _err(model: float, rtl: float) -> float:
    return (model - rtl) / rtl if rtl else 0.0


def summarize(rows: list) -> dict:
    """Largest and mean absolute relative error of cycles per section name, over the sections
    with matrix work (``matrix``), and over whole steps (``step``)."""
    groups: dict = {}
    for r in rows:
        groups.setdefault(r["section"], []).append(r)
        if r["rtl"]["busy_M"]:
            groups.setdefault("matrix", []).append(r)
    out = {}
    for sec, rs in groups.items():
        e = [abs(_err(r["model"]["cycles"], r["rtl"]["cycles"])) for r in rs]
        out[sec] = dict(max=max(e), mean=sum(e) / len(e), n=len(e))
    steps = {}
    for r in rows:
        a = steps.setdefault((r["shape"], r["step"]), [0, 0])
        a[0] += r["model"]["cycles"]
        a[1] += r["rtl"]["cycles"]
    e = [abs(_err(a, b)) for a, b in steps.values()]
    if e:
        out["step"] = dict(max=max(e), mean=sum(e) / len(e), n=len(e))
    return out


def run(cfg: Config, simulator: str = "verilator", n_validation: int | None = None,
        steps: int = 3, block_steps: int = 2, optimize: bool = True) -> dict:
    """Measure, calibrate and validate ``cfg``; a JSON-ready record (``rows``: validation
    layers, ``block``: the DiT block's sections)."""
    return evaluate(cfg, measure(cfg, simulator, n_validation, steps, block_steps, optimize))


def evaluate(cfg: Config, m: dict) -> dict:
    """Calibrate and validate on measurements ``m`` (:func:`measure`); the JSON-ready record."""
    t = calibrate(cfg, m)
    rows = validate(t, m, ("val",))
    block = validate(t, m, ("block",))
    name = next((n for n, v in m["programs"].items() if v[0] == "block"), None)
    block_bytes = ([buffer_bytes(cfg, w) for w in m["works"][name][1:]] if name else [])
    return dict(preset=cfg.name, config_hash=cfg.hash(), simulator=m["simulator"],
                sim_seconds=round(m["sim_s"], 1), timing=t.to_dict(),
                shapes=len({r["shape"] for r in rows}), rows=rows, block=block,
                block_bytes=block_bytes,
                calibration=summarize(validate(t, m, ("cal",))), summary=summarize(rows),
                block_summary=summarize(block))
