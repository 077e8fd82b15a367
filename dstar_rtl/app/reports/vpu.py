"""VPU report: cycles per row, accuracy against float, and ECP5 resources and Fmax.

``dstar measure vpu`` writes ``reports/vpu.json`` (the typed result :class:`Vpu`: every figure,
its provenance, tool versions, configuration hashes, step times) and ``reports/vpu.md`` (the same
as tables), through the one measurement runner (:data:`MEASUREMENT`). Everything is measured;
nothing is typed in.

1. Cycles per row (``bench.vpu``): every operation at three row lengths, on the generated
   VPU under Verilator, three rows back to back, no input gaps, an always-ready output, every
   output checked against golden. *Latency*: from the command's transfer to the row's last
   output beat, inclusive; *interval*: between the last output beats of consecutive rows (the
   steady-state cost of a row). Presets ``fpga`` and ``paper`` (``--presets`` changes them).
2. Accuracy (:mod:`analysis.vpu_accuracy`): the integer functions against their float references,
   maximum and mean error over random and edge rows, with the bounds the tests assert.
3. ECP5 (``fpga`` preset): ``synth_ecp5`` with DSP blocks and without (``-nodsp``), and
   nextpnr-ecp5 (85F, out of context, 100 MHz target) on the DSP netlist for Fmax and the
   critical path's end points.

``--reuse`` takes stored synthesis and place-and-route results of byte-identical inputs;
``--skip-fpga`` / ``--skip-cycles`` leave a part out (its previous figures are kept).
"""

from __future__ import annotations

import dataclasses
import platform
from dataclasses import dataclass
from pathlib import Path

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.measurement import Measurement, check_among, option
from dstar_rtl.gen.progress import Step
from dstar_rtl.gen.tables import md_table, tool_seconds
from dstar_rtl.golden.config import PRESETS, preset
from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import PnrRun, StepTime, SynthRun


@dataclass(frozen=True)
class VpuOptions:
    """What ``dstar measure vpu`` measures (checked at construction)."""

    presets: tuple[str, ...] = option(("fpga", "paper"), "presets of the cycles per row",
                                      choices=sorted(PRESETS))
    reuse: bool = option(False, "reuse stored synthesis/P&R results of identical inputs")
    skip_fpga: bool = option(False, "leave out ECP5 synthesis and P&R (keep the previous "
                                    "figures)")
    skip_cycles: bool = option(False, "leave out the cycles per row (keep the previous "
                                      "figures)")

    def __post_init__(self):
        check_among("--presets", self.presets, PRESETS)


@dataclass(frozen=True)
class RowCycles:
    """One operation at one row length: the first row's latency and the steady-state interval
    between rows (cycles)."""

    latency: int
    interval: float


@dataclass(frozen=True)
class VpuCycles:
    """Cycles per row of every operation at three row lengths (:func:`bench.vpu.measure`):
    ``table[op][str(n)]``."""

    preset: str
    config_hash: str
    vpu_lanes: int
    max_reduction: int
    lengths: tuple[int, ...]
    rows: int
    ops: tuple[str, ...]
    simulator: str
    table: dict[str, dict[str, RowCycles]]
    sim_cycles_per_second: float

    @classmethod
    def from_bench(cls, d: dict) -> VpuCycles:
        return cls(**{**d, "lengths": tuple(d["lengths"]), "ops": tuple(d["ops"]),
                      "table": {op: {n: RowCycles(**c) for n, c in by_n.items()}
                                for op, by_n in d["table"].items()}})


@dataclass(frozen=True)
class FunctionError:
    """One integer function against its float reference: maximum and mean absolute error, the
    bounds the tests assert (``None``: none), the worst case's name."""

    max_abs: float | None
    mean_abs: float | None
    max_bound: float | None
    mean_bound: float | None
    worst: str


@dataclass(frozen=True)
class VpuFpga:
    """The ``fpga`` VPU on the ECP5: synthesis with and without DSP blocks, place and route of
    the DSP netlist."""

    config_hash: str
    ecp5: SynthRun
    ecp5_nodsp: SynthRun
    pnr: PnrRun


@dataclass(frozen=True)
class Vpu(Result):
    """``reports/vpu.json``: cycles per row by preset, accuracy by preset and function, the
    ECP5 figures, the steps' times and the host."""

    KIND = "vpu"
    cycles: dict[str, VpuCycles]
    accuracy: dict[str, dict[str, FunctionError]]
    fpga: VpuFpga | None
    steps: tuple[StepTime, ...]
    host: dict[str, str]


def fpga_figures(steps: list, reuse: bool) -> VpuFpga:
    from dstar_rtl.flows.pnr import place_and_route
    from dstar_rtl.flows.synth import synthesize

    cfg = preset("fpga")
    runs = {}
    for nodsp in (False, True):
        label = "ecp5-nodsp" if nodsp else "ecp5"
        with Step(steps, f"synth vpu fpga {label}"):
            r = synthesize("vpu", cfg, "ecp5", nodsp=nodsp, reuse=reuse)
        runs[label] = SynthRun.from_flow(r)
        if not nodsp:
            with Step(steps, "nextpnr vpu fpga ecp5 (85F, 100 MHz target)"):
                p = place_and_route(r["netlist"], workdir=Path(r["workdir"]) / "pnr",
                                    freq_mhz=100, reuse=reuse)
            pnr = PnrRun.from_flow(p)
    return VpuFpga(cfg.hash(), runs["ecp5"], runs["ecp5-nodsp"], pnr)


