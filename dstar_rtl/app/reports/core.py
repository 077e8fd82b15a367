"""Core report: cycles per step and per layer of the ``fpga`` core on a DiT block, the counter
breakdown per engine, lane utilisation of the FFN and attention products, the block's matrix
work beside the INT8 baseline array, and the Verilator simulation speed.

``dstar measure core`` writes ``reports/core.json`` (the typed result :class:`Core`) and
``reports/core.md`` through the one measurement runner (:data:`MEASUREMENT`). Everything
is measured on the generated core (``tb/test_core_perf.py``, outputs checked against golden);
``--presets`` picks the presets (default ``fpga``).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.measurement import Measurement, check_among, option
from dstar_rtl.bench.core import analyse
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.progress import Step
from dstar_rtl.gen.tables import md_table
from dstar_rtl.golden.config import PRESETS, preset
from dstar_rtl.results.base import build
from dstar_rtl.results.core import (
    Core,
    CoreBlock,
    Speed,
)
from dstar_rtl.results.quantities import StepTime

ENGINES = ("H", "Q", "M", "V")


@dataclass(frozen=True)
class CoreOptions:
    """What ``dstar measure core`` runs (checked at construction)."""

    presets: tuple[str, ...] = option(("fpga",), "presets to measure", choices=sorted(PRESETS))
    steps: int = option(4, "DiT-block steps to run")

    def __post_init__(self):
        check_among("--presets", self.presets, PRESETS)
        if self.steps < 1:
            raise UserError(f"--steps must be at least 1, not {self.steps}")


def _pct(x):
    return "–" if x is None else f"{100 * x:.1f} %"

def render(res: Core) -> str:
    """``reports/core.md`` from its result."""
    md = ["# The DSTAR core on a DiT block", "",
          "Measured on the generated core under Verilator (`tb/test_core_perf.py`), every output "
          "and state checked bit for bit against the integer DiT-block golden. A step runs section "
          "by section (one program section per layer or VPU operation, `program.compiler`); "
          "*cycles* run from the section's first command to `done`, host streams never stall. "
          "`load` moves the step's input over the 32-bit host port and `store` returns every "
          "output and state for verification (a deployment stores only the block output).", ""]
    for name, r in res.presets.items():
        perf = r.perf
        sp = perf.spec
        md += [f"## `{name}` preset", "",
               f"Block: N = {sp.tokens} tokens, D = {sp.hidden}, {sp.heads} heads of "
               f"d = {sp.head_dim}, MLP {sp.mlp}; SAR interval {perf.interval}, "
               f"{perf.mask_kept} of {perf.mask_blocks} attention blocks kept. Core buffers: "
               + ", ".join(f"{k} {v}" for k, v in perf.core.items()) + ".", ""]
        secs = [s.name for s in perf.steps[0].sections]
        head = ["section"] + [f"step {s.step} ({'cache' if s.cache else 'reuse'})"
                              for s in perf.steps]
        rows = [[n] + [next(x.cycles for x in s.sections if x.name == n) for s in perf.steps]
                for n in secs]
        rows.append(["**step**"] + [s.cycles for s in perf.steps])
        md += ["### Cycles per step and per section", "", md_table(head, rows), ""]
        md += ["### Engine busy cycles per section (last cache step)", "",
               "Busy: the engine holds a command; Q and M overlap inside a linear layer "
               "(the QPU quantizes tile τ+1 while the MPU replays tile τ).", ""]
        cache = [s for s in perf.steps if s.cache][-1]
        rows = []
        for s in cache.sections:
            c = s.counters
            rows.append([s.name, s.cycles] + [c.get(f"busy_{e}", 0) for e in ENGINES] +
                        [c.get("groups_replayed", 0), c.get("vpu_rows", 0),
                         c.get("abuf_reads", 0) + c.get("abuf_writes", 0)])
        md += [md_table(["section", "cycles"] + [f"busy {e}" for e in ENGINES] +
                        ["groups", "VPU rows", "ABUF rows"], rows), ""]
        md += ["### Bytes moved per buffer (one step)", "",
               "Logical row accesses × row bytes (`program.isa.row_width`); GMEM rows are "
               "lane groups; the P cache is the GMEM groups of `P` written on a cache step and "
               "replayed on every step.", "",
               md_table(["buffer"] + [f"step {b.step} ({b.kind})" for b in r.bytes],
                        [[k] + [f"{b.bytes[k]:,}" for b in r.bytes] for k in r.bytes[0].bytes]),
               ""]
        md += ["### Lane utilisation (valid lanes / issued lane slots, last cache step)", "",
               md_table(["layers", "valid lanes", "lane slots", "utilisation", "paper"],
                        [[k, v.valid, v.slots, _pct(v.util), v.paper]
                         for k, v in r.lanes.items()]), ""]
        md += ["### Matrix work beside the INT8 baseline array", "",
               "DSTAR: the core's M-engine busy cycles (RTL, includes the drain through the VPU). "
               "Baseline: the generated INT8 baseline array (RTL, Verilator) streaming the same "
               "tiles densely, one beat per input channel, results checked "
               "(`tb/test_baseline_block.py`); *law* is its tile-flow formula for the same "
               "stream. The baseline array runs on a cache step's tile counts (on a reuse step "
               "it would skip Q·Kᵀ too). Step 0 quantizes the whole input; later steps only "
               "its change (differential layers).", ""]
        for sb in r.baseline:
            rows = [[b.section, b.tiles, b.groups, b.dense_beats, _pct(b.lane_util),
                     b.core_m_busy, b.baseline, b.baseline_array_cycles,
                     "–" if b.ratio is None else f"{b.ratio:.2f}×"] for b in sb.rows]
            tot_m = sum(b.core_m_busy for b in sb.rows)
            tot_b = sum(b.baseline for b in sb.rows)
            rows.append(["**total**", "", "", "", "", tot_m, tot_b, "",
                         f"{tot_b / tot_m:.2f}×" if tot_m else "–"])
            md += [f"Step {sb.step} ({sb.kind}):", "",
                   md_table(["section", "tiles", "DSTAR groups", "baseline beats", "lane util",
                             "DSTAR M busy", "baseline cycles", "law", "baseline / DSTAR"],
                            rows), ""]
        sim = perf.sim
        mod = sim.model or Speed(0, 0.0, 0.0)
        md += ["### Simulation speed", "",
               f"Verilator (`-O2`), one step's compute sections as one program (no host words): "
               f"{mod.cycles:,} cycles in {mod.wall_s:.2f} s = "
               f"**{mod.cycles_per_s:,.0f} cycles/s**. Section by section, with the "
               f"cocotb drivers: {sim.cycles:,} cycles in "
               f"{sim.wall_s:.1f} s = **{sim.cycles_per_s:,.0f} cycles/s** over whole steps; "
               f"{sim.compute_cycles:,} cycles in {sim.compute_wall_s:.1f} s = "
               f"**{sim.compute_cycles_per_s:,.0f} cycles/s** over the compute sections (the "
               "`load` and `store` sections move one host word per cycle through Python, which "
               "sets their pace).", ""]
    md += [f"Generated {res.provenance.date}; steps: " +
           ", ".join(f"{s.step} {s.seconds:.0f} s" for s in res.steps), ""]
    return "\n".join(md)


def measure_core(opts: CoreOptions, previous=None) -> Core:
    """The core and the INT8 baseline array on the block, for each preset of ``opts``."""
    from dstar_rtl.bench.core import measure, measure_baseline

    steps, presets = [], {}
    for name in opts.presets:
        cfg = preset(name)
        with Step(steps, f"core block cycles, {name} (Verilator -O2)"):
            perf = measure(cfg, steps=opts.steps)
        with Step(steps, f"INT8 baseline array on the block's tiles, {name} (Verilator)"):
            measured = measure_baseline(cfg, perf)
        presets[name] = build(CoreBlock, analyse(cfg, perf, measured), f"core {name}")
    return Core(run_provenance("core", {n: b.perf.config_hash for n, b in presets.items()}),
                presets=presets, steps=tuple(StepTime(**s) for s in steps),
                host=dict(python=platform.python_version(), machine=platform.machine()))


MEASUREMENT = Measurement(
    name="core", stem="core",
    summary="The core's cycles on a DiT block on the generated RTL: per step and section, the "
            "engines' busy cycles, bytes per buffer, lane use, and the INT8 baseline array "
            "beside it.", options=CoreOptions, result=Core, measure=measure_core, render=render)
