"""Energy of the QPU and the VPU from gate-level simulation of their standard-cell netlists, as
**data energy per event** plus **idle energy per cycle**.

Method (:func:`unit_energy`, the steps of :func:`bench.power.array_energy`):

1. **Netlist**: the ASIC flow (:func:`flows.synth.synthesize`, ``target="asic"``,
   :data:`GATE_OPTIONS`: the hierarchy kept so each cell knows its part, Booth multipliers) on
   the user's library, a stored identical run reused; :func:`flows.gate.gate_sources` makes the
   simulation sources.
2. **Simulation**: the unit's own cocotb testbench runs on the netlist under Verilator with
   toggle coverage; it checks every output beat against golden, so a run that returns has
   passed bit for bit (:func:`sim.runner.run_cocotb` raises otherwise). The run's length is
   read from cocotb's ``results.xml`` (the last test's stop time over the testbenches' clock
   period, :data:`tb.streams.CLOCK_NS`): reset, the stream, the output's trailing window.
3. **Energy**: :func:`flows.power.energy` over the run (internal power from the cells' tables,
   ``½·C·V²`` per net transition, leakage over ``cycles · clock_ns``);
   :func:`flows.power.clock_energy` gives the **idle** cycle (only the clock moves: the
   flip-flops' clock pins, the clock net, leakage). The **data** energy is the run's total less
   ``cycles`` idle cycles; divided by each event's count it is the data energy per event (the
   same energy over each count: the per-event figures are alternatives, not shares to add).
   Both also by part (:func:`group_parts`).
4. **Bounded tables**: :func:`flows.power.energy` reads every internal-power table no further
   than its largest index (:func:`flows.power.bounded_library`, its default): the netlist is as
   ABC maps it for area, with no buffer trees, so a net with hundreds or thousands of sinks gets
   a transition far beyond the tables (the VPU has nets of over 10 pF and transitions of
   hundreds of ns) where extrapolation would charge each toggle hundreds of times its in-table
   energy. ``unbounded`` records the run's energy with the tables extrapolated and the share
   that only the extrapolation adds.

Workloads:

- **QPU** (:func:`qpu_energy`): the closed-loop differences ``Δx`` of every linear layer of one
  block of the **trained digits DiT** (with its embedding and final layer) at steady-state DDIM
  steps (:func:`dit_tiles`: the float run of ``dstar power``'s trace), streamed by
  ``tb/test_qpu_rate.py`` with no input gaps and an always-ready output, every group and
  reconstruction beat compared with golden, at the configuration's default base and thresholds
  (the testbench writes no configuration; ``dstar power`` runs the MPU at the same). Events:
  sub-channels, their elements (``tile`` each) and groups emitted.
- **PE** (:func:`pe_energy`): one PE alone (units ``pe`` and ``baseline_pe``) on
  ``tb/test_pe.py``'s ``dense`` test: tiles of random full-range operands every cycle, no
  bubbles, every output compared after every edge. Events: beats (one operand set each),
  8-bit MACs (the INT8 PE: one a beat; the slice PE: ``lanes`` 2-bit digit products a beat,
  four of them an 8-bit activation's product).
- **VPU** (:func:`vpu_energy`): ``tb/test_vpu.py``'s ``every_operation_random_and_edge_rows``:
  ``rows`` random rows of each operation (random lengths up to ``max_reduction`` for the row
  operations, up to ``4·vpu_lanes`` otherwise; values cycling through random, small, extreme,
  all-equal, one-dominant and masked), 20 % input gaps, 30 % output stalls, every output value
  and saturation flag checked. Events: input beats and rows (and per operation, with ``ops``).

Latency of the runs: the QPU's first groups come ``qpu_latency`` cycles after its first
sub-channel, the VPU's outputs of a row after the row (a softmax or LayerNorm after a second
pass); the cycles of reset, fill, drain and the trailing windows are in ``cycles``, so their
clock cost is in the idle part and only what toggles beyond the clock counts as data.

Left out: the RAMs kept as macros (the QPU's reconstruction FIFO storage, the VPU's row buffer:
``$mem_v2`` cells, ``unknown_cells``), the clock tree and wires (pre-layout: only the pins'
capacitance), glitches (zero-delay simulation), clock gating (the idle figure assumes none).
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path
from xml.etree import ElementTree

from dstar_rtl.flows.gate import GATE_OPTIONS
from dstar_rtl.gen.outputs import data_json
from dstar_rtl.golden.config import Config

__all__ = ["GATE_OPTIONS", "run_cycles", "fj", "split_energy", "group_parts", "gate_netlist",
           "unit_energy",
           "dit_tiles", "qpu_energy", "vpu_energy", "pe_energy"]

#: The ASIC flow's options for every gate-level netlist: the hierarchy kept (each cell knows its
#: part) and Yosys's Booth multipliers (``synth -booth``: 25 % less energy and 22 % less area for
#: the INT8 PE's 8-bit multiplier, nothing for the slice PE, which has none); the whole-core
#: comparison's netlists use the same (:data:`flows.core_parts.ASIC_OPTIONS`).

_TIME_NS = {"fs": 1e-6, "ps": 1e-3, "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def run_cycles(results_xml, clock_period_ns: float) -> int:
    """Clock cycles of a cocotb run from time 0 to its last test's end, from ``results.xml``'s
    ``sim_time_stop`` properties. Raises ValueError when the file records no stop time."""
    stops = []
    for case in ElementTree.parse(results_xml).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        if "sim_time_stop" in props:
            stops.append(float(props["sim_time_stop"]) *
                         _TIME_NS[props.get("sim_time_unit", "ns")])
    if not stops:
        raise ValueError(f"{results_xml}: no sim_time_stop recorded")
    return round(max(stops) / clock_period_ns)


def fj(e: dict) -> float:
    """Internal + switching + leakage of an energy record (fJ)."""
    return e["internal"] + e["switching"] + e["leakage"]


def split_energy(total_fj: float, idle_fj_per_cycle: float, cycles: int, events: dict) -> dict:
    """``{"data_fj", "data_fj_per_event": {event: fJ}}``: the run's energy less ``cycles`` idle
    cycles, and that over each event's count (``None`` for a count of 0)."""
    data = total_fj - idle_fj_per_cycle * cycles
    return dict(data_fj=data, data_fj_per_event={k: (data / n if n else None)
                                                 for k, n in events.items()})


