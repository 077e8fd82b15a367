"""``dstar measure estimate``: synthesize the analytic estimate's calibration runs and fit it.

The estimate (:mod:`flows.estimate`) prices each unit's parts with coefficients fitted to real
synthesis. This measurement makes those synthesis runs and refits:

- ``--calibrate`` synthesizes every run of :data:`flows.estimate_fit.CALIBRATION_RUNS` (fitted)
  and :data:`~flows.estimate_fit.VALIDATION_RUNS` (held out) for ``ecp5``, ``ecp5 -nodsp`` and
  ``generic`` (:func:`flows.synth.synthesize`; a component alone, ``int8pe``, ``sorter`` or
  ``vpu_lane``, in ``build/fpga/estimate-calibration/<kind>-<hash>/<target>``), reusing a
  stored run of identical RTLIL, script and Yosys; about 45 minutes on two cores from scratch;
- ``--calibrate --missing`` synthesizes only the runs with no stored measurement (runs just
  added) and takes the others from the stored calibration (same Yosys version only);
- ``--refit`` synthesizes nothing: it fits the stored measurements again (after a change of the
  model alone).

Each prints, on stdout, a Markdown table of every run's measurement and the estimate's error
under the new fit, then the coefficients; progress goes to stderr. ``--write`` stores the result
(coefficients, measurements, errors) in ``flows/estimate_calibration.json``
(:func:`flows.estimate_coef.write_calibration`), which the estimate reads at import. A synthesis
that fails (Yosys 0.70's ``abc9`` asserts on some QPUs) is reported and left out of the fit.
"""

from __future__ import annotations

from dstar_rtl.app.options import Parser
from dstar_rtl.flows.estimate_coef import TARGETS, write_calibration
from dstar_rtl.flows.estimate_runs import (
    calibrate,
    component,
    measure,
    synth_run,
)
from dstar_rtl.gen.paths import relative
from dstar_rtl.gen.progress import say
from dstar_rtl.gen.tables import md_table

__all__ = ["component", "synth_run", "measure", "calibrate", "table", "main"]

#: Where the components synthesized alone keep their runs (under ``build/fpga``).
def table(cal: dict, fitted: list, held: list) -> str:
    """Every run's measurement and the estimate's error under ``cal`` (Markdown), then the
    coefficients, one line per target."""
    head = ["run", "set"]
    for t in TARGETS:
        head += [t, "error"]
    rows = []
    for title, recs, errs in (("fitted", fitted, cal["error"]),
                              ("held out", held, cal["validation"])):
        for r in recs:
            e = errs[r["label"]]
            row = [r["label"], title]
            for t in TARGETS:
                row += ([r["measured"][t], f"{100 * e[t]:+.1f} %"] if t in e else [None, None])
            rows.append(row)
    coef = [f"{t}: " + ", ".join(f"{k} {v:g}" for k, v in c.items())
            for t, c in cal["coef"].items()]
    return (f"Estimate / synthesis - 1 (Yosys {cal['yosys']}, {cal['date']}; – : the synthesis "
            f"failed)\n\n" + md_table(head, rows, left=2) + "\n\nCoefficients\n\n"
            + "\n".join(coef))


def main(argv=None, prog=None) -> int:
    p = Parser(prog=prog or "dstar measure estimate", description=__doc__.splitlines()[0])
    p.add_argument("--calibrate", action="store_true",
                   help="synthesize the calibration runs (reusing identical earlier runs), fit "
                        "and print the coefficients and per-run errors")
    p.add_argument("--refit", action="store_true",
                   help="fit the measurements stored in flows/estimate_calibration.json again, "
                        "without synthesis (after a change of the model alone)")
    p.add_argument("--write", action="store_true",
                   help="with --calibrate or --refit: store the result in "
                        "flows/estimate_calibration.json")
    p.add_argument("--missing", action="store_true",
                   help="with --calibrate: synthesize only the runs with no stored measurement "
                        "(runs just added), take the others as stored")
    args = p.parse_args(argv)
    if args.calibrate == args.refit:
        p.error("pass --calibrate or --refit (the estimate itself is `dstar estimate`)")
    if args.missing and not args.calibrate:
        p.error("--missing goes with --calibrate")
    cal, fitted, held = calibrate(remeasure=args.calibrate, missing=args.missing)
    print(table(cal, fitted, held))
    if args.write:
        path = write_calibration(cal)
        say(f"wrote the calibration to {relative(path)}")
    return 0
