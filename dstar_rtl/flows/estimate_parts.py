"""The parts of a unit and their features, counted from its configuration and its RTL.

:func:`unit_parts` returns, for every unit of :mod:`flows.estimate` but the core (whose
composition is :mod:`flows.estimate_core`), a list of :class:`Part`: one kind of hardware, its
number of instances, and per instance the *features* that the fitted coefficients
(:mod:`flows.estimate_coef`) price, with its DSP blocks, block and LUT RAM counted structurally.
Nothing here is fitted: every figure is read off the configuration and the RTL's structure, and
the RTL's own constants (:data:`rtl.chunker.SLOTS`, :attr:`rtl.vpu_lane.VPULane.LATENCY`, the
counters of :func:`golden.layouts.counters_layout`) are imported, not re-typed.

Features
--------
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
    its own coefficient (``reg.arr``, ``reg.qpu``, ``reg.vpu``).
logic features
    Widths of the datapath elements that cost LUTs and gates, so that a coefficient is the cost
    of one bit of one kind of element. PE with ``digit_product="multiply"``: ``pe.mul`` = lanes
    × weight_width (one digit × weight product per lane), ``pe.tree`` = (lanes − 1) × dot width
    (the adder tree), ``pe.shift`` = (dot width + max_exp) × exponent bits (the product-shift
    alignment), ``pe.hshift`` (Horner: the accumulator's and the result's shifts), ``pe.acc`` =
    acc_bits (accumulate, first-group select, shadow), ``pe.sat`` (overflow detection),
    ``pe.fused`` (fewer than two PE stages: alignment and accumulation in one logic cone, which
    costs more LUTs next to DSP blocks). PE with ``digit_product="select"`` (no multiplier, no
    DSP block; features of its own so that it leaves the multiplier's fit alone): ``pe.sel`` =
    2 × lanes × dot width (slice digits: two weight multiples per lane into the adder tree),
    ``pe.bsel`` = lanes × dot width (Booth digits: one 3:1 choice and its complement per lane),
    ``pe.sacc`` (accumulator and alignment shifter bits), ``pe.s1``, and ``pe.alone`` (a select
    PE synthesized alone, :func:`unit_parts`). Booth digits (``digits="booth"``) are 3 bits
    without a signed flag: they change the registers, not the multiplier's features. INT8 PE:
    ``i8.mul`` = weight_width², ``i8.acc``.
    QPU, weighed to first order in LUT4s (a 2:1 multiplexer bit 1, an n:1 one n/2, an adder or
    comparator bit 1) so that one coefficient scales a part: ``so`` = compare-exchanges of
    :func:`golden.bitonic.network` × (key + 2 × entry bits), ``qf`` the front's per-value
    datapath, ``qm`` the multiplexers of chunk assembler, packer and digit store, ``qb`` the
    exponent bins' logic (:func:`binner`). VPU: ``vl.mul``
    = the lane's ``x × y`` bits from :func:`rtl.vpu_lane.lane_widths`, ``vl.lin`` the rest of
    the lane (the softmax output lanes, :func:`softmax_out_lane`, are weighed with the same two),
    ``vo`` its operand selection and GELU tables, ``vpu.mul`` the row scalars' multiplier bits.
    ``*.1``: a constant per part. Generic gates only: ``ff`` (every flip-flop),
    ``mem`` (memory bits, flip-flops there), ``g.rd`` (read multiplexers of those memories),
    ``g.rom`` (the exponential's table, a block RAM on ECP5).
DSP blocks, block RAM, LUT RAM
    Counted structurally: an a × b product takes 18-bit pieces of each operand, a one-bit
    remainder left to logic, one MULT18X18D per pair of pieces (:func:`dsp_blocks`); a memory
    goes to TRELLIS_DPR16X4 or to DP16KD as Yosys's ``memory_libmap`` costs them
    (:func:`memory`: 4 per LUT-RAM cell, 128 per block), one copy per read port. Exact for the
    arrays, the VPU and the cores at ``tiny`` and ``fpga``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from math import ceil

from dstar_rtl.golden.bitonic import compare_exchanges
from dstar_rtl.golden.config import Config, ConfigError
from dstar_rtl.golden.layouts import (
    counters_layout,
    group_layout,
    layout_width,
    vpu_operand_widths,
    vpu_param_width,
)
from dstar_rtl.golden.vpu import vpu_tables
from dstar_rtl.rtl.chunker import SLOTS, column_layout
from dstar_rtl.rtl.qpu import RECON_DEPTH
from dstar_rtl.rtl.vpu import ROWS
from dstar_rtl.rtl.vpu_lane import VPULane, lane_widths
from dstar_rtl.rtl.vpu_scalar import SoftmaxRecip

__all__ = ["Part", "ubits", "dsp_blocks", "memory", "slice_pe", "int8_pe", "array_pes",
           "array_front", "front_registers", "qpu_parts", "binner", "sorter", "vpu_lane",
           "vpu_parts", "unit_parts", "UNIT_PARTS", "RECON_FIFO_DEPTH"]

#: The units :func:`unit_parts` models (the core is :mod:`flows.estimate_core`'s).
UNIT_PARTS = ("pe", "mpu", "baseline", "qpu", "qpu_mpu", "vpu")

#: Register bits of the QPU's statistics counters (:func:`golden.layouts.counters_layout`).
_COUNTER_BITS = layout_width(counters_layout())
#: Depth of the QPU's reconstruction queue (``rtl.qpu.RECON_DEPTH``: ``depth - 1`` memory
#: words and an output register).
RECON_FIFO_DEPTH = RECON_DEPTH


# ------------------------------------------------------------------------------- primitives
def ubits(n: int) -> int:
    """Bits of an Amaranth ``range(n)`` signal (values 0 .. n-1)."""
    return max(0, (n - 1).bit_length())


def dsp_blocks(a: int, b: int) -> int:
    """MULT18X18D blocks for an a × b product (Yosys ``mul2dsp`` with 18 × 18 pieces; a piece
    of one bit, below its minimum width of 2, is left to logic: a 19-bit operand takes one
    block's width, as measured on the VPU's lanes, 19 × 24 on two blocks)."""
    if min(a, b) < 2:
        return 0

    def pieces(n):
        q, r = divmod(n, 18)
        return q + (r >= 2)

    return pieces(a) * pieces(b)


_BRAM_SHAPES = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36))


def memory(depth: int, width: int, read_ports: int = 1, addr_bits: int = 0) -> dict:
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
    (the core's control, :mod:`flows.estimate_core`)."""
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


