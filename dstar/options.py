"""Shared command-line pieces: the parser every ``dstar`` command and measurement uses, and
``--preset`` / ``--set name=value``, which build a :class:`Config`."""

from __future__ import annotations

import argparse
import ast

from gen.errors import UserError
from golden.config import PRESETS, Config, ConfigError, preset

__all__ = ["Parser", "add_config_options", "parse_overrides", "config_from_args"]


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is :class:`gen.errors.UserError`: one line ``dstar: error:
    ...`` and exit status 2 (no usage dump), as for every other bad input."""

    def error(self, message):
        raise UserError(f"{self.prog}: {message}")


def add_config_options(p, default_preset: str | None = "tiny"):
    p.add_argument("--preset", default=default_preset, choices=sorted(PRESETS),
                   help=f"configuration preset (default: {default_preset or 'per command'})")
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
    return preset(args.preset, **parse_overrides(args.overrides))
