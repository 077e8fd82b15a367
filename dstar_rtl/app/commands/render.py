"""``dstar render``: rebuild a report's Markdown from its stored result, without measuring
(issue 48).

:data:`RENDERERS` names, per report, its stored JSON, its Markdown and the function that makes
the one from the other (each measurement's own ``markdown``/``render``). ``dstar render NAME``
rewrites ``reports/<md>`` from ``reports/<json>``; ``dstar render --all`` every one whose JSON is
there; ``--check`` writes nothing and exits 1 naming the reports whose Markdown is not what
today's code renders from their result (``tests/test_render.py`` keeps the committed reports
so). Takes seconds.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import check_output_dir, read_json, write_together
from dstar_rtl.gen.paths import REPORTS

__all__ = ["RENDERERS", "render", "register"]

#: report → (stored JSON, Markdown, "module:function" rendering the record, how the record is
#: passed: ``None`` whole, ``"typed"`` loaded as its type by the module's
#: :class:`app.measurement.Measurement` named after the colon, ``"module:Type"`` loaded as that
#: typed result, else the key of the part the function takes).
RENDERERS = {
    "arrays": ("arrays.json", "arrays.md", "dstar_rtl.app.reports.arrays:MEASUREMENT", "typed"),
    "asic": ("asic_area.json", "asic_area.md", "dstar_rtl.app.reports.asic:MEASUREMENT", "typed"),
    "bench": ("bench.json", "bench.md", "dstar_rtl.app.benches.layers:markdown",
              "dstar_rtl.app.benches.bench_result:Bench"),
    "compare": ("compare.json", "compare.md", "dstar_rtl.app.reports.compare:MEASUREMENT",
                "typed"),
    "core": ("core.json", "core.md", "dstar_rtl.app.reports.core:MEASUREMENT", "typed"),
    "core-area": ("core_area.json", "core_area.md", "dstar_rtl.app.reports.core_area:MEASUREMENT",
                  "typed"),
    "design-sweep": ("design_sweep.json", "design_sweep.md", "dstar_rtl.app.sweeps.report:markdown",
                     None),
    "energy": ("energy.json", "energy.md", "dstar_rtl.app.reports.energy:markdown", None),
    "packing": ("qpu_packing.json", "qpu_packing.md",
                "dstar_rtl.app.reports.packing:MEASUREMENT", "typed"),
    "pe-area": ("pe_area.json", "pe_area.md", "dstar_rtl.app.reports.pe_area:MEASUREMENT",
                "typed"),
    "pe-levers": ("pe_levers.json", "pe_levers.md", "dstar_rtl.app.reports.pe_levers:MEASUREMENT",
                  "typed"),
    "perf": ("perf_model.json", "perf_model.md", "dstar_rtl.app.benches.perf_validate:MEASUREMENT",
             "typed"),
    "profile": ("profile.json", "profile.md", "dstar_rtl.app.reports.profile_report:markdown",
                "dstar_rtl.app.reports.profile_result:Profile"),
    "profile-sweep": ("profile_sweep.json", "profile_sweep.md",
                      "dstar_rtl.app.reports.profile_report:sweep_markdown",
                      "dstar_rtl.app.reports.profile_result:ProfileSweep"),
    "projection": ("projection.json", "projection.md",
                   "dstar_rtl.app.reports.projection:MEASUREMENT", "typed"),
    "qpu-area": ("qpu_area.json", "qpu_area.md", "dstar_rtl.app.reports.qpu:MEASUREMENT", "typed"),
    "qpu-rate": ("qpu_rate.json", "qpu_rate.md", "dstar_rtl.app.benches.qpu:MEASUREMENT",
                 "typed"),
    "reference": ("reference.json", "reference.md", "dstar_rtl.app.reports.reference:MEASUREMENT",
                  "typed"),
    "sample": ("sample.json", "sample.md", "dstar_rtl.app.reports.sample_report:sample_markdown",
               "dstar_rtl.app.reports.sample_result:Sample"),
    "sizes": ("sweep.json", "sweep.md", "dstar_rtl.app.benches.sizes:MEASUREMENT", "typed"),
    "state-quality": ("state_quality.json", "state_quality.md",
                      "dstar_rtl.app.reports.state_quality:MEASUREMENT", "typed"),
    "verification": ("verification.json", "verification.md",
                     "dstar_rtl.app.reports.verification:MEASUREMENT", "typed"),
    "vpu": ("vpu.json", "vpu.md", "dstar_rtl.app.reports.vpu:MEASUREMENT", "typed"),
}


def render(name: str, reports: Path = REPORTS) -> tuple:
    """``(Markdown path, text)`` of report ``name`` rendered from its stored result."""
    js, md, fn, part = RENDERERS[name]
    mod, func = fn.split(":")
    obj = getattr(importlib.import_module(mod), func)
    if part == "typed":
        return reports / md, obj.render(obj.result.load(reports / js))
    if ":" in (part or ""):                 # a typed result the function renders
        tmod, tname = part.split(":")
        return reports / md, obj(getattr(importlib.import_module(tmod), tname).load(reports / js))
    rec = read_json(reports / js, f"the result of {name}")
    text = obj(rec if part is None else rec[part])
    return reports / md, text


def register(sub):
    p = sub.add_parser("render", help="rebuild reports' Markdown from their stored results "
                                      "(measures nothing)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="reports to render: " + ", ".join(RENDERERS))
    p.add_argument("--all", action="store_true", help="every report whose result is there")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 naming the reports whose Markdown differs")
    p.add_argument("--out-dir", type=Path, default=None, metavar="DIR",
                   help="where the Markdown goes (default: beside the results, reports/)")
    p.set_defaults(func=run)


def run(args) -> int:
    bad = [n for n in args.names if n not in RENDERERS]
    if bad or (not args.names) == (not args.all):
        raise UserError(f"name reports ({', '.join(RENDERERS)}) or --all"
                        + (f"; not a report: {', '.join(bad)}" if bad else ""))
    out = REPORTS if args.out_dir is None else check_output_dir(args.out_dir)
    names = list(RENDERERS) if args.all else args.names
    names = [n for n in names if (REPORTS / RENDERERS[n][0]).is_file() or not args.all]
    files = {Path(out) / p.name: t for p, t in (render(n) for n in names)}
    if args.check:
        differ = [_shown(p) for p, t in files.items()
                  if not p.is_file() or p.read_text() != t]
        if differ:
            print(f"dstar render: not what today's code renders: {', '.join(differ)}",
                  file=sys.stderr)
            return 1
        print(f"{len(files)} reports render as committed")
        return 0
    write_together(files)
    print("rendered " + ", ".join(_shown(p) for p in files))
    return 0


def _shown(p: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(REPORTS.parent.resolve()))
    except ValueError:
        return str(p)
