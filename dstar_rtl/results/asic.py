"""The typed result of ``dstar measure asic`` (``reports/asic_area.json``, :mod:`app.reports.asic`
measures and renders it): every unit's standard-cell area by part, each at its best, the ratios and
the levers alone."""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import Library

__all__ = ["Memory", "PartArea", "AsicUnit", "Best", "Ratio", "LeverRatio", "Worktree",
           "AsicReport"]


@dataclass(frozen=True)
class Memory:
    """A memory of a unit left out as a macro: its name, shape, bits and ports."""

    module: str | None
    name: str
    width: int
    size: int
    bits: int
    rom: bool
    read_ports: int
    write_ports: int


@dataclass(frozen=True)
class PartArea:
    """One part of a unit by part: its cells' area (µm², combinational and sequential),
    flip-flops and how many modules it sums."""

    area: float
    combinational: float
    sequential: float
    ff: int
    modules: int


@dataclass(frozen=True)
class AsicUnit:
    """One configuration on the library: its cells' area, flip-flops, cells, the RAM and ROM
    bits, the unbuffered critical path (ns, cells), Yosys's seconds, whether ``-booth`` ran,
    its lever, the run whose design it is when a lever equals the default, its RAMs (left out
    as macros) and, for a unit by part, its parts."""

    area: float
    combinational: float
    sequential: float
    ff: int
    cells: int
    ram_bits: int
    rom_bits: int
    delay_ns: float | None
    levels: int | None
    seconds: float | None
    booth: bool
    config_hash: str
    lever: str
    same_design_as: str | None
    memories: tuple[Memory, ...]
    parts: dict[str, PartArea] | None = None


@dataclass(frozen=True)
class Best:
    """A unit's smallest run: its key, area, ``-booth`` and lever."""

    key: str
    area: float
    booth: bool
    lever: str


@dataclass(frozen=True)
class Ratio:
    """DSTAR at its best against INT8 at its best (µm² and their ratio), DSTAR's levers."""

    dstar: float
    int8_best: float
    ratio: float
    dstar_lever: str


@dataclass(frozen=True)
class LeverRatio:
    """One slice-PE lever on its own against the INT8 PE at its best."""

    lever: str
    preset: str
    dstar: float
    int8_best: float
    ratio: float
    ff: int
    delay_ns: float | None
    same_design_as: str | None


@dataclass(frozen=True)
class Worktree:
    """The commit measured and the uncommitted changes to the sources elaboration reads."""

    commit: str | None
    modified: tuple[str, ...]


@dataclass(frozen=True)
class AsicReport(Result):
    """``reports/asic_area.json``: every run by key, each unit's best, the DSTAR/INT8 ratios,
    the levers, the runs that failed (key → why) and the worktree."""

    KIND = "asic"
    liberty: Library
    yosys: str
    units: dict[str, AsicUnit]
    best: dict[str, Best]
    ratios: dict[str, Ratio]
    levers: dict[str, LeverRatio]
    failed: dict[str, str]
    worktree: Worktree
