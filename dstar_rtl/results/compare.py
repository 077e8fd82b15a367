"""The typed result of ``dstar measure compare`` (:class:`Compare`, ``reports/compare.json``):
the whole DSTAR core against the whole INT8 core, measured on the RTL at ``fpga`` and modelled
at ``paper`` (:mod:`app.reports.compare` measures and renders it).

Readers (REPORT.md's headline, the projection's energy per image, the PE-area report's paper
workload) load it with :meth:`Compare.load`.
"""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.perf.chip_memory import MemorySystem
from dstar_rtl.perf.chip_model import Workload
from dstar_rtl.results.base import Result
from dstar_rtl.results.quantities import StepTime

__all__ = ["Compare", "FpgaComparison", "PaperComparison", "MeasuredCore", "CoreArea",
           "Memory", "Quality", "ModelCheckStep", "AreaModel", "FitCheck"]


@dataclass(frozen=True)
class Memory:
    """One RAM of a core, left out of its cells: its module, name, words × bits, read ports
    and SRAM estimate (µm²)."""

    module: str
    name: str
    width: int
    size: int
    bits: int
    read_ports: int
    sram_um2: float


@dataclass(frozen=True)
class CoreArea:
    """A core's Nangate45 cells (µm²) by part, its flip-flops, RAMs and their SRAM estimate,
    the QPU's share of QPU + MPU (:func:`flows.core_parts.core_area`)."""

    cells_um2: float
    parts: dict[str, float]
    ff: int
    memories: tuple[Memory, ...]
    ram_bits: int
    sram_um2: float
    qpu_share: float
    seconds: float | None
    config_hash: str


@dataclass(frozen=True)
class Psnr:
    """PSNR against the float sample (dB): mean with its 95 % interval over ``n`` samples
    (``None`` with one sample), and each sample's."""

    mean: float | None
    lo: float | None
    hi: float | None
    n: int
    per_sample: tuple[float, ...]


@dataclass(frozen=True)
class Quality:
    psnr_db: Psnr
    classifier_with_float: int | None
    classifier_with_label: int | None
    samples: int


@dataclass(frozen=True)
class ModelCheckStep:
    """The cycle model against the RTL on one step: cycles and each engine's busy cycles."""

    cache_step: bool
    rtl: int
    model: int
    error: float
    busy: dict[str, dict[str, int]]


@dataclass(frozen=True)
class ModelCheck:
    steps: tuple[ModelCheckStep, ...]


@dataclass(frozen=True)
class MeasuredCore:
    """One ``fpga`` core sampled on the RTL: its configuration, cycles per image and per step,
    average activation bits, quality, cell area, ECP5 resources without DSP blocks, the cycle
    model's check and the sampling's seconds."""

    config: dict
    config_hash: str
    cycles_per_image: float
    cycles_per_step: dict[str, float]
    average_bits: float
    quality: Quality
    area: CoreArea
    ecp5: dict[str, int]
    model_check: ModelCheck
    sample_seconds: float


@dataclass(frozen=True)
class FpgaComparison:
    """Both ``fpga`` cores and the ratios DSTAR over INT8 (module text of
    :mod:`app.reports.compare`); ``measured``: when a run that kept this object measured it;
    ``rtl_sources``: the digest of the RTL it measured (``None``: not recorded)."""

    dstar_um2: float
    int8_um2: float
    dstar_cycles_per_image: float
    int8_cycles_per_image: float
    speedup: float
    per_um2: float
    per_um2_with_sram: float
    per_lut: float
    qpu_share: float
    steps: int
    labels: tuple[int, ...]
    seed: int
    simulator: str
    cores: dict[str, MeasuredCore]
    measured: str | None = None
    rtl_sources: str | None = None


@dataclass(frozen=True)
class FitCheck:
    """The part-area model at a size it was not fitted on: synthesized, modelled, error."""

    T: int
    synthesized: float
    model: float
    error: float


@dataclass(frozen=True)
class Prediction:
    T: int
    total: float
    parts: dict[str, float] | None = None


@dataclass(frozen=True)
class PartsFit:
    """Each part fitted as a + b·T + c·T² (``coefficients``) on ``fit_sizes``."""

    fit_sizes: tuple[int, ...]
    coefficients: dict[str, tuple[float, ...]]
    check: FitCheck
    predicted: Prediction


@dataclass(frozen=True)
class SramFit:
    predicted: float
    check: FitCheck


@dataclass(frozen=True)
class FamilyRun:
    """A synthesized core of the ``paper`` family: its cells, flip-flops, SRAM and seconds."""

    cells_um2: float
    ff: int
    sram_um2: float
    seconds: float | None


@dataclass(frozen=True)
class AreaModel:
    fit: PartsFit
    sram: SramFit
    synthesized: dict[str, FamilyRun]
    qpu_share: float


@dataclass(frozen=True)
class PaperComparison:
    """The ``paper`` cores: part-area models, the projection's cycles per image for ``model``
    under ``workload``, the ratios; ``memory``: the chip's memory system the cycles were
    charged with (``None``: a projection before every byte was charged)."""

    dstar_um2: float
    int8_um2: float
    dstar_cycles_per_image: int
    int8_cycles_per_image: int
    speedup: float
    per_um2: float
    per_um2_with_sram: float
    qpu_share: float
    model: str
    workload: Workload
    workload_notes: tuple[str, ...]
    dstar_sram_um2: float
    int8_sram_um2: float
    area_model: dict[str, AreaModel]
    memory: MemorySystem | None = None
    rtl_sources: str | None = None


@dataclass(frozen=True)
class Compare(Result):
    """``reports/compare.json``."""

    KIND = "compare"
    liberty: dict[str, str]
    sram: dict[str, float | str]
    fpga: FpgaComparison
    verdict: str
    steps: tuple[StepTime, ...]
    seconds: float
    paper: PaperComparison | None = None
