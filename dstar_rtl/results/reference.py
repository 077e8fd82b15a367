"""The typed result of ``dstar measure reference`` (``reports/reference.json``,
:mod:`app.reports.reference` measures and renders it): the reference family compiled on each
preset, the first steps run, the hidden-96 model's step times."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dstar_rtl.results.base import Result

__all__ = ["BufferNeed", "Traffic", "FamilyRow", "FirstStep", "StepTimes", "Reference"]


@dataclass(frozen=True)
class BufferNeed:
    """Rows a buffer needs for the whole model resident, and the preset's."""

    need: int
    preset: int


@dataclass(frozen=True)
class Traffic:
    """32-bit host words of one step: in, out, and the streamed state's share."""

    words_in: int
    words_out: int
    streamed_words: int


@dataclass(frozen=True)
class FamilyRow:
    """One family member on one preset: its shape, whether it compiles (else why not), the
    buffers it needs and the ones deepened, its commands, host traffic and fc2 pieces."""

    model: str
    preset: str
    tokens: int
    hidden: int
    depth: int
    heads: int
    mlp: int
    status: str
    raised: dict[str, int] | None = None
    reason: str | None = None
    buffers: dict[str, BufferNeed] | None = None
    deepened: dict[str, int] | None = None
    command_bits: int | None = None
    streamed: dict[str, tuple[str, ...]] | None = None
    init_commands: int | None = None
    init_words: int | None = None
    step_commands: int | None = None
    cache_step: Traffic | None = None
    reuse_step: Traffic | None = None
    pieces: dict[str, int] | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class FirstStep:
    """A member's first DDIM step on the ISA executor: its seconds and commands, or why it did
    not run."""

    model: str
    preset: str
    refused: str | None = None
    seconds: float | None = None
    commands: int | None = None


@dataclass(frozen=True)
class StepTimes:
    """Time per DDIM step of the :data:`H96` model on the executor and the Verilator core."""

    model: dict[str, Any]
    preset: str
    steps: int
    pieces: dict[str, int]
    executor_s_per_step: float
    rtl_build_s: float | None = None
    rtl_s_per_step: float | None = None
    rtl_bit_exact: bool | None = None
    rtl_cycles_per_step: float | None = None


@dataclass(frozen=True)
class Reference(Result):
    """``reports/reference.json``: every member on every preset, the first steps run, the step
    times."""

    KIND = "reference"
    rows: tuple[FamilyRow, ...]
    runs: tuple[FirstStep, ...] = ()
    step_times: StepTimes | None = None
