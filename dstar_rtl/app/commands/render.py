"""``dstar render``: rebuild a report's Markdown from its stored result, without measuring
(issue 48).

:data:`NAMES` are the reports it knows: each ``dstar measure`` name, whose measurement gives
its files, its result's type and its renderer, and the reports of the other commands
(:data:`OTHERS`). ``dstar render NAME``
rewrites ``reports/<md>`` from ``reports/<json>``; ``dstar render --all`` every one whose JSON is
there; ``--check`` writes nothing and exits 1 naming the reports whose Markdown is not what
today's code renders from their result (``tests/test_render.py`` keeps the committed reports
so). Takes seconds.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from dstar_rtl.app.experiments import MEASUREMENTS
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import check_output_dir, write_together
from dstar_rtl.gen.paths import REPORTS

__all__ = ["NAMES", "OTHERS", "files", "render", "register"]

#: The reports of commands that are not ``dstar measure`` names: report → (stored JSON, Markdown,
#: "module:function" rendering it, "module:Type" of the typed result it is loaded as).
OTHERS = {
    "dit-int": ("dit_int.json", "dit_int.md", "dstar_rtl.app.commands.dit_int:dit_int_markdown",
                "dstar_rtl.app.commands.dit_int:DitInt"),
    "profile": ("profile.json", "profile.md", "dstar_rtl.app.reports.profile_report:markdown",
                "dstar_rtl.results.profile:Profile"),
    "profile-sweep": ("profile_sweep.json", "profile_sweep.md",
                      "dstar_rtl.app.reports.profile_report:sweep_markdown",
                      "dstar_rtl.results.profile:ProfileSweep"),
    "sample": ("sample.json", "sample.md", "dstar_rtl.app.reports.sample_report:sample_markdown",
               "dstar_rtl.results.sample:Sample"),
}

#: Every report ``dstar render`` knows: each ``dstar measure`` name (its measurement's
#: ``stem``, type and renderer; but ``estimate``, which stores the estimate's calibration, not
#: a report) and :data:`OTHERS`.
NAMES = sorted([n for n in MEASUREMENTS if n != "estimate"] + list(OTHERS))


def _load(spec: str):
    mod, name = spec.split(":")
    return getattr(importlib.import_module(mod), name)


def files(name: str) -> tuple:
    """``(stored JSON, Markdown)`` file names of report ``name``."""
    if name in OTHERS:
        return OTHERS[name][:2]
    m = _load(f"{MEASUREMENTS[name][0]}:MEASUREMENT")
    return f"{m.stem}.json", f"{m.stem}.md"


def render(name: str, reports: Path = REPORTS) -> tuple:
    """``(Markdown path, text)`` of report ``name`` rendered from its stored result."""
    js, md = files(name)
    if name not in OTHERS:
        m = _load(f"{MEASUREMENTS[name][0]}:MEASUREMENT")
        return reports / md, m.render(m.result.load(reports / js))
    fn, kind = _load(OTHERS[name][2]), _load(OTHERS[name][3])
    return reports / md, fn(kind.load(reports / js))


def register(sub):
    p = sub.add_parser("render", help="rebuild reports' Markdown from their stored results "
                                      "(measures nothing)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="reports to render: " + ", ".join(NAMES))
    p.add_argument("--all", action="store_true", help="every report whose result is there")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 naming the reports whose Markdown differs")
    p.add_argument("--out-dir", type=Path, default=None, metavar="DIR",
                   help="where the Markdown goes (default: beside the results, reports/)")
    p.set_defaults(func=run)


def run(args) -> int:
    bad = [n for n in args.names if n not in NAMES]
    if bad or (not args.names) == (not args.all):
        raise UserError(f"name reports ({', '.join(NAMES)}) or --all"
                        + (f"; not a report: {', '.join(bad)}" if bad else ""))
    out = REPORTS if args.out_dir is None else check_output_dir(args.out_dir)
    names = NAMES if args.all else args.names
    names = [n for n in names if (REPORTS / files(n)[0]).is_file() or not args.all]
    texts = {Path(out) / p.name: t for p, t in (render(n) for n in names)}
    if args.check:
        differ = [_shown(p) for p, t in texts.items()
                  if not p.is_file() or p.read_text() != t]
        if differ:
            print(f"dstar render: not what today's code renders: {', '.join(differ)}",
                  file=sys.stderr)
            return 1
        print(f"{len(texts)} reports render as committed")
        return 0
    write_together(texts)
    print("rendered " + ", ".join(_shown(p) for p in texts))
    return 0


def _shown(p: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(REPORTS.parent.resolve()))
    except ValueError:
        return str(p)