def _group_name(part: str) -> str:
    m = re.match(r"^(lane)\d+$", part.split(".")[0])
    return "lanes" if m else part.split(".")[0]


def group_parts(parts: dict, idle_parts: dict, cycles: int) -> dict:
    """The parts of :func:`flows.power.energy` (``run``) and :func:`flows.power.clock_energy`
    (``idle``) by top-level instance, the VPU's ``lane<k>`` together as ``lanes``:
    ``{group: {"cells", "instances", "total_fj", "idle_fj_per_cycle", "data_fj"}}``."""
    out = {}
    for src, key in ((parts, "total_fj"), (idle_parts, "idle_fj_per_cycle")):
        for name, p in src.items():
            g = out.setdefault(_group_name(name), dict(cells=0, instances=set(), total_fj=0.0,
                                                       idle_fj_per_cycle=0.0))
            g[key] += fj(p)
            if src is parts:
                g["cells"] += p["cells"]
                g["instances"].add(name)
    for g in out.values():
        g["instances"] = len(g["instances"])
        g["data_fj"] = g["total_fj"] - g["idle_fj_per_cycle"] * cycles
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["total_fj"]))


def gate_netlist(unit: str, cfg: Config, liberty, say) -> tuple:
    """``(unit config, synthesis result, work directory, gate-level sources, seconds)`` of
    ``unit`` at its bench configuration mapped to ``liberty`` (the ``asic`` flow with ``parts``,
    a stored identical run reused); one progress line."""
    from dstar_rtl.bench.resources import unit_config
    from dstar_rtl.flows.gate import gate_sources
    from dstar_rtl.flows.synth import synthesize

    ucfg = unit_config(unit, cfg)
    t0 = time.perf_counter()
    syn = synthesize(unit, ucfg, "asic", liberty=liberty, **GATE_OPTIONS, reuse=True)
    wd = Path(syn["workdir"])
    gs = gate_sources(wd)
    t = time.perf_counter() - t0
    say(f"{unit}: netlist {syn['num_cells']:,} cells, {syn['resources']['area']:,.0f} um2 "
        f"({'stored' if syn.get('reused') else 'synthesized'}, {t:.0f} s)")
    return ucfg, syn, wd, gs, t


