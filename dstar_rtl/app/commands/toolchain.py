"""``dstar toolchain [--check] [--jobs N]``: compile the WebAssembly tools once (``make setup``
runs it), so that no first-run message reaches a test; the work is :mod:`sim.toolchain`.

It writes no output file (the compiled code goes to the YoWASP cache); ``--check`` reports on
stderr which tools would still compile and exits 1 if any would. Tools whose optional extra is
not installed (nextpnr: ``fpga``; Boolector: ``formal``) are skipped, with a line saying so.
"""

from __future__ import annotations

from dstar_rtl.app.options import EXTRAS, installed
from dstar_rtl.gen.errors import UserError, WorkError
from dstar_rtl.gen.progress import say
from dstar_rtl.sim import toolchain

__all__ = ["register"]


def register(sub):
    p = sub.add_parser("toolchain", help="compile the WebAssembly tools once (make setup runs it)",
                       description=toolchain.__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true",
                   help="report which tools are not yet compiled (exit 1 if any), compile nothing")
    p.add_argument("-j", "--jobs", type=int, default=2, help="tools compiled at once")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.jobs < 1:
        raise UserError(f"--jobs must be at least 1, not {args.jobs}")
    tools = [t for t in toolchain.TOOLS if installed(t.module)]
    for extra, modules in EXTRAS.items():
        skipped = [t.name for t in toolchain.TOOLS if t not in tools and t.module in modules]
        if skipped:
            say(f"toolchain: {', '.join(skipped)} skipped: not installed (the {extra!r} extra: "
                f"pip install 'dstar-rtl[{extra}]')")
    if args.check:
        return toolchain.main(["--check"], tools=tools)
    try:
        toolchain.warm(tools, jobs=args.jobs)
    except RuntimeError as exc:
        raise WorkError(f"toolchain: {exc}") from None
    return 0