def accuracy(names) -> dict[str, dict[str, FunctionError]]:
    from dstar_rtl.analysis import vpu_accuracy as va

    out = {}
    for name in names:
        cfg = preset(name)
        m, b = va.measure(cfg), va.bounds(cfg)
        out[name] = {k: FunctionError(max_abs=m[k]["max_abs"], mean_abs=m[k]["mean_abs"],
                                      max_bound=b[k]["max_abs"], mean_bound=b[k]["mean_abs"],
                                      worst=m[k]["worst"]) for k in va.METRICS}
    return out


def _cell(v) -> str:
    return "–" if v is None or v != v else f"{v:.4g}"


def render(res: Vpu) -> str:
    """``reports/vpu.md`` from its result."""
    lines = ["# VPU: cycles per row, accuracy, ECP5 resources", "",
             "Generated by `dstar measure vpu` (part of `make reports`); every figure "
             "is measured. Operations and operands: `golden/vpu_stream.py`; architecture: "
             "docs/architecture.md, section 9.", ""]
    for name, c in res.cycles.items():
        lines += [f"## Cycles per row, `{name}` preset (vpu_lanes {c.vpu_lanes}, "
                  f"max_reduction {c.max_reduction})", "",
                  f"Verilator, {c.rows} rows back to back per case (commands sent ahead on "
                  f"their own stream), no gaps, output always ready. *lat*: the first row's "
                  f"command transfer to its last output beat; *int*: cycles between the last "
                  f"beats of consecutive rows. Testbench throughput (golden model included) "
                  f"{c.sim_cycles_per_second:,.0f} cycles/s.", ""]
        head = ["operation"] + [f"n={n} lat / int" for n in c.lengths]
        rows = [[op] + [f"{c.table[op][str(n)].latency} / {c.table[op][str(n)].interval:g}"
                        for n in c.lengths] for op in c.ops]
        lines += [md_table(head, rows), ""]
    for name, a in res.accuracy.items():
        lines += [f"## Accuracy against float, `{name}` preset", "",
                  "Maximum and mean absolute error of the integer model against the float "
                  "reference over random and edge rows, and the bounds `tests/test_vpu.py` "
                  "asserts (units: output LSBs unless noted).", ""]
        rows = [[k, _cell(v.max_abs), _cell(v.max_bound), _cell(v.mean_abs),
                 _cell(v.mean_bound), v.worst] for k, v in a.items()]
        lines += [md_table(["function", "max", "max bound", "mean", "mean bound", "worst case"],
                         rows), ""]
    f = res.fpga
    if f:
        lines += ["## ECP5, `fpga` preset", ""]
        rows = []
        for label, run in (("ecp5", f.ecp5), ("ecp5-nodsp", f.ecp5_nodsp)):
            r = run.resources
            rows.append([label, r.lut_total, r.ff, r.dsp, r.bram, r.carry,
                         tool_seconds(dataclasses.asdict(run))])
        lines += [md_table(["flow", "LUTs", "FFs", "DSPs", "BRAM", "carry", "seconds"], rows), ""]
        p, cp = f.pnr, f.pnr.critical_path
        lines += [f"nextpnr-ecp5 (85F, out of context, {p.constraint_mhz:g} MHz target): "
                  f"**Fmax {p.fmax_mhz} MHz** "
                  f"({'met' if p.timing_pass else 'NOT met'}); critical path "
                  f"{cp.delay_ns} ns ({cp.logic_ns} logic, "
                  f"{cp.routing_ns} routing, {cp.logic_levels} logic levels) "
                  f"from `{cp.start}` to `{cp.end}`.", ""]
    lines += ["## Steps", "", md_table(["step", "seconds", "status"],
                                     [[s.step, s.seconds, s.status] for s in res.steps]), ""]
    return "\n".join(lines)


def measure(opts: VpuOptions, previous=lambda: None) -> Vpu:
    """The VPU's cycles, accuracy and ECP5 figures; what ``opts`` skips is taken from
    ``previous()`` (the stored result), or left out when there is none."""
    steps: list = []
    prev = previous() if opts.skip_cycles or opts.skip_fpga else None
    cycles = dict(prev.cycles) if prev and opts.skip_cycles else {}
    if not opts.skip_cycles:
        from dstar_rtl.bench.vpu import measure as measure_cycles

        for name in opts.presets:
            with Step(steps, f"cycles per row, {name} (Verilator)"):
                cycles[name] = VpuCycles.from_bench(measure_cycles(preset(name)))
    with Step(steps, "accuracy (golden)"):
        acc = accuracy(["tiny", "fpga"])
    fpga = prev.fpga if prev and opts.skip_fpga else None
    if not opts.skip_fpga:
        fpga = fpga_figures(steps, opts.reuse)
    configs = {name: c.config_hash for name, c in cycles.items()}
    return Vpu(run_provenance("vpu", configs), cycles=cycles, accuracy=acc, fpga=fpga,
               steps=tuple(StepTime(**s) for s in steps),
               host=dict(python=platform.python_version(), machine=platform.machine()))


MEASUREMENT = Measurement(
    name="vpu", stem="vpu",
    summary="The VPU's cycles per row on the generated RTL, its accuracy against float, and "
            "its ECP5 resources and Fmax.", options=VpuOptions, result=Vpu, measure=measure,
    render=render)
