"""The DRAM a testbench puts behind a core's DRAM port, as the core sees it (the model is
:class:`tb.dram_model.DramModel`; ``dstar sample --dram-latency --dram-bandwidth`` names one)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DramTiming"]


@dataclass(frozen=True)
class DramTiming:
    """A DRAM as the core sees it: ``latency`` cycles from a burst's address to its first read
    beat (or from its last write beat to the response), ``bytes_per_cycle`` of bandwidth both
    directions share."""

    latency: int
    bytes_per_cycle: float

    def __post_init__(self):
        if not isinstance(self.latency, int) or isinstance(self.latency, bool) or \
                self.latency < 1:
            raise ValueError(f"latency must be an integer >= 1 (cycles), not {self.latency!r}")
        if not self.bytes_per_cycle > 0:
            raise ValueError(f"bytes_per_cycle must be > 0, not {self.bytes_per_cycle!r}")
