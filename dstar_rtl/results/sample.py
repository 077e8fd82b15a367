"""The typed result of ``dstar sample`` (:class:`Sample`, ``DIR/sample.json``): a whole DiT
sampled on a backend (float, the integer golden, or the generated core on Verilator or
Icarus), every sample's PSNR against float and classifier reading, every step's figures and, on
an RTL backend, the core's cycles and how it ran (:mod:`app.reports.sample_report` renders it;
REPORT.md reads ``reports/sample.json`` with :meth:`Sample.load`).
"""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.results.base import Result

__all__ = ["Sample", "SampleRecord", "CoreSampling", "Agreement"]


@dataclass(frozen=True)
class SampleRecord:
    """One sample: its index, label and seed, PSNR against the float sample (``None`` on the
    float backend), the classifier's reading of it and of the float sample, and each step's
    figures (the backend's counters: values checked, bits, SAR, cycles on an RTL core)."""

    index: int
    label: int
    seed: int
    psnr_db: float | None
    per_step: tuple[dict, ...]
    classifier: int | None = None
    classifier_float: int | None = None


@dataclass(frozen=True)
class CoreSampling:
    """How the generated core ran the samples: bit-exact at every step, batch rows, the init
    program's cycles per simulator run, the runs, commands per step, the layers whose state
    streamed through the host port, the memory map, cycles per step and per image, the bytes
    of the core's on-chip buffers and, with a DRAM port, the DRAM bytes per image by kind
    (weights, state, P cache) and the DRAM behind it (``dram``: ``{"latency": cycles,
    "bytes_per_cycle": ...}`` of a deterministic DRAM, or ``{"pause": p}`` of the AXI RAM
    paused at random)."""

    bit_exact: bool
    batch_rows: int
    init_cycles: tuple[int, ...]
    runs: int
    commands_per_step: int
    streamed: dict[str, tuple[str, ...]]
    memory_map: tuple[str, ...]
    cycles_per_step: dict[str, float]
    cycles_per_image: float
    sram_bytes: dict[str, int] | None = None              # the core's buffers as built
    dram_bytes_per_image: dict[str, int] | None = None    # by kind, read and write (DRAM port)
    dram: dict[str, float] | None = None                  # the DRAM behind the port


@dataclass(frozen=True)
class Agreement:
    """How many of the samples the digits classifier reads as their label and as the float
    sample's class (``None``: no float samples to compare with)."""

    with_label: int
    samples: int
    with_float: int | None = None


@dataclass(frozen=True)
class Sample(Result):
    """``sample.json``."""

    KIND = "sample"
    backend: str
    model: dict
    config: dict
    config_hash: str
    steps: int
    guidance: float
    seed: int
    sar: bool
    samples: tuple[SampleRecord, ...]
    seconds: float
    kept_fraction: dict[str, float] | None = None
    base_log2: dict[str, int] | None = None
    core: CoreSampling | None = None
    classifier_agreement: Agreement | None = None
