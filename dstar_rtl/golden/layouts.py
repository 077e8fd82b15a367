"""Record layouts of every stream that crosses a unit boundary (numerics §2.1).

A layout is an ordered list of fields ``(name, width, dims)``: ``width`` bits per element and
``dims`` a tuple of array dimensions (``()`` for a scalar). Packing puts the first field at bit 0
and, inside an array, element ``[0]`` (row-major) at the lowest bits. That is exactly how
``amaranth.lib.data.StructLayout``/``ArrayLayout`` lay out their members, so the RTL builds its
signatures from these lists (``rtl.layouts``) and a testbench packs and unpacks stream payloads with
:func:`pack` / :func:`unpack` without re-typing a width.

Signed fields carry a ``signed`` marker: ``(name, width, dims, True)``.
"""

from __future__ import annotations

from math import prod

import numpy as np

from dstar_rtl.golden.config import Config

__all__ = ["COUNTER_NAMES", "group_layout", "drain_layout", "recon_layout", "weight_load_layout",
           "subchannel_layout", "qpu_config_layout", "counters_layout",
           "baseline_group_layout", "int8_group_layout", "gmem_layout", "VPU_OPS",
           "vpu_cmd_layout", "vpu_in_layout", "vpu_out_layout", "layout_width", "pack", "unpack"]


def _f(name, width, dims=(), signed=False):
    return (name, int(width), tuple(dims), bool(signed))


def group_layout(cfg: Config) -> list:
    """One lane group (numerics §2.3): per row and lane a raw digit (``cfg.digit_width`` bits: a
    2-bit slice read with the lane's signed flag, or a 3-bit two's-complement Booth digit
    {-2..2}, whose lanes all have signed = 1), per lane channel, signed and valid, the absolute
    exponent, and the tile's first/last markers."""
    return [
        _f("digits", cfg.digit_width, (cfg.rows, cfg.lanes)),
        _f("channel", cfg.chan_width, (cfg.lanes,)),
        _f("signed", 1, (cfg.lanes,)),
        _f("valid", 1, (cfg.lanes,)),
        _f("exp", cfg.exp_width),
        _f("first", 1),
        _f("last", 1),
    ]


def baseline_group_layout(cfg: Config) -> list:
    """One beat of the INT8 baseline array: per row one signed weight-width activation and the
    channel whose weight row it multiplies, plus tile markers."""
    return [
        _f("act", cfg.weight_width, (cfg.rows,), signed=True),
        _f("channel", cfg.chan_width),
        _f("first", 1),
        _f("last", 1),
    ]


def int8_group_layout(cfg: Config) -> list:
    """One GMEM row of the INT8 core (numerics §2.8): a baseline beat (per row one INT8
    activation, the channel) with ``valid`` (0 only on the one group of an all-zero tile) and the
    tile's exponent ``exp`` (the same on every group of the tile)."""
    return [
        _f("act", cfg.weight_width, (cfg.rows,), signed=True),
        _f("channel", cfg.chan_width),
        _f("valid", 1),
        _f("exp", cfg.exp_width),
        _f("first", 1),
        _f("last", 1),
    ]


def gmem_layout(cfg: Config) -> list:
    """The core's GMEM row: a lane group (:func:`group_layout`) with the DSTAR datapath, an
    :func:`int8_group_layout` row with the INT8 one."""
    return int8_group_layout(cfg) if cfg.datapath == "int8" else group_layout(cfg)


def drain_layout(cfg: Config, baseline: bool = False) -> list:
    """One MPU drain beat: one row of ``cols`` accumulators, its row index and the tile's last row;
    with ``overflow_detect`` also the row's sticky overflow flags. ``baseline`` selects the INT8
    baseline array's accumulator width (it has no overflow flags)."""
    width = cfg.baseline_acc_width if baseline else cfg.acc_bits
    fields = [
        _f("acc", width, (cfg.cols,), signed=True),
        _f("row", max(1, (cfg.rows - 1).bit_length())),
        _f("last", 1),
    ]
    if cfg.overflow_detect and not baseline:
        fields.append(_f("ovf", 1, (cfg.cols,)))
    return fields


def weight_load_layout(cfg: Config) -> list:
    """One weight-buffer write: the weight row ``W[channel, 0:cols]``."""
    return [
        _f("w", cfg.weight_width, (cfg.cols,), signed=True),
        _f("channel", cfg.chan_width),
    ]


def recon_layout(cfg: Config) -> list:
    """One reconstruction beat of the QPU: ``dequant(q)`` of the T values of a sub-channel."""
    return [_f("value", cfg.recon_width, (cfg.rows,), signed=True)]


def subchannel_layout(cfg: Config) -> list:
    """One QPU input beat: the T differences of one input channel of a tile, and the tile's end."""
    return [_f("u", cfg.dx_width, (cfg.rows,), signed=True), _f("last", 1)]


def qpu_config_layout(cfg: Config) -> list:
    """The QPU's per-layer configuration word: static base ``B`` and ``thr2, thr4, thr6``."""
    return [_f("base_log2", max(1, cfg.act_frac.bit_length())), _f("thr", 7, (3,))]


