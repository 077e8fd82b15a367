"""``dstar measure design-sweep`` (also ``dstar sweep``): the design-space sweep of the DSTAR MPU
against the INT8 array per µm², on the one measurement runner.

Synthesizes every PE variant and a subset of arrays on the Liberty library
(:mod:`bench.sweep.design`, on the :mod:`flows.farm`: ``--jobs`` local processes or a Dask
cluster's workers with ``--scheduler``), models the rest (:mod:`bench.sweep.area`), takes the
throughput from the measured bench (:mod:`bench.sweep.throughput`; ``--throughput bench`` uses
the bench's speed-up and lane utilization as they are) and writes ``design_sweep.json``,
``design_sweep.md`` and ``design_sweep.png`` into ``--out`` together. Progress on stderr.

Bad input (a lever value not in the list, a size below 2, ``--measure-sizes`` not among the
sizes, a missing library or bench result, ``--jobs`` below 1) is one line and exit status 2
before any work; a failed synthesis run is one line and exit status 1, and nothing is written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.measurement import Measurement, check_among, option
from dstar_rtl.app.options import check_liberty, require_extra, resolve_liberty
from dstar_rtl.app.sweeps.report import figure, markdown
from dstar_rtl.bench.sweep.design import LEVERS
from dstar_rtl.flows.liberty import NANGATE
from dstar_rtl.gen.errors import UserError, WorkError
from dstar_rtl.gen.outputs import png_writer
from dstar_rtl.gen.paths import REPORTS
from dstar_rtl.gen.progress import say
from dstar_rtl.results.base import build, plain
from dstar_rtl.results.design_sweep import DesignSweep

__all__ = ["SweepOptions", "MEASUREMENT"]


def _hop(text: str, option: str, whole: str) -> str:
    """A hop value: an integer >= 1 or ``whole`` (broadcast), as a string."""
    if text != whole and not (text.isdigit() and int(text) >= 1):
        raise UserError(f"{option} takes integers >= 1 or {whole!r}, not {text!r}")
    return text if text == whole else str(int(text))


@dataclass(frozen=True)
class SweepOptions:
    """What ``dstar measure design-sweep`` sweeps (checked at construction)."""

    sizes: tuple[int, ...] = option((4, 8, 16, 32, 64), "array sizes rows = cols", metavar="N")
    measure_sizes: tuple[int, ...] = option((4, 8), "sizes at which arrays are synthesized",
                                            metavar="N")
    lanes: tuple[int, ...] = option((2, 4, 8), "DSTAR lanes", choices=(1, 2, 4, 8, 16))
    pe_stages: tuple[int, ...] = option((0, 1, 2), "PE pipeline stages", choices=(0, 1, 2))
    digit_product: tuple[str, ...] = option(LEVERS["digit_product"], "digit products",
                                            choices=LEVERS["digit_product"])
    digits: tuple[str, ...] = option(LEVERS["digits"], "digit codes", choices=LEVERS["digits"])
    acc: tuple[str, ...] = option(LEVERS["acc"], "accumulator: derived (cannot overflow) and/or "
                                  "26 (saturating, sticky flag)", choices=LEVERS["acc"])
    weight_hop: tuple[str, ...] = option(("1", "rows"), "rows per column-operand register: "
                                         "integers and/or 'rows' (broadcast)", metavar="K")
    act_hop: tuple[str, ...] = option(("1", "cols"), "columns per row-operand register: "
                                      "integers and/or 'cols' (broadcast along the row)",
                                      metavar="K")
    liberty: Path | None = option(None, f"the standard-cell library (default: {NANGATE})")
    bench: Path = option(REPORTS / "bench.json", "the measured bench (dstar bench)")
    throughput: Literal["schedule", "bench"] = option(
        "schedule", "schedule: scale the bench by the schedule's groups at each size and lanes; "
                    "bench: the bench's figures at every size and lanes")
    asic_area: Path = option(REPORTS / "asic_area.json", "stored ASIC result holding the QPU by "
                             "part (used when it is on the same library; else it is synthesized)")
    jobs: int = option(2, "local synthesis processes")
    scheduler: str | None = option(None, "run the synthesis on this Dask scheduler's workers",
                                   metavar="tcp://HOST:PORT")
    reuse: bool = option(False, "take stored results of identical synthesis runs")

    def __post_init__(self):
        if any(n < 2 for n in self.sizes):
            raise UserError(f"--sizes must be at least 2, not {min(self.sizes)}")
        missing = sorted(set(self.measure_sizes) - set(self.sizes))
        if missing:
            raise UserError(f"--measure-sizes {missing[0]} is not among --sizes "
                            f"{list(self.sizes)}")
        if self.jobs < 1:
            raise UserError(f"--jobs must be at least 1, not {self.jobs}")
        check_among("--lanes", self.lanes, (1, 2, 4, 8, 16))
        for h in self.weight_hop:
            _hop(h, "--weight-hop", "rows")
        for h in self.act_hop:
            _hop(h, "--act-hop", "cols")
        if not self.bench.is_file():
            raise UserError(f"bench report not found: {self.bench} (run dstar bench)")
        check_liberty(resolve_liberty(self.liberty))
        if self.scheduler is not None:
            require_extra("farm", "dstar sweep --scheduler")


def _uniq(xs):
    return list(dict.fromkeys(xs))


def _stored_qpu(opts: SweepOptions, info: dict, preset_name: str, want: str) -> dict | None:
    """The QPU of the bench's preset and packer by part from ``--asic-area`` when it holds that
    very configuration on the same library, else ``None`` (it is synthesized)."""
    from dstar_rtl.results.asic import AsicReport

    if not opts.asic_area.is_file():
        return None
    stored = AsicReport.load(opts.asic_area)
    q = stored.units.get(f"qpu-{preset_name}")
    if stored.liberty.sha256 != info["sha256"] or not (q and q.parts) or q.config_hash != want:
        return None
    return dict(area=q.area, config_hash=q.config_hash, preset=preset_name,
                parts={k: v.area for k, v in q.parts.items()},
                source=f"{opts.asic_area.name} (qpu-{preset_name} by part)")


def measure(opts: SweepOptions, previous=None) -> DesignSweep:
    """The sweep (module docstring), progress on stderr."""
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
    from dstar_rtl.results.bench import Bench

    t0 = time.perf_counter()
    lib = resolve_liberty(opts.liberty)
    info = check_liberty(lib)
    bench = Bench.load(opts.bench)
    hops = [_hop(h, "--weight-hop", "rows") for h in opts.weight_hop]
    act_hops = [_hop(h, "--act-hop", "cols") for h in opts.act_hop]
    sizes, msizes = sorted(_uniq(opts.sizes)), sorted(_uniq(opts.measure_sizes))
    dvars = variants(_uniq(opts.lanes), _uniq(opts.pe_stages), _uniq(opts.digit_product),
                     _uniq(opts.digits), _uniq(opts.acc), _uniq(hops), _uniq(act_hops))
    bvars = baseline_variants(_uniq(opts.pe_stages), _uniq(hops), _uniq(act_hops))
    try:
        for v in dvars + bvars:
            for n in sizes:
                config_for(v, n, v["kind"] == "int8")
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    ref = bench_reference(bench)
    # The QPU is the bench's: its preset and packer (the open groups are part of the measured
    # throughput, and they cost a small QPU relatively more than a large one).
    packer = bench_packing(bench.config)
    qpu = _stored_qpu(opts, info, bench.preset, preset(bench.preset, **packer).hash())
    say(f"{len(dvars)} DSTAR and {len(bvars)} INT8 variants x sizes {sizes} on {info['name']}"
        f" ({lib.name}); QPU of `{bench.preset}` from "
        + (qpu["source"] if qpu else "a synthesis run here")
        + (f" with the bench's {packer}" if packer else ""))
    try:
        sw = run_sweep(dvars, bvars, sizes, msizes, str(lib), reuse=opts.reuse, jobs=opts.jobs,
                       scheduler=opts.scheduler, qpu=qpu, progress=say, packer=packer,
                       qpu_preset=bench.preset)
    except JobError as exc:
        raise WorkError(f"synthesis failed: {exc}") from None
    except SynthError as exc:
        raise WorkError(str(exc)) from None
    sw["measure_sizes"] = msizes
    stats, check = None, None
    if opts.throughput == "schedule":
        stats = workload_stats(ref, dict(bench.config), sorted(set(sizes) | {ref["rows"]}),
                               sorted(set(opts.lanes) | {ref["lanes"]}), progress=say)
        check = check_consistency(ref, stats)
    rep = dict(liberty=info, yosys=yosys_version(), base_preset=BASE_PRESET, sizes=sizes,
               measure_sizes=msizes, dstar_variants=[v["key"] for v in dvars],
               int8_variants=[v["key"] for v in bvars], qpu=sw["qpu"],
               throughput=record(ref, stats, check, opts.bench.name, opts.throughput),
               **assemble(dvars, bvars, sizes, sw, model(ref, stats)),
               seconds=round(time.perf_counter() - t0, 1), synthesis_seconds=sw["seconds"])
    c = rep["crossover"]
    say("crossover: " + (f"{c['size']}x{c['size']}" if c["size"] is not None else
                         f"none (best {c['best_ratio']:.2f}x at {c['best_size']}, misses by "
                         f"{c['miss']:.2f}x)"))
    return build(DesignSweep, dict(rep, provenance=plain(run_provenance("design-sweep"))),
                 "the design sweep")


MEASUREMENT = Measurement(
    name="design-sweep", stem="design_sweep",
    summary="The design-space sweep: area (µm²), throughput and throughput per µm² of DSTAR "
            "against the INT8 array over sizes, lanes, PE stages and the datapath levers; PEs "
            "and small arrays synthesized on a Liberty library, the rest modelled; the Pareto "
            "front and the crossover size.",
    options=SweepOptions, result=DesignSweep, measure=measure, render=markdown,
    figures=lambda r: {"design_sweep.png": png_writer(figure(r), dpi="figure")})
