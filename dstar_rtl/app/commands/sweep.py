"""``dstar sweep``: the design-space sweep of the DSTAR MPU against the INT8 array per µm².

``dstar sweep [--sizes 4 8 16 32 64] [--measure-sizes 4 8] [--lanes 2 4 8] [--pe-stages 0 1 2]
[--digit-product multiply select] [--digits slice booth] [--acc derived 26] [--weight-hop 1
rows] [--act-hop 1 cols] [--liberty FILE] [--bench reports/bench.json] [--throughput schedule|bench]
[--asic-area reports/asic_area.json] [--out-dir reports] [--jobs N] [--scheduler ADDR]
[--reuse]``

Synthesizes every PE variant and a subset of arrays on the Liberty library
(:mod:`bench.sweep.design`, on the :mod:`flows.farm`: ``--jobs`` local processes or a Dask
cluster's workers with ``--scheduler``), models the rest (:mod:`bench.sweep.area`), takes the
throughput from the measured bench (:mod:`bench.sweep.throughput`; ``--throughput bench`` uses
the bench's speed-up and lane utilization as they are, without the schedule at other sizes and
lanes) and writes ``design_sweep.json``, ``design_sweep.md`` and ``design_sweep.png`` into
``--out-dir`` together (:func:`gen.outputs.write_together`). Progress on stderr.

Bad input (a lever value not in the list, a size below 2, ``--measure-sizes`` not among the
sizes, a missing library or bench report, ``--jobs`` below 1, an output folder that cannot be
written) is one line and exit status 2 before any work; a failed synthesis run is one line and
exit status 1, and nothing is written.
"""

from __future__ import annotations

import time
from pathlib import Path

from dstar_rtl.app.cli import UserError, WorkError
from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.options import check_liberty, require_extra, resolve_liberty
from dstar_rtl.flows.liberty import NANGATE
from dstar_rtl.gen.outputs import check_output_dir, png_writer, write_together
from dstar_rtl.gen.paths import ROOT
from dstar_rtl.gen.progress import say
from dstar_rtl.results.base import build, plain
from dstar_rtl.results.design_sweep import DesignSweep

__all__ = ["register", "run_sweep_command"]

NAMES = ("design_sweep.json", "design_sweep.md", "design_sweep.png")


def _hop(text: str, option: str = "--weight-hop", whole: str = "rows"):
    """A hop value: an integer >= 1 or ``whole`` (``rows`` for ``--weight-hop``, ``cols`` for
    ``--act-hop``: broadcast), as a string."""
    if text == whole:
        return text
    try:
        k = int(text)
    except ValueError:
        raise UserError(f"{option} takes integers >= 1 or {whole!r}, not {text!r}") from None
    if k < 1:
        raise UserError(f"{option} takes integers >= 1 or {whole!r}, not {text!r}")
    return str(k)


