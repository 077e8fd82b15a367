"""Progress and logging of long flows: one format, always on stderr.

Every long command (synthesis sweeps, place and route, benches, report writers) reports through
the ``dstar`` logger, so stdout carries only a command's result and ``2>/dev/null`` silences
the rest:

- :func:`say` logs one line, stamped with the seconds since the process started:
  ``[   12.3 s] synth mpu-fpga ecp5``;
- :class:`Step` logs a named step's start and end with its wall time, and records both in a
  list for the report (``{step, seconds, status, load_avg_1min}``);
- :func:`progress` wraps a long loop in a ``tqdm`` bar on stderr (shown on a terminal only, so
  logs and CI output stay line-based).
"""

from __future__ import annotations

import logging
import os
import sys
import time

from tqdm import tqdm

__all__ = ["log", "say", "Step", "progress", "seconds"]

_T0 = time.perf_counter()


class _Elapsed(logging.Formatter):
    def format(self, record):
        return f"[{seconds():7.1f} s] {record.getMessage()}"


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (pytest's capture swaps it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def _logger() -> logging.Logger:
    lg = logging.getLogger("dstar")
    if not lg.handlers:
        handler = _StderrHandler()
        handler.setFormatter(_Elapsed())
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
        lg.propagate = False
    return lg


#: The project's logger (stderr, ``[seconds] message``).
log = _logger()


def say(msg: str) -> None:
    """One progress line on stderr."""
    log.info(msg)


def seconds() -> float:
    """Seconds since the process started (the stamp of every line)."""
    return time.perf_counter() - _T0


class Step:
    """``with Step(steps, "synth mpu"):``: logs the start and the end of a step with its wall
    time and status, and appends ``{step, seconds, status, load_avg_1min}`` to ``steps``."""

    def __init__(self, steps: list, name: str):
        self.steps, self.name = steps, name

    def __enter__(self):
        say(f"start {self.name}")
        self.t = time.perf_counter()
        return self

    def __exit__(self, kind, exc, tb):
        dt = time.perf_counter() - self.t
        status = "ok" if kind is None else f"failed: {exc}"
        self.steps.append(dict(step=self.name, seconds=round(dt, 1), status=status,
                               load_avg_1min=round(os.getloadavg()[0], 2)))
        say(f"end   {self.name} ({dt:.1f} s, {status})")
        return False


def progress(iterable, desc: str, total: int | None = None):
    """``iterable`` with a progress bar on stderr (on a terminal only; elsewhere silent)."""
    return tqdm(iterable, desc=desc, total=total, file=sys.stderr, leave=False,
                disable=None, mininterval=1.0)
