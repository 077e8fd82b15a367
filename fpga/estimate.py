"""A cheap analytic estimate of a unit's resources and peak throughput from its configuration.

No elaboration and no synthesis: :func:`estimate` takes a :class:`~golden.config.Config` and
returns in milliseconds (any preset, ``paper`` included) the estimated ECP5 LUT total (LUT4 + 2
× CCU2C, as :func:`fpga.synth.resources` counts it; ``synth_ecp5`` with and without DSP blocks),
flip-flops, DSP blocks, block and LUT RAM, generic CMOS transistors (Yosys ``stat -tech cmos``
after ``dfflegalize``, as :mod:`fpga.synth` reports them), and the peak operations per cycle.

The model
---------
A unit is a sum of *parts* (a PE times the number of PEs, the array's front end, the QPU's
front, chunk assembler, sorter, packer and store, a VPU lane times ``vpu_lanes``, the VPU's row
scalars and control; the core is these parts plus its buffers and its control,
:mod:`fpga.estimate_core`). Every part carries, per instance, *features* computed from the
configuration by reading the RTL:

``reg.*``
    Register bits counted from the RTL, with what Yosys does to them: the PE's stage-1 control
    equals its forwarded control (``w_out.ctrl``) and is merged with it; the array's skew chains
    of values that every row or column shares (the digits' signed flags, the column control)
    exist once; PE outputs that lead nowhere (the right column's ``a_out``, the bottom row's
    weights, every ``captured`` flag but the last PE's) are removed; a weight buffer in LUT RAM
    brings its registered read data, one in block RAM the glue Yosys adds around a DP16KD's
    write port (``2 × width + address + 5``, measured). For the arrays the count is exact on
    every configuration measured (the ``fpga`` MPU's 9,795 included); the QPU's and the VPU's
    are approximate (within 2 %: their trimming is not modelled bit by bit) and each family has
    its own coefficient (0.9999, 0.991 and 0.977 flip-flops per counted bit).
logic features
    Widths of the datapath elements that cost LUTs and gates, so that a coefficient is the cost
    of one bit of one kind of element. PE with ``digit_product="multiply"``: ``pe.mul`` = lanes
    × weight_width (one digit × weight product per lane), ``pe.tree`` = (lanes − 1) × dot width
    (the adder tree),
    ``pe.shift`` = (dot width + max_exp) × exponent bits (the product-shift alignment),
    ``pe.hshift`` (Horner: the accumulator's and the result's shifts), ``pe.acc`` = acc_bits
    (accumulate, first-group select, shadow), ``pe.sat`` (overflow detection),
    ``pe.fused`` (fewer than two PE stages: alignment and accumulation in one logic cone, which
    costs more LUTs next to DSP blocks). PE with ``digit_product="select"`` (no multiplier, no
    DSP block; features of its own so that it leaves the multiplier's fit alone): ``pe.sel`` =
    2 × lanes × dot width (slice digits: two weight multiples per lane into the adder tree),
    ``pe.bsel`` = lanes × dot width (Booth digits: one 3:1 choice and its complement per lane),
    ``pe.sacc`` (accumulator and alignment shifter bits), ``pe.s1``, and ``pe.alone`` (a select
    PE synthesized alone, see below). Booth digits (``digits="booth"``) are 3 bits without a
    signed flag: they change the registers, not the multiplier's features. INT8 PE: ``i8.mul``
    = weight_width², ``i8.acc``.
    QPU, weighed to first order in LUT4s (a 2:1 multiplexer bit 1, an n:1 one n/2, an adder or
    comparator bit 1) so that one coefficient scales a part: ``so`` = compare-exchanges of
    :func:`golden.bitonic.network` × (key + 2 × entry bits), ``qf`` the front's per-value
    datapath, ``qm`` the multiplexers of chunk assembler, packer and digit store. VPU: ``vl.mul``
    = the lane's ``x × y`` bits from :func:`rtl.vpu_lane.lane_widths`, ``vl.lin`` the rest of
    the lane, ``vo`` its operand selection and GELU tables, ``vpu.mul`` the row scalars'
    multiplier bits. ``*.1``: a constant per part. Generic gates only: ``ff`` (every flip-flop),
    ``mem`` (memory bits, flip-flops there), ``g.rd`` (read multiplexers of those memories),
    ``g.rom`` (the exponential's table, a block RAM on ECP5).
DSP blocks, block RAM, LUT RAM
    Counted structurally: an a × b product takes ``ceil(a/18) × ceil(b/18)`` MULT18X18D; a
    memory goes to TRELLIS_DPR16X4 or to DP16KD as Yosys's ``memory_libmap`` costs them (4 per
    LUT-RAM cell, 128 per block), one copy per read port. Exact for the arrays; the VPU's DSP
    count is within a few blocks.

Each resource is Σ coefficient × feature. The coefficients (:data:`CALIBRATION`) were fitted
once by non-negative least squares on the relative error against real synthesis
(:func:`fpga.synth.synthesize`: Yosys 0.70, one fresh process per run) of the 44 small
configurations in :data:`CALIBRATION_RUNS` (PE, INT8 PE, MPU and baseline variants, the select
datapath's PEs and MPUs, the sorter alone, the QPU, the VPU lane alone, the VPU), each for ``ecp5``,
``ecp5 -nodsp`` and ``generic``. ``python -m fpga.estimate --calibrate`` re-runs that synthesis
(reusing stored runs of identical RTLIL, script and Yosys), fits, and prints every run's error and
that of the 18 held-out configurations of :data:`VALIDATION_RUNS`; ``--write`` stores the result
here, and ``--refit`` fits the stored measurements again without synthesis (after a change of the
model alone); ``--calibrate --missing`` synthesizes only the runs that have no stored measurement
(runs just added: the 13 select, Booth and ``weight_hop`` runs took 4 minutes) and takes the others
as stored. About 45 minutes on two cores from scratch: 20 for the held-out ``fpga`` MPU, most of the
rest the VPU without DSP blocks.

Measured error (calibration of 2026-12-01; estimate / synthesis − 1)
--------------------------------------------------------------------
=================  ================================  ========================================
quantity           fitted runs (44)                  held out (18)
=================  ================================  ========================================
ECP5 LUTs          PE ≤ 8.1 % (select PE alone       ≤ 9.6 %, except +20.5 % (PE, 2 lanes,
                   ≤ 20.8 %), arrays ≤ 7.7 %,        pe_stages 0, with DSP blocks)
                   QPU ≤ 4.2 %, VPU ≤ 3.5 %
LUTs, ``-nodsp``   ≤ 7.7 % (select PE alone          ≤ 9.0 %, except −15.3 % (VPU, 2 lanes,
                   ≤ 21.0 %)                         act_width 12)
flip-flops         arrays ≤ 0.2 %, QPU/VPU ≤ 1.7 %   arrays ≤ 0.2 %, QPU/VPU ≤ 1.6 %
transistors        ≤ 1.1 %                           ≤ 3.5 %
=================  ================================  ========================================

The ``fpga`` MPUs (64 PEs, four times the largest fitted array) are among the held-out runs:
the default one LUTs −1.9 % (+0.2 % without DSPs), flip-flops exact, transistors −2.7 %; with
the select datapath and Booth digits (0 DSP) LUTs −9.6 %, flip-flops exact, transistors
−3.3 %. The select datapath's PE alone is its worst fitted run (``pe select+booth`` −20.8 %):
Yosys maps a lone select PE with ABC9 but every select array with the classic ABC (ABC9
asserts on them, :mod:`fpga.synth`), and the two mappers differ by up to a third on it; the
``pe.alone`` constant takes the mean difference. ``weight_hop`` is modelled in the registers
(every ``weight_hop``-th row's PEs register ``w_out``; the others' stage-1 control is then a
register of its own; the row skew is ``i // weight_hop``): exact on the held-out MPU with
``weight_hop=2``, 3 flip-flops over on the broadcast baseline. ``act_hop`` likewise (every
``act_hop``-th column's PEs register ``a_out``; the column skew is ``j // act_hop``): exact on
the tiny MPU with ``act_hop = cols`` (2,072 flip-flops, with ``weight_hop = rows`` too 1,628),
3 over on the baseline as with ``weight_hop``; no re-fit (the hops change only register
counts).
The tests (``tests/test_estimate.py``) assert :data:`TOLERANCE`: 25 % on LUTs and transistors,
10 % on flip-flops (1 % and exact DSP/RAM counts for the arrays). The fit has nearly as many
coefficients per part as it has runs of that part, so the fitted errors flatter it: the held-out
column is the estimate's error. ECP5 synthesis of the QPU trips an assertion in Yosys 0.70's
``abc9`` for rows ≠ 4 with 4 lanes (see :data:`CALIBRATION_RUNS`): no such QPU is in the fit.

>>> r = estimate("mpu", preset("tiny"))                     # doctest: +SKIP
>>> r["peak"]["ops_per_cycle"], r["ecp5"]["dsp"]            # doctest: +SKIP
(64, 64)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from dataclasses import dataclass, field
from math import ceil
from pathlib import Path

import numpy as np

from golden.bitonic import compare_exchanges
from golden.config import Config, ConfigError, preset

__all__ = ["estimate", "ecp5_resources", "parts", "peak", "front_registers", "Part", "UNITS",
           "TARGETS",
           "TOLERANCE", "CALIBRATION", "CALIBRATION_RUNS", "VALIDATION_RUNS", "measure", "fit",
           "errors", "calibrate"]

UNITS = ("pe", "mpu", "baseline", "qpu", "qpu_mpu", "vpu", "core")

#: Estimated quantity → (synthesis target, nodsp, result field) it is calibrated against.
TARGETS = {
    "lut": ("ecp5", False, "lut_total"),
    "lut_nodsp": ("ecp5", True, "lut_total"),
    "ff": ("ecp5", False, "ff"),
    "transistors": ("generic", False, "transistors"),
}

#: The relative error the tests allow between estimate and synthesis: a documented tolerance,
#: wider than every error measured at calibration (``CALIBRATION["error"]``, fitted runs, and
#: ``CALIBRATION["validation"]``, held-out runs).
TOLERANCE = {"lut": 0.25, "lut_nodsp": 0.25, "ff": 0.10, "transistors": 0.25}

_SLOTS = 4             # rtl.chunker.SLOTS: digit-store slots of the QPU
_COUNTERS = 13         # golden.schedule.COUNTER_NAMES: 32-bit statistics counters of the QPU
_FIFO_DEPTH = 4        # the QPU's reconstruction FIFO
_VPU_LATENCY = 6       # rtl.vpu_lane.VPULane.LATENCY


# ------------------------------------------------------------------------------- primitives
def _ubits(n: int) -> int:
    """Bits of an Amaranth ``range(n)`` signal (values 0 .. n-1)."""
    return max(0, (n - 1).bit_length())


def _dsp(a: int, b: int) -> int:
    """MULT18X18D blocks for an a × b product (Yosys ``mul2dsp`` with 18 × 18 pieces)."""
    if min(a, b) < 2:
        return 0
    return ceil(a / 18) * ceil(b / 18)


_BRAM_SHAPES = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36))


def _memory(depth: int, width: int, read_ports: int = 1, addr_bits: int = 0) -> dict:
    """ECP5 mapping of a memory with one write port and ``read_ports`` synchronous read ports
    (one copy per read port), as Yosys's ``memory_libmap`` chooses by its cost figures (4 per
    TRELLIS_DPR16X4 of 16 × 4 bits, 128 per DP16KD in its cheapest shape): ``{lutram, bram,
    ff}``. ``ff`` are the flip-flops that come with it: the registered read data of LUT RAM, or
    the glue Yosys adds around a DP16KD's write port (2 × width + address + 5, measured)."""
    cells = ceil(depth / 16) * ceil(width / 4)
    tiles = min(ceil(depth / d) * ceil(width / w) for d, w in _BRAM_SHAPES)
    if 4 * cells < 128 * tiles:
        return {"lutram": read_ports * cells, "bram": 0, "ff": read_ports * width}
    return {"lutram": 0, "bram": read_ports * tiles, "ff": 2 * width + addr_bits + 5}


