"""``dstar sweep``: the design-space sweep, the measurement ``dstar measure design-sweep``
(:mod:`app.sweeps.measure`) under its own name (``dstar sweep --help``)."""

from __future__ import annotations

from dstar_rtl.app.measurement import alias_command

__all__ = ["register"]


def register(sub):
    alias_command(sub, "sweep", "dstar_rtl.app.sweeps.measure",
                  help="design-space sweep: area (µm²), throughput and throughput per "
                       "µm² of DSTAR against the INT8 array (dstar measure design-sweep)")