# --------------------------------------------------------------------------------- the arrays
def slice_pe(cfg: Config, count: int = 1, register_w: bool = True,
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
    return Part("PE (2-bit slice)", count, feats, dsp=0 if select else L * dsp_blocks(3, ww))


def int8_pe(cfg: Config, count: int = 1, register_w: bool = True,
            register_a: bool = True) -> Part:
    """:class:`rtl.pe.Int8PE` (``register_w``, ``register_a`` as for :func:`slice_pe`)."""
    ww, A, S = cfg.weight_width, cfg.baseline_acc_width, cfg.pe_stages
    regs = (ww if register_a else 0) + (ww + 3 if register_w else 0) + 2 * A + 1
    if S >= 1:
        regs += 2 * ww + (0 if register_w else 3)
    if S >= 2:
        regs += 2 * ww + 3
    return Part("PE (INT8)", count, {"reg.arr": regs, "i8.mul": ww * ww, "i8.acc": A,
                                     "i8.1": 1}, dsp=dsp_blocks(ww, ww))


def array_pes(cfg: Config, baseline: bool) -> list:
    """The PEs of an array: with ``weight_hop`` k only every k-th row registers the column
    operand (``w_out``), with ``act_hop`` k only every k-th column the row operand (``a_out``);
    the other PEs pass it on as a wire."""
    pe = int8_pe if baseline else slice_pe
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


def array_front(cfg: Config, baseline: bool, depth: int | None = None,
                own_registers: bool = False) -> Part | int:
    """:class:`rtl.array.ArrayUnit` and :class:`rtl.array.SystolicArray` without the PEs: weight
    buffer (``depth`` rows, default ``max_reduction``; the core's MPU has ``wmem_rows``),
    front-end registers, skew chains, drain control; less the PE registers that lead nowhere in
    an array. ``own_registers``: only the register bits of the array's own logic (an int)."""
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
    abits = cfg.chan_width if depth == cfg.max_reduction else max(1, ubits(depth))
    mem = memory(depth, width, ports, abits)
    own = skew + s2 + s1 + 1 + extra + 2 + ubits(R)
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
    (:mod:`bench.sweep.design`)."""
    return array_front(cfg, baseline, own_registers=True)


# ------------------------------------------------------------------------------------ the QPU
def qpu_parts(cfg: Config) -> list:
    """:class:`rtl.qpu.QPU`: front (stages 1-3), chunk assembler, sorter, packer, top; with
    ``packer == "bins"`` front, exponent bins (:func:`binner`) and top.

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
               + SLOTS.bit_length() + ubits(SLOTS) + 1)
    # n + 4 positions, each a 5:1 choice (buffer or one of four new descriptors) and the
    # buffer's next value.
    chunker = Part("QPU chunk assembler", 1, {"reg.qpu": ch_regs,
                                              "qm": 4 * (n + 4) * (ebits + 2 * T)})
    kw, pw = XW + 1, ubits(n)                  # the sort key and its payload, the position
    group = T * L * 2 + L * chw + 2 * L + XW + 2
    pk_regs = n * (kw + pw) + 4 + 1 + (n + 1).bit_length() + 1 + group
    # Per lane an n:1 choice of a descriptor and of its digit column.
    packer = Part("QPU packer", 1, {"reg.qpu": pk_regs, "qm": L * n * (kw + pw + 2 * T) // 2})
    fifo = memory(RECON_FIFO_DEPTH - 1, T * rw)  # its read register: the FIFO's output
    top_regs = (_COUNTER_BITS + r0b + 21 + XW + 2
                + fifo.pop("ff") + 2 * RECON_FIFO_DEPTH.bit_length() + 2)
    if cfg.packer == "bins":
        # Counters, configuration and FIFO are constant-size; no digit store.
        top = Part("QPU counters, FIFO", 1, {"reg.qpu": top_regs, "qpu.1": 1},
                   mem_bits=(RECON_FIFO_DEPTH - 1) * T * rw, **fifo)
        return [front, binner(cfg), top]
    # The column store (SLOTS chunks of n columns) and its SLOTS:1 read; counters,
    # configuration and FIFO are constant-size.
    col = column_layout(cfg).size
    top = Part("QPU digit store, counters, FIFO", 1, {
        "reg.qpu": top_regs + SLOTS * n * col, "qm": 2 * n * col, "qpu.1": 1},
        mem_bits=(RECON_FIFO_DEPTH - 1) * T * rw, **fifo)
    return [front, chunker, sorter(cfg), packer, top]


def binner(cfg: Config) -> Part:
    """:class:`rtl.binner.Binner`: ``pack_bins`` open groups (flag, exponent, column count and
    ``lanes - 1`` columns each), the held sub-channel's progress, the pending group and the
    output register. Its logic ``qb``, weighed like the other QPU features: per slice column
    of a sub-channel its bin's exponent, count and open flag read (``pack_bins``:1) and compared;
    the group sent, a bin's columns read (``pack_bins``:1) and each lane zeroed when unused;
    per bin the column written (one of the sub-channel's four) and its exponent."""
    K, L, X = cfg.pack_bins, cfg.lanes, cfg.exp_width
    col = column_layout(cfg).size
    group = layout_width(group_layout(cfg))
    cb = ubits(L - 1)
    regs = (K * (1 + X + cb + (L - 1) * col) + cfg.max_reduction.bit_length() + 4 + 3
            + 2 * (group + 1) + 1)
    per_column = (X + cb + 1) * K // 2 + X + cb
    send = ((L - 1) * col + X + cb) * K // 2 + L * col + 2 * col
    per_bin = 2 * (col + X) + L
    return Part("QPU exponent bins", 1, {"reg.qpu": regs,
                                          "qb": 4 * per_column + send + K * per_bin})


def sorter(cfg: Config) -> Part:
    """:class:`rtl.sorter.BitonicSorter` as the QPU builds it: ``sort_n`` descriptors, key
    (valid, exponent), payload (the position in the column store,
    :func:`rtl.chunker.descriptor_layout`), one register per network stage.
    Each compare-exchange of :func:`golden.bitonic.network` is a key comparison and two 2:1
    multiplexers of a whole entry."""
    n = cfg.sort_n
    kw, pw = cfg.exp_width + 1, ubits(n)
    lg = n.bit_length() - 1
    stages = lg * (lg + 1) // 2
    cx = compare_exchanges(n)
    return Part("QPU bitonic sorter", 1, {"reg.qpu": stages * (n * (kw + pw) + 4 + 1),
                                          "so": cx * (kw + 2 * (kw + pw))})


# ------------------------------------------------------------------------------------ the VPU
def vpu_lane(cfg: Config, t, count: int = 1, operands: bool = True,
             requant: bool = True) -> Part:
    """One VPU lane: :class:`rtl.vpu_lane.VPULane` and (``operands``) its share of the VPU's
    input and operand registers, operand selection and GELU tables (``t``: the VPU's tables,
    :func:`golden.vpu.vpu_tables`).

    Features: ``vl.mul`` the ``x × y`` multiplier bits; ``vl.lin`` the rest of the lane to first
    order in LUT4s (the sum, the rounding bias and its shift right by ``rs``, four saturations,
    the exponential's shift); ``vo`` the operand stage (``x``, ``y``, ``add`` chosen among
    about ten micro-operations, the GELU tables as logic, ``acc_requant``'s saturated sum);
    ``g.rom`` the exponential's table, block RAM on ECP5 and logic in generic gates. Without
    ``requant`` (the core's VPU) the narrower widths and no ``side`` data."""
    w = lane_widths(cfg, t, requant)
    A, E = cfg.acc_bits, t.exp_frac
    x, y, ad, rs, sm, r = w["x"], w["y"], w["add"], w["rs"], w["sum"], w["r"]
    carry = 3 + 1 + ((A + 1) if requant else 0)           # mode, enable, side, flag
    regs = ((x + y) + ad + rs + carry + sm + rs + carry + (sm + 2) + rs + carry + sm + carry
            + r + 1 + (E + 2).bit_length() + (E + 1) + carry + r + 1
            + ((A + 1) if requant else 0))
    ke = (E + 2).bit_length()
    feats = {"reg.vpu": regs, "vl.mul": x * y,
             "vl.lin": 3 * sm + sm * rs // 2 + 8 * r + (E + 2) * ke // 2,
             "g.rom": len(t.exp_lut) * (t.exp_lut_frac + 1)}
    if operands:
        ow = vpu_operand_widths(cfg)
        if requant:
            beat = ow["a"] + ow["b"] + ow["c"] + cfg.mult_width + cfg.sh_max.bit_length() + 1
        else:          # the bits the other operations read: a as x̂, b as a reconstruction
            beat = (cfg.act_width + 1) + cfg.recon_width + ow["c"] + 1
        feats["reg.vpu"] += beat + (x + y + ad + rs + carry)
        rom = (len(t.gelu_base) * t.widths["gelu.base"][0]
               + len(t.gelu_delta) * t.widths["gelu.delta"][0])
        feats["vo"] = 4 * (x + y + ad) + rom // 16 + (3 * A if requant else 0)
    # The exponential's table is read into a register: Yosys maps it to block RAM.
    mem = memory(len(t.exp_lut), t.exp_lut_frac + 1)
    mem.pop("ff")  # a ROM: no write port, and its read register is the lane's stage E
    return Part("VPU lane", count, feats, dsp=dsp_blocks(x, y), bram=mem["bram"],
                lutram=mem["lutram"])


def softmax_out_lane(cfg: Config, t, count: int = 1) -> Part:
    """One lane of :class:`rtl.vpu_pout.SoftmaxOut`: the product ``ex × y1`` (``vl.mul``), its
    rounding bias, shift and saturation to ``P`` (``vl.lin``, first order in LUT4s, as the
    lane's) and three stages of registers."""
    ex, y1, sh = t.exp_frac + 1, t.widths["softmax.y1"][0], t.widths["softmax.shift"][0]
    pw = ex + y1
    regs = pw + (pw + 2) + cfg.p_base_log2 + 1
    return Part("VPU softmax output lane", count,
                {"reg.vpu": regs, "vl.mul": ex * y1, "vl.lin": 2 * pw + pw * sh // 2},
                dsp=dsp_blocks(ex, y1))


def vpu_parts(cfg: Config, requant: bool = True) -> list:
    """:class:`rtl.vpu.VPU`: ``vpu_lanes`` lanes and softmax output lanes; the row scalars, the
    softmax row records, the row buffer (a ring of two rows) and control (``vpu.mul``: the
    scalar units' multiplier bits; ``vpu.1``: the rest, nearly constant); ``requant`` as the
    VPU's parameter."""
    t = vpu_tables(cfg)
    if t.rsqrt_frac < cfg.act_frac + t.ln_eps_frac // 2:  # the RTL's own check (rtl.vpu.VPU)
        raise ConfigError(f"VPU: act_frac ({cfg.act_frac}) + ln_eps_frac/2 "
                          f"({t.ln_eps_frac // 2}) must not exceed rsqrt_frac "
                          f"({t.rsqrt_frac}): LayerNorm's output shift would be negative")
    L, W, n_max = cfg.vpu_lanes, cfg.act_width, cfg.max_reduction
    wd = {k: v[0] for k, v in t.widths.items()}
    lw = lane_widths(cfg, t, requant)
    pw = vpu_param_width(cfg)
    Qr, Qs = t.recip_frac, t.rsqrt_frac
    nb = n_max.bit_length()
    muls = [(Qr + 1, Qr), (Qr, Qr + 2), (nb, wd["layernorm.S2"]),
            (wd["layernorm.S1"], wd["layernorm.S1"]), (Qs, Qs), (Qs + 2, Qs + 1),
            (Qs, Qs + 3), (nb, wd["layernorm.y1"]), (wd["layernorm.S1"], wd["layernorm.y1"])]
    depth = ceil(n_max / L)
    ring = 2 * depth
    bw = max(W, t.exp_frac + 1)
    scalar_regs = (wd["softmax.sum"] + 6 + 3 * (Qr + 1) + 2 * Qr + Qr + 2 + 3 * 6
                   + wd["layernorm.nS2"] + wd["layernorm.S1sq"] + wd["layernorm.V"]
                   + 2 * wd["layernorm.Vp"] + 4 * (Qs + 2) + 4 * Qs + Qs + 1 + Qs + 3
                   + wd["layernorm.y1"] + 5 * 6 + 2 * nb + 4)
    row_regs = (5 * W + 2 * wd["softmax.sum"] + wd["layernorm.S1"] + wd["layernorm.S2"]
                + 2 * (wd["softmax.sum"] + wd["layernorm.S2"]) + 2 * W + L.bit_length()
                + lw["ny1"] + lw["s1y1"] + 6 + 1 + 5)
    y1, sh = wd["softmax.y1"], wd["softmax.shift"]
    # Softmax rows in flight: the records, the output pass's counters and its read stage.
    rec_regs = (ROWS * (ubits(n_max + 1) + y1 + sh + 1) + 3 * ubits(ROWS)
                + ubits(ring + 1) + 2 * ubits(ring) + (ubits(depth + 1) + 1) * 2
                + ubits(n_max + 1) + 2 * (y1 + sh) + L + 2 + 1 + SoftmaxRecip.LATENCY + 1)
    ctl_regs = (3 + 4 + 2 * nb + pw + 2 * ubits(depth + 1) + 4 + 1
                + (VPULane.LATENCY + 3) * (3 + ubits(ring)) + 3 * L + 6)
    mem = memory(ring, L * (bw + 1), 1, ubits(ring))
    feats = {"reg.vpu": scalar_regs + row_regs + rec_regs + ctl_regs + mem.pop("ff"),
             "vpu.mul": sum(a * b for a, b in muls), "vpu.1": 1,
             "g.rd": ring * L * (bw + 1)}
    fixed = Part("VPU row scalars, reductions, row buffer, control", 1, feats,
                 dsp=sum(dsp_blocks(a, b) for a, b in muls), mem_bits=ring * L * (bw + 1),
                 **mem)
    return [vpu_lane(cfg, t, count=L, requant=requant), softmax_out_lane(cfg, t, count=L),
            fixed]


# ------------------------------------------------------------------------------- the units
def unit_parts(unit: str, cfg: Config) -> list:
    """The parts of ``unit`` (one of :data:`UNIT_PARTS`) for ``cfg``. Raises :class:`ValueError`
    for another unit and where the RTL refuses the configuration."""
    if unit == "pe":                       # as gen.units builds it: w_out a register at hop 1
        pe = slice_pe(cfg, register_w=cfg.weight_hop == 1, register_a=cfg.act_hop == 1)
        if cfg.digit_product == "select":
            # Synthesized alone, the select PE maps to more LUTs than each PE of an array does
            # (ABC9 maps the lone PE; on the arrays ABC9 asserts and the classic ABC maps them,
            # flows.synth): a constant of the lone PE.
            pe = dataclasses.replace(pe, feats={**pe.feats, "pe.alone": 1})
        return [pe]
    if unit in ("mpu", "baseline"):
        return array_pes(cfg, unit == "baseline") + [array_front(cfg, unit == "baseline")]
    if unit in ("qpu", "qpu_mpu"):
        if cfg.packer == "sort" and cfg.sort_n < 4:  # the RTL's own check (rtl.qpu.QPU)
            raise ValueError(f"sort_n must be >= 4 for the QPU (one sub-channel brings up to 4 "
                             f"slice columns and a chunk must hold the overflow), not "
                             f"{cfg.sort_n}")
        return qpu_parts(cfg) + (unit_parts("mpu", cfg) if unit == "qpu_mpu" else [])
    if unit == "vpu":
        return vpu_parts(cfg)
    raise ValueError(f"unit must be one of {list(UNIT_PARTS)}, not {unit!r}")