@dataclass(frozen=True)
class Part:
    """One kind of hardware in a unit: ``count`` instances, each with ``feats`` (feature →
    amount), ``dsp``/``bram``/``lutram`` primitives and ``mem_bits`` of memory (flip-flops in
    generic gates). ``fixed`` (target → amount per instance) is added as it is, without
    coefficients: a part whose cost is taken from a measurement rather than from features
    (the core's control, :mod:`fpga.estimate_core`)."""
    name: str
    count: int
    feats: dict
    dsp: int = 0
    bram: int = 0
    lutram: int = 0
    mem_bits: int = 0
    fixed: dict = field(default_factory=dict)

    def vector(self) -> dict:
        """Per-instance features including the derived ``ff`` (all counted register bits) and
        ``mem`` (memory bits) that the transistor model prices."""
        v = dict(self.feats)
        v["ff"] = sum(a for k, a in self.feats.items() if k.startswith("reg."))
        v["mem"] = self.mem_bits
        return v


def _uses(target: str, feature: str) -> bool:
    """Which features a target's model may use: ``reg.*`` only the flip-flop count; ``ff``,
    ``mem`` and ``g.*`` (what is a block RAM on ECP5) only the transistor count."""
    if target == "ff":
        return feature.startswith("reg.")
    if feature.startswith("reg."):
        return False
    if feature in ("ff", "mem") or feature.startswith("g."):
        return target == "transistors"
    return True


