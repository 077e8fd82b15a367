"""Resources against array size: the MPU and the INT8 baseline array at ``rows = cols`` of 2, 4,
6 and 8 (the ``tiny`` preset otherwise), ECP5 synthesis with DSP blocks, through the same flow
as ``dstar synth`` (one fresh Yosys process per configuration).

``dstar measure sizes [--sizes 2 4 6 8] [--reuse] [--jobs N] [--scheduler tcp://host:8786]``
writes ``reports/sweep.json``; ``dstar report`` tables and plots it. The configurations run in
parallel through :mod:`flows.farm`: ``--jobs`` local processes, or the workers of a Dask
cluster with ``--scheduler``. Progress on stderr.
"""

from __future__ import annotations

import sys
import time

from dstar_rtl.app.options import Parser
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import check_output_dir, json_text, write_together
from dstar_rtl.gen.paths import ROOT
from dstar_rtl.gen.progress import say
from dstar_rtl.golden.config import ConfigError, preset

OUT = ROOT / "reports"
UNITS = ("mpu", "baseline")


def synth_point(unit: str, n: int, reuse: bool) -> dict:
    """One point of the sweep: ``unit`` at ``rows = cols = n`` (a farm job: a fresh Yosys
    process, its own work directory)."""
    from dstar_rtl.flows.synth import synthesize

    cfg = preset("tiny", rows=n, cols=n, vpu_lanes=n)
    t0 = time.perf_counter()
    r = synthesize(unit, cfg, "ecp5", reuse=reuse)
    return dict(unit=unit, size=n, config_hash=cfg.hash(), resources=r["resources"],
                flow=r.get("flow", "flat"), seconds=r["seconds"],
                reused=r.get("reused", False), tools=r["tools"],
                wall_s=round(time.perf_counter() - t0, 1))


def sweep(sizes, reuse: bool, steps: list, *, jobs: int = 2, scheduler=None) -> list:
    """Every (size, unit) point, run on the farm; ``steps`` gets one record per point."""
    from dstar_rtl.flows.farm import run_jobs

    args = [(unit, n, reuse) for n in sizes for unit in UNITS]
    rows = run_jobs(synth_point, args, jobs=jobs, scheduler=scheduler,
                    labels=[f"synth {u} {n}x{n} ecp5" for u, n, _ in args],
                    progress=say)
    for r in rows:
        steps.append(dict(name=f"synth {r['unit']} {r['size']}x{r['size']} ecp5",
                          seconds=r.pop("wall_s"),
                          **({"status": "reused"} if r["reused"] else {})))
    return rows


def main(argv=None, prog=None) -> int:
    ap = Parser(prog=prog or "dstar measure sizes", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", type=int, default=[2, 4, 6, 8],
                    help="array sizes rows = cols (default: 2 4 6 8)")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse stored synthesis results of identical runs")
    ap.add_argument("--jobs", type=int, default=2, help="local processes (default 2)")
    ap.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                    help="run the points on this Dask scheduler's workers instead")
    args = ap.parse_args(argv)
    check_output_dir(OUT)
    if args.jobs < 1:
        raise UserError(f"--jobs must be at least 1, not {args.jobs}")
    for n in args.sizes:
        try:
            preset("tiny", rows=n, cols=n, vpu_lanes=n)
        except ConfigError as exc:
            raise UserError(f"--sizes {n}: {exc}") from None
    steps = []
    res = dict(points=sweep(args.sizes, args.reuse, steps, jobs=args.jobs,
                            scheduler=args.scheduler), steps=steps,
               generated=time.strftime("%Y-%m-%d"), base_preset="tiny")
    write_together({OUT / "sweep.json": json_text(res)})
    say(f"wrote {OUT / 'sweep.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