def register(sub):
    from dstar_rtl.bench.sweep.design import LEVERS

    p = sub.add_parser(
        "sweep", help="design-space sweep: area (µm²), throughput and throughput per µm² of "
                      "DSTAR against the INT8 array",
        description="Sweep array size, lanes, PE stages and the datapath levers; synthesize "
                    "PEs and small arrays on a Liberty library, model the rest, and write a "
                    "JSON report, a Markdown table and a Pareto plot.")
    p.add_argument("--sizes", nargs="+", type=int, default=[4, 8, 16, 32, 64], metavar="N")
    p.add_argument("--measure-sizes", nargs="+", type=int, default=[4, 8], metavar="N",
                   help="sizes at which arrays are synthesized (default 4 8)")
    p.add_argument("--lanes", nargs="+", type=int, choices=(1, 2, 4, 8, 16), default=[2, 4, 8])
    p.add_argument("--pe-stages", nargs="+", type=int, choices=(0, 1, 2), default=[0, 1, 2])
    p.add_argument("--digit-product", nargs="+", choices=LEVERS["digit_product"],
                   default=list(LEVERS["digit_product"]))
    p.add_argument("--digits", nargs="+", choices=LEVERS["digits"],
                   default=list(LEVERS["digits"]))
    p.add_argument("--acc", nargs="+", choices=LEVERS["acc"], default=list(LEVERS["acc"]),
                   help="accumulator: derived (cannot overflow) and/or 26 (saturating, sticky "
                        "flag)")
    p.add_argument("--weight-hop", nargs="+", default=["1", "rows"], metavar="K",
                   help="rows per column-operand register: integers and/or 'rows' (broadcast); "
                        "default 1 rows (ignored when the configuration has no weight_hop)")
    p.add_argument("--act-hop", nargs="+", default=["1", "cols"], metavar="K",
                   help="columns per row-operand register: integers and/or 'cols' (broadcast "
                        "along the row); every value with every --weight-hop value; default 1 "
                        "cols (ignored when the configuration has no act_hop)")
    p.add_argument("--liberty", type=Path, default=None, metavar="FILE.lib",
                   help=f"the standard-cell library (default {NANGATE})")
    p.add_argument("--bench", type=Path, default=ROOT / "reports" / "bench.json",
                   help="the measured bench report (dstar bench --json)")
    p.add_argument("--throughput", choices=("schedule", "bench"), default="schedule",
                   help="schedule (default): scale the bench by the schedule's groups at each "
                        "size and lanes; bench: the bench's figures at every size and lanes")
    p.add_argument("--asic-area", type=Path, default=ROOT / "reports" / "asic_area.json",
                   help="stored ASIC report holding the QPU by part (used when it is on the "
                        "same library; otherwise the QPU is synthesized)")
    p.add_argument("--out-dir", type=Path, default=ROOT / "reports")
    p.add_argument("--jobs", type=int, default=2, help="local synthesis processes (default 2)")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="run the synthesis on this Dask scheduler's workers instead")
    p.add_argument("--reuse", action="store_true",
                   help="take stored results of identical synthesis runs")
    p.set_defaults(func=run_sweep_command)


def _check(args):
    if any(n < 2 for n in args.sizes):
        raise UserError(f"--sizes must be at least 2, not {min(args.sizes)}")
    missing = sorted(set(args.measure_sizes) - set(args.sizes))
    if missing:
        raise UserError(f"--measure-sizes {missing[0]} is not among --sizes {args.sizes}")
    if args.jobs < 1:
        raise UserError(f"--jobs must be at least 1, not {args.jobs}")
    hops = [_hop(h) for h in args.weight_hop]
    act_hops = [_hop(h, "--act-hop", "cols") for h in args.act_hop]
    if not args.bench.is_file():
        raise UserError(f"bench report not found: {args.bench} (run dstar bench)")
    from dstar_rtl.results.bench import Bench

    bench = Bench.load(args.bench)
    lib = resolve_liberty(args.liberty)
    info = check_liberty(lib)
    if args.scheduler is not None:
        require_extra("farm", "dstar sweep --scheduler")
    return hops, act_hops, lib, info, bench


def _uniq(xs):
    return list(dict.fromkeys(xs))