# ------------------------------------------------------------------------------------ parts
def _slice_pe(cfg: Config, count: int = 1, register_w: bool = True,
              register_a: bool = True) -> Part:
    """:class:`rtl.pe.SlicePE` (``register_w``: its ``w_out`` is a register, as at every PE with
    ``weight_hop = 1``; otherwise a wire, and the stage-1 control is a register of its own;
    ``register_a``: its ``a_out`` is a register, as at every PE with ``act_hop = 1``; otherwise
    a wire)."""
    L, ww, A, S = cfg.lanes, cfg.weight_width, cfg.acc_bits, cfg.pe_stages
    XW, X = cfg.exp_width, cfg.max_exp
    horner = cfg.alignment == "horner"
    select = cfg.digit_product == "select"
    booth = cfg.digits == "booth"
    ctrl = 3 + XW * (2 if horner else 1)
    dot = ww + 3 + (L - 1).bit_length()
    # a_out (digits, and signed flags for slices), w_out, acc, shadow, captured
    row = (cfg.digit_width + (0 if booth else 1)) * L
    regs = (row if register_a else 0) + (L * ww + ctrl if register_w else 0) + 2 * A + 1
    if S >= 1:
        regs += dot + (0 if register_w else ctrl)  # p1_value (p1_ctrl merges with w_out.ctrl)
    if S >= 2:
        regs += (dot if horner else dot + X) + (3 + 2 * XW if horner else 3)
    if cfg.overflow_detect:
        regs += 2
    # Product-shift shifts each term; Horner shifts the accumulator (in its loop) and the result.
    shift = 0 if horner else (dot + X) * XW
    hshift = 2 * A * XW if horner else 0
    # With fewer than two PE stages the alignment and the accumulation are one logic cone;
    # with DSP products Yosys/ABC then maps about a third more LUTs (measured, pe_stages 2 vs 1).
    fused = 1 if S < 2 and not select else 0
    feats = {"reg.arr": regs, "pe.hshift": hshift, "pe.sat": A if cfg.overflow_detect else 0}
    if select:
        # The select datapath (SlicePE._partial_select) has features of its own, so that its
        # few runs leave the multiplier datapath's fit alone: per lane one (Booth: a 3:1 choice
        # of 0, w, 2w, then the one's complement) or two (slice: d[0]·w and d[1]·(±2w)) addends
        # into the adder tree with the carry-ins (``pe.bsel``/``pe.sel``: the tree's adder
        # bits, selects included); the alignment shifter and the accumulator (``pe.sacc``);
        # a constant (``pe.s1``).
        feats["pe.bsel" if booth else "pe.sel"] = (1 if booth else 2) * L * dot
        feats.update({"pe.sacc": A + shift // XW, "pe.s1": 1})
    else:
        feats.update({"pe.mul": L * ww, "pe.tree": (L - 1) * dot, "pe.shift": shift,
                      "pe.acc": A, "pe.fused": fused, "pe.1": 1})
    return Part("PE (2-bit slice)", count, feats, dsp=0 if select else L * _dsp(3, ww))


def _int8_pe(cfg: Config, count: int = 1, register_w: bool = True,
             register_a: bool = True) -> Part:
    """:class:`rtl.pe.Int8PE` (``register_w``, ``register_a`` as for :func:`_slice_pe`)."""
    ww, A, S = cfg.weight_width, cfg.baseline_acc_width, cfg.pe_stages
    regs = (ww if register_a else 0) + (ww + 3 if register_w else 0) + 2 * A + 1
    if S >= 1:
        regs += 2 * ww + (0 if register_w else 3)
    if S >= 2:
        regs += 2 * ww + 3
    return Part("PE (INT8)", count, {"reg.arr": regs, "i8.mul": ww * ww, "i8.acc": A,
                                     "i8.1": 1}, dsp=_dsp(ww, ww))


def _array_front(cfg: Config, baseline: bool, depth: int | None = None,
                 own_registers: bool = False) -> Part:
    """:class:`rtl.array.ArrayUnit` and :class:`rtl.array.SystolicArray` without the PEs: weight
    buffer (``depth`` rows, default ``max_reduction``; the core's MPU has ``wmem_rows``),
    front-end registers, skew chains, drain control; less the PE registers that lead nowhere in
    an array."""
    depth = cfg.max_reduction if depth is None else depth
    R, C, L, ww, XW, S = cfg.rows, cfg.cols, cfg.lanes, cfg.weight_width, cfg.exp_width, \
        cfg.pe_stages
    hop = cfg.weight_hop
    ahop = cfg.act_hop
    # The bottom row's forwarded column operand leads nowhere when that row registers it (with
    # fewer than one PE stage its control too: otherwise it is the stage-1 control); the right
    # column's forwarded row operand likewise.
    bottom = (R % hop) == 0
    right = (C % ahop) == 0
    if baseline:
        row, row_sh, col, col_sh = ww, 0, ww, 3
        s1 = R * ww + 2
        ports, mask, extra = 1, 0, 0
        dead = (R * ww if right else 0) + ((C * ww + (0 if S else C * 3)) if bottom else 0)
    else:
        ctrl = 3 + XW * (2 if cfg.alignment == "horner" else 1)
        dw = cfg.digit_width
        booth = cfg.digits == "booth"
        # Per row the digits; the signed flags are the same for every row (one chain). A Booth
        # digit carries its sign: its row operand has no flags (the group's stage-1 flags are
        # removed as unread).
        row, row_sh, col, col_sh = dw * L, 0 if booth else L, L * ww, ctrl
        s1 = R * L * dw + (1 if booth else 2) * L + XW + 2
        ports, mask = L, C * L * ww
        extra = XW if cfg.alignment == "horner" else 0
        dead = (R * (dw + (0 if booth else 1)) * L if right else 0) + \
            ((C * L * ww + (0 if S else C * ctrl)) if bottom else 0)
    # Row i is delayed by i // weight_hop cycles, column j by j // act_hop.
    skew = (sum(i // hop for i in range(R)) * row + (R - 1) // hop * row_sh
            + sum(j // ahop for j in range(C)) * col + (C - 1) // ahop * col_sh)
    s2 = R * row + row_sh + C * col + col_sh
    width = C * ww
    abits = cfg.chan_width if depth == cfg.max_reduction else max(1, _ubits(depth))
    mem = _memory(depth, width, ports, abits)
    own = skew + s2 + s1 + 1 + extra + 2 + _ubits(R)
    regs = own + mem.pop("ff") - dead - (R * C - 1)
    if own_registers:
        return own
    # Generic gates have no RAM: each read port becomes a depth:1 multiplexer of the word.
    return Part("array front end, skew, drain", 1, {
        "reg.arr": regs, "arr.mask": mask, "arr.1": 1,
        "g.rd": ports * width * depth},
        mem_bits=depth * width, **mem)


def front_registers(cfg: Config, baseline: bool = False) -> int:
    """Register bits of an array's own logic outside its PEs and weight memory (front-end
    stages, skew chains, drain control): what its non-PE area scales with
    (:mod:`dstar.design_sweep`)."""
    return _array_front(cfg, baseline, own_registers=True)


def _qpu_parts(cfg: Config) -> list:
    """:class:`rtl.qpu.QPU`: front (stages 1-3), chunk assembler, sorter, packer, top.

    The logic features weigh each element by its LUT4 cost to first order (a 2:1 multiplexer
    bit 1, an n:1 multiplexer bit n/2, an adder or comparator bit 1), so that one fitted
    coefficient per part scales them: ``qf`` the front's per-value datapath, ``qm`` the
    multiplexers of the chunk assembler, the packer and the digit store, ``so`` the sorter.
    """
    T, n, L, XW = cfg.rows, cfg.sort_n, cfg.lanes, cfg.exp_width
    dxw, rw, F, chw = cfg.dx_width, cfg.recon_width, cfg.act_frac, cfg.chan_width
    sb = (F + cfg.e_max).bit_length()                   # quantization shift r0 + e
    r0b = F.bit_length()
    front_regs = (2 * T * dxw + dxw + r0b + 21 + 4 + XW + sb + 2 * 2
                  + 4 + XW + 1 + 4 + 8 * T + T * rw + 2)
    # Per value: |u| and the max tree, rounding add, right shift by r0 + e, clip and negate,
    # the reconstruction's left shift.
    front = Part("QPU front: max, bins, quantize/slice", 1, {
        "reg.qpu": front_regs, "qf": T * (3 * dxw + (dxw + rw) * sb // 2 + 24)})
    ebits = XW + 1 + chw + 1                             # a buffered descriptor
    ch_regs = (n * (ebits + 2 * T) + (n + 1).bit_length() + 2 + cfg.max_reduction.bit_length()
               + _SLOTS.bit_length() + _ubits(_SLOTS) + 1)
    # n + 4 positions, each a 5:1 choice (buffer or one of four new descriptors) and the
    # buffer's next value.
    chunker = Part("QPU chunk assembler", 1, {"reg.qpu": ch_regs,
                                              "qm": 4 * (n + 4) * (ebits + 2 * T)})
    sorter = _sorter(cfg)
    kw, pw = XW + 1, chw + 1 + _ubits(n)
    group = T * L * 2 + L * chw + 2 * L + XW + 2
    pk_regs = n * (kw + pw) + 4 + 1 + (n + 1).bit_length() + 1 + group
    # Per lane an n:1 choice of a descriptor and of its digit column.
    packer = Part("QPU packer", 1, {"reg.qpu": pk_regs, "qm": L * n * (kw + pw + 2 * T) // 2})
    fifo = _memory(_FIFO_DEPTH - 1, T * rw)            # its read register: the FIFO's output
    top_regs = (_SLOTS * n * 2 * T + _COUNTERS * 32 + r0b + 21 + XW + 2
                + fifo.pop("ff") + 2 * _FIFO_DEPTH.bit_length() + 2)
    # The digit store's SLOTS:1 read; counters, configuration and FIFO are constant-size.
    top = Part("QPU digit store, counters, FIFO", 1, {
        "reg.qpu": top_regs, "qm": 2 * n * 2 * T, "qpu.1": 1},
        mem_bits=(_FIFO_DEPTH - 1) * T * rw, **fifo)
    return [front, chunker, sorter, packer, top]


def _sorter(cfg: Config) -> Part:
    """:class:`rtl.sorter.BitonicSorter` as the QPU builds it: ``sort_n`` descriptors, key
    (valid, exponent), payload (channel, signed, position), one register per network stage.
    Each compare-exchange of :func:`golden.bitonic.network` is a key comparison and two 2:1
    multiplexers of a whole entry."""
    n = cfg.sort_n
    kw, pw = cfg.exp_width + 1, cfg.chan_width + 1 + _ubits(n)
    lg = n.bit_length() - 1
    stages = lg * (lg + 1) // 2
    cx = compare_exchanges(n)
    return Part("QPU bitonic sorter", 1, {"reg.qpu": stages * (n * (kw + pw) + 4 + 1),
                                          "so": cx * (kw + 2 * (kw + pw))})


def _vpu_lane(cfg: Config, t, count: int = 1, operands: bool = True) -> Part:
    """One VPU lane: :class:`rtl.vpu_lane.VPULane` and (``operands``) its share of the VPU's
    input and operand registers, operand selection and GELU tables.

    Features: ``vl.mul`` the ``x × y`` multiplier bits; ``vl.lin`` the rest of the lane to first
    order in LUT4s (the sum, the rounding bias and its shift right by ``rs``, four saturations,
    the exponential's shift); ``vo`` the operand stage (``x``, ``y``, ``add`` chosen among
    about ten micro-operations, the GELU tables as logic, ``acc_requant``'s saturated sum);
    ``g.rom`` the exponential's table, block RAM on ECP5 and logic in generic gates."""
    from golden.layouts import vpu_operand_widths
    from rtl.vpu_lane import lane_widths

    w = lane_widths(cfg, t)
    A, E = cfg.acc_bits, t.exp_frac
    x, y, ad, rs, sm, r = w["x"], w["y"], w["add"], w["rs"], w["sum"], w["r"]
    carry = 3 + 1 + A + 1                                  # mode, enable, side, flag
    regs = ((x + y) + ad + rs + carry + sm + rs + carry + (sm + 2) + rs + carry + sm + carry
            + r + 1 + (E + 2).bit_length() + (E + 1) + carry + r + 1 + A + 1)
    ke = (E + 2).bit_length()
    feats = {"reg.vpu": regs, "vl.mul": x * y,
             "vl.lin": 3 * sm + sm * rs // 2 + 8 * r + (E + 2) * ke // 2,
             "g.rom": len(t.exp_lut) * (t.exp_lut_frac + 1)}
    if operands:
        ow = vpu_operand_widths(cfg)
        feats["reg.vpu"] += (ow["a"] + ow["b"] + ow["c"] + cfg.mult_width
                             + cfg.sh_max.bit_length() + 1) + (x + y + ad + rs + carry)
        rom = (len(t.gelu_base) * t.widths["gelu.base"][0]
               + len(t.gelu_delta) * t.widths["gelu.delta"][0])
        feats["vo"] = 4 * (x + y + ad) + rom // 16 + 3 * A
    # The exponential's table is read into a register: Yosys maps it to block RAM.
    mem = _memory(len(t.exp_lut), t.exp_lut_frac + 1)
    mem.pop("ff")  # a ROM: no write port, and its read register is the lane's stage E
    return Part("VPU lane", count, feats, dsp=_dsp(x, y), bram=mem["bram"], lutram=mem["lutram"])


def _vpu_parts(cfg: Config) -> list:
    """:class:`rtl.vpu.VPU`: ``vpu_lanes`` lanes; the row scalars, row buffer and control
    (``vpu.mul``: the scalar units' multiplier bits; ``vpu.1``: the rest, nearly constant)."""
    from golden.layouts import vpu_param_width
    from golden.vpu import vpu_tables
    from rtl.vpu_lane import lane_widths

    t = vpu_tables(cfg)
    if t.rsqrt_frac < cfg.act_frac + t.ln_eps_frac // 2:  # the RTL's own check (rtl.vpu.VPU)
        raise ConfigError(f"VPU: act_frac ({cfg.act_frac}) + ln_eps_frac/2 "
                          f"({t.ln_eps_frac // 2}) must not exceed rsqrt_frac "
                          f"({t.rsqrt_frac}): LayerNorm's output shift would be negative")
    L, W, n_max = cfg.vpu_lanes, cfg.act_width, cfg.max_reduction
    wd = {k: v[0] for k, v in t.widths.items()}
    lw = lane_widths(cfg, t)
    pw = vpu_param_width(cfg)
    Qr, Qs = t.recip_frac, t.rsqrt_frac
    nb = n_max.bit_length()
    muls = [(Qr + 1, Qr), (Qr, Qr + 2), (nb, wd["layernorm.S2"]),
            (wd["layernorm.S1"], wd["layernorm.S1"]), (Qs, Qs), (Qs + 2, Qs + 1),
            (Qs, Qs + 3), (nb, wd["layernorm.y1"]), (wd["layernorm.S1"], wd["layernorm.y1"])]
    depth = ceil(n_max / L)
    bw = max(W, t.exp_frac + 1)
    scalar_regs = (wd["softmax.sum"] + 6 + 3 * (Qr + 1) + 2 * Qr + Qr + 2 + 3 * 6
                   + wd["layernorm.nS2"] + wd["layernorm.S1sq"] + wd["layernorm.V"]
                   + 2 * wd["layernorm.Vp"] + 4 * (Qs + 2) + 4 * Qs + Qs + 1 + Qs + 3
                   + wd["layernorm.y1"] + 5 * 6 + 2 * nb + 4)
    row_regs = (4 * W + wd["softmax.sum"] + wd["layernorm.S1"] + wd["layernorm.S2"]
                + 2 * (wd["softmax.sum"] + wd["layernorm.S2"]) + 2 * W + L.bit_length()
                + wd["softmax.y1"] + 6 + lw["ny1"] + lw["s1y1"] + 6 + 1 + 5)
    ctl_regs = (3 + 4 + 2 * nb + pw + 2 * _ubits(depth + 1) + 4 + 1
                + (_VPU_LATENCY + 3) * (3 + _ubits(depth)) + 3 * L + 6)
    mem = _memory(depth, L * (bw + 1), 1, _ubits(depth))
    feats = {"reg.vpu": scalar_regs + row_regs + ctl_regs + mem.pop("ff"),
             "vpu.mul": sum(a * b for a, b in muls), "vpu.1": 1,
             "g.rd": depth * L * (bw + 1)}
    fixed = Part("VPU row scalars, reductions, row buffer, control", 1, feats,
                 dsp=sum(_dsp(a, b) for a, b in muls), mem_bits=depth * L * (bw + 1), **mem)
    return [_vpu_lane(cfg, t, count=L), fixed]



def _array_pes(cfg: Config, baseline: bool) -> list:
    """The PEs of an array: with ``weight_hop`` k only every k-th row registers the column
    operand (``w_out``), with ``act_hop`` k only every k-th column the row operand (``a_out``);
    the other PEs pass it on as a wire."""
    pe = _int8_pe if baseline else _slice_pe
    reg_rows = cfg.rows // cfg.weight_hop
    reg_cols = cfg.cols // cfg.act_hop
    out = []
    for rw, nr in ((True, reg_rows), (False, cfg.rows - reg_rows)):
        for ra, nc in ((True, reg_cols), (False, cfg.cols - reg_cols)):
            if nr and nc:
                p = pe(cfg, nr * nc, register_w=rw, register_a=ra)
                wires = [n for n, r in (("w_out", rw), ("a_out", ra)) if not r]
                out.append(p if not wires else dataclasses.replace(
                    p, name=p.name + ", " + " and ".join(wires) + (" wires" if len(wires) > 1
                                                                   else " a wire")))
    return out


def parts(unit: str, cfg: Config) -> list:
    """The parts of ``unit`` for ``cfg`` (see the module docstring)."""
    if unit == "pe":                       # as gen.units builds it: w_out a register at hop 1
        pe = _slice_pe(cfg, register_w=cfg.weight_hop == 1,
                       register_a=cfg.act_hop == 1)
        if cfg.digit_product == "select":
            # Synthesized alone, the select PE maps to more LUTs than each PE of an array does
            # (ABC9 maps the lone PE; on the arrays ABC9 asserts and the classic ABC maps them,
            # fpga.synth): a constant of the lone PE.
            pe = dataclasses.replace(pe, feats={**pe.feats, "pe.alone": 1})
        return [pe]
    if unit in ("mpu", "baseline"):
        return _array_pes(cfg, unit == "baseline") + [_array_front(cfg, unit == "baseline")]
    if unit in ("qpu", "qpu_mpu"):
        if cfg.sort_n < 4:  # the RTL's own check (rtl.qpu.QPU)
            raise ValueError(f"sort_n must be >= 4 for the QPU (one sub-channel brings up to 4 "
                             f"slice columns and a chunk must hold the overflow), not "
                             f"{cfg.sort_n}")
        return _qpu_parts(cfg) + (parts("mpu", cfg) if unit == "qpu_mpu" else [])
    if unit == "vpu":
        return _vpu_parts(cfg)
    if unit == "core":
        from .estimate_core import core_parts
        return core_parts(cfg)
    raise ValueError(f"unit must be one of {list(UNITS)}, not {unit!r}")


def _component_parts(kind: str, cfg: Config) -> list:
    """Parts of a unit or of a component synthesized alone for calibration."""
    if kind == "int8pe":
        return [_int8_pe(cfg)]
    if kind == "sorter":
        return [_sorter(cfg)]
    if kind == "vpu_lane":
        from golden.vpu import vpu_tables
        return [_vpu_lane(cfg, vpu_tables(cfg), operands=False)]
    return parts(kind, cfg)


def peak(unit: str, cfg: Config) -> dict:
    """Peak operations per cycle of ``unit``."""
    R, C, L = cfg.rows, cfg.cols, cfg.lanes
    ww = cfg.weight_width
    if unit in ("mpu", "qpu_mpu", "pe", "core"):
        n = L if unit == "pe" else R * C * L
        # Four 2-bit digit-MACs make one INT8 x weight MAC.
        return {"ops_per_cycle": n, "op": f"2-bit x {ww}-bit digit-MACs",
                "int8_mac_equivalent": n // 4 if n % 4 == 0 else n / 4}
    if unit == "baseline":
        return {"ops_per_cycle": R * C, "op": f"{ww}-bit x {ww}-bit MACs"}
    if unit == "qpu":
        return {"ops_per_cycle": cfg.rows, "op": f"values quantized (one sub-channel of "
                                                 f"T = {cfg.rows})"}
    if unit == "vpu":
        return {"ops_per_cycle": cfg.vpu_lanes, "op": "elements"}
    raise ValueError(f"unit must be one of {list(UNITS)}, not {unit!r}")


# ------------------------------------------------------------------------------ the estimate
def _coef(target: str) -> dict:
    return CALIBRATION["coef"][target]


def _value(target: str, ps: list) -> float:
    c = _coef(target)
    return sum(p.count * (sum(c.get(f, 0.0) * a for f, a in p.vector().items()
                              if _uses(target, f)) + p.fixed.get(target, 0))
               for p in ps)


def _worst(errs: dict) -> dict:
    """The largest relative error per target over ``{label: {target: error}}``."""
    return {t: max((abs(e[t]) for e in errs.values() if t in e), default=None) for t in TARGETS}


def estimate(unit: str, cfg: Config) -> dict:
    """The analytic estimate of ``unit`` for ``cfg``: ``{unit, preset, config_hash, peak,
    ecp5 {lut_total, ff, dsp, bram, lutram}, ecp5_nodsp {...}, generic {transistors,
    memory_bits}, parts [...], model {...}}``. Raises :class:`ValueError` for an unknown unit.

    For ``core`` (:mod:`fpga.estimate_core`) ``model["core"]`` says how its control is
    estimated and its error against the measured cores, and ``generic["lower_bound"]`` is true:
    the control's transistors count only its flip-flops."""
    ps = parts(unit, cfg)
    out = dict(
        unit=unit, preset=cfg.name, config_hash=cfg.hash(), peak=peak(unit, cfg),
        ecp5=ecp5_resources(ps), ecp5_nodsp=ecp5_resources(ps, nodsp=True),
        generic=dict(transistors=round(_value("transistors", ps)),
                     memory_bits=sum(p.count * p.mem_bits for p in ps)),
        parts=[dict(name=p.name, count=p.count,
                    lut=round(_value("lut", [p])), lut_nodsp=round(_value("lut_nodsp", [p])),
                    ff=round(_value("ff", [p])), dsp=p.count * p.dsp,
                    bram=p.count * p.bram, transistors=round(_value("transistors", [p])))
               for p in ps],
        model=dict(yosys=CALIBRATION["yosys"], calibrated=CALIBRATION["date"],
                   runs=len(CALIBRATION["error"]), held_out=len(CALIBRATION["validation"]),
                   tolerance=TOLERANCE,
                   max_calibration_error=_worst(CALIBRATION["error"]),
                   max_held_out_error=_worst(CALIBRATION["validation"])),
    )
    if unit == "core":
        from .estimate_core import model_note
        out["model"]["core"] = model_note()
        out["generic"]["lower_bound"] = True
    return out


def ecp5_resources(ps: list, nodsp: bool = False) -> dict:
    """``{lut_total, ff, dsp, bram, lutram}`` of parts ``ps`` (``nodsp``: multipliers in LUTs)."""
    return dict(lut_total=round(_value("lut_nodsp" if nodsp else "lut", ps)),
                ff=round(_value("ff", ps)),
                dsp=0 if nodsp else sum(p.count * p.dsp for p in ps),
                bram=sum(p.count * p.bram for p in ps),
                lutram=sum(p.count * p.lutram for p in ps))


# ------------------------------------------------------------------------------ calibration
_SEL = {"digit_product": "select"}
_SB = {"digit_product": "select", "digits": "booth"}

#: (label, unit or component, preset, overrides): the configurations the coefficients are fitted
#: to. Each synthesizes in well under two minutes for every target on two busy cores.
CALIBRATION_RUNS = (
    ("pe tiny", "pe", "tiny", {}),
    ("pe lanes=1", "pe", "tiny", {"lanes": 1}),
    ("pe lanes=2", "pe", "tiny", {"lanes": 2}),
    ("pe lanes=8", "pe", "tiny", {"lanes": 8}),
    ("pe ww=4", "pe", "tiny", {"weight_width": 4}),
    ("pe ww=12", "pe", "tiny", {"weight_width": 12}),
    ("pe max_reduction=4096", "pe", "tiny", {"max_reduction": 4096}),
    ("pe act_width=8", "pe", "tiny", {"act_width": 8, "act_frac": 4, "base_log2": 4}),
    ("pe stages=0", "pe", "tiny", {"pe_stages": 0}),
    ("pe stages=2", "pe", "tiny", {"pe_stages": 2}),
    ("pe horner", "pe", "tiny", {"alignment": "horner", "max_reduction": 2}),
    ("pe overflow", "pe", "tiny", {"overflow_detect": True, "acc_width": 20}),
    ("int8pe tiny", "int8pe", "tiny", {}),
    ("int8pe ww=4", "int8pe", "tiny", {"weight_width": 4}),
    ("int8pe ww=12 stages=2", "int8pe", "tiny", {"weight_width": 12, "pe_stages": 2}),
    ("mpu 2x2", "mpu", "tiny", {"rows": 2, "cols": 2}),
    ("mpu 2x2 lanes=2", "mpu", "tiny", {"rows": 2, "cols": 2, "lanes": 2}),
    ("mpu 3x3 lanes=2", "mpu", "tiny", {"rows": 3, "cols": 3, "lanes": 2}),
    ("mpu tiny", "mpu", "tiny", {}),
    ("baseline 2x2", "baseline", "tiny", {"rows": 2, "cols": 2}),
    ("baseline tiny", "baseline", "tiny", {}),
    ("sorter n=4", "sorter", "tiny", {"sort_n": 4}),
    ("sorter n=8", "sorter", "tiny", {}),
    ("sorter n=16", "sorter", "tiny", {"sort_n": 16}),
    ("qpu tiny", "qpu", "tiny", {}),
    ("qpu T=2 n=4 lanes=2", "qpu", "tiny", {"rows": 2, "cols": 2, "sort_n": 4, "lanes": 2}),
    ("qpu n=16", "qpu", "tiny", {"sort_n": 16}),
    # ECP5 synthesis of this one trips an assertion in Yosys 0.70's abc9 (ABC_OPS_REINTEGRATE,
    # rtlil.cc:3091), as it does for rows 2 and 8 with 4 lanes: only its generic run is fitted.
    ("qpu T=6", "qpu", "tiny", {"rows": 6, "cols": 6}),
    ("qpu lanes=2 max_reduction=1024", "qpu", "tiny", {"lanes": 2, "max_reduction": 1024}),
    ("qpu act_width=12", "qpu", "tiny", {"act_width": 12, "act_frac": 6, "base_log2": 4}),
    ("vpu_lane tiny", "vpu_lane", "tiny", {}),
    ("vpu_lane act_width=12", "vpu_lane", "tiny", {"act_width": 12, "act_frac": 6,
                                                   "base_log2": 4}),
    ("vpu lanes=1", "vpu", "tiny", {"vpu_lanes": 1}),
    ("vpu tiny", "vpu", "tiny", {}),
    ("vpu lanes=2", "vpu", "tiny", {"vpu_lanes": 2}),
    ("vpu lanes=8 max_reduction=256", "vpu", "tiny", {"vpu_lanes": 8, "max_reduction": 256}),
    # The select datapath (digit products as selects of the weight's multiples, no DSP) with
    # slice and with Booth digits, and Booth digits with multiplied products.
    ("pe select", "pe", "tiny", _SEL),
    ("pe select+booth", "pe", "tiny", _SB),
    ("pe select lanes=2", "pe", "tiny", {**_SEL, "lanes": 2}),
    ("pe select+booth lanes=8", "pe", "tiny", {**_SB, "lanes": 8}),
    ("pe booth", "pe", "tiny", {"digits": "booth"}),
    ("pe select+booth stages=0", "pe", "tiny", {**_SB, "pe_stages": 0}),
    ("mpu 2x2 select", "mpu", "tiny", {**_SEL, "rows": 2, "cols": 2}),
    ("mpu select+booth tiny", "mpu", "tiny", _SB),
)

#: Held-out configurations: synthesized and compared by ``--calibrate`` (and by the tests), never
#: fitted to. Their errors are the estimate's measured out-of-sample error.
VALIDATION_RUNS = (
    ("pe ww=6", "pe", "tiny", {"weight_width": 6}),
    ("pe lanes=2 stages=0 max_reduction=256", "pe", "tiny",
     {"lanes": 2, "pe_stages": 0, "max_reduction": 256}),
    ("pe horner lanes=2 ww=6", "pe", "tiny",
     {"alignment": "horner", "max_reduction": 1, "lanes": 2, "weight_width": 6}),
    ("pe overflow acc_width=26 lanes=8", "pe", "tiny",
     {"overflow_detect": True, "acc_width": 26, "lanes": 8}),
    ("mpu 3x3", "mpu", "tiny", {"rows": 3, "cols": 3}),
    ("mpu 2x2 ww=6 stages=2", "mpu", "tiny",
     {"rows": 2, "cols": 2, "weight_width": 6, "pe_stages": 2}),
    ("baseline 3x3", "baseline", "tiny", {"rows": 3, "cols": 3}),
    ("baseline 2x2 ww=6", "baseline", "tiny", {"rows": 2, "cols": 2, "weight_width": 6}),
    ("qpu T=2 lanes=2", "qpu", "tiny", {"rows": 2, "cols": 2, "lanes": 2}),
    ("qpu n=16 lanes=8", "qpu", "tiny", {"sort_n": 16, "lanes": 8}),
    ("vpu lanes=2 act_width=12", "vpu", "tiny",
     {"vpu_lanes": 2, "act_width": 12, "act_frac": 6, "base_log2": 4}),
    ("qpu_mpu tiny", "qpu_mpu", "tiny", {}),
    # 64 PEs: the extrapolation check (about 20 minutes of Yosys when not stored, e.g. by
    # dstar measure arrays).
    ("mpu fpga", "mpu", "fpga", {}),
    ("pe select+booth stages=2 ww=6", "pe", "tiny", {**_SB, "pe_stages": 2, "weight_width": 6}),
    ("mpu 3x3 select", "mpu", "tiny", {**_SEL, "rows": 3, "cols": 3}),
    # weight_hop: the column operand registered every 2 rows (MPU), broadcast (baseline).
    ("mpu select+booth weight_hop=2", "mpu", "tiny", {**_SB, "weight_hop": 2}),
    ("baseline weight_hop=4", "baseline", "tiny", {"weight_hop": 4}),
    # The fpga MPU with the select datapath and Booth digits (0 DSP; 64 PEs).
    ("mpu fpga select+booth", "mpu", "fpga", _SB),
)

_CAL_ROOT_NAME = "estimate-calibration"


def _component(kind: str, cfg: Config):
    if kind == "int8pe":
        from rtl.pe import Int8PE
        return Int8PE(cfg)
    if kind == "sorter":
        from rtl.chunker import chunk_side_layout, descriptor_layout
        from rtl.sorter import BitonicSorter
        return BitonicSorter(cfg.sort_n, cfg.exp_width + 1, descriptor_layout(cfg),
                             chunk_side_layout(cfg))
    if kind == "vpu_lane":
        from golden.vpu import vpu_tables
        from rtl.vpu_lane import VPULane
        return VPULane(cfg, vpu_tables(cfg))
    raise ValueError(kind)


def _synth_run(kind: str, cfg: Config, target: str, nodsp: bool) -> dict:
    """Synthesize a unit (``fpga.synth.synthesize``) or a component alone, reusing a stored
    result of identical RTLIL, script and Yosys."""
    from .synth import BUILD_ROOT, _cached, synth_script, synthesize, synthesize_rtlil

    if kind in UNITS:
        return synthesize(kind, cfg, target, nodsp=nodsp, reuse=True)
    from amaranth.back import rtlil

    top = f"cal_{kind}"
    il = rtlil.convert(_component(kind, cfg), name=top)
    tag = target + ("-nodsp" if nodsp else "")
    workdir = (BUILD_ROOT / _CAL_ROOT_NAME / f"{kind}-{cfg.hash()}" / tag).resolve()
    cached = _cached(workdir, il, synth_script(top, target, nodsp=nodsp))
    if cached is not None:
        return cached
    out = synthesize_rtlil(il, top, target, nodsp=nodsp, workdir=workdir)
    (workdir / "result.json").write_text(json.dumps(out, indent=2) + "\n")
    return out


def measure(runs=CALIBRATION_RUNS, say=print) -> list:
    """Synthesize every calibration run for every target: ``[{label, kind, preset, overrides,
    measured {target: value}, seconds {...}}]``."""
    from .synth import SynthError

    out = []
    for label, kind, pname, ov in runs:
        cfg = preset(pname, **ov)
        rec = dict(label=label, kind=kind, preset=pname, overrides=ov, measured={}, seconds={})
        done = {}
        for tname, (target, nodsp, key) in TARGETS.items():
            tag = f"{target}{' -nodsp' if nodsp else ''}"
            if (target, nodsp) not in done:
                t0 = time.perf_counter()
                say(f"  synth {label}: {tag} ...")
                try:
                    r = _synth_run(kind, cfg, target, nodsp)
                except SynthError as exc:  # left out of the fit, and said so
                    say(f"  synth {label}: {tag} failed: {exc}")
                    r = None
                done[target, nodsp] = r
                rec["seconds"][tag] = ("failed" if r is None else "reused" if r.get("reused")
                                       else round(time.perf_counter() - t0, 1))
            r = done[target, nodsp]
            if r is not None:
                rec["measured"][tname] = r["transistors"] if key == "transistors" else \
                    r["resources"][key]
        out.append(rec)
    return out


def _nnls(A: np.ndarray, b: np.ndarray, iters: int = 500) -> np.ndarray:
    """Non-negative least squares (Lawson-Hanson active set): min |Ax - b|, x >= 0."""
    m, n = A.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    w = A.T @ (b - A @ x)
    for _ in range(iters):
        if passive.all() or w[~passive].max(initial=-np.inf) <= 1e-12:
            break
        j = np.argmax(np.where(passive, -np.inf, w))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(A[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > 1e-12
        w = A.T @ (b - A @ x)
    return x


def _features(rec: dict) -> dict:
    """Total features of a measured record's unit or component."""
    v = {}
    for p in _component_parts(rec["kind"], preset(rec["preset"], **rec["overrides"])):
        for f, a in p.vector().items():
            v[f] = v.get(f, 0) + p.count * a
    return v


def fit(records: list) -> dict:
    """Coefficients per target fitted to measured records by non-negative least squares on the
    relative error: ``{target: {feature: coefficient}}``."""
    coef = {}
    vecs = [_features(r) for r in records]
    for target in TARGETS:
        feats = sorted({f for v in vecs for f, a in v.items() if a and _uses(target, f)})
        rows = [(v, r["measured"][target]) for v, r in zip(vecs, records)
                if r["measured"].get(target)]
        A = np.array([[v.get(f, 0) / y for f in feats] for v, y in rows], dtype=float)
        x = _nnls(A, np.ones(len(rows)))
        coef[target] = {f: float(f"{c:.5g}") for f, c in zip(feats, x) if c > 0}
    return coef


def errors(coef: dict, records: list) -> dict:
    """``{label: {target: estimate / measured - 1}}`` of measured records under ``coef``."""
    out = {}
    for r in records:
        v = _features(r)
        out[r["label"]] = {
            t: round(sum(coef[t].get(f, 0) * a for f, a in v.items() if _uses(t, f))
                     / r["measured"][t] - 1, 4)
            for t in TARGETS if r["measured"].get(t)}
    return out


def _stored(runs) -> list:
    """Records of ``runs`` with the measurements stored in ``CALIBRATION``."""
    return [dict(label=lab, kind=kind, preset=p, overrides=ov,
                 measured=CALIBRATION["measured"].get(lab, {}))
            for lab, kind, p, ov in runs]


def calibrate(write: bool = False, say=print, remeasure: bool = True,
              missing: bool = False) -> dict:
    """Measure the calibration and validation runs (``remeasure=False``: take the measurements
    stored in ``CALIBRATION``, e.g. after a change of the model alone; ``missing``: measure only
    the runs that have no stored measurement, e.g. runs just added, and take the others as
    stored), fit the calibration runs, report the error on both; with ``write`` store the
    result in this module's ``CALIBRATION`` block."""
    from .synth import yosys_version

    if missing:
        yosys, date = yosys_version(), time.strftime("%Y-%m-%d")
        if yosys != CALIBRATION["yosys"]:
            raise RuntimeError(f"the stored measurements are of Yosys {CALIBRATION['yosys']}, "
                               f"this is {yosys}: run --calibrate")
        todo = [r for r in CALIBRATION_RUNS + VALIDATION_RUNS
                if not CALIBRATION["measured"].get(r[0])]
        say(f"measuring the {len(todo)} runs with no stored measurement (Yosys {yosys}); "
            f"the other {len(CALIBRATION_RUNS) + len(VALIDATION_RUNS) - len(todo)} as stored")
        new = {r["label"]: r["measured"] for r in measure(todo, say=say)}
        recs, held = _stored(CALIBRATION_RUNS), _stored(VALIDATION_RUNS)
        for r in recs + held:
            r["measured"] = new.get(r["label"], r["measured"])
    elif remeasure:
        yosys, date = yosys_version(), time.strftime("%Y-%m-%d")
        say(f"calibrating against Yosys {yosys}: {len(CALIBRATION_RUNS)} configurations to fit, "
            f"{len(VALIDATION_RUNS)} held out")
        recs = measure(CALIBRATION_RUNS, say=say)
        held = measure(VALIDATION_RUNS, say=say)
    else:
        yosys, date = CALIBRATION["yosys"], CALIBRATION["date"]
        say(f"fitting the measurements stored on {date} (Yosys {yosys})")
        recs, held = _stored(CALIBRATION_RUNS), _stored(VALIDATION_RUNS)
        missing = [r["label"] for r in recs + held if not r["measured"]]
        if missing:
            raise RuntimeError(f"no stored measurement of {missing}: run --calibrate")
    coef = fit(recs)
    cal = dict(yosys=yosys, date=date, coef=coef,
               error=errors(coef, recs), validation=errors(coef, held),
               measured={r["label"]: r["measured"] for r in recs + held})
    say("")
    say(f"{'run (relative error of the estimate)':40s} " + " ".join(f"{t:>17s}" for t in TARGETS))
    for title, rs, errs in (("fitted", recs, cal["error"]), ("held out", held, cal["validation"])):
        say(f"-- {title}")
        for r in rs:
            e = errs[r["label"]]
            say(f"{r['label']:40s} " + " ".join(
                f"{r['measured'][t]:>10,} {100 * e[t]:+5.1f}%" if t in e else f"{'failed':>17s}"
                for t in TARGETS))
    say("")
    for t, c in coef.items():
        say(f"{t}: " + ", ".join(f"{k} {v:g}" for k, v in c.items()))
    if write:
        path = Path(__file__)
        text = path.read_text()
        block = "CALIBRATION = " + _pyrepr(cal) + "\n"
        new, n = re.subn(r"^(# BEGIN CALIBRATION\n).*?^(# END CALIBRATION)$",
                         lambda m: m.group(1) + block + m.group(2), text,
                         flags=re.S | re.M)
        if n != 1:
            raise RuntimeError("calibration block markers not found in fpga/estimate.py")
        path.write_text(new)
        say(f"wrote the coefficients to {path}")
    return cal


def _pyrepr(obj, indent: int = 0, room: int = 99) -> str:
    """A stable, readable Python literal of nested dicts: a dict is one entry per line at the
    top two levels, and wherever it would not fit in ``room`` columns."""
    if isinstance(obj, dict) and (indent < 2 or 4 * indent + len(repr(obj)) > room):
        pad = "    " * (indent + 1)
        items = [f"{pad}{k!r}: {_pyrepr(v, indent + 1, room - len(repr(k)) - 2)},"
                 for k, v in obj.items()]
        return "{\n" + "\n".join(items) + "\n" + "    " * indent + "}"
    return repr(obj)


# The fitted coefficients: written by `python -m fpga.estimate --calibrate --write` from real
# synthesis of CALIBRATION_RUNS (LUTs, FFs and transistors per unit of each feature), with the
# measured values, the fit's relative error on every run and on VALIDATION_RUNS. Not edited by
# hand (tests/test_estimate.py checks that the coefficients are the fit of the measurements).
# BEGIN CALIBRATION
CALIBRATION = {
    'yosys': '0.70',
    'date': '2026-12-01',
    'coef': {
        'lut': {
            'arr.1': 38.974,
            'arr.mask': 2.8771,
            'i8.1': 13.978,
            'i8.acc': 2.9111,
            'i8.mul': 0.13612,
            'pe.acc': 4.9998,
            'pe.alone': 109.01,
            'pe.bsel': 1.351,
            'pe.fused': 108.07,
            'pe.hshift': 1.1053,
            'pe.mul': 4.3299,
            'pe.sacc': 3.7519,
            'pe.sat': 3.319,
            'pe.sel': 1.8136,
            'qf': 2.8891,
            'qm': 0.94614,
            'qpu.1': 1359.7,
            'so': 1.0616,
            'vl.lin': 2.3737,
            'vo': 1.0626,
            'vpu.1': 1401.8,
            'vpu.mul': 0.19175,
        },
        'lut_nodsp': {
            'arr.1': 10.147,
            'arr.mask': 2.4001,
            'i8.1': 26.108,
            'i8.mul': 5.7192,
            'pe.acc': 6.9031,
            'pe.alone': 100.65,
            'pe.bsel': 1.3746,
            'pe.hshift': 1.07,
            'pe.mul': 15.01,
            'pe.sacc': 3.8485,
            'pe.sat': 2.3315,
            'pe.sel': 1.8762,
            'qf': 2.8891,
            'qm': 0.94614,
            'qpu.1': 1359.7,
            'so': 1.0616,
            'vl.lin': 3.2592,
            'vl.mul': 3.785,
            'vpu.mul': 3.445,
        },
        'ff': {'reg.arr': 0.99993, 'reg.qpu': 0.99078, 'reg.vpu': 0.97671},
        'transistors': {
            'arr.1': 469.27,
            'arr.mask': 49.188,
            'ff': 28.692,
            'g.rd': 11.68,
            'g.rom': 3.3814,
            'i8.1': 278.19,
            'i8.acc': 39.462,
            'i8.mul': 54.934,
            'mem': 28.725,
            'pe.acc': 101.38,
            'pe.bsel': 43.348,
            'pe.fused': 16.692,
            'pe.hshift': 7.3549,
            'pe.mul': 101.57,
            'pe.sacc': 54.116,
            'pe.sat': 49.814,
            'pe.sel': 33.421,
            'pe.shift': 0.65761,
            'pe.tree': 30.871,
            'qf': 29.157,
            'qm': 24.074,
            'qpu.1': 11796.0,
            'so': 22.9,
            'vl.lin': 19.151,
            'vl.mul': 46.471,
            'vo': 23.344,
            'vpu.mul': 50.908,
        },
    },
    'error': {
        'pe tiny': {
            'lut': -0.0528,
            'lut_nodsp': -0.0179,
            'ff': -0.0001,
            'transistors': 0.0038,
        },
        'pe lanes=1': {
            'lut': 0.0024,
            'lut_nodsp': -0.0372,
            'ff': -0.0001,
            'transistors': 0.0048,
        },
        'pe lanes=2': {
            'lut': -0.0638,
            'lut_nodsp': 0.0865,
            'ff': -0.0001,
            'transistors': -0.0106,
        },
        'pe lanes=8': {
            'lut': -0.0337,
            'lut_nodsp': -0.0112,
            'ff': -0.0001,
            'transistors': -0.0022,
        },
        'pe ww=4': {
            'lut': 0.0808,
            'lut_nodsp': 0.0204,
            'ff': -0.0001,
            'transistors': -0.0003,
        },
        'pe ww=12': {
            'lut': -0.0103,
            'lut_nodsp': -0.0173,
            'ff': -0.0001,
            'transistors': -0.0002,
        },
        'pe max_reduction=4096': {
            'lut': -0.0366,
            'lut_nodsp': -0.0044,
            'ff': -0.0001,
            'transistors': 0.006,
        },
        'pe act_width=8': {
            'lut': 0.0827,
            'lut_nodsp': -0.0014,
            'ff': -0.0001,
            'transistors': 0.004,
        },
        'pe stages=0': {
            'lut': 0.0514,
            'lut_nodsp': 0.0211,
            'ff': -0.0001,
            'transistors': 0.0013,
        },
        'pe stages=2': {
            'lut': 0.0336,
            'lut_nodsp': 0.0063,
            'ff': -0.0001,
            'transistors': 0.0001,
        },
        'pe horner': {'lut': -0.0, 'lut_nodsp': 0.0, 'ff': -0.0001, 'transistors': 0.0},
        'pe overflow': {'lut': 0.0, 'lut_nodsp': 0.0, 'ff': -0.0001, 'transistors': 0.0},
        'int8pe tiny': {
            'lut': -0.0253,
            'lut_nodsp': 0.0081,
            'ff': -0.0001,
            'transistors': -0.0011,
        },
        'int8pe ww=4': {
            'lut': 0.0,
            'lut_nodsp': -0.0033,
            'ff': -0.0001,
            'transistors': -0.0,
        },
        'int8pe ww=12 stages=2': {
            'lut': 0.0,
            'lut_nodsp': -0.0143,
            'ff': -0.0001,
            'transistors': -0.0,
        },
        'mpu 2x2': {
            'lut': -0.0411,
            'lut_nodsp': -0.0319,
            'ff': -0.0001,
            'transistors': 0.0035,
        },
        'mpu 2x2 lanes=2': {
            'lut': 0.0044,
            'lut_nodsp': -0.0193,
            'ff': -0.0001,
            'transistors': 0.0008,
        },
        'mpu 3x3 lanes=2': {
            'lut': -0.01,
            'lut_nodsp': -0.0355,
            'ff': -0.0001,
            'transistors': -0.0009,
        },
        'mpu tiny': {
            'lut': 0.0016,
            'lut_nodsp': 0.0073,
            'ff': -0.0001,
            'transistors': -0.0017,
        },
        'baseline 2x2': {
            'lut': -0.0151,
            'lut_nodsp': -0.0084,
            'ff': -0.0001,
            'transistors': -0.0028,
        },
        'baseline tiny': {
            'lut': 0.0377,
            'lut_nodsp': 0.0172,
            'ff': 0.002,
            'transistors': 0.0038,
        },
        'sorter n=4': {
            'lut': 0.0237,
            'lut_nodsp': 0.0237,
            'ff': -0.0092,
            'transistors': -0.0065,
        },
        'sorter n=8': {
            'lut': 0.0033,
            'lut_nodsp': 0.0033,
            'ff': -0.0092,
            'transistors': 0.0014,
        },
        'sorter n=16': {
            'lut': -0.0247,
            'lut_nodsp': -0.0247,
            'ff': -0.0092,
            'transistors': 0.0048,
        },
        'qpu tiny': {
            'lut': -0.0008,
            'lut_nodsp': -0.0008,
            'ff': 0.0043,
            'transistors': -0.0042,
        },
        'qpu T=2 n=4 lanes=2': {
            'lut': -0.0099,
            'lut_nodsp': -0.0099,
            'ff': -0.0013,
            'transistors': -0.0005,
        },
        'qpu n=16': {
            'lut': -0.0201,
            'lut_nodsp': -0.0201,
            'ff': 0.0165,
            'transistors': -0.0014,
        },
        'qpu T=6': {'transistors': -0.0006},
        'qpu lanes=2 max_reduction=1024': {
            'lut': -0.0172,
            'lut_nodsp': -0.0172,
            'ff': 0.003,
            'transistors': 0.0054,
        },
        'qpu act_width=12': {
            'lut': 0.0419,
            'lut_nodsp': 0.0419,
            'ff': 0.0047,
            'transistors': 0.0012,
        },
        'vpu_lane tiny': {
            'lut': 0.0322,
            'lut_nodsp': 0.0035,
            'ff': 0.0051,
            'transistors': 0.0,
        },
        'vpu_lane act_width=12': {
            'lut': -0.0345,
            'lut_nodsp': -0.027,
            'ff': 0.0082,
            'transistors': 0.0,
        },
        'vpu lanes=1': {
            'lut': 0.0001,
            'lut_nodsp': -0.0255,
            'ff': -0.0016,
            'transistors': 0.0001,
        },
        'vpu tiny': {
            'lut': 0.0001,
            'lut_nodsp': 0.0401,
            'ff': 0.0046,
            'transistors': 0.0001,
        },
        'vpu lanes=2': {
            'lut': -0.0002,
            'lut_nodsp': 0.0069,
            'ff': -0.0042,
            'transistors': -0.0002,
        },
        'vpu lanes=8 max_reduction=256': {
            'lut': 0.0,
            'lut_nodsp': -0.001,
            'ff': -0.0123,
            'transistors': 0.0,
        },
        'pe select': {
            'lut': -0.1137,
            'lut_nodsp': -0.1068,
            'ff': -0.0001,
            'transistors': -0.0052,
        },
        'pe select+booth': {
            'lut': -0.2075,
            'lut_nodsp': -0.2099,
            'ff': -0.0001,
            'transistors': -0.0035,
        },
        'pe select lanes=2': {
            'lut': 0.0149,
            'lut_nodsp': 0.0159,
            'ff': -0.0001,
            'transistors': 0.0079,
        },
        'pe select+booth lanes=8': {
            'lut': 0.0081,
            'lut_nodsp': 0.0086,
            'ff': -0.0001,
            'transistors': 0.0061,
        },
        'pe booth': {
            'lut': -0.0438,
            'lut_nodsp': 0.0181,
            'ff': -0.0001,
            'transistors': -0.0069,
        },
        'pe select+booth stages=0': {
            'lut': 0.1864,
            'lut_nodsp': 0.1828,
            'ff': -0.0001,
            'transistors': -0.004,
        },
        'mpu 2x2 select': {
            'lut': 0.0768,
            'lut_nodsp': 0.0713,
            'ff': -0.0001,
            'transistors': 0.0008,
        },
        'mpu select+booth tiny': {
            'lut': -0.0602,
            'lut_nodsp': -0.0559,
            'ff': -0.0001,
            'transistors': -0.0037,
        },
    },
    'validation': {
        'pe ww=6': {
            'lut': 0.0499,
            'lut_nodsp': 0.019,
            'ff': -0.0001,
            'transistors': 0.0039,
        },
        'pe lanes=2 stages=0 max_reduction=256': {
            'lut': 0.2054,
            'lut_nodsp': -0.0697,
            'ff': -0.0001,
            'transistors': -0.0103,
        },
        'pe horner lanes=2 ww=6': {
            'lut': 0.0522,
            'lut_nodsp': 0.0372,
            'ff': -0.0001,
            'transistors': -0.0017,
        },
        'pe overflow acc_width=26 lanes=8': {
            'lut': -0.0775,
            'lut_nodsp': -0.0756,
            'ff': -0.0001,
            'transistors': 0.0319,
        },
        'mpu 3x3': {
            'lut': -0.0469,
            'lut_nodsp': -0.0265,
            'ff': -0.0001,
            'transistors': 0.0035,
        },
        'mpu 2x2 ww=6 stages=2': {
            'lut': 0.0075,
            'lut_nodsp': 0.0355,
            'ff': -0.0001,
            'transistors': 0.0037,
        },
        'baseline 3x3': {
            'lut': -0.0313,
            'lut_nodsp': -0.0019,
            'ff': -0.0001,
            'transistors': -0.0022,
        },
        'baseline 2x2 ww=6': {
            'lut': 0.0144,
            'lut_nodsp': -0.0308,
            'ff': -0.0001,
            'transistors': -0.0054,
        },
        'qpu T=2 lanes=2': {
            'lut': -0.0318,
            'lut_nodsp': -0.0318,
            'ff': 0.0068,
            'transistors': -0.0067,
        },
        'qpu n=16 lanes=8': {
            'lut': -0.0568,
            'lut_nodsp': -0.0568,
            'ff': 0.0162,
            'transistors': -0.0034,
        },
        'vpu lanes=2 act_width=12': {
            'lut': -0.0124,
            'lut_nodsp': -0.1531,
            'ff': -0.0027,
            'transistors': 0.0067,
        },
        'qpu_mpu tiny': {
            'lut': 0.0005,
            'lut_nodsp': 0.0045,
            'ff': 0.0027,
            'transistors': -0.0101,
        },
        'mpu fpga': {
            'lut': -0.0194,
            'lut_nodsp': 0.0023,
            'ff': -0.0001,
            'transistors': -0.0274,
        },
        'pe select+booth stages=2 ww=6': {
            'lut': 0.0955,
            'lut_nodsp': 0.0902,
            'ff': -0.0001,
            'transistors': 0.0153,
        },
        'mpu 3x3 select': {
            'lut': 0.0475,
            'lut_nodsp': 0.057,
            'ff': -0.0001,
            'transistors': -0.0002,
        },
        'mpu select+booth weight_hop=2': {
            'lut': -0.0602,
            'lut_nodsp': -0.0559,
            'ff': -0.0001,
            'transistors': -0.0037,
        },
        'baseline weight_hop=4': {
            'lut': 0.0361,
            'lut_nodsp': 0.0169,
            'ff': 0.0022,
            'transistors': 0.0034,
        },
        'mpu fpga select+booth': {
            'lut': -0.0958,
            'lut_nodsp': -0.0818,
            'ff': -0.0001,
            'transistors': -0.0327,
        },
    },
    'measured': {
        'pe tiny': {'lut': 424, 'lut_nodsp': 707, 'ff': 128, 'transistors': 11342},
        'pe lanes=1': {'lut': 297, 'lut_nodsp': 347, 'ff': 93, 'transistors': 6700},
        'pe lanes=2': {'lut': 355, 'lut_nodsp': 418, 'ff': 105, 'transistors': 8352},
        'pe lanes=8': {'lut': 559, 'lut_nodsp': 1188, 'ff': 173, 'transistors': 17790},
        'pe ww=4': {'lut': 289, 'lut_nodsp': 418, 'ff': 100, 'transistors': 8170},
        'pe ww=12': {'lut': 496, 'lut_nodsp': 979, 'ff': 156, 'transistors': 14606},
        'pe max_reduction=4096': {
            'lut': 448,
            'lut_nodsp': 739,
            'ff': 140,
            'transistors': 12264,
        },
        'pe act_width=8': {
            'lut': 334,
            'lut_nodsp': 640,
            'ff': 112,
            'transistors': 10074,
        },
        'pe stages=0': {'lut': 382, 'lut_nodsp': 680, 'ff': 115, 'transistors': 10998},
        'pe stages=2': {'lut': 284, 'lut_nodsp': 690, 'ff': 161, 'transistors': 12314},
        'pe horner': {'lut': 664, 'lut_nodsp': 938, 'ff': 123, 'transistors': 12548},
        'pe overflow': {'lut': 413, 'lut_nodsp': 665, 'ff': 108, 'transistors': 10692},
        'int8pe tiny': {'lut': 86, 'lut_nodsp': 389, 'ff': 78, 'transistors': 6868},
        'int8pe ww=4': {'lut': 54, 'lut_nodsp': 118, 'ff': 46, 'transistors': 2990},
        'int8pe ww=12 stages=2': {
            'lut': 118,
            'lut_nodsp': 862,
            'ff': 137,
            'transistors': 13264,
        },
        'mpu 2x2': {'lut': 1908, 'lut_nodsp': 3038, 'ff': 664, 'transistors': 130324},
        'mpu 2x2 lanes=2': {
            'lut': 1454,
            'lut_nodsp': 1941,
            'ff': 508,
            'transistors': 90882,
        },
        'mpu 3x3 lanes=2': {
            'lut': 3200,
            'lut_nodsp': 4368,
            'ff': 1097,
            'transistors': 161714,
        },
        'mpu tiny': {
            'lut': 6822,
            'lut_nodsp': 11344,
            'ff': 2432,
            'transistors': 355068,
        },
        'baseline 2x2': {
            'lut': 380,
            'lut_nodsp': 1592,
            'ff': 369,
            'transistors': 71118,
        },
        'baseline tiny': {
            'lut': 1330,
            'lut_nodsp': 6178,
            'ff': 1452,
            'transistors': 198170,
        },
        'sorter n=4': {'lut': 224, 'lut_nodsp': 224, 'ff': 195, 'transistors': 10610},
        'sorter n=8': {'lut': 965, 'lut_nodsp': 965, 'ff': 798, 'transistors': 43718},
        'sorter n=16': {
            'lut': 3483,
            'lut_nodsp': 3483,
            'ff': 2770,
            'transistors': 152026,
        },
        'qpu tiny': {'lut': 5735, 'lut_nodsp': 5735, 'ff': 2280, 'transistors': 162638},
        'qpu T=2 n=4 lanes=2': {
            'lut': 3220,
            'lut_nodsp': 3220,
            'ff': 1133,
            'transistors': 78430,
        },
        'qpu n=16': {'lut': 9501, 'lut_nodsp': 9501, 'ff': 4730, 'transistors': 316994},
        'qpu T=6': {'transistors': 192714},
        'qpu lanes=2 max_reduction=1024': {
            'lut': 6069,
            'lut_nodsp': 6069,
            'ff': 2516,
            'transistors': 172968,
        },
        'qpu act_width=12': {
            'lut': 5145,
            'lut_nodsp': 5145,
            'ff': 2210,
            'transistors': 154646,
        },
        'vpu_lane tiny': {
            'lut': 1612,
            'lut_nodsp': 5083,
            'ff': 619,
            'transistors': 80126,
        },
        'vpu_lane act_width=12': {
            'lut': 1507,
            'lut_nodsp': 4574,
            'ff': 559,
            'transistors': 72258,
        },
        'vpu lanes=1': {
            'lut': 4396,
            'lut_nodsp': 14542,
            'ff': 2075,
            'transistors': 323978,
        },
        'vpu tiny': {
            'lut': 11864,
            'lut_nodsp': 28338,
            'ff': 4729,
            'transistors': 642606,
        },
        'vpu lanes=2': {
            'lut': 6887,
            'lut_nodsp': 19141,
            'ff': 2974,
            'transistors': 430242,
        },
        'vpu lanes=8 max_reduction=256': {
            'lut': 22153,
            'lut_nodsp': 54365,
            'ff': 8761,
            'transistors': 1305250,
        },
        'pe select': {'lut': 594, 'lut_nodsp': 594, 'ff': 128, 'transistors': 10504},
        'pe select+booth': {
            'lut': 515,
            'lut_nodsp': 515,
            'ff': 128,
            'transistors': 9260,
        },
        'pe select lanes=2': {
            'lut': 415,
            'lut_nodsp': 415,
            'ff': 105,
            'transistors': 7802,
        },
        'pe select+booth lanes=8': {
            'lut': 489,
            'lut_nodsp': 489,
            'ff': 173,
            'transistors': 13094,
        },
        'pe booth': {'lut': 420, 'lut_nodsp': 682, 'ff': 128, 'transistors': 11464},
        'pe select+booth stages=0': {
            'lut': 344,
            'lut_nodsp': 344,
            'ff': 115,
            'transistors': 8890,
        },
        'mpu 2x2 select': {
            'lut': 1758,
            'lut_nodsp': 1758,
            'ff': 664,
            'transistors': 126932,
        },
        'mpu select+booth tiny': {
            'lut': 5526,
            'lut_nodsp': 5526,
            'ff': 2468,
            'transistors': 322164,
        },
        'pe ww=6': {'lut': 340, 'lut_nodsp': 550, 'ff': 114, 'transistors': 9738},
        'pe lanes=2 stages=0 max_reduction=256': {
            'lut': 284,
            'lut_nodsp': 503,
            'ff': 97,
            'transistors': 8322,
        },
        'pe horner lanes=2 ww=6': {
            'lut': 503,
            'lut_nodsp': 564,
            'ff': 88,
            'transistors': 8106,
        },
        'pe overflow acc_width=26 lanes=8': {
            'lut': 652,
            'lut_nodsp': 1299,
            'ff': 165,
            'transistors': 17744,
        },
        'mpu 3x3': {'lut': 4123, 'lut_nodsp': 6666, 'ff': 1428, 'transistors': 230656},
        'mpu 2x2 ww=6 stages=2': {
            'lut': 1164,
            'lut_nodsp': 2286,
            'ff': 708,
            'transistors': 106644,
        },
        'baseline 3x3': {
            'lut': 819,
            'lut_nodsp': 3546,
            'ff': 806,
            'transistors': 127546,
        },
        'baseline 2x2 ww=6': {
            'lut': 308,
            'lut_nodsp': 968,
            'ff': 293,
            'transistors': 51894,
        },
        'qpu T=2 lanes=2': {
            'lut': 4435,
            'lut_nodsp': 4435,
            'ff': 1916,
            'transistors': 127628,
        },
        'qpu n=16 lanes=8': {
            'lut': 10673,
            'lut_nodsp': 10673,
            'ff': 4794,
            'transistors': 338824,
        },
        'vpu lanes=2 act_width=12': {
            'lut': 6400,
            'lut_nodsp': 20082,
            'ff': 2707,
            'transistors': 391232,
        },
        'qpu_mpu tiny': {
            'lut': 12558,
            'lut_nodsp': 17080,
            'ff': 4709,
            'transistors': 521690,
        },
        'mpu fpga': {
            'lut': 27657,
            'lut_nodsp': 45840,
            'ff': 9795,
            'transistors': 2094174,
        },
        'pe select+booth stages=2 ww=6': {
            'lut': 349,
            'lut_nodsp': 349,
            'ff': 145,
            'transistors': 9014,
        },
        'mpu 3x3 select': {
            'lut': 3888,
            'lut_nodsp': 3888,
            'ff': 1428,
            'transistors': 223086,
        },
        'mpu select+booth weight_hop=2': {
            'lut': 5526,
            'lut_nodsp': 5526,
            'ff': 2164,
            'transistors': 313410,
        },
        'baseline weight_hop=4': {
            'lut': 1332,
            'lut_nodsp': 6180,
            'ff': 1308,
            'transistors': 194138,
        },
        'mpu fpga select+booth': {
            'lut': 22561,
            'lut_nodsp': 22561,
            'ff': 9935,
            'transistors': 1960830,
        },
    },
}
# END CALIBRATION


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m fpga.estimate", description=__doc__.split("\n")[0])
    p.add_argument("--calibrate", action="store_true",
                   help="synthesize the calibration runs (reusing identical earlier runs), fit "
                        "and print the coefficients and per-run errors")
    p.add_argument("--refit", action="store_true",
                   help="fit the measurements stored in fpga/estimate.py again, without "
                        "synthesis (after a change of the model alone)")
    p.add_argument("--write", action="store_true",
                   help="with --calibrate or --refit: store the coefficients in "
                        "fpga/estimate.py")
    p.add_argument("--missing", action="store_true",
                   help="with --calibrate: synthesize only the runs with no stored measurement "
                        "(runs just added), take the others as stored")
    args = p.parse_args(argv)
    if args.calibrate == args.refit:
        p.error("pass --calibrate or --refit (the estimate itself is `dstar estimate`)")
    if args.missing and not args.calibrate:
        p.error("--missing goes with --calibrate")
    t0 = time.perf_counter()
    calibrate(write=args.write, remeasure=args.calibrate, missing=args.missing,
              say=lambda s: print(f"[{time.perf_counter() - t0:7.1f} s] {s}" if s.startswith(
                  "  synth") else s, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