#: The QPU's statistics counters (golden.schedule.Counters counts them), in numerics §2.3's order.
COUNTER_NAMES = ("subchannels", "subchannels_b2", "subchannels_b4", "subchannels_b6",
                 "subchannels_b8", "subchannels_zero", "saturated", "slice_columns",
                 "dropped_columns", "groups", "padded_lanes", "shifts", "shift_amount")


def counters_layout() -> list:
    """The QPU's statistics counters as one word: 32 bits each, in numerics §2.3's order."""
    return [_f(name, 32) for name in COUNTER_NAMES]


# VPU operation codes (numerics §2.7), in command order; `golden.vpu_stream` documents the operands.
VPU_OPS = ("softmax", "layernorm", "modulate", "gelu", "gated_residual", "acc_requant",
           "diff_delta", "xhat_update", "kv_amax", "kv_quant", "softmax_mx")


def vpu_param_width(cfg: Config) -> int:
    """Width of the command's ``param``: LayerNorm's ``eps_q`` (the widest) or the K/V shift."""
    from dstar_rtl.golden.vpu import vpu_tables
    return max(vpu_tables(cfg).widths["layernorm.eps"][0], 6)


def vpu_cmd_layout(cfg: Config) -> list:
    """One VPU command: the operation (index into :data:`VPU_OPS`), the row length ``n`` in
    elements (1 .. max_reduction; LayerNorm 1 .. ``cfg.ln_max``) and the operation's parameter
    (LayerNorm ``eps_q``, the ``kv_quant`` shift ``e``, ``softmax_mx``'s row max in
    ``act_width``-bit two's complement; 0 otherwise)."""
    return [
        _f("op", 4),
        _f("n", cfg.ln_max.bit_length()),
        _f("param", vpu_param_width(cfg)),
    ]


def vpu_operand_widths(cfg: Config) -> dict:
    """Widths of the VPU's per-lane operands ``a`` and ``b`` (signed) and ``c`` (signed)."""
    W, A = cfg.act_width, cfg.acc_bits
    return {"a": max(A, W + 1), "b": max(A, cfg.recon_width), "c": W}


def vpu_in_layout(cfg: Config) -> list:
    """One VPU input beat: ``vpu_lanes`` elements of a row (element ``k·vpu_lanes + l`` in lane
    ``l``; lanes past the row's end are ignored), each with operands ``a``, ``b``, ``c``, the
    requantization mantissa ``m`` and shift ``sh``, and the softmax ``mask`` bit."""
    L = cfg.vpu_lanes
    w = vpu_operand_widths(cfg)
    return [
        _f("a", w["a"], (L,), signed=True),
        _f("b", w["b"], (L,), signed=True),
        _f("c", w["c"], (L,), signed=True),
        _f("m", cfg.mult_width, (L,)),
        _f("sh", cfg.sh_max.bit_length(), (L,)),
        _f("mask", 1, (L,)),
    ]


def vpu_out_layout(cfg: Config) -> list:
    """One VPU output beat: per lane the result ``y`` (act format, ``P``, ``Δx``, ``x̂``, INT8
    ``w`` or the K/V shift ``e``), the running sum ``Y`` of ``acc_requant``, the saturation flags
    of ``y`` and ``Y``, and the row's last beat marker. Lanes past the row's end are 0."""
    L = cfg.vpu_lanes
    return [
        _f("y", cfg.dx_width, (L,), signed=True),
        _f("Y", cfg.acc_bits, (L,), signed=True),
        _f("sat", 1, (L,)),
        _f("Ysat", 1, (L,)),
        _f("last", 1),
    ]


def layout_width(layout) -> int:
    return sum(w * prod(d) for _, w, d, _ in layout)


def pack(layout, values: dict) -> int:
    """Pack a dict of field values (scalars or nested sequences/arrays) into one integer."""
    out, off = 0, 0
    for name, width, dims, _signed in layout:
        arr = np.asarray(values[name], dtype=object).reshape(-1) if dims else [values[name]]
        n = prod(dims)
        if len(arr) != n:
            raise ValueError(f"field {name!r} needs {n} elements, got {len(arr)}")
        mask = (1 << width) - 1
        for v in arr:
            out |= (int(v) & mask) << off
            off += width
    return out


def unpack(layout, word: int) -> dict:
    """Inverse of :func:`pack`; arrays come back as int64 NumPy arrays (object arrays of Python
    integers for fields wider than 63 bits), signed fields sign-extended."""
    res, off = {}, 0
    word = int(word)
    for name, width, dims, signed in layout:
        n = prod(dims)
        vals = []
        for _ in range(n):
            v = (word >> off) & ((1 << width) - 1)
            if signed and v >> (width - 1):
                v -= 1 << width
            vals.append(v)
            off += width
        dtype = np.int64 if width <= 63 else object
        res[name] = np.array(vals, dtype=dtype).reshape(dims) if dims else vals[0]
    return res
