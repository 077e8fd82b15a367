"""Resources against array size: the MPU and the INT8 baseline array at ``rows = cols`` of 2, 4,
6 and 8 (the ``tiny`` preset otherwise), ECP5 synthesis with DSP blocks, through the same flow
as ``dstar synth`` (one fresh Yosys process per configuration).

``dstar measure sizes [--sizes 2 4 6 8] [--reuse] [--jobs N] [--scheduler tcp://host:8786]``
writes ``reports/sweep.json`` (the typed result :class:`Sizes`), ``reports/sweep.md`` and
``reports/sweep.png`` through the one measurement runner (:data:`MEASUREMENT`); ``dstar report``
shows the same table and figure. The configurations run in parallel through :mod:`flows.farm`:
``--jobs`` local processes, or the workers of a Dask cluster with ``--scheduler``. Progress on
stderr.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.markdown import render
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import png_writer
from dstar_rtl.gen.progress import say
from dstar_rtl.gen.tables import md_table
from dstar_rtl.golden.config import ConfigError, preset
from dstar_rtl.results.quantities import Resources
from dstar_rtl.results.sizes import SizePoint, Sizes, SizeStep

__all__ = ["Sizes", "SizePoint", "MEASUREMENT", "table", "plot", "point_config"]

UNITS = ("mpu", "baseline")
BASE = "tiny"


def point_config(n: int):
    """The configuration of the sweep's point of size ``n``: the ``tiny`` preset at
    ``rows = cols = vpu_lanes = n``."""
    return preset(BASE, rows=n, cols=n, vpu_lanes=n)


def synth_point(unit: str, n: int, reuse: bool) -> dict:
    """One point of the sweep: ``unit`` at ``rows = cols = n`` (a farm job: a fresh Yosys
    process, its own work directory)."""
    from dstar_rtl.flows.synth import synthesize

    cfg = point_config(n)
    t0 = time.perf_counter()
    r = synthesize(unit, cfg, "ecp5", reuse=reuse)
    return dict(unit=unit, size=n, config_hash=cfg.hash(), resources=r["resources"],
                flow=r.get("flow", "flat"), seconds=r["seconds"],
                reused=r.get("reused", False), tools=r["tools"],
                wall_s=round(time.perf_counter() - t0, 1))


@dataclass(frozen=True)
class SizesOptions:
    """What ``dstar measure sizes`` synthesizes (checked at construction)."""

    sizes: tuple[int, ...] = option((2, 4, 6, 8), "array sizes rows = cols")
    reuse: bool = option(False, "reuse stored synthesis results of identical runs")
    jobs: int = option(2, "local processes")
    scheduler: str | None = option(None, "run the points on this Dask scheduler's workers "
                                         "instead", metavar="tcp://HOST:PORT")

    def __post_init__(self):
        if self.jobs < 1:
            raise UserError(f"--jobs must be at least 1, not {self.jobs}")
        for n in self.sizes:
            try:
                point_config(n)
            except ConfigError as exc:
                raise UserError(f"--sizes {n}: {exc}") from None


def measure(opts: SizesOptions, previous=None) -> Sizes:
    """Every (size, unit) point, run on the farm (progress on stderr)."""
    from dstar_rtl.flows.farm import run_jobs

    args = [(unit, n, opts.reuse) for n in opts.sizes for unit in UNITS]
    rows = run_jobs(synth_point, args, jobs=opts.jobs, scheduler=opts.scheduler,
                    labels=[f"synth {u} {n}x{n} ecp5" for u, n, _ in args], progress=say)
    steps = tuple(SizeStep(f"synth {r['unit']} {r['size']}x{r['size']} ecp5", r.pop("wall_s"),
                           "reused" if r["reused"] else None) for r in rows)
    points = tuple(SizePoint(**{**r, "resources": Resources.from_flow(r["resources"])})
                   for r in rows)
    return Sizes(run_provenance("sizes", {f"{p.unit} {p.size}": p.config_hash
                                             for p in points}),
                 base_preset=BASE, points=points, steps=steps)


def _config_cell(p: SizePoint) -> str:
    """``default`` when the point was measured on today's configuration of its size."""
    if p.config_hash == point_config(p.size).hash():
        return "default"
    return f"`{p.config_hash}` (**not today's**)"


def table(result: Sizes) -> list:
    """The sweep's Markdown lines (a stale note when a point is not of today's configuration,
    the table): the same in ``reports/sweep.md`` and REPORT.md."""
    pts = sorted(result.points, key=lambda p: (p.unit, p.size))
    cells = [_config_cell(p) for p in pts]
    old = sum(c != "default" for c in cells)
    return [*([f"**Stale**: {old} of {len(pts)} points were measured on configurations other "
               "than today's (column *configuration*); `dstar measure sizes` remeasures them.",
               ""] if old else []),
            md_table(["unit", "n × n", "configuration", "LUT4", "carry", "FF", "DSP",
                      "LUTs per PE"],
                     [[p.unit, f"{p.size} × {p.size}", c, p.resources.lut4, p.resources.carry,
                       p.resources.ff, p.resources.dsp,
                       f"{p.resources.lut_total / p.size ** 2:,.0f}"]
                      for p, c in zip(pts, cells)], left=8, digits=None), ""]


def markdown(result: Sizes) -> str:
    """``reports/sweep.md`` from its result (``app/templates/sweep.md``)."""
    return render("sweep", r=result, table="\n".join(table(result)))


def plot(result: Sizes):
    """The size-sweep figure as a writer of PNG bytes to a binary file object."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    ax = fig.subplots(1, 2)
    for unit in sorted({p.unit for p in result.points}):
        pts = sorted((p for p in result.points if p.unit == unit), key=lambda p: p.size)
        xs = [p.size ** 2 for p in pts]
        ax[0].plot(xs, [p.resources.lut_total for p in pts], "o-", label=unit)
        ax[1].plot(xs, [p.resources.ff for p in pts], "o-", label=unit)
    for a, lab in zip(ax, ("LUTs (LUT4 + carry + LUT RAM)", "flip-flops")):
        a.set_xlabel("PEs (rows × cols)")
        a.set_ylabel(lab)
        a.grid(alpha=0.3)
        a.legend()
    fig.suptitle(f"ECP5 resources against array size ({result.base_preset} preset otherwise)")
    fig.tight_layout()
    return png_writer(fig, dpi=110)


MEASUREMENT = Measurement(
    name="sizes", stem="sweep",
    summary="ECP5 resources of the MPU and the INT8 array against the array's size (the tiny "
            "preset at rows = cols = vpu_lanes = n).",
    options=SizesOptions, result=Sizes, measure=measure, render=markdown,
    figures=lambda r: {"sweep.png": plot(r)})
