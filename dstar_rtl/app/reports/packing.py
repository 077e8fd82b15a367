"""Issues 16 and 28: how the QPU forms lane groups (the sorting packer with ``open_groups`` open
partial groups, or the exponent bins of ``packer = "bins"``), lane utilization against QPU area,
side by side in one run.

``dstar measure packing`` writes ``reports/qpu_packing.json`` (the typed result :class:`Packing`)
and ``reports/qpu_packing.md`` through the one measurement runner (:data:`MEASUREMENT`):

1. lane utilization (valid lanes / (groups · lanes)) of the group streams of the whole sampling
   run that ``dstar bench`` measures (the trained digits DiT, every layer of block 0 plus
   ``x_embed`` and ``final.linear``, every step, at the operating point of
   ``reports/profile_sweep.json``), from the golden schedule, for each ``open_groups`` in
   :data:`PACKINGS` on the ``fpga`` preset with the bench's datapath (:data:`BENCH`); the same
   streams the RTL QPU emits, bit for bit (``tests/test_qpu_amaranth.py``);
2. the QPU of each of those configurations synthesized alone in one fresh Yosys process per run
   (:mod:`flows.synth`): ECP5 with every LUT mapped by ``abc -lut 4`` (the mapper the QPU falls
   back to when abc9 asserts, so all runs share one flow), and cell area on the standard-cell
   library given by ``--liberty`` (default: Nangate45 of ``../shared/pdk`` when present).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from dstar_rtl.analysis.profile import load_operating_point
from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.app.options import resolve_liberty
from dstar_rtl.bench.layers import load_inputs, prepare
from dstar_rtl.flows.synth import synthesize, yosys_version
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import data_json
from dstar_rtl.gen.paths import REPORTS
from dstar_rtl.gen.progress import say
from dstar_rtl.golden.config import preset
from dstar_rtl.results.packing import Packing, PackingRow
from dstar_rtl.results.quantities import AsicArea, Library, Resources

#: The bench's datapath (``reports/bench.md``): the packing does not depend on it but the digit
#: code changes which columns are zero.
BENCH = dict(digit_product="select", digits="booth", weight_hop=8, act_hop=8)
#: The rows: a label and the packing's parameters.
PACKINGS = tuple(
    [(f"sort, open {k}, windows {w}", dict(packer="sort", open_groups=k, pack_windows=w))
     for k, w in ((0, 1), (1, 1), (2, 1), (4, 1), (4, 2))]
    + [(f"bins {n}", dict(packer="bins", open_groups=0, pack_windows=1, pack_bins=n))
       for n in (4, 8)])


def lane_utilization(packing: dict, operating_point, inputs, steps=20) -> dict:
    """Groups and valid lanes of the bench workload's streams with the ``packing`` parameters
    (the stream does not depend on ``pack_windows``); ``inputs``: the layers and trace of
    :func:`bench.layers.load_inputs`."""
    cfg = preset("fpga", **BENCH, **packing)
    layers_in, trace = inputs
    layers = prepare(cfg, layers_in, trace, list(range(steps)), False, operating_point)
    groups = sum(bl.groups for bl in layers)
    valid = sum(bl.lanes_valid for bl in layers)
    return dict(groups=groups, lanes_valid=valid, lane_util=valid / (groups * cfg.lanes))


@dataclass(frozen=True)
class PackingOptions:
    """What ``dstar measure packing`` reads (checked at construction)."""

    liberty: Path | None = option(None, "standard-cell library for the ASIC area (default: the "
                                        "Nangate45 library beside the project when it is "
                                        "there, else no ASIC area)")
    operating_point: Path = option(REPORTS / "profile_sweep.json",
                                   "the profile sweep whose operating point the streams use")
    reuse: bool = option(False, "reuse stored identical Yosys runs")

    def __post_init__(self):
        if not Path(self.operating_point).is_file():
            raise UserError(f"--operating-point: operating point file not found: "
                            f"{self.operating_point}")
        resolve_liberty(self.liberty, needed=False)


def qpu_area(packing: dict, liberty, reuse) -> tuple:
    """The QPU of ``packing`` alone: ``(config hash, ECP5 resources, ECP5 flow, cell area or
    None, library or None)``."""
    cfg = preset("fpga", **BENCH, **packing)
    r = synthesize("qpu", cfg, "ecp5", nodsp=True, abc9=False, reuse=reuse)
    asic = library = None
    if liberty:
        a = synthesize("qpu", cfg, "asic", liberty=liberty, reuse=reuse)
        asic, library = AsicArea.from_flow(a["resources"]), Library.from_flow(a["liberty"])
    return cfg.hash(), Resources.from_flow(r["resources"]), r.get("flow"), asic, library


def _area(a: AsicArea | None, name: str) -> str:
    v = None if a is None else getattr(a, name)
    return "–" if v is None else f"{v:,.1f}"


def markdown(data: Packing) -> str:
    """``reports/qpu_packing.md`` from its result."""
    lib = data.library or Library(None)
    rows = ["| packing | groups | lane util | ECP5 LUT4 | CCU2C | LUT total | FF | "
            "area µm² | comb. | seq. |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in data.rows:
        e = r.ecp5
        rows.append(f"| {r.label} | {r.groups:,} | {100 * r.lane_util:.1f} % | {e.lut4:,} | "
                    f"{e.carry:,} | {e.lut_total:,} | {e.ff:,} | "
                    + " | ".join(_area(r.asic, x) for x in
                                 ("area", "combinational_area", "sequential_area")) + " |")
    return "\n".join([
        "# How the QPU forms lane groups: lane utilization against QPU area",
        "",
        f"Generated by `dstar measure packing` on {data.provenance.date}; Yosys "
        f"{data.yosys}; library {lib.name or '–'} (sha256 "
        f"`{(lib.sha256 or '–')[:16]}`).",
        "",
        f"`fpga` preset with {', '.join(f'`{k}={v}`' for k, v in data.bench.items())}. Lane "
        "utilization over the whole sampling run `dstar bench` measures (trained digits DiT, "
        f"{data.steps} steps, operating point `{data.operating_point}`), from the golden "
        "schedule that the RTL QPU reproduces bit for bit. QPU alone, one Yosys process per run: "
        "ECP5 `synth_ecp5 -nodsp` with `abc -lut 4` (LUT total = LUT4 + 2 × CCU2C), and the "
        "liberty flow of `dstar synth --target asic` (buffers as macros). *sort*: chunks of "
        "`sort_n` sorted by exponent and packed, *open* partial groups held across the chunks "
        "of a tile (`open_groups`), *windows* packed per cycle (`pack_windows`, 2: a cycle that "
        "stores a partial group also emits the window after it; the same stream, more QPU "
        "rate, see `reports/qpu_rate.md`). *bins N*: no chunks and no sort, one open group per "
        "exponent bin, N bins (`packer = \"bins\"`, `pack_bins`; numerics §2.3).",
        "",
        *rows,
        "",
    ])


def measure(opts: PackingOptions, previous=None) -> Packing:
    """Every packing of :data:`PACKINGS`: lane utilization on the bench workload and the QPU's
    area (progress on stderr)."""
    try:
        op = load_operating_point(opts.operating_point)
    except (ValueError, KeyError) as why:
        raise UserError(f"--operating-point {opts.operating_point}: {why}") from None
    liberty = resolve_liberty(opts.liberty, needed=False)
    rows, library, util, configs = [], None, {}, {}
    layers_in, trace, _ = load_inputs(preset("fpga", **BENCH), steps=20)
    for label, packing in PACKINGS:
        t0 = time.perf_counter()
        stream_key = data_json({k: v for k, v in packing.items() if k != "pack_windows"},
                               sort_keys=True)
        if stream_key not in util:
            util[stream_key] = lane_utilization(packing, op, (layers_in, trace))
        chash, ecp5, flow, asic, lib = qpu_area(packing, liberty, opts.reuse)
        library = lib or library
        configs[label] = chash
        rows.append(PackingRow(label=label, **packing, **util[stream_key], config_hash=chash,
                               ecp5=ecp5, ecp5_flow=flow, asic=asic))
        say(f"{label}: lane util {100 * rows[-1].lane_util:.1f} %, ECP5 LUT "
            f"{ecp5.lut_total:,}, FF {ecp5.ff:,} ({time.perf_counter() - t0:.0f} s)")
    return Packing(run_provenance("packing", configs), yosys=yosys_version(),
                   library=library, steps=20, operating_point=op["name"], bench=dict(BENCH),
                   rows=tuple(rows))


MEASUREMENT = Measurement(
    name="packing", stem="qpu_packing",
    summary="How the QPU forms lane groups: lane utilization on the bench workload against the "
            "QPU's ECP5 cells and cell area, for each packing.", options=PackingOptions,
    result=Packing, measure=measure, render=markdown)
