"""The DSTAR core's instruction set: buffers, command encoding, semantics (docs/core.md).

This module is the single source of the core's command words, buffer row layouts and counter
order; the RTL (:mod:`rtl.core`), the compiler (:mod:`program.compiler`), the ISA-level
executor (:mod:`program.executor`) and the testbenches import it. It depends only on the golden
configuration and layouts.

Tile size ``T = rows = cols = vpu_lanes``; every buffer is addressed in rows.

Buffers
-------
======  ==================================================  ============================
id      row                                                 written / read by
======  ==================================================  ============================
ABUF    ``T`` activations (act_width, signed), one *lane*   LOAD/STORE, QUANT, GEMM, VROW
        per token of a tile
XBUF    ``T`` values of ``x̂`` (act_width + 1, signed)       LOAD/STORE, QUANT (diff)
YBUF    ``T`` running sums ``Y`` (ystate_width, signed)     LOAD/STORE, GEMM (accum)
WMEM    ``cols`` INT8 weights of one input channel          LOAD, VROW (kv_quant); GEMM
RBUF    ``T`` × (m, sh, bias) of output channels            LOAD; GEMM
VBUF    ``T`` act values of a per-channel vector            LOAD; VROW (b, c operands)
MASK    one bit per key block of a query tile               LOAD; VROW (softmax)
CNT     one 32-bit counter (:data:`COUNTERS`)               STORE only (read-only)
======  ==================================================  ============================

**Tensors in ABUF.** A tensor of ``N`` tokens × ``C`` channels at base ``b`` keeps element
``(t, c)`` in row ``b + (t // T)·C + c``, lane ``t % T``: one row is a *sub-channel* (the ``T``
tokens of a tile at one channel). Rows ``r .. r+T-1`` at lane ``t`` are a *token segment*. The
hardware stores ABUF skewed over ``T`` banks (element of row ``r``, lane ``t`` in bank
``(r + t) mod T``) so both are one access per cycle; the skew is invisible at this level.
Vectors in VBUF and rows of RBUF hold channel ``k·T + l`` of block ``k`` in lane ``l``.
A GMEM group stream (one QUANT) occupies consecutive rows, one group
(:func:`golden.layouts.group_layout`) per row, the last one marked ``last``.

Commands
--------
Every command is :func:`cmd_bits` bits: :data:`CMD_BITS` (128) at every preset, or
:data:`CMD_BITS_WIDE` (160, five host words) when a deep ABUF's address fields no longer fit 128
bits (ABUF beyond 2**16 rows). The header ``op`` (5 bits), ``wait`` and ``signal``
(:data:`SEMAPHORES` bits each, masks over that many counting semaphores, 0..15 each), then the
opcode's fields (:func:`cmd_layout`). The dispatcher reads commands in order. A command issues
when its engine is idle, every semaphore in ``wait`` is non-zero (they are decremented at
issue), and: H and V commands wait until every engine is idle and block the dispatcher while
they run; Q, M and D commands may run together (the compiler uses the semaphores for the group
double buffer and the DRAM transfers). A VROW with ``overlap`` waits only for H and V to be
idle, and Q, M and D commands issue while it runs: the program orders it against them with
semaphores. An
engine increments the semaphores of ``signal`` when the command's last write has landed (a GEMM with
``rmax``: when RMAX holds its maxima).

=========  ======  ============================================================================
opcode     engine  semantics
=========  ======  ============================================================================
NOP        -       nothing.
END        -       wait until every engine is idle; the core reports ``done``.
BARRIER    -       wait until every engine is idle.
LOAD       H       ``zero``: rows ``addr .. addr+count-1`` of ``buf`` := 0 (no host words);
                   otherwise those rows from the host stream, :func:`host_words_per_row` 32-bit
                   words each, least significant first.
STORE      H       rows ``addr .. addr+count-1`` of ``buf`` to the host stream, same packing.
QCFG       Q       the QPU's base ``B`` and thresholds ``thr2, thr4, thr6`` for later QUANTs.
QUANT      Q       one tile: for ``c`` in ``0 .. nch-1``, ``x = ABUF[src + c]``; ``u = x -
                   XBUF[xsrc + c]`` if ``diff`` else ``x``; the QPU quantizes ``u`` (the last
                   ``c`` ends the tile); its groups go to ``GMEM[gdst ...]`` in order; if ``diff``,
                   ``XBUF[xsrc + c] := sat(XBUF[xsrc + c] + dequant(q))`` (act_width + 1).
                   Done when the tile's last group is written. ``pcache`` counts the groups as
                   P-cache writes.
GEMM       M       replays ``GMEM[gsrc ...]`` up to its ``last`` group through the MPU, weight
                   row of lane channel ``ch`` = ``WMEM[wbase + ch]``; for each token ``i`` of the
                   tile: ``Y = YBUF[ysrc + i]`` if ``accum`` else 0, ``(y, Y') =
                   acc_requant(Y, acc_i, m, sh - s, bias)`` with ``(m, sh, bias) = RBUF[rrow]``
                   and ``s = SREG[sreg]`` if ``use_sreg`` else 0; ``y`` to the token segment of
                   ABUF rows ``dst .. dst+T-1`` lane ``i``; if ``accum``, ``YBUF[ysrc + i] := Y'``.
                   ``pcache`` counts the replayed groups as P-cache reads. ``rmax`` 1: the row
                   maxima ``RMAX[i] := max_j y_ij``; 2: ``RMAX[i] := max(RMAX[i], max_j y_ij)``
                   (a softmax_mx VROW takes them); 0: RMAX unchanged.
VROW       V       VPU operation ``vop`` (:data:`golden.layouts.VPU_OPS`, not ``acc_requant``,
                   ``diff_delta``, ``xhat_update``) over rows, ``cols`` selects the walk:
                   *token rows* (``cols = 0``): for token ``r`` in ``0 .. R-1`` one VPU command of
                   ``n`` elements; beat ``k`` reads operand ``a`` from ABUF token segment at rows
                   ``a + (r // T)·C + k·T``, lane ``r % T`` (``c`` likewise from base ``c`` for
                   gated_residual), ``b`` (and ``c`` for modulate) from ``VBUF[vb + k]``
                   (``VBUF[c + k]``), the softmax mask bit of every lane from bit ``k`` of
                   ``MASK[vb + r // T]``; results to the token segment of ``dst`` likewise (ABUF),
                   or ``WMEM[dst + k·R + r]`` (kv_quant).
                   *sub-channels* (``cols = 1``): for tile ``j`` in ``0 .. R-1`` one VPU command
                   of ``n·T`` elements; beat ``k`` reads ``ABUF[a + j·C + k]``; results to
                   ``WMEM[dst + j·n + k]`` (kv_quant).
                   ``kv_amax`` continues its running max over every command of the VROW and
                   writes the shift of the last to ``SREG[sreg]``; ``kv_quant`` takes its shift
                   from ``SREG[sreg]``; ``softmax_mx`` takes row ``r``'s max from
                   ``RMAX[r % T]`` as it was when the VROW issued (the softmax mask like
                   ``softmax``); other operations take ``param`` from the VPARAM register.
                   ``overlap``: runs beside Q and M (above); not for ``gated_residual``
                   (``operand``), whose two ABUF operands take the port Q reads.
VPARAM     V       the VROW parameter register := ``value`` (LayerNorm's ``eps_q``).
DLOAD      D       rows ``addr .. addr+count-1`` of ``buf`` (:data:`DRAM_BUFFERS`) := the DRAM
                   image (below) at beat ``dram`` of the DRAM port. Done when the last row is
                   written. ``groups`` (GMEM only): a group stream (below): its header beat at
                   ``dram`` gives its rows ``n`` (more than ``count``: ``dram``), which are
                   loaded from beat ``dram + 1``.
DSTORE     D       the DRAM image of rows ``addr .. addr+count-1`` of ``buf`` (one of
                   :data:`DSTORABLE`) to beat ``dram``: only the image's bytes are
                   written (the last beat's bytes past it keep their value). Done when DRAM
                   has acknowledged every write. ``groups`` (GMEM only): the group stream
                   from ``addr`` through its first ``last`` group (at most ``count`` rows,
                   ``n``) from beat ``dram + 1``, then its header beat at ``dram``.
STEP       -       the step phase := phase + 1, or 0 when that reaches ``interval``.
SKIP       -       on a reuse step (phase != 0) the next ``count`` commands are discarded.
=========  ======  ============================================================================

**The D engine** exists when the configuration has a DRAM port (``cfg.dram_width`` bits a
beat; without one DLOAD and DSTORE are ``opcode``). Like Q and M it runs beside the other
engines (H and a VROW without ``overlap`` wait for it, BARRIER and END too) and is ordered
against them by the semaphores; it takes one command at a time, in order.

**DRAM image.** A row of ``buf`` takes :func:`dram_row_bytes` bytes in DRAM (its bits,
:func:`dram_row_layout`, least significant first, the last byte's spare bits 0); the ``count``
rows of one transfer lie one after another from byte ``dram · beat_bytes``, so a transfer
moves :func:`dram_beats` beats and the rows need not meet beat boundaries. ``dram`` counts
beats: a transfer starts on a beat. A *group stream* (``groups``, the P cache: its length is
the data's) is one header beat, the row count ``n`` in its low 32 bits and zeros above, then
the image of its ``n`` rows: ``1 + dram_beats(n)`` beats.

On the INT8 core (``cfg.datapath == "int8"``, numerics §2.8) QCFG does nothing, QUANT runs the
INT8 quantizer (one exponent per tile, one group per non-zero sub-channel; ``diff`` is
``operand``) and GEMM replays those groups through the INT8 array, its shift ``max(0, sh - s -
e)`` with the tile's exponent ``e``.

Errors (sticky code on the status port; the core stops issuing and then consumes and discards
every further command; reset clears it): :data:`ERRORS`. ``opcode``: an unknown opcode;
``address``: a row outside its buffer (checked before the command starts; a GMEM replay or group
write running past the end, a weight row past WMEM while it runs); ``operand``: an illegal
field (VROW ``vop`` not in :data:`VROW_OPS`, ``n`` or ``R`` 0, a row longer than
``max_reduction``, the sub-channel walk for an operation writing ABUF, STORE of a buffer not in
:data:`STORABLE`, DSTORE of one not in :data:`DSTORABLE`, ``groups`` on a buffer but GMEM,
LOAD of CNT, QUANT ``nch`` 0 or above ``max_reduction``); ``vpu`` / ``qpu``: the unit refused
a command or configuration; ``shift``: ``sh - SREG`` negative; ``semaphore``: a count above 15,
or a wait no engine can satisfy any more (every engine idle); ``dram``: the DRAM port answered a
read or write with an error response, or a group stream's header gives more rows than its
DLOAD's ``count``. DLOAD and DSTORE with a ``count`` of 0 do nothing; ``address`` also covers a
transfer past the port's address space (``dram + beats > 2**DRAM_ADDR_BITS``, a group
stream's header and ``count`` rows counted).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, fields

import numpy as np

from dstar_rtl.golden.config import (
    CORE_ADDR_BITS,
    CORE_BUFFER_ROWS,
    CORE_WIDE_ROWS,
    Config,
    bitlen,
    core_rows_limit,
)
from dstar_rtl.golden.layouts import (
    VPU_OPS,
    gmem_layout,
    layout_width,
    pack,
    qpu_config_layout,
    unpack,
)
from dstar_rtl.golden.schedule import COUNTER_NAMES

__all__ = ["CoreConfig", "CORE_PRESETS", "core_preset", "OPCODES", "BUFFERS", "ERRORS",
           "COUNTERS", "CMD_BITS", "CMD_BITS_WIDE", "cmd_bits", "HOST_WORD", "ADDR_BITS",
           "SEMAPHORES", "SREGS", "Cmd",
           "cmd_layout", "header_layout", "assemble", "disassemble", "encode", "decode",
           "format_cmd", "parse_cmd", "row_layout", "row_width", "host_words_per_row",
           "row_to_words", "words_to_row", "buffer_depth", "ENGINE", "VROW_OPS", "status_layout",
           "STORABLE", "check_core", "core_for", "CYCLE_COUNTERS", "addr_bits", "abuf_bits",
           "rbuf_bits", "vbuf_bits", "vpu_row_excess",
           "tensor_rows", "rows_tensor", "ysum_rows", "rows_ysum", "store_counters",
           "DRAM_BUFFERS", "DSTORABLE", "DRAM_ADDR_BITS", "dram_row_layout", "dram_row_bytes",
           "beat_bytes",
           "dram_beats", "rows_to_bytes", "bytes_to_rows", "buf_names", "sram_bytes"]

CMD_BITS = 128          # one command, every configuration whose fields fit it
CMD_BITS_WIDE = 160     # one command of a configuration with a deeper ABUF (cmd_bits)
HOST_WORD = 32          # host stream word
ADDR_BITS = CORE_ADDR_BITS   # the narrow address and count fields (addr_bits: the wide ones)
SEMAPHORES = 6          # counting semaphores (the header's wait and signal masks)
SREGS = 16              # K/V shift registers
SEM_BITS = 4            # each semaphore counts 0..15

OPCODES = ("NOP", "END", "BARRIER", "LOAD", "STORE", "QCFG", "QUANT", "GEMM", "VROW",
           "VPARAM", "STEP", "SKIP", "DLOAD", "DSTORE")
ENGINE = {"LOAD": "H", "STORE": "H", "QCFG": "Q", "QUANT": "Q", "GEMM": "M", "VROW": "V",
          "VPARAM": "V", "DLOAD": "D", "DSTORE": "D"}
BUFFERS = ("ABUF", "XBUF", "YBUF", "WMEM", "RBUF", "VBUF", "MASK", "CNT")
STORABLE = ("ABUF", "XBUF", "YBUF", "CNT")
#: The buffers DLOAD and DSTORE move (their ``buf`` field indexes this tuple): every buffer,
#: GMEM (group rows: the P cache) in CNT's place.
DRAM_BUFFERS = ("ABUF", "XBUF", "YBUF", "WMEM", "RBUF", "VBUF", "MASK", "GMEM")
#: The buffers DSTORE moves: those the core writes (WMEM, RBUF, VBUF and MASK are loaded, never
#: stored: WMEM's read ports are the MPU's).
DSTORABLE = ("ABUF", "XBUF", "YBUF", "GMEM")
DRAM_ADDR_BITS = 32     # DLOAD/DSTORE ``dram``: a DRAM address in beats of the port
VROW_OPS = ("softmax", "layernorm", "modulate", "gelu", "gated_residual", "kv_amax", "kv_quant",
            "softmax_mx")

#: Sticky error codes (0 = none).
ERRORS = ("none", "opcode", "address", "operand", "vpu", "qpu", "shift", "semaphore",
          "dram")

#: Performance counters (32-bit, saturating) in CNT order. Cycle counters: ``cycles`` since
#: reset; per engine ``busy_E`` (a command running) and ``stall_E`` (a command of that engine
#: waiting at the dispatcher). The rest are event counts the ISA executor reproduces exactly.
COUNTERS = (
    ("cycles", "busy_H", "busy_Q", "busy_M", "busy_V", "busy_D", "stall_H", "stall_Q",
     "stall_M", "stall_V", "stall_D", "commands", "host_words_in", "host_words_out",
     "dram_read_beats", "dram_write_beats",
     "groups_replayed", "lanes_valid", "pcache_groups_written", "pcache_groups_read",
     "abuf_reads", "abuf_writes", "xbuf_reads", "xbuf_writes", "ybuf_reads", "ybuf_writes",
     "wmem_writes", "gmem_writes", "vpu_rows", "vpu_beats", "vpu_saturated", "y_saturated",
     "ysum_saturated")
    + tuple(f"qpu_{n}" for n in COUNTER_NAMES))
CYCLE_COUNTERS = COUNTERS[:11]


def _f(name, width, dims=(), signed=False):
    return (name, int(width), tuple(dims), bool(signed))


# ================================================================================ sizes
@dataclass(frozen=True)
class CoreConfig:
    """Buffer depths (rows) of the core; checked against a program by the compiler.

    WMEM, XBUF, YBUF and GMEM have at most ``2**CORE_WIDE_ADDR_BITS`` rows, ABUF
    ``2**CORE_ABUF_ADDR_BITS``, RBUF and VBUF ``2**CORE_PARAM_ADDR_BITS``, MASK ``2**ADDR_BITS``
    (:func:`golden.config.core_rows_limit`).
    """

    abuf_rows: int = 4096
    xbuf_rows: int = 1024
    ybuf_rows: int = 1024
    wmem_rows: int = 2048
    gmem_rows: int = 2048
    rbuf_rows: int = 128
    vbuf_rows: int = 128
    mask_rows: int = 64

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            top = core_rows_limit(f.name)
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= top:
                raise ValueError(f"CoreConfig.{f.name} must be an integer in [1, {top}], "
                                 f"not {v!r}")

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


CORE_PRESETS = {
    "tiny": CoreConfig(abuf_rows=2048, xbuf_rows=512, ybuf_rows=512, wmem_rows=1024,
                       gmem_rows=1024, rbuf_rows=64, vbuf_rows=64, mask_rows=32),
    "fpga": CoreConfig(abuf_rows=4096, xbuf_rows=1024, ybuf_rows=1024, wmem_rows=2048,
                       gmem_rows=2048, rbuf_rows=128, vbuf_rows=64, mask_rows=64),
    "paper": CoreConfig(abuf_rows=16384, xbuf_rows=8192, ybuf_rows=8192, wmem_rows=16384,
                        gmem_rows=16384, rbuf_rows=1024, vbuf_rows=512, mask_rows=512),
}


def core_preset(name: str, **overrides) -> CoreConfig:
    if name not in CORE_PRESETS:
        raise ValueError(f"core preset must be one of {sorted(CORE_PRESETS)}, not {name!r}")
    d = CORE_PRESETS[name].to_dict()
    d.update(overrides)
    return CoreConfig(**d)


@functools.lru_cache(maxsize=256)
def core_for(cfg: Config) -> CoreConfig:
    """The buffer depths used for ``cfg``: those ``cfg`` sets (``abuf_rows``, ... of
    :data:`golden.config.CORE_BUFFER_ROWS`), the others from the core preset of the same name,
    else from the default :class:`CoreConfig` (memoized: both are frozen)."""
    base = CORE_PRESETS.get(cfg.name, CoreConfig())
    return dataclasses.replace(base, **{b: getattr(cfg, b) for b in CORE_BUFFER_ROWS
                                        if getattr(cfg, b) is not None})


def check_core(cfg: Config):
    """The core needs ``rows == cols == vpu_lanes`` (the tile size T); raise otherwise."""
    if not (cfg.rows == cfg.cols == cfg.vpu_lanes):
        raise ValueError(f"the core needs rows == cols == vpu_lanes (the tile size); "
                         f"{cfg.name!r} has rows {cfg.rows}, cols {cfg.cols}, "
                         f"vpu_lanes {cfg.vpu_lanes}")


# ============================================================================ buffer rows
def row_layout(cfg: Config, buf: str) -> list:
    """Golden layout of one row of ``buf`` (the order the host words carry it)."""
    T = cfg.tile
    if buf == "ABUF":
        return [_f("v", cfg.act_width, (T,), True)]
    if buf == "XBUF":
        return [_f("v", cfg.xhat_width, (T,), True)]
    if buf == "YBUF":
        return [_f("v", cfg.ystate_width, (T,), True)]
    if buf == "WMEM":
        return [_f("w", cfg.weight_width, (cfg.cols,), True)]
    if buf == "RBUF":
        return [_f("m", cfg.mult_width, (T,)), _f("sh", bitlen(cfg.sh_max), (T,)),
                _f("bias", cfg.act_width, (T,), True)]
    if buf == "VBUF":
        return [_f("v", cfg.act_width, (T,), True)]
    if buf == "MASK":
        return [_f("bits", max(1, math.ceil(cfg.max_reduction / T)))]
    if buf == "CNT":
        return [_f("count", 32)]
    raise ValueError(f"buf must be one of {BUFFERS}, not {buf!r}")


def row_width(cfg: Config, buf: str) -> int:
    return layout_width(row_layout(cfg, buf))


def host_words_per_row(cfg: Config, buf: str) -> int:
    return -(-row_width(cfg, buf) // HOST_WORD)


def dram_row_layout(cfg: Config, buf: str) -> list:
    """The layout of one row of ``buf`` (a name of :data:`DRAM_BUFFERS`) as DLOAD and DSTORE
    move it: :func:`row_layout`, or a GMEM group (:func:`golden.layouts.gmem_layout`)."""
    if buf == "GMEM":
        return gmem_layout(cfg)
    if buf not in DRAM_BUFFERS:
        raise ValueError(f"buf must be one of {DRAM_BUFFERS}, not {buf!r}")
    return row_layout(cfg, buf)


def dram_row_bytes(cfg: Config, buf: str) -> int:
    """Bytes one row of ``buf`` takes in DRAM: its bits rounded up to whole bytes."""
    return -(-layout_width(dram_row_layout(cfg, buf)) // 8)


def beat_bytes(cfg: Config) -> int:
    """Bytes of one beat of the DRAM port (``cfg.dram_width / 8``); 0 without a port."""
    return cfg.dram_width // 8


def dram_beats(cfg: Config, buf: str, count: int) -> int:
    """Beats a DLOAD or DSTORE of ``count`` rows of ``buf`` moves: ``ceil(count · row bytes /
    beat bytes)`` (module docstring, "DRAM image")."""
    return -(-count * dram_row_bytes(cfg, buf) // beat_bytes(cfg))


def rows_to_bytes(cfg: Config, buf: str, words) -> bytes:
    """Packed rows of ``buf`` (integers of :func:`dram_row_layout`) → their DRAM image:
    each row in :func:`dram_row_bytes` bytes, least significant first, rows one after another."""
    n = dram_row_bytes(cfg, buf)
    return b"".join(int(w).to_bytes(n, "little") for w in words)


def bytes_to_rows(cfg: Config, buf: str, image: bytes) -> list:
    """Inverse of :func:`rows_to_bytes` (the padding bits of a row's last byte dropped)."""
    n = dram_row_bytes(cfg, buf)
    mask = (1 << layout_width(dram_row_layout(cfg, buf))) - 1
    return [int.from_bytes(image[i:i + n], "little") & mask for i in range(0, len(image), n)]


def sram_bytes(cfg: Config) -> dict:
    """``{buffer: bytes}`` of the on-chip buffers ``cfg``'s core builds (:func:`core_for`
    depths × row bits; GMEM's rows are groups), CNT and the registers left out."""
    core = core_for(cfg)
    return {b: buffer_depth(core, b) * layout_width(dram_row_layout(cfg, b)) // 8
            for b in DRAM_BUFFERS}


def buffer_depth(core: CoreConfig, buf: str) -> int:
    if buf == "CNT":
        return len(COUNTERS)
    return getattr(core, buf.lower() + "_rows")


def row_to_words(cfg: Config, buf: str, values: dict) -> list:
    """One row (dict of field values) → its host words."""
    word = pack(row_layout(cfg, buf), values)
    n = host_words_per_row(cfg, buf)
    return [(word >> (HOST_WORD * i)) & ((1 << HOST_WORD) - 1) for i in range(n)]


def words_to_row(cfg: Config, buf: str, words) -> dict:
    word = sum(int(w) << (HOST_WORD * i) for i, w in enumerate(words))
    return unpack(row_layout(cfg, buf), word)


def tensor_rows(t, T: int) -> np.ndarray:
    """An (N, C) tensor → its ABUF / XBUF rows (N/T·C, T): row ``(token // T)·C + c``, lane
    ``token % T`` (module docstring, "Tensors in ABUF")."""
    t = np.asarray(t, np.int64)
    N, C = t.shape
    return t.reshape(N // T, T, C).transpose(0, 2, 1).reshape(N // T * C, T)


def rows_tensor(rows, N: int, T: int) -> np.ndarray:
    """Inverse of :func:`tensor_rows` for ``N`` tokens."""
    rows = np.asarray(rows, np.int64)
    C = len(rows) * T // N
    return rows.reshape(N // T, C, T).transpose(0, 2, 1).reshape(N, C)


def ysum_rows(Y, T: int) -> np.ndarray:
    """An (N, C) running sum → its YBUF rows: row ``(tile·(C/T) + block)·T + token``, lane the
    channel in the block (the order the GEMMs of a layer write)."""
    Y = np.asarray(Y, np.int64)
    N, C = Y.shape
    return Y.reshape(N // T, T, C // T, T).transpose(0, 2, 1, 3).reshape(-1, T)


def rows_ysum(rows, N: int, T: int) -> np.ndarray:
    """Inverse of :func:`ysum_rows` for ``N`` tokens."""
    rows = np.asarray(rows, np.int64)
    C = len(rows) * T // N
    return rows.reshape(N // T, C // T, T, T).transpose(0, 2, 1, 3).reshape(N, C)


# ================================================================================ commands
def status_layout() -> list:
    """The core's ``status`` port: ``done`` (END reached), ``busy`` (an engine runs), ``error``
    (index into :data:`ERRORS`), ``error_index`` (the failing command's position in the
    stream), ``phase`` (the step phase)."""
    return [_f("done", 1), _f("busy", 1), _f("error", bitlen(len(ERRORS) - 1)),
            _f("error_index", 32), _f("phase", 8)]


def header_layout() -> list:
    return [_f("op", 5), _f("wait", SEMAPHORES), _f("signal", SEMAPHORES)]


def vpu_row_excess(cfg: Config, op: str, n: int, cols: int) -> str | None:
    """Why a VROW of operation ``op`` (a name of :data:`golden.layouts.VPU_OPS`) with row field
    ``n`` and walk ``cols`` makes VPU rows the core refuses (``operand``), or None: a row of
    ``n·T`` elements (sub-channel walk) or ``n`` (token rows) longer than ``max_reduction``, a
    LayerNorm token row longer than ``ln_row_max`` (:attr:`golden.config.Config.ln_max`)."""
    elems = n * cfg.tile if cols else n
    ln = op == "layernorm" and not cols
    bound, name = (cfg.ln_max, "ln_row_max") if ln else (cfg.max_reduction, "max_reduction")
    if elems <= bound:
        return None
    return f"VROW {op}: a VPU row of {elems} elements exceeds {name} {bound}"


@functools.lru_cache(maxsize=256)
def cmd_bits(cfg: Config) -> int:
    """The command width of ``cfg``'s core: :data:`CMD_BITS` when every opcode's fields fit it
    (every preset), else :data:`CMD_BITS_WIDE` (an ABUF deeper than ``2**16`` rows widens
    VROW's three ABUF fields past 128 bits)."""
    need = layout_width(header_layout()) + max(
        (sum(w * (math.prod(d) if d else 1) for _n, w, d, _s in cmd_layout(cfg, op))
         for op in OPCODES), default=0)
    if need > CMD_BITS_WIDE:        # the address limits of golden.config keep it below
        raise ValueError(f"commands of {need} bits exceed {CMD_BITS_WIDE}")
    return CMD_BITS if need <= CMD_BITS else CMD_BITS_WIDE


def addr_bits(cfg: Config) -> int:
    """Width of the wide address fields (every LOAD/STORE address and count, QUANT ``xsrc`` and
    ``gdst``, GEMM ``gsrc``, ``wbase`` and ``ysrc``): :data:`ADDR_BITS`, or more when a WMEM,
    XBUF, YBUF, GMEM, ABUF, RBUF or VBUF of ``cfg``'s core (:func:`core_for`) is deeper than
    ``2**ADDR_BITS`` (a LOAD or STORE addresses any buffer)."""
    core = core_for(cfg)
    deepest = max(getattr(core, b) for b in (*CORE_WIDE_ROWS, "abuf_rows", "rbuf_rows",
                                             "vbuf_rows"))
    return max(ADDR_BITS, bitlen(deepest - 1))


def rbuf_bits(cfg: Config) -> int:
    """Width of GEMM's ``rrow``: :data:`ADDR_BITS`, or RBUF's when ``cfg``'s core has a deeper
    one (at most ``CORE_PARAM_ADDR_BITS``)."""
    return max(ADDR_BITS, bitlen(core_for(cfg).rbuf_rows - 1))


def vbuf_bits(cfg: Config) -> int:
    """Width of VROW's ``vb`` (a VBUF row, or the MASK row of a softmax): :data:`ADDR_BITS`, or
    VBUF's when ``cfg``'s core has a deeper one (at most ``CORE_PARAM_ADDR_BITS``; VROW's ``c``,
    modulate's VBUF row, is at least as wide)."""
    return max(ADDR_BITS, bitlen(core_for(cfg).vbuf_rows - 1))


def abuf_bits(cfg: Config) -> int:
    """Width of the ABUF address fields (QUANT ``src``, GEMM ``dst``, VROW ``a``, ``c`` and
    ``dst``): :data:`ADDR_BITS`, or more when ``cfg``'s core has a deeper ABUF (at most
    ``CORE_ABUF_ADDR_BITS``; VROW's ``c`` and ``dst`` also address VBUF and WMEM)."""
    return max(ADDR_BITS, bitlen(core_for(cfg).abuf_rows - 1))


def cmd_layout(cfg: Config, op: str) -> list:
    """Field layout of opcode ``op`` after the header (bit 13 on). Narrow fields have
    :data:`ADDR_BITS` bits, ABUF addresses :func:`abuf_bits`, GEMM ``rrow`` :func:`rbuf_bits`,
    VROW ``vb`` :func:`vbuf_bits`, wide ones :func:`addr_bits` (each the narrow width at every
    preset). A new list each call (the layouts are memoized per configuration)."""
    return list(_cmd_layout(cfg, op))


@functools.lru_cache(maxsize=1024)
def _cmd_layout(cfg: Config, op: str) -> tuple:
    return tuple(_cmd_layout_of(cfg, op))


def _cmd_layout_of(cfg: Config, op: str) -> list:
    A, W, B = ADDR_BITS, addr_bits(cfg), abuf_bits(cfg)
    RB, VB = rbuf_bits(cfg), vbuf_bits(cfg)
    if op in ("NOP", "END", "BARRIER"):
        return []
    if op == "LOAD":
        return [_f("buf", 3), _f("zero", 1), _f("addr", W), _f("count", W)]
    if op == "STORE":
        return [_f("buf", 3), _f("addr", W), _f("count", W)]
    if op == "QCFG":
        return [(n, w, d, s) for n, w, d, s in qpu_config_layout(cfg)]
    if op == "QUANT":
        return [_f("src", B), _f("xsrc", W), _f("nch", A), _f("gdst", W), _f("diff", 1),
                _f("pcache", 1)]
    if op == "GEMM":
        return [_f("gsrc", W), _f("wbase", W), _f("ysrc", W), _f("rrow", RB), _f("dst", B),
                _f("accum", 1), _f("use_sreg", 1), _f("sreg", 4), _f("pcache", 1),
                _f("rmax", 2)]
    if op == "VROW":
        return [_f("vop", 4), _f("cols", 1), _f("R", A), _f("n", A), _f("a", B), _f("C", A),
                _f("c", max(B, VB)), _f("vb", VB), _f("dst", B), _f("sreg", 4),
                _f("overlap", 1)]
    if op in ("DLOAD", "DSTORE"):
        return [_f("buf", 3), _f("groups", 1), _f("addr", W), _f("count", W),
                _f("dram", DRAM_ADDR_BITS)]
    if op == "VPARAM":
        return [_f("value", 64)]
    if op == "STEP":
        return [_f("interval", 8)]
    if op == "SKIP":
        return [_f("count", A)]
    raise ValueError(f"op must be one of {OPCODES}, not {op!r}")


@dataclass
class Cmd:
    """One command: ``op``, semaphore masks and the opcode's fields (dict)."""

    op: str
    args: dict
    wait: int = 0
    signal: int = 0

    def __getattr__(self, k):
        try:
            return self.__dict__["args"][k]
        except KeyError:
            raise AttributeError(k) from None


def store_counters() -> Cmd:
    """The STORE of every counter (CNT rows ``0 .. len(COUNTERS)-1``, one word each): a
    snapshot of the counters as the command starts."""
    return Cmd("STORE", dict(buf=BUFFERS.index("CNT"), addr=0, count=len(COUNTERS)))


def _check_fields(cfg: Config, cmd: Cmd) -> list:
    lay = cmd_layout(cfg, cmd.op)
    names = [f[0] for f in lay]
    extra = set(cmd.args) - set(names)
    if extra:
        raise ValueError(f"{cmd.op} has no field(s) {sorted(extra)}; fields are {names}")
    for name, w, dims, _s in lay:
        v = cmd.args.get(name, 0)
        vals = np.asarray(v).reshape(-1) if dims else [v]
        for x in vals:
            if not 0 <= int(x) < 1 << w:
                raise ValueError(f"{cmd.op}.{name} = {int(x)} does not fit in {w} bits "
                                 f"(allowed 0..{(1 << w) - 1})")
    for k, v in (("wait", cmd.wait), ("signal", cmd.signal)):
        if not 0 <= v < 1 << SEMAPHORES:
            raise ValueError(f"{cmd.op}.{k} = {v} is not a mask over {SEMAPHORES} semaphores")
    return lay


def encode(cfg: Config, cmd: Cmd) -> int:
    """One command → its :func:`cmd_bits`-bit integer."""
    if cmd.op not in OPCODES:
        raise ValueError(f"op must be one of {OPCODES}, not {cmd.op!r}")
    lay = _check_fields(cfg, cmd)
    head = pack(header_layout(), dict(op=OPCODES.index(cmd.op), wait=cmd.wait,
                                      signal=cmd.signal))
    body = pack(lay, {f[0]: cmd.args.get(f[0], 0 if not f[2] else [0] * math.prod(f[2]))
                      for f in lay}) if lay else 0
    return head | (body << layout_width(header_layout()))


def decode(cfg: Config, word: int) -> Cmd:
    """Inverse of :func:`encode`; an unknown opcode raises ValueError."""
    word = int(word)
    h = unpack(header_layout(), word)
    if h["op"] >= len(OPCODES):
        raise ValueError(f"unknown opcode {h['op']}")
    op = OPCODES[h["op"]]
    lay = cmd_layout(cfg, op)
    body = unpack(lay, word >> layout_width(header_layout())) if lay else {}
    args = {k: (v.tolist() if isinstance(v, np.ndarray) else int(v)) for k, v in body.items()}
    return Cmd(op, args, int(h["wait"]), int(h["signal"]))


def assemble(cfg: Config, cmds) -> list:
    """Commands → :func:`cmd_bits`-bit words."""
    return [encode(cfg, c) for c in cmds]


def disassemble(cfg: Config, words) -> list:
    """:func:`cmd_bits`-bit words → commands."""
    return [decode(cfg, w) for w in words]


def buf_names(op: str) -> tuple:
    """The buffers ``op``'s ``buf`` field indexes: :data:`DRAM_BUFFERS` for DLOAD and DSTORE,
    :data:`BUFFERS` for LOAD and STORE."""
    return DRAM_BUFFERS if op in ("DLOAD", "DSTORE") else BUFFERS


def format_cmd(cmd: Cmd) -> str:
    """One line of assembly: ``GEMM gsrc=0 wbase=16 ... [wait=1 signal=2]``."""
    parts = [cmd.op]
    for k, v in cmd.args.items():
        if k == "vop" and v < len(VPU_OPS):
            v = VPU_OPS[v]
        elif k == "buf":
            v = buf_names(cmd.op)[v]
        elif isinstance(v, list):
            v = ",".join(str(x) for x in v)
        parts.append(f"{k}={v}")
    if cmd.wait:
        parts.append(f"wait={cmd.wait}")
    if cmd.signal:
        parts.append(f"signal={cmd.signal}")
    return " ".join(parts)


def parse_cmd(cfg: Config, line: str) -> Cmd:
    """Inverse of :func:`format_cmd`."""
    toks = line.split("#", 1)[0].split()
    if not toks:
        raise ValueError("empty command line")
    op = toks[0].upper()
    if op not in OPCODES:
        raise ValueError(f"unknown opcode {toks[0]!r}; opcodes are {OPCODES}")
    args, wait, signal = {}, 0, 0
    for t in toks[1:]:
        if "=" not in t:
            raise ValueError(f"{op}: expected field=value, got {t!r}")
        k, v = t.split("=", 1)
        if k == "vop" and not v.lstrip("-").isdigit():
            if v not in VPU_OPS:
                raise ValueError(f"vop must be one of {VPU_OPS}, not {v!r}")
            val = VPU_OPS.index(v)
        elif k == "buf":
            names = buf_names(op)
            if v not in names:
                raise ValueError(f"buf must be one of {names}, not {v!r}")
            val = names.index(v)
        elif "," in v:
            val = [int(x, 0) for x in v.split(",")]
        else:
            val = int(v, 0)
        if k == "wait":
            wait = val
        elif k == "signal":
            signal = val
        else:
            args[k] = val
    cmd = Cmd(op, args, wait, signal)
    _check_fields(cfg, cmd)
    return cmd


# ============================================================================= documentation
def encoding_markdown(cfg: Config) -> str:
    """The command encoding and buffer rows of ``cfg`` as Markdown tables (docs/core_isa.md)."""
    lines = [f"# DSTAR core command encoding (`{cfg.name}` preset)", "",
             "Generated by `python -m dstar_rtl.program.isa` from `program/isa.py`; every "
             "command is "
             f"{cmd_bits(cfg)} bits, fields packed from bit 0 in the order listed (arrays "
             "element 0 first). The semantics are the module docstring of `program/isa.py`.", ""]
    for op in OPCODES:
        lines += [f"## {op} (opcode {OPCODES.index(op)}, engine {ENGINE.get(op, 'dispatcher')})",
                  "", "| field | bits | width |", "|---|---|---:|"]
        off = 0
        for name, w, dims, _s in header_layout() + cmd_layout(cfg, op):
            n = math.prod(dims) if dims else 1
            shape = f"{w} × {n}" if dims else f"{w}"
            lines.append(f"| {name} | {off}..{off + w * n - 1} | {shape} |")
            off += w * n
        lines.append("")
    lines += ["## Buffer rows (host words: 32 bits, least significant first)", "",
              "| buffer | row fields | bits | host words |", "|---|---|---:|---:|"]
    for b in BUFFERS:
        f = ", ".join(f"{n}[{math.prod(d)}]×{w}" if d else f"{n}×{w}"
                      for n, w, d, _s in row_layout(cfg, b))
        lines.append(f"| {b} | {f} | {row_width(cfg, b)} | {host_words_per_row(cfg, b)} |")
    lines += ["", "## DRAM rows (DLOAD/DSTORE `buf`; bytes per row in DRAM)", "",
              "| buf | buffer | bits | bytes |", "|---:|---|---:|---:|"]
    lines += [f"| {i} | {b} | {layout_width(dram_row_layout(cfg, b))} | "
              f"{dram_row_bytes(cfg, b)} |" for i, b in enumerate(DRAM_BUFFERS)]
    lines += ["", "## Error codes", "", "| code | name |", "|---:|---|"]
    lines += [f"| {i} | {e} |" for i, e in enumerate(ERRORS)]
    lines += ["", "## Counters (`STORE CNT`, one 32-bit word each)", "", "| index | name |",
              "|---:|---|"]
    lines += [f"| {i} | {c} |" for i, c in enumerate(COUNTERS)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    from dstar_rtl.golden.config import preset
    sys.stdout.write(encoding_markdown(preset(sys.argv[1] if len(sys.argv) > 1 else "fpga")))
