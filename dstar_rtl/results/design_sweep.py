"""The typed result of ``dstar sweep`` (:class:`DesignSweep`, ``reports/design_sweep.json``): the
design space of the DSTAR and INT8 arrays on Nangate45 against size, with the bench's
throughput, where DSTAR's core overtakes the INT8 array per mm² (:mod:`app.sweeps.report`
renders it).

A record per variant and size, the synthesis runs behind the area model and the model's
check are kept as the sweep assembles them (string-keyed data inside the typed fields).
"""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result

__all__ = ["DesignSweep", "Crossover"]


@dataclass(frozen=True)
class Crossover:
    """The smallest size from which DSTAR stays ahead per mm² (``None``: none), the ratio at
    each size, the sizes it is ahead at, the best size and ratio, and by how much the best
    misses parity when it never gets ahead."""

    size: int | None
    ratios: dict[str, float]
    ahead: tuple[int, ...]
    best_size: int
    best_ratio: float
    miss: float | None = None


@dataclass(frozen=True)
class DesignSweep(Result):
    """``reports/design_sweep.json``."""

    KIND = "design-sweep"
    liberty: dict[str, str]
    yosys: str
    base_preset: str
    sizes: tuple[int, ...]
    measure_sizes: tuple[int, ...]
    dstar_variants: tuple[str, ...]
    int8_variants: tuple[str, ...]
    qpu: dict
    throughput: dict
    records: tuple[dict, ...]
    best: dict
    crossover: Crossover
    crossover_arrays_only: Crossover
    crossover_steady_state: Crossover
    model_check: tuple[dict, ...]
    pe_runs: dict
    array_runs: dict
    seconds: float
    synthesis_seconds: float
