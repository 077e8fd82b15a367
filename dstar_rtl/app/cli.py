"""The ``dstar`` command line.

Each subcommand lives in its own module and registers itself through a ``register(subparsers)``
function that adds its parser and sets ``func``.

Exit status and errors (every command):

- **0**: done; every output was written.
- **2**: bad input (:class:`UserError`: a bad parameter, a missing or malformed input file, an
  output that cannot be written, an optional extra the command needs that is not installed;
  also :class:`golden.config.ConfigError`). Every command checks all of its input before any
  work (:mod:`gen.outputs` checks the output paths; a library's ValueError there becomes
  UserError through :func:`app.options.checking`; :func:`app.options.require_extra` names
  the missing extra), prints one line ``dstar: error: ...`` on stderr and writes nothing, not
  even a folder. A ValueError or FileNotFoundError that escapes during the work is no user
  error but a bug: it keeps its traceback.
- **1**: the input was valid but the work failed (:class:`WorkError`: Yosys or another tool
  failed, a simulation disagreed with golden, timing was not met, an output could not be
  written): one line ``dstar: error: ...`` on stderr (naming the tool's log when there is one);
  the outputs of the command are written together or not at all (:func:`gen.outputs.
  write_together`), so a failure leaves none of them. (``dstar build`` keeps the tools' work
  folders with their logs, and writes its bitstream also when only timing is missed.)

A missing output folder is created. A closed stdout (``dstar ... | head``) ends the command
quietly with status 1. Tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from dstar_rtl.app.options import Parser
from dstar_rtl.gen.errors import UserError, WorkError

__all__ = ["main", "UserError", "WorkError"]

# Subcommand modules, in the order ``dstar --help`` lists them.
COMMAND_MODULES = (
    "dstar_rtl.app.commands.generate",
    "dstar_rtl.app.commands.trace",
    "dstar_rtl.app.commands.fmdq",
    "dstar_rtl.app.commands.sar",
    "dstar_rtl.app.commands.dit",
    "dstar_rtl.app.commands.dit_int",
    "dstar_rtl.app.commands.synth",
    "dstar_rtl.app.commands.report",
    "dstar_rtl.app.commands.render",
    "dstar_rtl.app.commands.build",
    "dstar_rtl.app.commands.bench",
    "dstar_rtl.app.commands.power",
    "dstar_rtl.app.commands.profile",
    "dstar_rtl.app.commands.sample",
    "dstar_rtl.app.commands.sweep",
    "dstar_rtl.app.commands.measure",
    "dstar_rtl.app.commands.toolchain",
)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dstar", description="DSTAR RTL generator and tools")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in COMMAND_MODULES:
        importlib.import_module(mod).register(sub)
    return p


def _one_line(exc: Exception) -> str:
    """The first line of an exception's message (its class name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def main(argv=None) -> int:
    """Run one ``dstar`` command (``argv``: its arguments, default ``sys.argv[1:]``); returns
    the exit status (module docstring). Every JSON object the command writes records its
    command line (:func:`gen.outputs.record_command`)."""
    from dstar_rtl.gen.outputs import record_command

    record_command(sys.argv[1:] if argv is None else argv)
    try:
        return _run(argv)
    finally:
        record_command(None)


def _run(argv) -> int:
    from dstar_rtl.golden.config import ConfigError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        rc = args.func(args)
    except (UserError, ConfigError) as exc:
        # Only these two: a ValueError or FileNotFoundError that reaches here was not foreseen
        # by a command's checks, a bug, and keeps its traceback (so does any other exception).
        print(f"dstar: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except WorkError as exc:
        print(f"dstar: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dstar: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (``dstar ... | head``): stop quietly, as cat does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return rc or 0


if __name__ == "__main__":
    # Run the package's module, not this __main__ copy, so its error classes are the ones caught.
    from dstar_rtl.app.cli import main as _main
    sys.exit(_main())
