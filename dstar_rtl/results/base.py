"""Typed results: what a measurement returns, what is stored in ``reports/``, what readers load.

A result is a frozen dataclass derived from :class:`Result`: its figures as typed fields
(numbers, strings, nested dataclasses, tuples and string-keyed dicts of them), a ``KIND`` (the
measurement's name) and a ``SCHEMA`` version, and its :class:`Provenance` (the command that made
it, the date in one format, the digest of the code that measured it, the tools' versions, the
configurations' hashes). It is written as the one JSON format of every result
(:func:`gen.outputs.json_text`, with ``"kind"`` and ``"schema"`` first) and read back as its
type by :meth:`Result.load`: a file of another kind, of another schema version or with a field
missing or of the wrong type is refused in one line naming the file and the field, so that a
renamed figure breaks its reader when it loads the file, not when a table is half written.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Speed(Result):
...     KIND = "speed"
...     mhz: float
>>> s = Speed(Provenance.unrecorded(), mhz=96.5)
>>> Speed.from_data(s.to_data()) == s
True
"""

from __future__ import annotations

import dataclasses
import time
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import json_text, read_json

__all__ = ["Provenance", "Result", "now", "plain", "build"]

#: The date format of every result (UTC, to the minute).
DATE_FORMAT = "%Y-%m-%d %H:%M UTC"


def now() -> str:
    """Today's date and time in the results' one format."""
    return time.strftime(DATE_FORMAT, time.gmtime())


@dataclass(frozen=True)
class Provenance:
    """Where a result comes from. ``command``: the ``dstar`` command line that made it;
    ``date``: when (:data:`DATE_FORMAT`); ``code``: SHA-256 of the code that measured it (its
    import closure, and the RTL and testbenches when it simulates or synthesizes them: the
    registry's fingerprint, :func:`app.experiments.fingerprint`); ``tools``: tool → version;
    ``configs``: configuration name → hash. A field the run that made the result did not
    record (results made before the typed results) is ``None``, and such a result keeps the
    date its run wrote, in that run's format."""

    command: str | None
    date: str | None
    code: str | None = None
    tools: dict[str, str] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)

    @classmethod
    def unrecorded(cls, command: str | None = None, date: str | None = None) -> Provenance:
        """The provenance of a result whose run recorded only ``command`` (and ``date``)."""
        return cls(command=command, date=date)


@dataclass(frozen=True)
class Result:
    """The base of every typed result (module docstring). Subclasses set ``KIND`` and, when
    their layout changes, ``SCHEMA``, and add their fields after ``provenance``."""

    KIND: ClassVar[str] = ""
    SCHEMA: ClassVar[int] = 1

    provenance: Provenance

    def to_data(self) -> dict:
        """The result as plain data: ``kind``, ``schema``, then every field."""
        return {"kind": self.KIND, "schema": self.SCHEMA, **plain(self)}

    def to_json(self) -> str:
        """The result as the text of its JSON file."""
        return json_text(self.to_data())

    @classmethod
    def from_data(cls, data, where: str = "result"):
        """A result of this type from :meth:`to_data`'s plain data; UserError naming ``where``
        and the field when the data is of another kind or schema, or does not fit the type."""
        if not isinstance(data, dict):
            raise UserError(f"{where}: not a result (a JSON object)")
        if data.get("kind") != cls.KIND:
            raise UserError(f"{where}: a result of kind {data.get('kind')!r}, not {cls.KIND!r}")
        if data.get("schema") != cls.SCHEMA:
            raise UserError(f"{where}: schema {data.get('schema')!r} of {cls.KIND!r}; this "
                            f"version reads schema {cls.SCHEMA} (measure it again)")
        body = {k: v for k, v in data.items() if k not in ("kind", "schema", "command")}
        return _build(cls, body, where)

    @classmethod
    def load(cls, path):
        """The result stored at ``path`` (UserError, one line, when it is missing or does not
        fit)."""
        return cls.from_data(read_json(Path(path), f"a {cls.KIND} result"), str(path))


def plain(obj, present: bool = False):
    """``obj`` (a result, a dataclass of one, tuples and dicts of them) as plain JSON data;
    ``present``: without the dataclass fields that are ``None`` (a renderer that asks whether
    a figure is there by its key)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain(getattr(obj, f.name), present) for f in dataclasses.fields(obj)
                if not (present and getattr(obj, f.name) is None)}
    if isinstance(obj, (list, tuple)):
        return [plain(v, present) for v in obj]
    if isinstance(obj, dict):
        return {str(k): plain(v, present) for k, v in obj.items()}
    if isinstance(obj, Path):
        return str(obj)
    return obj


def build(tp, value, where: str = "result"):
    """``value`` (plain data, e.g. what a bench returns) as the typed ``tp`` (a dataclass of
    a result); a UserError naming ``where`` and the field when it does not fit."""
    return _build(tp, value, where)


def _build(tp, value, where: str):
    """``value`` (plain data) as type ``tp`` (a dataclass, a tuple or dict of a type, a union
    with None, a number, a string)."""
    if tp is dict:                          # a bare ``dict``: string keys, any values
        tp = dict[str, Any]
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _build(a, value, where)
            except UserError as e:
                errors.append(str(e))
        raise UserError(errors[0] if errors else f"{where}: {value!r} fits none of {tp}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise UserError(f"{where}: expected an object for {tp.__name__}")
        hints = typing.get_type_hints(tp)
        fields = {f.name: f for f in dataclasses.fields(tp) if f.init}
        unknown = set(value) - set(fields)
        if unknown:
            raise UserError(f"{where}: {tp.__name__} has no field {sorted(unknown)[0]!r}")
        kw = {}
        for name, f in fields.items():
            if name not in value:
                if (f.default is dataclasses.MISSING
                        and f.default_factory is dataclasses.MISSING):
                    raise UserError(f"{where}: {tp.__name__}.{name} is missing")
                continue
            kw[name] = _build(hints[name], value[name], f"{where}: {tp.__name__}.{name}")
        return tp(**kw)
    if origin in (tuple, list):
        if not isinstance(value, list):
            raise UserError(f"{where}: expected a list")
        args = typing.get_args(tp)
        item = args[0] if args else Any
        return tuple(_build(item, v, f"{where}[{k}]") for k, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise UserError(f"{where}: expected an object")
        _, item = typing.get_args(tp) or (str, Any)
        return {k: _build(item, v, f"{where}[{k!r}]") for k, v in value.items()}
    if tp is float:
        if value is None:                   # a non-finite figure is stored as null
            return float("nan")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp in (str, bool):
        if isinstance(value, tp):
            return value
    elif tp is Path:
        if isinstance(value, str):
            return Path(value)
    else:
        raise TypeError(f"{where}: results cannot hold {tp!r}")
    raise UserError(f"{where}: expected {tp.__name__}, not {value!r}")
