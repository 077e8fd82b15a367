"""One runner for every measurement: options from a dataclass, a typed result, files written
together.

A :class:`Measurement` is a function from an options dataclass (and the stored result, for a
measurement that keeps the parts it is told to skip) to a :class:`results.base.Result`, and a
renderer from that result to Markdown. :meth:`Measurement.main` does the rest the same
way for all of them: the command line from the options' fields (``--name-with-dashes``, the
field's type, its default, its ``help`` metadata; tuples take one or more values, booleans are
switches), ``--out DIR`` (default ``reports/``), the options' own checks (their
``__post_init__`` raises :class:`gen.errors.UserError` naming the option, what was given and
what would work) before any work, the result and its Markdown written together
(``DIR/STEM.json``, ``DIR/STEM.md`` and the measurement's figures), and ``--markdown-only``,
which renders the stored result (its Markdown and figures) again without measuring.

An options field with ``metadata={"help": ..., "choices": ..., "metavar": ...}`` documents
itself; ``typing.Literal`` fields take their choices from the type.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dstar_rtl.app.options import Parser, add_config_options, config_from_args
from dstar_rtl.gen.errors import UserError, WorkError
from dstar_rtl.gen.outputs import check_output_dir, write_together
from dstar_rtl.gen.paths import REPORTS, relative

__all__ = ["Measurement", "option", "check_among", "alias_command"]


def option(default, help: str, **meta):
    """An options field: its default and its help text (``choices``, ``metavar`` optional)."""
    kw = {"default_factory": lambda: default} if isinstance(default, (list, dict)) else \
        {"default": default}
    return dataclasses.field(metadata={"help": help, **meta}, **kw)


def check_among(flag: str, values, allowed) -> None:
    """An options check: every one of ``values`` (given as ``flag``) is one of ``allowed``, else
    a UserError naming the first that is not and what would work."""
    bad = [v for v in values if v not in allowed]
    if bad:
        raise UserError(f"{flag} must be among {sorted(allowed)}, not {bad[0]!r}")


@dataclass(frozen=True)
class Measurement:
    """``name`` (``dstar measure NAME``), ``stem`` (its files, ``STEM.json`` and ``STEM.md``),
    ``options`` (a frozen dataclass), ``measure`` (``(options, previous) → result``, where
    ``previous()`` is the stored result, ``None`` when there is none, a UserError when it cannot
    be read as its type), ``result`` (the result's type) and ``render`` (result → Markdown)."""

    name: str
    stem: str
    summary: str
    options: type
    result: type
    measure: Callable
    render: Callable
    #: result → ``{file name: writer}`` of its figures (``writer(binary file)``, e.g.
    #: :func:`gen.outputs.png_writer`), written beside the result; none by default.
    figures: Callable | None = None
    #: result → the message of a failure found in it (e.g. runs that failed), raised as a
    #: :class:`gen.errors.WorkError` (exit 1) once the result is written; none by default.
    failure: Callable | None = None
    #: The default preset of a measurement of one configuration: ``--preset``, ``--variant`` and
    #: ``--set NAME=VALUE`` are added to its command line and the configuration they make is the
    #: options' ``config`` field (their checks see it); ``None``: no configuration options.
    preset: str | None = None
    #: result → the text printed when it is written (its Markdown by default).
    echo: Callable | None = None

    def parser(self, prog: str | None = None) -> Parser:
        p = Parser(prog=prog or f"dstar measure {self.name}", description=self.summary)
        hints = typing.get_type_hints(self.options)
        if self.preset is not None:
            add_config_options(p, default_preset=self.preset)
        for f in _cli_fields(self.options):
            _add_option(p, f, hints[f.name])
        p.add_argument("--out", type=Path, default=REPORTS, metavar="DIR",
                       help=f"folder of {self.stem}.json and {self.stem}.md (default: reports/)")
        p.add_argument("--markdown-only", action="store_true",
                       help=f"render {self.stem}.md again from the stored {self.stem}.json, "
                            f"measuring nothing")
        return p

    def main(self, argv=None, prog: str | None = None) -> int:
        args = self.parser(prog).parse_args(argv)
        out = check_output_dir(args.out)
        json_path, md_path = out / f"{self.stem}.json", out / f"{self.stem}.md"
        if args.markdown_only:
            result = self.result.load(json_path)
            write_together({md_path: self.render(result), **self._figures(result, out)})
            return 0
        given = {f.name: _value(getattr(args, f.name)) for f in _cli_fields(self.options)}
        if self.preset is not None:
            given["config"] = config_from_args(args)
        opts = self.options(**given)

        def previous():
            return self.result.load(json_path) if json_path.is_file() else None

        result = self.measure(opts, previous)
        text = self.render(result)
        write_together({json_path: result.to_json(), md_path: text,
                        **self._figures(result, out)}, record_command=False)
        print(self.echo(result) if self.echo is not None else text)
        problem = self.failure(result) if self.failure is not None else None
        if problem:
            raise WorkError(problem)
        return 0

    def _figures(self, result, out: Path) -> dict:
        made = self.figures(result) if self.figures is not None else {}
        return {out / name: writer for name, writer in made.items()}


def _cli_fields(options: type) -> list:
    """The options' fields that are command-line options (not ``config``, which the
    configuration options make)."""
    return [f for f in dataclasses.fields(options) if f.name != "config"]


def _add_option(p: Parser, f: dataclasses.Field, tp):
    flag = "--" + f.name.replace("_", "-")
    meta = dict(f.metadata)
    default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    text = meta.pop("help", "")
    if default is not None and not isinstance(default, bool) and "default:" not in text:
        text += f" (default: {_shown(default)})"
    kw = dict(help=text, dest=f.name, default=default, **meta)
    origin = typing.get_origin(tp)
    if tp is bool:
        p.add_argument(flag, action="store_true", **{k: v for k, v in kw.items()
                                                     if k in ("help", "dest", "default")})
        return
    if origin is typing.Literal:
        kw.setdefault("choices", typing.get_args(tp))
        tp = type(typing.get_args(tp)[0])
    if origin in (tuple, list):
        item = typing.get_args(tp)[0]
        if typing.get_origin(item) is typing.Literal:
            kw.setdefault("choices", typing.get_args(item))
            item = type(typing.get_args(item)[0])
        kw.setdefault("nargs", "+")
        p.add_argument(flag, type=item, **kw)
        return
    if origin in (typing.Union, types.UnionType):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    if tp is Path:
        kw.setdefault("metavar", "FILE")
    p.add_argument(flag, type=tp, **kw)


def _value(v):
    """An option's value as the options dataclass holds it (a list of values as a tuple)."""
    return tuple(v) if isinstance(v, list) else v


def _shown(default) -> str:
    if isinstance(default, (tuple, list)):
        return " ".join(map(str, default)) or "none"
    if isinstance(default, Path):
        return relative(default)
    return str(default)


def alias_command(sub, name: str, module: str, help: str):
    """``dstar NAME``: the measurement of ``module`` (its ``MEASUREMENT``) under a name of its
    own. Every argument goes to the measurement's parser (its options, ``--out``, ``--help``):
    this parser knows no option (``prefix_chars`` no argument starts with)."""
    import argparse
    import importlib

    def run(args) -> int:
        m = importlib.import_module(module).MEASUREMENT
        return m.main(args.options, prog=f"dstar {name}") or 0

    p = sub.add_parser(name, add_help=False, prefix_chars="\x00", help=help)
    p.add_argument("options", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)
