"""Published figures the project builds on or compares with, each with its source, in one place.

Every model below the application reads them from here (the chip's memories, the SRAM and HBM
energies, the A100, the 7 nm scaling, the published per-MAC energies); the reports name the
source string beside the figure. The paper's DiT layer shapes are :mod:`models.dit_shapes`'s;
the paper's core (array size, lanes, cores) is the ``paper`` preset of :mod:`golden.config`.
Units are in the names. The figures and sources are those of the project's reference notes.
"""

from __future__ import annotations

__all__ = ["PAPER_CHIP", "A100_40GB", "HBM2", "HOROWITZ_45NM", "CACTI_45NM", "BIT_FUSION",
           "JOUPPI_7NM", "DEEPSCALE_7NM"]

#: The DSTAR paper's chip (arXiv 2607.15846): clock, on-chip SRAM (a shared scratchpad and one
#: unified buffer per core), HBM bandwidth, its power and its headline claim against the A100.
PAPER_CHIP = dict(
    freq_hz=1e9, scratchpad_bytes=512 * 1024, core_buffer_bytes=80 * 1024,
    hbm_bytes_per_s=1.5e12, power_w=118.75, latency_vs_a100=7.33,
    source="DSTAR, arXiv 2607.15846: 1 GHz, 512 KB scratchpad, about 80 KB per core, HBM2 "
           "1.5 TB/s, 118.75 W, up to 7.33x lower latency than an A100")

#: NVIDIA A100 40 GB (PCIe), the GPU the paper compares with; its memory size is also the HBM
#: capacity the projection gives the chip (the paper gives none).
A100_40GB = dict(
    name="A100 40 GB", fp16_flops=312e12, hbm_bytes_per_s=1.555e12, board_w=250.0,
    hbm_bytes=40e9,
    source="NVIDIA A100 datasheet: 312 dense FP16 TFLOPS, 1,555 GB/s, 250 W (PCIe), 40 GB")

#: HBM2 energy per bit moved, at its own voltage.
HBM2 = dict(pj_per_bit=3.97, activation=1.21, on_die=2.24, io=0.30,
            source="O'Connor et al., MICRO 2017: HBM2 3.97 pJ/bit (activation 1.21 + on-die "
                   "movement 2.24 + I/O 0.30)")

#: Horowitz's 45 nm energies at 0.9 V: a 64-bit SRAM read by capacity, an 8-bit multiply and a
#: 32-bit add.
HOROWITZ_45NM = dict(
    volts=0.9, sram_read_64b_pj={8 * 1024: 10.0, 32 * 1024: 20.0, 1024 * 1024: 100.0},
    mult8_pj=0.2, add32_pj=0.1,
    source="Horowitz, ISSCC 2014, \"Computing's energy problem\" (45 nm, 0.9 V)")

#: CACTI's 45 nm sweep as Bit Fusion ships it: 32-bit-port reads of 1 KB and 8 KB, and the
#: read and write of 16 KB (pJ).
CACTI_45NM = dict(read_32b_pj={1024: 1.13, 8 * 1024: 6.39}, read_16k_pj=9.98,
                  write_16k_pj=8.42,
                  source="CACTI 45 nm sweep (hsharma35/bitfusion, bitfusion/sram/cacti_sweep.csv)")

#: Bit Fusion's fixed 8-bit PE at 45 nm, 500 MHz (its synthesis results), pJ per MAC.
BIT_FUSION = dict(int8_pe_pj=0.236,
                  source="Sharma et al., Bit Fusion, ISCA 2018 (45 nm, 500 MHz)")

#: 45 nm → 7 nm energy factors, logic and SRAM apart: the ranges of Table 3 (multipliers 2.1-3.2×
#: less energy, SRAM 1.3-2.4×); HBM is the same memory at either node.
JOUPPI_7NM = dict(logic=(2.1, 3.2), sram=(1.3, 2.4),
                  source="Jouppi et al., ISCA 2021 (TPUv4i), Table 3: 45 nm to 7 nm energy")

#: The factor the DSTAR paper scaled by (DeepScaleTool, power at equal frequency, second-hand).
DEEPSCALE_7NM = dict(power=0.2473, source="Sarangi and Baas, DeepScaleTool, ISCAS 2021")