def run_sweep_command(args) -> int:
    from dstar_rtl.app.reports.asic import AsicReport
    from dstar_rtl.app.sweeps.report import figure, markdown
    from dstar_rtl.bench.sweep.design import (
        BASE_PRESET,
        baseline_variants,
        bench_packing,
        config_for,
        run_sweep,
        variants,
    )
    from dstar_rtl.bench.sweep.figures import assemble
    from dstar_rtl.bench.sweep.throughput import (
        bench_reference,
        check_consistency,
        model,
        record,
        workload_stats,
    )
    from dstar_rtl.flows.farm import JobError
    from dstar_rtl.flows.synth import SynthError, yosys_version
    from dstar_rtl.golden.config import ConfigError, preset

    t0 = time.perf_counter()

    out = check_output_dir(args.out_dir)
    hops, act_hops, lib, info, bench = _check(args)
    sizes, msizes = sorted(_uniq(args.sizes)), sorted(_uniq(args.measure_sizes))
    dvars = variants(_uniq(args.lanes), _uniq(args.pe_stages), _uniq(args.digit_product),
                     _uniq(args.digits), _uniq(args.acc), _uniq(hops), _uniq(act_hops))
    bvars = baseline_variants(_uniq(args.pe_stages), _uniq(hops), _uniq(act_hops))
    try:
        for v in dvars + bvars:
            for n in sizes:
                config_for(v, n, v["kind"] == "int8")
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    ref = bench_reference(bench)
    # The QPU is the bench's: its preset and packer (the open groups are part of the measured
    # throughput, and they cost a small QPU relatively more than a large one), by part, from
    # `asic_area.json` when it holds that very configuration, else synthesized here.
    packer = bench_packing(bench.config)
    qpu_preset = bench.preset
    want = preset(qpu_preset, **packer).hash()
    qpu = None
    if args.asic_area.is_file():
        stored = AsicReport.load(args.asic_area)
        q = stored.units.get(f"qpu-{qpu_preset}")
        if (stored.liberty.sha256 == info["sha256"] and q and q.parts
                and q.config_hash == want):
            qpu = dict(area=q.area, config_hash=q.config_hash, preset=qpu_preset,
                       parts={k: v.area for k, v in q.parts.items()},
                       source=f"{args.asic_area.name} (qpu-{qpu_preset} by part)")
    say(f"{len(dvars)} DSTAR and {len(bvars)} INT8 variants x sizes {sizes} on {info['name']}"
        f" ({lib.name}); QPU of `{qpu_preset}` from "
        + (qpu["source"] if qpu else "a synthesis run here")
        + (f" with the bench's {packer}" if packer else ""))
    try:
        sw = run_sweep(dvars, bvars, sizes, msizes, str(lib), reuse=args.reuse,
                       jobs=args.jobs, scheduler=args.scheduler, qpu=qpu, progress=say,
                       packer=packer, qpu_preset=qpu_preset)
    except JobError as exc:
        raise WorkError(f"synthesis failed: {exc}") from None
    except SynthError as exc:
        raise WorkError(str(exc)) from None
    sw["measure_sizes"] = msizes
    stats, check = None, None
    if args.throughput == "schedule":
        base = dict(bench.config)
        stats = workload_stats(ref, base, sorted(set(sizes) | {ref["rows"]}),
                               sorted(set(args.lanes) | {ref["lanes"]}), progress=say)
        check = check_consistency(ref, stats)

    tput = model(ref, stats)
    rep = dict(liberty=info, yosys=yosys_version(), base_preset=BASE_PRESET, sizes=sizes,
               measure_sizes=msizes,
               dstar_variants=[v["key"] for v in dvars], int8_variants=[v["key"] for v in bvars],
               qpu=sw["qpu"],
               throughput=record(ref, stats, check, str(args.bench.name), args.throughput),
               **assemble(dvars, bvars, sizes, sw, tput),
               seconds=round(time.perf_counter() - t0, 1),
               synthesis_seconds=sw["seconds"])
    prov = run_provenance("design-sweep")
    result = build(DesignSweep, dict(rep, provenance=plain(prov)), "the design sweep")
    paths = [out / n for n in NAMES]
    write_together({paths[0]: result.to_json(), paths[1]: markdown(result),
                    paths[2]: png_writer(figure(result), dpi="figure")}, record_command=False)
    c = rep["crossover"]
    say("crossover: " + (f"{c['size']}x{c['size']}" if c["size"] is not None else
                         f"none (best {c['best_ratio']:.2f}x at {c['best_size']}, misses by "
                         f"{c['miss']:.2f}x)"))
    say(f"wrote {', '.join(str(p) for p in paths)}")
    return 0
