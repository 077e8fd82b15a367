"""``dstar report``: regenerate REPORT.md and reports/units/*.json from the measured reports."""

from __future__ import annotations

from pathlib import Path

from .cmd_analysis import check_output_path

__all__ = ["register"]


def register(sub):
    p = sub.add_parser(
        "report", help="regenerate REPORT.md from reports/ and the last cocotb runs",
        description="Summarise the measured reports (synthesis, Fmax, the core's cycles, the "
                    "size sweep) and the last cocotb results into REPORT.md, with one JSON per "
                    "unit, preset and target in reports/units/. Measures nothing itself: run "
                    "`make reports` (and the python -m fpga.* commands it names) first.")
    p.add_argument("-o", "--out", type=Path, default=Path("REPORT.md"),
                   help="the Markdown file to write (default REPORT.md)")
    p.set_defaults(func=run_report)


def run_report(args):
    from fpga.report_summary import write_report

    check_output_path(args.out)
    s = write_report(Path(args.out))
    print(f"wrote {s['out']} ({s['units']} unit/preset/target entries, "
          f"{s['verification']} cocotb results) and reports/units/")
    return 0
