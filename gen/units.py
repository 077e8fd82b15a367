"""The generator's catalogue of units: name → constructor from a :class:`Config`."""

from __future__ import annotations

from golden.config import Config

__all__ = ["UNITS", "build_unit", "top_name"]


def _pe(cfg):
    """One slice PE as the array builds it: with ``weight_hop > 1`` (``act_hop > 1``) the PE of a
    row (column) that does not register the weights (the row operand): ``w_out`` (``a_out``) a
    wire."""
    from rtl.pe import SlicePE
    return SlicePE(cfg, register_w=cfg.weight_hop == 1, register_a=cfg.act_hop == 1)


def _baseline_pe(cfg):
    from rtl.pe import Int8PE
    return Int8PE(cfg, register_w=cfg.weight_hop == 1, register_a=cfg.act_hop == 1)


def _mpu(cfg):
    from rtl.mpu import MPU
    return MPU(cfg)


def _baseline(cfg):
    from rtl.baseline import Baseline
    return Baseline(cfg)


def _qpu(cfg):
    from rtl.qpu import QPU
    return QPU(cfg)


def _qpu_mpu(cfg):
    from rtl.chain import QuantizedMatmul
    return QuantizedMatmul(cfg)


def _vpu(cfg):
    from rtl.vpu import VPU
    return VPU(cfg)


def _uart_vpu(cfg):
    # The UART bit time is not a Config field: the generated unit uses the module's simulation
    # default (rtl.uart_vpu.SIM_CYCLES_PER_BIT); a board top passes clock / baud itself.
    from rtl.uart_vpu import SIM_CYCLES_PER_BIT, UartVPU
    return UartVPU(cfg, cycles_per_bit=SIM_CYCLES_PER_BIT)


def _core(cfg):
    # Buffer depths are not Config fields: the core preset of the same name (or the default
    # CoreConfig for a configuration that is not a preset).
    from golden.core_isa import check_core, core_for
    from rtl.core import Core
    check_core(cfg)
    return Core(cfg, core_for(cfg))


def _uart_core(cfg):
    from golden.core_isa import check_core, core_for
    from rtl.uart_core import UartCore
    from rtl.uart_vpu import SIM_CYCLES_PER_BIT
    check_core(cfg)
    return UartCore(cfg, core_for(cfg), cycles_per_bit=SIM_CYCLES_PER_BIT)


UNITS = {
    "pe": (_pe, "one 2-bit-slice PE"),
    "mpu": (_mpu, "the mixed-precision systolic array with its weight front end"),
    "baseline": (_baseline, "the INT8xINT8 output-stationary baseline array"),
    "baseline_pe": (_baseline_pe, "one INT8xINT8 PE of the baseline array"),
    "qpu": (_qpu, "the quantization unit: max, bins, quantize/slice, bitonic sort, pack"),
    "qpu_mpu": (_qpu_mpu, "the QPU streaming groups straight into the MPU"),
    "vpu": (_vpu, "the vector unit: softmax, LayerNorm, modulation, GELU, residual, requantize"),
    "uart_vpu": (_uart_vpu, "the VPU behind the UART host link (simulation bit time)"),
    "core": (_core, "the DSTAR core: MPU, QPU, VPU, buffers and the command controller"),
    "uart_core": (_uart_core, "the core behind the UART host link (simulation bit time)"),
}


def top_name(unit: str) -> str:
    return f"dstar_{unit}"


def build_unit(unit: str, cfg: Config):
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {sorted(UNITS)}, not {unit!r}")
    return UNITS[unit][0](cfg)