def unit_energy(unit: str, cfg: Config, liberty, testbench: str, extra_env: dict | None,
                events, clock_ns: float = 1.0, tag: str = "unit-power", progress=None, *,
                testcase=None, seed: int = 1) -> dict:
    """Gate-level energy of ``unit`` at ``cfg`` over one run of the cocotb module
    ``testbench`` (``testcase``: only that test) with ``extra_env`` (module docstring).

    ``events``: ``{name: count in this run}``, or a function of the testbench's result (the
    JSON it writes to ``DSTAR_TB_RESULT``, which this sets; ``{}`` when it writes none)
    returning that dict. Raises AssertionError when the run fails (an output beat differs from
    golden). Returns ``cells``, ``area_um2``, ``run_cycles``, ``events``, ``total`` and
    ``idle_per_cycle`` (fJ by internal, switching, leakage), ``total_fj``,
    ``idle_fj_per_cycle``, ``data_fj``, ``data_fj_per_event``, ``parts`` (:func:`group_parts`),
    ``unbounded`` (the total with the tables extrapolated, ``extrapolated_share``), ``energy``
    (:func:`flows.power.energy`'s record of the run, its parts ungrouped) and the ``seconds`` of
    each step."""
    from dstar_rtl.flows.liberty import read_liberty
    from dstar_rtl.flows.power import clock_energy, energy, toggles_from_coverage
    from dstar_rtl.sim.runner import run_cocotb
    from dstar_rtl.tb.streams import CLOCK_NS

    say = progress or (lambda msg: None)
    ucfg, syn, wd, gs, t_syn = gate_netlist(unit, cfg, liberty, say)
    area = syn["resources"]["area"]
    with tempfile.TemporaryDirectory(prefix="dstar-unit-power-") as d:
        res = Path(d) / "tb_result.json"
        t1 = time.perf_counter()
        say(f"{unit} {tag}: gate-level build (if not stored) and run of {testbench} ...")
        sim = run_cocotb(unit, ucfg, "verilator", testbench, testcase=testcase, seed=seed,
                         tag=tag, netlist=gs, toggles=True,
                         extra_env={**(extra_env or {}), "DSTAR_TB_RESULT": str(res)})
        tb_result = json.loads(res.read_text()) if res.is_file() else {}
    t_sim = time.perf_counter() - t1
    cycles = run_cycles(sim.results_xml, CLOCK_NS)
    say(f"{unit} {tag}: passed bit for bit, {cycles:,} cycles ({t_sim:.0f} s)")
    t2 = time.perf_counter()
    counts = dict(events(tb_result) if callable(events) else events)
    toggles = toggles_from_coverage(sim.test_dir / "coverage.dat", gs.top, gs.ports)
    lib = read_liberty(wd / "cells.lib")
    netlist = json.loads((wd / "netlist.json").read_text())
    clk = gs.ports["clk"]["bits"][0]
    e = energy(netlist, lib, toggles, cycles * clock_ns, gs.top)
    idle = clock_energy(netlist, lib, clk, clock_ns, gs.top)
    unbounded = fj(energy(netlist, lib, toggles, cycles * clock_ns, gs.top,
                          bounded=False)["total"])
    t_energy = time.perf_counter() - t2
    total, idle_fj = fj(e["total"]), fj(idle["total"])
    split = split_energy(total, idle_fj, cycles, counts)
    say(f"{unit} {tag}: {total / 1e3:,.1f} pJ, idle {idle_fj:,.1f} fJ/cycle, data "
        f"{split['data_fj'] / 1e3:,.1f} pJ; with the tables extrapolated {unbounded / 1e3:,.1f} "
        f"pJ ({t_energy:.0f} s)")
    keep = ("internal", "switching", "leakage", "sequential")
    return dict(
        unit=unit, preset=ucfg.name, config_hash=ucfg.hash(), cells=syn["num_cells"],
        area_um2=area, library=syn.get("liberty"), workdir=str(wd), testbench=testbench,
        testcase=testcase, seed=seed, passed=True, run_cycles=cycles, clock_ns=clock_ns,
        events=counts, tb_result=tb_result,
        total={k: e["total"][k] for k in keep}, idle_per_cycle={k: idle["total"][k] for k in keep},
        total_fj=total, idle_fj_per_cycle=idle_fj, **split,
        parts=group_parts(e["parts"], idle["parts"], cycles),
        unbounded=dict(total_fj=unbounded, extrapolated_share=(
            (unbounded - total) / unbounded if unbounded else 0.0)),
        unknown_cells=e["unknown_cells"], transitions=sum(toggles.values()), energy=e,
        seconds=dict(synthesis=round(t_syn, 1), simulation=round(t_sim, 1),
                     energy=round(t_energy, 1)))


