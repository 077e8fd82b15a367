"""``dstar report``: regenerate REPORT.md and reports/units/*.json from the measured reports.

REPORT.md, ``reports/units/*.json`` and ``reports/sweep.png`` beside it are written together
(:mod:`gen.outputs`); an output that cannot be written is one line and exit status 2 before
anything is read."""

from __future__ import annotations

from pathlib import Path

from dstar_rtl.gen.outputs import check_output_dir, check_outputs, write_together

__all__ = ["register"]


def register(sub):
    p = sub.add_parser(
        "report", help="regenerate REPORT.md from reports/ and the last cocotb runs",
        description="Summarise the measured reports (synthesis, Fmax, the core's cycles, the "
                    "size sweep) and the last cocotb results into REPORT.md, with one JSON per "
                    "unit, preset and target in reports/units/. Measures nothing itself: run "
                    "`make reports` (the `dstar measure` commands it runs) first.")
    p.add_argument("-o", "--out", type=Path, default=Path("REPORT.md"),
                   help="the Markdown file to write (default REPORT.md)")
    p.set_defaults(func=run_report)


def run_report(args):
    from dstar_rtl.app.reports.summary import report_files, side_folder

    check_outputs(args.out)
    check_output_dir(side_folder(args.out) / "units")
    files, s = report_files(args.out)
    check_outputs(*files)
    write_together(files)
    print(f"wrote {s['out']} ({s['units']} unit/preset/target entries, "
          f"{s['verification']} cocotb runs, {s['verification_passing']} passing) and "
          f"{Path(args.out).parent / 'reports' / 'units'}/")
    return 0
