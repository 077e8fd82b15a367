"""Parameter checks shared by every unit's constructor.

Each check returns the value it accepted, so a constructor can write ``self._x = check_int("x",
x, lo=1)``, and raises with a message that names the parameter and the values it allows: a
:class:`TypeError` for an object of the wrong kind (a configuration, tables), a
:class:`ValueError` for a value out of range.
"""

from amaranth.hdl import Shape

from dstar_rtl.golden.config import Config

__all__ = ["check_config", "check_core", "check_tables", "check_int", "check_bool",
           "check_shape", "check_callable"]


def check_config(cfg) -> Config:
    """Return ``cfg`` if it is a :class:`golden.config.Config` (validated at its construction)."""
    if not isinstance(cfg, Config):
        raise TypeError(f"cfg must be a golden.config.Config, not {cfg!r}")
    return cfg


def check_core(core):
    """Return ``core`` if it is a :class:`program.isa.CoreConfig` (the buffer depths)."""
    from dstar_rtl.program.isa import CoreConfig
    if not isinstance(core, CoreConfig):
        raise TypeError(f"core must be a program.isa.CoreConfig, not {core!r}")
    return core


def check_tables(tables):
    """Return ``tables`` if it is a :class:`golden.vpu.VPUTables` (the VPU's ROM contents)."""
    from dstar_rtl.golden.vpu import VPUTables
    if not isinstance(tables, VPUTables):
        raise TypeError(f"tables must be a golden.vpu.VPUTables (e.g. golden.vpu.vpu_tables(cfg)), "
                        f"not {tables!r}")
    return tables


def check_int(name: str, value, *, lo: int | None = None, hi: int | None = None,
              why: str = "") -> int:
    """Return ``value`` if it is an ``int`` (not a ``bool``) in ``lo .. hi`` (either bound may be
    omitted); ``why`` is added to the message in parentheses."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    ok = ok and (lo is None or value >= lo) and (hi is None or value <= hi)
    if not ok:
        if lo is not None and hi is not None:
            allowed = f"an integer in {lo} .. {hi}"
        elif lo is not None:
            allowed = f"an integer >= {lo}"
        elif hi is not None:
            allowed = f"an integer <= {hi}"
        else:
            allowed = "an integer"
        raise ValueError(f"{name} must be {allowed}{f' ({why})' if why else ''}, not {value!r}")
    return value


def check_bool(name: str, value) -> bool:
    """Return ``value`` if it is ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool (True or False), not {value!r}")
    return value


def check_shape(name: str, shape):
    """Return ``shape`` if it is shape-castable with a width of at least 1."""
    try:
        width = Shape.cast(shape).width
    except TypeError:
        width = 0
    if isinstance(shape, bool) or width < 1:
        raise ValueError(f"{name} must be a shape of width >= 1 (an int, a range, a Shape or a "
                         f"shape-castable such as a data.StructLayout), not {shape!r}")
    return shape


def check_callable(name: str, value, what: str):
    """Return ``value`` if it is callable (``what`` says what it should be)."""
    if not callable(value):
        raise ValueError(f"{name} must be callable ({what}), not {value!r}")
    return value