# ------------------------------------------------------------------------------ workloads
def dit_tiles(cfg: Config, steps=(1, 2), block: int = 0, trace_steps: int = 10,
              progress=None) -> tuple[list, dict]:
    """``(tiles, description)``: the QPU's input at ``steps`` of a ``trace_steps``-step float
    DDIM run of the trained digits DiT: each linear layer of ``block`` (and the embedding and
    final layer) as its closed-loop difference ``Δx`` cut into ``(tile, cin)`` token tiles, the
    last zero-padded; a SAR cache-only layer (``qkv[qk]``) on cache steps only, as ``dstar bench``
    runs them."""
    import numpy as np

    from dstar_rtl.bench.layers import load_inputs
    from dstar_rtl.golden.differential import DiffLinear
    from dstar_rtl.golden.fmdq import to_fixed
    from dstar_rtl.golden.sar import is_cache_step

    layers, trace, desc = load_inputs(cfg, weights="trained", steps=trace_steps, block=block,
                                      progress=progress)
    T, tiles, per_layer = cfg.tile, [], []
    for ls in layers:
        cin = ls.W.shape[0]
        layer = DiffLinear(np.zeros((cin, 1), np.int64), np.ones(1), cfg, name=ls.name,
                           schedule=False)
        X = trace[ls.x_key]
        n = 0
        for t in range(max(steps) + 1):
            if ls.cache_only and not is_cache_step(t, cfg.sar_interval):
                continue
            dx = layer.step(to_fixed(X[t], cfg.act_width, cfg.act_frac)[0]).dx
            if t not in steps:
                continue
            pad = np.zeros((-(-len(dx) // T) * T, cin), np.int64)
            pad[:len(dx)] = dx
            tiles += [pad[k:k + T] for k in range(0, len(pad), T)]
            n += len(pad) // T
        per_layer.append(dict(layer=ls.name, cin=cin, tiles=n))
    desc = dict(model=desc["model"], params_sha256=desc["params_sha256"],
                trace_steps=trace_steps, seed=desc["seed"], label=desc["label"], block=block,
                steps=sorted(steps), tokens=desc["tokens"], layers=per_layer)
    return tiles, desc


def qpu_energy(cfg: Config, liberty, tiles, description: dict | None = None,
               clock_ns: float = 1.0, tag: str = "unit-power", progress=None) -> dict:
    """:func:`unit_energy` of the QPU streaming the difference ``tiles`` (each ``(tile, C)``)
    through ``tb/test_qpu_rate.py`` at the configuration's default base and thresholds."""
    from dstar_rtl.bench.qpu import rate_job
    from dstar_rtl.golden.vectors import qpu_workload_from_tiles

    wl = qpu_workload_from_tiles(cfg, tiles)
    events = dict(elements=len(wl.words) * cfg.tile, subchannels=len(wl.words),
                  groups=len(wl.groups))
    with tempfile.TemporaryDirectory(prefix="dstar-qpu-power-") as d:
        spec, out = Path(d) / "in.json", Path(d) / "out.json"
        spec.write_text(data_json(rate_job(wl)))
        r = unit_energy("qpu", cfg, liberty, "dstar_rtl.tb.test_qpu_rate",
                        {"DSTAR_RATE_IN": str(spec), "DSTAR_RATE_OUT": str(out)}, events,
                        clock_ns, tag, progress)
        rate = json.loads(out.read_text())
    r["workload"] = dict(description or {}, tiles=len(tiles), counters=wl.counters,
                         stream_cycles=rate["total_cycles"],
                         testbench="tb/test_qpu_rate.py: no input gaps, output always ready, "
                                   "every group and reconstruction beat checked")
    return r


def vpu_energy(cfg: Config, liberty, rows: int = 6, ops=None, clock_ns: float = 1.0,
               tag: str = "unit-power", progress=None) -> dict:
    """:func:`unit_energy` of the VPU on ``tb/test_vpu.py``'s random and edge rows, ``rows``
    per operation of ``ops`` (default every one)."""
    from dstar_rtl.golden.layouts import VPU_OPS

    ops = list(ops or VPU_OPS)

    def events(res):
        per_op = res["ops"]
        return dict(in_beats=sum(c["in_beats"] for c in per_op.values()),
                    rows=sum(c["rows"] for c in per_op.values()),
                    out_beats=sum(c["out_beats"] for c in per_op.values()))

    env = {"DSTAR_ROWS": str(rows), "DSTAR_VPU_OPS": ",".join(ops)}
    r = unit_energy("vpu", cfg, liberty, "dstar_rtl.tb.test_vpu", env, events, clock_ns, tag,
                    progress,
                    testcase="every_operation_random_and_edge_rows")
    r["workload"] = dict(rows_per_op=rows, ops=r["tb_result"]["ops"],
                         testbench="tb/test_vpu.py every_operation_random_and_edge_rows: random "
                                   "and edge rows, 20 % input gaps, 30 % output stalls, values "
                                   "and saturation flags checked")
    return r


def pe_energy(cfg: Config, liberty, kind: str, tiles: int = 16, clock_ns: float = 1.0,
              tag: str = "pe-power", progress=None) -> dict:
    """:func:`unit_energy` of one PE of ``kind`` (``"slice"``: the MPU's PE at ``cfg``;
    ``"int8"``: the INT8 array's PE with the INT8 core's own choices,
    :func:`bench.resources.unit_config`) on ``tiles`` dense tiles (module docstring),
    with ``pj_per_mac`` (the run's energy over its 8-bit MACs, reset and the tail's idle
    cycles included)."""
    from dstar_rtl.bench.resources import unit_config
    from dstar_rtl.sim.pe_vectors import DENSE_TILE

    if kind not in ("slice", "int8"):
        raise ValueError(f"kind must be 'slice' or 'int8', not {kind!r}")
    unit = "pe" if kind == "slice" else "baseline_pe"
    ucfg = cfg if kind == "slice" else unit_config("baseline", cfg)
    beats = tiles * DENSE_TILE
    macs = beats * (cfg.lanes / 4 if kind == "slice" else 1)
    r = unit_energy(unit, ucfg, liberty, "dstar_rtl.tb.test_pe",
                    {"DSTAR_PE_DENSE_TILES": str(tiles)},
                    dict(beats=beats, macs8=macs), clock_ns, tag, progress, testcase="dense")
    r["pj_per_mac"] = r["total_fj"] / 1e3 / macs
    r["workload"] = dict(tiles=tiles, beats=beats, macs8=macs,
                         testbench="tb/test_pe.py dense: random full-range operands every "
                                   "cycle, no bubbles, every output after every edge checked")
    return r
