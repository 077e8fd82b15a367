"""``dstar sweep``: the design-space sweep, the measurement ``dstar measure design-sweep``
(:mod:`app.sweeps.measure`) under its own name; every option is the measurement's
(``dstar sweep --help``)."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub):
    # Every argument goes to the measurement's own parser (its options, --out, --help):
    # this parser knows no option (``prefix_chars`` no argument starts with).
    p = sub.add_parser(
        "sweep", add_help=False, prefix_chars="\x00",
        help="design-space sweep: area (µm²), throughput and throughput per µm² of DSTAR "
             "against the INT8 array (dstar measure design-sweep)")
    p.add_argument("options", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def run(args) -> int:
    from dstar_rtl.app.sweeps.measure import MEASUREMENT

    return MEASUREMENT.main(args.options, prog="dstar sweep") or 0
