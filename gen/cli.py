"""The ``dstar`` command line.

Each subcommand lives in its own module and registers itself through a ``register(subparsers)``
function that adds its parser and sets ``func``. A user error (bad parameter, missing file, bad
trace) prints one line ``dstar: error: ...`` on stderr and exits with status 2; nothing is
written. Tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main", "UserError"]

# Subcommand modules, in the order ``dstar --help`` lists them.
COMMAND_MODULES = (
    "gen.cmd_generate",
    "gen.cmd_analysis",
    "gen.cmd_synth",
    "gen.cmd_report",
    "gen.cmd_build",
    "gen.cmd_bench",
    "gen.cmd_profile",
)


class UserError(Exception):
    """A problem with the user's input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error becomes one line and exit status 2 (no usage dump)."""

    def error(self, message):
        raise UserError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dstar", description="DSTAR RTL generator and tools")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in COMMAND_MODULES:
        importlib.import_module(mod).register(sub)
    return p


def main(argv=None) -> int:
    from golden.config import ConfigError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        rc = args.func(args)
    except (UserError, ConfigError, FileNotFoundError, ValueError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"dstar: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dstar: interrupted", file=sys.stderr)
        return 130
    return rc or 0


if __name__ == "__main__":
    # Run the package's module, not this __main__ copy, so its error classes are the ones caught.
    from gen.cli import main as _main
    sys.exit(_main())
