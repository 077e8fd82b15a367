"""The DSTAR configuration: one frozen, validated object and its presets.

Every width, depth and record layout that crosses a unit boundary is derived here (numerics §2.1);
the RTL, the testbenches and the reports import it and never re-type a number.

>>> cfg = preset("tiny")
>>> cfg.acc_bits
31
>>> preset("tiny", sort_n=12)
Traceback (most recent call last):
...
golden.config.ConfigError: sort_n must be a power of two >= 2, not 12
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Config", "ConfigError", "PRESETS", "VARIANTS", "CHOSEN", "INT8_CHOSEN", "preset",
           "bitlen", "CORE_BUFFER_ROWS", "DRAM_WIDTHS", "PACKERS", "PACK_BINS",
           "CORE_WIDE_ROWS", "CORE_WIDE_ADDR_BITS", "CORE_PARAM_ROWS", "CORE_PARAM_ADDR_BITS",
           "CORE_ADDR_BITS", "CORE_ABUF_ADDR_BITS", "core_rows_limit"]

# Precision classes of FMDQ (numerics §2.2) and the fixed INT8 top threshold.
PRECISIONS = (2, 4, 6, 8)
THR8 = 127
# Exponent and FPoT fields are 5 bits (numerics §2.2 step 3).
EXP_WIDTH = 5
ALIGNMENTS = ("product-shift", "horner")
# How a slice PE forms a digit x weight product, and how a sub-channel's value is cut into digits
# (docs/architecture.md 2, 3).
DIGIT_PRODUCTS = ("multiply", "select")
DIGIT_CODES = ("slice", "booth")
#: How the QPU forms lane groups (numerics §2.3): ``sort`` (chunks sorted by exponent, then
#: packed) or ``bins`` (one open group per exponent bin, no sort).
PACKERS = ("sort", "bins")
#: Bin counts of ``packer = "bins"``: a sub-channel's four columns fall in four different bins.
PACK_BINS = (4, 8, 16)
#: The core's matrix datapath (docs/architecture.md 16): DSTAR's QPU and slice MPU on
#: differential FMDQ layers, or the INT8 array with an INT8 activation quantizer on dense layers.
DATAPATHS = ("dstar", "int8")
# Parameters added after configuration hashes were first published: they enter
# Config.hash() only when they differ from their default.
MAX_OPEN_GROUPS = 4
#: The core's buffers whose depth (rows) a configuration may set (program.isa.CoreConfig).
CORE_BUFFER_ROWS = ("abuf_rows", "xbuf_rows", "ybuf_rows", "wmem_rows", "gmem_rows", "rbuf_rows",
                    "vbuf_rows", "mask_rows")
#: Bits of the core's narrow address and count fields (VROW, SKIP, and the RBUF, VBUF and MASK
#: addresses): those buffers have at most 2**14 rows.
CORE_ADDR_BITS = 14
#: ABUF may be deeper, up to 2**CORE_ABUF_ADDR_BITS rows (a whole reference DiT's activations,
#: at the fpga preset's tile too); its address fields (QUANT ``src``, GEMM ``dst``, VROW ``a``,
#: ``c`` and ``dst``) widen to its depth (program.isa.abuf_bits), 14 bits at every preset;
#: beyond 2**16 rows the commands are 160 bits (program.isa.cmd_bits).
CORE_ABUF_ADDR_BITS = 20
#: The buffers that may be deeper still (WMEM, XBUF, YBUF, GMEM: the whole model's weights,
#: state and P-cache), up to 2**CORE_WIDE_ADDR_BITS rows; their address fields (and every
#: LOAD/STORE address and count) widen to the deepest of them (program.isa.addr_bits).
CORE_WIDE_ROWS = ("wmem_rows", "xbuf_rows", "ybuf_rows", "gmem_rows")
CORE_WIDE_ADDR_BITS = 24
#: RBUF and VBUF (every layer's requantization rows, every block's adaLN vectors) may have up to
#: 2**CORE_PARAM_ADDR_BITS rows; GEMM ``rrow`` and VROW ``vb`` widen to their depth
#: (program.isa.rbuf_bits, vbuf_bits), 14 bits at every preset.
CORE_PARAM_ROWS = ("rbuf_rows", "vbuf_rows")
CORE_PARAM_ADDR_BITS = 16
#: Beat widths (bits) the core's DRAM port may have (``Config.dram_width``; 0: no port).
DRAM_WIDTHS = (32, 64, 128, 256, 512, 1024)


def core_rows_limit(buf: str) -> int:
    """The most rows core buffer ``buf`` (``"abuf_rows"`` ...) may have."""
    bits = (CORE_WIDE_ADDR_BITS if buf in CORE_WIDE_ROWS
            else CORE_ABUF_ADDR_BITS if buf == "abuf_rows"
            else CORE_PARAM_ADDR_BITS if buf in CORE_PARAM_ROWS else CORE_ADDR_BITS)
    return 1 << bits
HASH_IF_CHANGED = ("digit_product", "digits", "weight_hop", "act_hop", "open_groups",
                   "pack_windows", "datapath", "base_offset", "packer",
                   "pack_bins", "ln_row_max", "ystate_frac", "dram_width",
                   "mlp_chunks") + CORE_BUFFER_ROWS


class ConfigError(ValueError):
    """An impossible parameter set. The message names the parameter, its value and what is
    allowed."""


def bitlen(n: int) -> int:
    """Number of bits of the non-negative integer ``n`` (``int.bit_length``)."""
    return int(n).bit_length()


def _is_pow2(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1 and (n & (n - 1)) == 0


@dataclass(frozen=True)
class Config:
    """A DSTAR core configuration (numerics §2 and 3).

    Parameters (all keyword-only)
    ----------
    rows, cols:
        MPU array size. This version fixes ``T = rows = cols = Bs`` (numerics §2.2): ``cols`` must
        equal ``rows``.
    lanes:
        SIMD lanes per PE (digits per group). A power of two, at most ``sort_n``.
    weight_width:
        Signed weight width (INT8: 8).
    act_width, act_frac:
        Activation fixed point: ``act_width`` bits with ``act_frac`` fractional bits.
    base_log2:
        Default static base ``B`` (``ScaleBase = 2**B``), ``0 <= B <= base_log2_max``.
    base_log2_max:
        The largest ``B`` the configuration port accepts (``<= act_frac``); fixes ``r0_min``.
    thr:
        ``(thr2, thr4, thr6)``: precision thresholds, strictly increasing, below ``thr8 = 127``.
    e_max:
        Largest PoT exponent; ``e_max + 6`` must fit the 5-bit exponent field.
    sort_n:
        Bitonic sorter width (a power of two).
    max_reduction:
        Largest reduction one accumulation covers (a longer layer runs in pieces, numerics
        §2.5) and the longest VPU row of every operation but LayerNorm.
    ln_row_max:
        Longest LayerNorm row (the model's hidden size) the VPU normalizes; the VPU always takes
        ``max_reduction`` (:attr:`ln_max` is the larger of the two; ``None``, the default of every
        preset, leaves it at ``max_reduction``). Rows up to ``max_reduction`` are held in the VPU's
        row buffer; a longer one arrives twice, once for its statistics and once to be normalized
        (numerics §2.7). Widens LayerNorm's per-row scalars and the VPU's row length. In ``[1,
        2**14]``.
    drop_zero_columns:
        Drop slice columns whose T digits are all zero (numerics §2.3).
    open_groups:
        Partial lane groups the packer may hold open across the chunks of a tile (``0``, the
        default: a group never spans two chunks). A run of one exponent that ends a chunk with
        fewer than ``lanes`` descriptors waits in one of these slots, with its digits, for the
        next run of the same exponent in a later chunk of the tile, which fills it first; the
        slots still open after the tile's last chunk are emitted then (:mod:`golden.schedule`).
        In ``0..4``.
    pack_windows:
        Windows the packer forms per cycle with open groups: ``1`` (default) packs one window a
        cycle, and a window that stores a partial group emits nothing that cycle; ``2`` also
        forms the window after a stored one and emits it in the same cycle when its group goes
        out (about 3,700 more ECP5 LUTs at ``fpga``, for about 12 % more QPU rate on the
        reference DiT). The group stream is the same either way. ``2`` needs ``open_groups >= 1``.
    packer:
        How the QPU forms lane groups: ``"sort"`` (default; chunks of ``sort_n`` descriptors
        sorted by exponent by a bitonic network, then packed, with ``open_groups`` partial groups
        held across chunks) or ``"bins"`` (no chunks, no sort: each descriptor joins the open
        group of its exponent's bin, ``pack_bins`` of them, direct-mapped; a full group leaves at
        once, a bin wanted by another exponent is emitted partial). Same dot products, different
        groups (:func:`golden.schedule.bin_tile`). ``"bins"`` needs ``open_groups = 0``,
        ``pack_windows = 1`` and ``lanes >= 2``; ``alignment = "horner"`` needs ``"sort"``.
    pack_bins:
        Exponent bins of ``packer = "bins"``: 4 (default), 8 or 16.
    alignment:
        ``"product-shift"`` (default) or ``"horner"`` (needs ``packer = "sort"`` and
        ``sort_n >= 4 * max_reduction``).
    acc_width:
        Accumulator width; ``None`` derives the width that cannot overflow. A narrower width needs
        ``overflow_detect``.
    overflow_detect:
        Saturating accumulator with a sticky overflow flag.
    pe_stages:
        Pipeline registers inside a PE between the multipliers and the accumulator (0..2).
    digit_product:
        How a slice PE forms each lane's digit x weight product: ``"multiply"`` (default) writes
        ``digit * w`` and lets the tools map it (a DSP block per lane on ECP5), ``"select"`` picks
        it from the weight's multiples (multiplexers and the adder tree, never a multiplier, so
        no DSP block). Bit-exact either way.
    digits:
        The digit code of a sub-channel's value: ``"slice"`` (default; 2-bit two's-complement
        slices, top one signed {-2..1}, the others unsigned {0..3}) or ``"booth"`` (radix-4 Booth
        digits, every one signed in {-2..2}, carried as 3-bit two's complement). Same number of
        digits, same exponents, same dot products; different zero columns.
    weight_hop:
        Rows a column operand (the weights and their control) crosses per register in the arrays
        (MPU and baseline alike): ``1`` (default) registers it at every PE (systolic forwarding);
        ``k`` registers it after every ``k``-th row, the PEs between pass it on as a wire (one
        net drives ``k`` PEs); ``rows`` broadcasts it down the column with no register. The row
        operands are skewed to match (row ``i`` by ``i // k`` cycles). In ``1..rows``.
    act_hop:
        The same for the row operands (a token's digits, or the INT8 activation) on their way
        right: registered after every ``act_hop``-th column (``cols``: broadcast along the row);
        the column operands are then skewed by ``j // act_hop``. With both hops at the array's
        size nothing is skewed at all. In ``1..cols``.
    datapath:
        The core's matrix datapath: ``"dstar"`` (default; the QPU quantizes each sub-channel of
        ``Δx`` with FMDQ and the MPU of slice PEs replays its group stream; every linear layer is
        differential) or ``"int8"`` (the INT8 baseline's array with an INT8 activation quantizer
        in place of the QPU and the MPU: every linear layer is dense, ``y = W·q(x)`` each step,
        ``q`` one power-of-two exponent per token tile, numerics §2.8). ``"int8"`` needs
        ``mult_width >= act_width``.
    closed_loop:
        Differential layers keep ``x̂`` (closed loop, numerics §2.5) instead of the previous
        ``x``.
    ystate_frac:
        How a differential layer keeps its running sum ``Y`` between steps (numerics §2.5,
        "Stored Y", issue 47): ``None`` (default) keeps all ``acc_bits`` (exact, ``Y = W·x̂``);
        an integer ``g`` keeps ``Y`` rounded to ``g`` bits below each output channel's LSB
        (by the channel's requantization shift) in ``ystate_width = act_width + 2 + g`` bits,
        which cuts the state every step reads and writes (never wider than ``acc_bits``). In
        ``[0, sh_max]``; ``None`` with ``datapath = "int8"`` (no state). Every preset keeps
        :data:`YSTATE_FRAC_CHOSEN`.
    p_base_log2:
        Static base of attention probabilities: ``P`` in units of ``2**-p_base_log2``
        (numerics §2.6).
    base_offset:
        The per-layer static bases of a model (the operating point's, numerics §2.4): ``None``
        runs every layer at ``base_log2``; an integer profiles each linear layer's base on the
        float calibration run that also profiles the SAR masks (:mod:`analysis.calibration`:
        the ``--profile-base`` rule, :func:`analysis.trace.profile_base_log2`) and adds this
        offset, clipped to ``[0, B_max]``. A host-side choice: each layer's QPU configuration
        word carries its base.
    sar_interval, sar_thr:
        SAR cache-step interval and block-keep threshold.
    vpu_lanes:
        VPU elements per cycle.
    mult_width:
        Requantization mantissa width (16: ``2**15 <= m < 2**16``); ``sh_max`` the largest shift.
    cores:
        Cores of the chip (performance model only).
    abuf_rows, xbuf_rows, ybuf_rows, wmem_rows, gmem_rows, rbuf_rows, vbuf_rows, mask_rows:
        Depths (rows) of the core's buffers (:class:`program.isa.CoreConfig`). ``None``
        (default) takes the depth of the core preset of the configuration's name, or the
        default core's for a custom name (:func:`program.isa.core_for`). In
        ``[1, 2**14]``.
    dram_width:
        The core's DRAM port (docs/core.md §9): ``0`` (default) builds none, so the D engine's
        commands (DLOAD, DSTORE) are unknown opcodes; otherwise the bits of one beat of its
        AXI4 manager port, one of :data:`DRAM_WIDTHS`.
    mlp_chunks:
        The MLP's hidden channels in this many chunks (numerics §2.5): ``fc2``'s reduction runs
        in as many pieces, its stored ``Y`` rounded after each, so that a core with a DRAM port
        runs a chunk of ``fc1``, its GELU and the matching piece of ``fc2`` one after another
        with only that chunk's weights on chip (``program.model``, "Passes"). ``1`` (default):
        the hidden channels whole. DSTAR only: the INT8 core's quantizer scales a whole tile by
        one exponent, so it cannot split a reduction.
    """

    rows: int = 4
    cols: int = 4
    lanes: int = 4
    weight_width: int = 8
    act_width: int = 16
    act_frac: int = 8
    base_log2: int = 6
    base_log2_max: int | None = None
    thr: tuple = (1, 7, 31)
    e_max: int = 11
    sort_n: int = 8
    max_reduction: int = 64
    ln_row_max: int | None = None
    drop_zero_columns: bool = True
    open_groups: int = 0
    pack_windows: int = 1
    packer: str = "sort"
    pack_bins: int = 4
    alignment: str = "product-shift"
    acc_width: int | None = None
    overflow_detect: bool = False
    pe_stages: int = 1
    digit_product: str = "multiply"
    digits: str = "slice"
    weight_hop: int = 1
    act_hop: int = 1
    datapath: str = "dstar"
    closed_loop: bool = True
    ystate_frac: int | None = None
    p_base_log2: int = 7
    base_offset: int | None = None
    sar_interval: int = 2
    sar_thr: float = 1e-3
    vpu_lanes: int = 4
    mult_width: int = 16
    sh_max: int = 47
    cores: int = 1
    abuf_rows: int | None = None
    xbuf_rows: int | None = None
    ybuf_rows: int | None = None
    wmem_rows: int | None = None
    gmem_rows: int | None = None
    rbuf_rows: int | None = None
    vbuf_rows: int | None = None
    mask_rows: int | None = None
    dram_width: int = 0
    mlp_chunks: int = 1
    name: str = field(default="custom", compare=False)

    # ------------------------------------------------------------------ validation
    def __post_init__(self):
        def need(cond, param, value, allowed):
            if not cond:
                raise ConfigError(f"{param} must be {allowed}, not {value!r}")

        def pos_int(param, lo=1, hi=None):
            v = getattr(self, param)
            ok = (isinstance(v, int) and not isinstance(v, bool) and v >= lo
                  and (hi is None or v <= hi))
            rng = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"
            need(ok, param, v, rng)

        pos_int("rows")
        pos_int("cols")
        need(self.cols == self.rows, "cols", self.cols,
             f"equal to rows ({self.rows}): this version fixes T = rows = cols")
        need(_is_pow2(self.sort_n) and self.sort_n >= 2, "sort_n", self.sort_n,
             "a power of two >= 2")
        need(_is_pow2(self.lanes) and self.lanes <= self.sort_n, "lanes", self.lanes,
             f"a power of two <= sort_n ({self.sort_n}) so that lane groups pack a chunk")
        pos_int("weight_width", 2, 16)
        pos_int("act_width", 4, 32)
        pos_int("act_frac", 0, self.act_width - 1)
        bmax = self.act_frac if self.base_log2_max is None else self.base_log2_max
        if self.base_log2_max is not None:
            pos_int("base_log2_max", 0, self.act_frac)
        pos_int("base_log2", 0, bmax)
        need(isinstance(self.thr, tuple) and len(self.thr) == 3
             and all(isinstance(t, int) and not isinstance(t, bool) for t in self.thr),
             "thr", self.thr, "a tuple of three integers (thr2, thr4, thr6)")
        t2, t4, t6 = self.thr
        need(0 <= t2 < t4 < t6 < THR8, "thr", self.thr,
             f"strictly increasing with 0 <= thr2 < thr4 < thr6 < {THR8}")
        pos_int("e_max", 0, (1 << EXP_WIDTH) - 1 - 6)
        pos_int("max_reduction", 1)
        if self.ln_row_max is not None:
            pos_int("ln_row_max", 1, 1 << 14)
        need(isinstance(self.drop_zero_columns, bool), "drop_zero_columns", self.drop_zero_columns,
             "a bool")
        pos_int("open_groups", 0, MAX_OPEN_GROUPS)
        need(self.pack_windows in (1, 2) and not isinstance(self.pack_windows, bool),
             "pack_windows", self.pack_windows, "1 or 2")
        if self.pack_windows == 2:
            need(self.open_groups >= 1, "pack_windows", self.pack_windows,
                 "1 unless open_groups >= 1 (a second window only follows a stored one)")
        need(self.packer in PACKERS, "packer", self.packer, f"one of {PACKERS}")
        need(self.pack_bins in PACK_BINS and not isinstance(self.pack_bins, bool), "pack_bins",
             self.pack_bins, f"one of {PACK_BINS}")
        if self.packer == "bins":
            need(self.open_groups == 0 and self.pack_windows == 1, "packer", self.packer,
                 "'sort' unless open_groups = 0 and pack_windows = 1 (the bins hold every "
                 "partial group)")
            need(self.lanes >= 2, "packer", self.packer, "'sort' unless lanes >= 2")
        need(self.alignment in ALIGNMENTS, "alignment", self.alignment, f"one of {ALIGNMENTS}")
        if self.alignment == "horner":
            need(self.packer == "sort" and self.sort_n >= 4 * self.max_reduction, "alignment",
                 self.alignment,
                 f"'product-shift' unless packer = 'sort' and one chunk holds a whole tile "
                 f"(sort_n >= 4 * max_reduction = {4 * self.max_reduction}, "
                 f"sort_n is {self.sort_n}, packer is {self.packer!r}: the groups must come "
                 f"in descending exponent order)")
        need(isinstance(self.overflow_detect, bool), "overflow_detect", self.overflow_detect,
             "a bool")
        safe = self.safe_acc_width
        if self.acc_width is not None:
            pos_int("acc_width", 2, 128)
            if self.acc_width < safe:
                need(self.overflow_detect, "acc_width", self.acc_width,
                     f">= {safe} (the width that cannot overflow), or narrower only with "
                     f"overflow_detect=True")
        pos_int("pe_stages", 0, 2)
        need(self.digit_product in DIGIT_PRODUCTS, "digit_product", self.digit_product,
             f"one of {DIGIT_PRODUCTS}")
        need(self.digits in DIGIT_CODES, "digits", self.digits, f"one of {DIGIT_CODES}")
        pos_int("weight_hop", 1, self.rows)
        pos_int("act_hop", 1, self.cols)
        need(self.datapath in DATAPATHS, "datapath", self.datapath, f"one of {DATAPATHS}")
        need(isinstance(self.closed_loop, bool), "closed_loop", self.closed_loop, "a bool")
        if self.ystate_frac is not None:
            need(self.datapath == "dstar", "ystate_frac", self.ystate_frac,
                 "None with datapath 'int8' (its dense layers keep no Y)")
            pos_int("ystate_frac", 0, self.sh_max)
        # P is 0..2**p_base_log2 - 1 <= 127 so the quantizer keeps e = 0 (numerics §2.6).
        pos_int("p_base_log2", 0, 7)
        bo = self.base_offset
        need(bo is None or (isinstance(bo, int) and not isinstance(bo, bool)
                            and -self.act_frac <= bo <= self.act_frac), "base_offset", bo,
             f"None or an integer in [-{self.act_frac}, {self.act_frac}]")
        pos_int("sar_interval", 1)
        need(isinstance(self.sar_thr, (int, float)) and 0 <= self.sar_thr < 1, "sar_thr",
             self.sar_thr, "a number in [0, 1)")
        pos_int("vpu_lanes")
        pos_int("mult_width", 2, 32)
        if self.datapath == "int8":     # numerics §2.8: a shift below 0 is taken as 0, exactly
            need(self.mult_width >= self.act_width, "mult_width", self.mult_width,
                 f">= act_width ({self.act_width}) with datapath 'int8'")
        pos_int("sh_max", 1, 127)
        pos_int("cores")
        for buf in CORE_BUFFER_ROWS:
            if getattr(self, buf) is not None:
                pos_int(buf, 1, core_rows_limit(buf))
        need(self.dram_width in (0, *DRAM_WIDTHS) and not isinstance(self.dram_width, bool),
             "dram_width", self.dram_width, f"0 (no DRAM port) or one of {DRAM_WIDTHS}")
        pos_int("mlp_chunks", 1, 64)
        need(self.mlp_chunks == 1 or self.datapath != "int8", "mlp_chunks", self.mlp_chunks,
             "1 with datapath 'int8' (its quantizer cannot split a reduction)")

    # ------------------------------------------------------------------ derived values
    @property
    def tile(self) -> int:
        """T = Bs: tokens per tile, rows of the array, SAR block size."""
        return self.rows

    @property
    def B_max(self) -> int:
        return self.act_frac if self.base_log2_max is None else self.base_log2_max

    @property
    def r0(self) -> int:
        """Finest-step shift of the default base: ``act_frac - B``."""
        return self.act_frac - self.base_log2

    @property
    def r0_min(self) -> int:
        return self.act_frac - self.B_max

    @property
    def thresholds(self) -> dict:
        """``{b: thr[b]}`` for b in 2, 4, 6, 8."""
        return dict(zip(PRECISIONS, (*self.thr, THR8)))

    @property
    def xhat_width(self) -> int:
        """Width of the reconstruction ``x̂`` (act_width + 1)."""
        return self.act_width + 1

    @property
    def dx_width(self) -> int:
        """Width of a difference ``Δx`` (act_width + 2)."""
        return self.act_width + 2

    @property
    def recon_width(self) -> int:
        """Width of one reconstruction value ``dequant(q)`` in the QPU's second stream."""
        return self.act_width + 3

    @property
    def safe_acc_width(self) -> int:
        """``bitlen(max_reduction · wmax · 2**(act_width + 1 - r0_min)) + 1`` (numerics §2.1).

        With Booth digits one sub-channel of a tile (the one whose digits straddle two chunks:
        its low digits in the previous chunk, its top digit first in the next, a middle one not
        yet) can reach 17/16 of its value bound in a partial sum (q = -120: -8 + -128 = -136), so
        the bound adds ``wmax · 2**(act_width + 1 - r0_min) / 16`` (the same width at every
        preset)."""
        wmax = (1 << (self.weight_width - 1)) - 1
        unit = 1 << (self.act_width + 1 - self.r0_min)
        bound = self.max_reduction * wmax * unit
        if self.digits == "booth":
            bound += -(-wmax * unit // 16)
        return bitlen(bound) + 1

    @property
    def baseline_acc_width(self) -> int:
        """Accumulator of the INT8×INT8 baseline: ``bitlen(max_reduction · 128 · wmax) + 1``."""
        wmax = (1 << (self.weight_width - 1)) - 1
        return bitlen(self.max_reduction * (1 << (self.weight_width - 1)) * wmax) + 1

    @property
    def acc_bits(self) -> int:
        """The accumulator width in use (explicit or derived)."""
        return self.safe_acc_width if self.acc_width is None else self.acc_width

    @property
    def ystate_width(self) -> int:
        """Bits of each stored running sum ``Y`` (numerics §2.5): ``acc_bits``, or with
        ``ystate_frac = g`` the ``act_width + 2 + g`` bits that hold twice the output range at
        ``g`` bits below its LSB."""
        if self.ystate_frac is None:
            return self.acc_bits
        return min(self.acc_bits, self.act_width + 2 + self.ystate_frac)

    def ystate_shift(self, sh):
        """The shift ``s`` (per output channel, from its requantization shift ``sh``) by which a
        stored ``Y`` is rounded: ``max(0, sh - mult_width - ystate_frac)``, 0 with
        ``ystate_frac`` None. Its LSB is then ``2**-g`` to ``2**-(g+1)`` of an output LSB
        (``2**(mult_width-1) <= m < 2**mult_width``)."""
        sh = np.asarray(sh, dtype=np.int64)
        if self.ystate_frac is None:
            return np.zeros_like(sh)
        return np.maximum(sh - self.mult_width - self.ystate_frac, 0)

    @property
    def digit_width(self) -> int:
        """Bits of one digit in a lane group: 2 (slice: the raw 2-bit pattern, read with the lane's
        signed flag) or 3 (Booth: the digit {-2..2} in two's complement)."""
        return 3 if self.digits == "booth" else 2

    @property
    def row_skew_max(self) -> int:
        """The largest skew of a row operand: row ``rows - 1`` by ``(rows - 1) // weight_hop``."""
        return (self.rows - 1) // self.weight_hop

    @property
    def col_skew_max(self) -> int:
        """The largest skew of a column operand: column ``cols - 1`` by ``(cols - 1) //
        act_hop``."""
        return (self.cols - 1) // self.act_hop

    def act_registered(self, col: int) -> bool:
        """Whether the PEs of array column ``col`` register the row operand they pass right."""
        return (col + 1) % self.act_hop == 0

    def weight_registered(self, row: int) -> bool:
        """Whether the PEs of array row ``row`` register the column operand they pass down (the
        bottom row's register, if any, leads nowhere and synthesis removes it)."""
        return (row + 1) % self.weight_hop == 0

    @property
    def exp_width(self) -> int:
        return EXP_WIDTH

    @property
    def max_exp(self) -> int:
        """Largest slice exponent in a group (``e_max + 6``)."""
        return self.e_max + 6

    @property
    def ln_max(self) -> int:
        """The longest LayerNorm row: the larger of ``ln_row_max`` and ``max_reduction``."""
        return max(self.max_reduction, self.ln_row_max or 0)

    @property
    def chan_width(self) -> int:
        """Width of a lane's channel index (weight row within a block)."""
        return max(1, bitlen(self.max_reduction - 1))

    @property
    def slices_max(self) -> int:
        """Most slice columns one tile can produce."""
        return 4 * self.max_reduction

    @property
    def sorter_compare_exchanges(self) -> int:
        n = self.sort_n
        lg = n.bit_length() - 1
        return n * lg * (lg + 1) // 4

    @property
    def peak_macs_per_cycle(self) -> int:
        """2-bit × weight multiply-adds per cycle of one core."""
        return self.rows * self.cols * self.lanes

    # ------------------------------------------------------------------ identity
    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["thr"] = list(self.thr)
        return d

    def hash(self) -> str:
        """A short stable hash of every parameter but the name. A parameter added after the
        hash was first published (:data:`HASH_IF_CHANGED`) enters it only when it differs from
        its default, so a configuration that builds the same hardware as before keeps its hash
        (and the stored reports that name it stay valid)."""
        d = self.to_dict()
        d.pop("name")
        for k in HASH_IF_CHANGED:
            if d[k] == self.fields()[k].default:
                d.pop(k)
        blob = json.dumps(d, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def replace(self, **changes) -> "Config":
        return dataclasses.replace(self, **changes)

    @classmethod
    def fields(cls) -> dict:
        return {f.name: f for f in dataclasses.fields(cls)}


#: The operating point ``dstar profile --sweep`` chose on the integer model of the trained digits
#: DiT (``reports/profile_sweep.md``): 3.50 bits at 42.1 dB [40.4, 43.8] against float.
THR_CHOSEN = (2, 7, 31)
BASE_OFFSET_CHOSEN = -2

#: The stored Y every preset keeps (numerics §2.5, issue 47): of the fractions
#: ``reports/state_quality.md`` measured at the operating point, the narrowest that keeps the
#: quality rule (g = 4: 41.6 dB [40.05, 43.2], 10/10; g = 2 and 0 fall to 39.9 and 39.1 on the
#: lower bound). 22 bits of Y in place of 33 at ``fpga`` and 38 at ``paper``.
YSTATE_FRAC_CHOSEN = 4

#: The datapath and quantization point every preset uses (numerics §4, issues 27, 28 and 47):
#: the choices the measurements made (``reports/pe_levers.md``, ``reports/qpu_packing.md``,
#: ``reports/profile_sweep.md``, ``reports/state_quality.md``). Each preset adds its number of
#: exponent bins.
CHOSEN = dict(digit_product="select", digits="booth", packer="bins", thr=THR_CHOSEN,
              base_offset=BASE_OFFSET_CHOSEN, ystate_frac=YSTATE_FRAC_CHOSEN)

# numerics §4.
PRESETS = {
    "tiny": dict(rows=4, cols=4, lanes=4, sort_n=8, max_reduction=64, vpu_lanes=4,
                 weight_hop=4, act_hop=4, pack_bins=4, **CHOSEN),
    "fpga": dict(rows=8, cols=8, lanes=4, sort_n=32, max_reduction=256, vpu_lanes=8,
                 weight_hop=8, act_hop=8, pack_bins=4, **CHOSEN),
    "paper": dict(rows=64, cols=64, lanes=4, sort_n=64, max_reduction=4608, vpu_lanes=64,
                  cores=32, weight_hop=8, act_hop=8, pack_bins=8, **CHOSEN),
}

#: The INT8 core's own choice (``datapath = "int8"``, issue 28, ``reports/pe_area.md``): its PE
#: without a pipeline stage is 5-7 % smaller and its critical path (1.99 ns at ``paper`` on
#: Nangate45) still shorter than the DSTAR PE's (2.52 ns), so a baseline at DSTAR's clock takes
#: it; it keeps no state, so no stored Y. :func:`preset` applies each to an INT8 configuration
#: unless the overrides give it.
INT8_CHOSEN = dict(pe_stages=0, ystate_frac=None)

#: Earlier defaults kept by name for the lever tables (``preset(name, variant=...)``, the CLI's
#: ``--variant``). ``initial``: the datapath and quantization point of every preset before
#: issue 27 (multiplying slice PEs, operands forwarded at every PE, no open groups, one base).
#: ``sort``: the default of issue 27, before the exponent bins of issue 28 (the sorting packer
#: with four open groups).
VARIANTS = {
    "initial": dict(digit_product="multiply", digits="slice", weight_hop=1, act_hop=1,
                    packer="sort", pack_bins=4, open_groups=0, thr=(1, 7, 31),
                    base_offset=None, ystate_frac=None),
    "sort": dict(packer="sort", pack_bins=4, open_groups=4),
}


def preset(name: str, variant: str | None = None, **overrides) -> Config:
    """The named preset (optionally one of its :data:`VARIANTS`), with parameter overrides.

    A preset's operand hops are capped at the array's size when ``rows``/``cols`` are
    overridden and the hops are not (``preset("fpga", rows=4)`` broadcasts over its 4 rows).
    An INT8 configuration (``datapath="int8"``) takes :data:`INT8_CHOSEN` where the overrides
    do not set it."""
    if name not in PRESETS:
        raise ConfigError(f"preset must be one of {sorted(PRESETS)}, not {name!r}")
    if variant is not None and variant not in VARIANTS:
        raise ConfigError(f"variant must be one of {sorted(VARIANTS)}, not {variant!r}")
    unknown = set(overrides) - set(Config.fields())
    if unknown:
        raise ConfigError(f"unknown parameter {sorted(unknown)[0]!r}; parameters are "
                          f"{sorted(k for k in Config.fields() if k != 'name')}")
    merged = {**PRESETS[name], **(VARIANTS[variant] if variant else {}), **overrides}
    if merged.get("datapath") == "int8":
        merged = {**merged, **{k: v for k, v in INT8_CHOSEN.items() if k not in overrides}}
    for hop, dim in (("weight_hop", "rows"), ("act_hop", "cols")):
        if hop not in overrides and isinstance(merged.get(dim), int):
            merged[hop] = max(1, min(merged.get(hop, 1), merged[dim]))
    return Config(**{**merged, "name": name})
