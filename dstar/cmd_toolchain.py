"""``dstar toolchain [--check] [--jobs N]``: compile the WebAssembly tools once (``make setup``
runs it), so that no first-run message reaches a test; the work is :mod:`sim.toolchain`."""

from __future__ import annotations

from sim import toolchain

__all__ = ["register"]


def register(sub):
    p = sub.add_parser("toolchain", help="compile the WebAssembly tools once (make setup runs it)",
                       description=toolchain.__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true",
                   help="report which tools are not yet compiled (exit 1 if any), compile nothing")
    p.add_argument("-j", "--jobs", type=int, default=2, help="tools compiled at once")
    p.set_defaults(func=run)


def run(args) -> int:
    return toolchain.main((["--check"] if args.check else []) + ["--jobs", str(args.jobs)])
