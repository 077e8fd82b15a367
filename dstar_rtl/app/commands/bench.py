"""``dstar bench``: the DSTAR MPU and the INT8 baseline array side by side, the measurement
``dstar measure bench`` (:mod:`app.benches.layers`) under its own name; every option is the
measurement's (``dstar bench --help``)."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub):
    # Every argument goes to the measurement's own parser (its options, --out, --help):
    # this parser knows no option (``prefix_chars`` no argument starts with).
    p = sub.add_parser(
        "bench", add_help=False, prefix_chars="\x00",
        help="DSTAR MPU against the INT8 baseline array on the layers of a DiT (RTL cycles, "
             "ECP5 resources; dstar measure bench)")
    p.add_argument("options", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def run(args) -> int:
    from dstar_rtl.app.benches.layers import MEASUREMENT

    return MEASUREMENT.main(args.options, prog="dstar bench") or 0
