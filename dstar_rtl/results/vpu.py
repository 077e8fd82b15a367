"""The typed result of ``dstar measure vpu`` (``reports/vpu.json``, :mod:`app.reports.vpu`
measures and renders it): the VPU's cycles per row, its accuracy, resources and Fmax."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import PnrRun, StepTime, SynthRun

__all__ = ["RowCycles", "VpuCycles", "FunctionError", "VpuFpga", "Vpu"]


@dataclass(frozen=True)
class RowCycles:
    """One operation at one row length: the first row's latency and the steady-state interval
    between rows (cycles)."""

    latency: int
    interval: float


@dataclass(frozen=True)
class VpuCycles:
    """Cycles per row of every operation at three row lengths (:func:`bench.vpu.measure`):
    ``table[op][str(n)]``."""

    preset: str
    config_hash: str
    vpu_lanes: int
    max_reduction: int
    lengths: tuple[int, ...]
    rows: int
    ops: tuple[str, ...]
    simulator: str
    table: dict[str, dict[str, RowCycles]]
    sim_cycles_per_second: float

    @classmethod
    def from_bench(cls, d: dict) -> VpuCycles:
        return cls(**{**d, "lengths": tuple(d["lengths"]), "ops": tuple(d["ops"]),
                      "table": {op: {n: RowCycles(**c) for n, c in by_n.items()}
                                for op, by_n in d["table"].items()}})


@dataclass(frozen=True)
class FunctionError:
    """One integer function against its float reference: maximum and mean absolute error, the
    bounds the tests assert (``None``: none), the worst case's name."""

    max_abs: float | None
    mean_abs: float | None
    max_bound: float | None
    mean_bound: float | None
    worst: str


@dataclass(frozen=True)
class VpuFpga:
    """The ``fpga`` VPU on the ECP5: synthesis with and without DSP blocks, place and route of
    the DSP netlist."""

    config_hash: str
    ecp5: SynthRun
    ecp5_nodsp: SynthRun
    pnr: PnrRun


@dataclass(frozen=True)
class Vpu(Result):
    """``reports/vpu.json``: cycles per row by preset, accuracy by preset and function, the
    ECP5 figures, the steps' times and the host."""

    KIND = "vpu"
    cycles: dict[str, VpuCycles]
    accuracy: dict[str, dict[str, FunctionError]]
    fpga: VpuFpga | None
    steps: tuple[StepTime, ...]
    host: dict[str, str]
