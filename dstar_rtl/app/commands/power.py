"""``dstar power``: gate-level energy per MAC and per image, the measurement ``dstar measure
power`` (:mod:`app.reports.power`) under its own name; every option is the measurement's
(``dstar power --help``)."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub):
    # Every argument goes to the measurement's own parser (its options, --out, --help):
    # this parser knows no option (``prefix_chars`` no argument starts with).
    p = sub.add_parser(
        "power", add_help=False, prefix_chars="\x00",
        help="energy per MAC of the DSTAR MPU and the INT8 array from gate-level simulation of "
             "their standard-cell netlists (dstar measure power)")
    p.add_argument("options", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def run(args) -> int:
    from dstar_rtl.app.reports.power import MEASUREMENT

    return MEASUREMENT.main(args.options, prog="dstar power") or 0
