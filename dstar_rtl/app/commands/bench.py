"""``dstar bench``: the DSTAR MPU and the INT8 baseline array side by side, the measurement
``dstar measure bench`` (:mod:`app.benches.layers`) under its own name (``dstar bench --help``)."""

from __future__ import annotations

from dstar_rtl.app.measurement import alias_command

__all__ = ["register"]


def register(sub):
    alias_command(sub, "bench", "dstar_rtl.app.benches.layers",
                  help="DSTAR MPU against the INT8 baseline array on the layers of a DiT "
                       "(RTL cycles, ECP5 resources; dstar measure bench)")
