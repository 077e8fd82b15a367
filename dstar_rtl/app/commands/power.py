"""``dstar power``: gate-level energy per MAC and per image, the measurement ``dstar measure
power`` (:mod:`app.reports.power`) under its own name (``dstar power --help``)."""

from __future__ import annotations

from dstar_rtl.app.measurement import alias_command

__all__ = ["register"]


def register(sub):
    alias_command(sub, "power", "dstar_rtl.app.reports.power",
                  help="energy per MAC of the DSTAR MPU and the INT8 array from gate-level "
                       "simulation of their standard-cell netlists (dstar measure power)")
