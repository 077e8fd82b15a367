"""Paper-scale projection: the RTL-calibrated core model (:mod:`perf.perf_model`) scaled to the
paper's chip and run on the layer shapes of the paper's seven DiTs
(:mod:`models.dit_shapes`).

``dstar measure projection`` (:mod:`app.reports.projection`) →
``reports/projection.{json,md,png}``.

How it scales
-------------
* **One core** is the calibrated command-level model with the ``paper`` configuration (64×64,
  lanes 4, sort_n 64): the structural constants follow from the configuration (MPU latency
  ``rows + cols + pe_stages + 2``, tile period, drain of ``T`` beats) and the few measured
  offsets are carried over from the calibrated presets (``reports/perf_model.json``; where the
  offsets of ``tiny`` and ``fpga`` differ they are extrapolated linearly in ``rows``).
* **Work per command** is synthetic but follows the golden schedule's rule: a tile of ``cin``
  sub-channels at ``bits`` average bits sends ``cin · bits/2`` slice columns, packed ``lanes``
  to a group at lane fill ``fill`` (both measured by ``dstar profile`` on the trained DiT, or
  the paper's values). Reductions longer than ``max_reduction`` are split and accumulated.
* **Reduction pieces and the core's buffer** (:mod:`perf.chip_memory`): each token tile's
  reduction may run in pieces (``compile_block(..., pieces=)``, program/compiler.py), each
  piece's QUANT beside the previous piece's GEMMs; and the paper's 80 KB per core holds a
  layer's working set only in pieces (a block's weights, the groups, the accumulators). For
  every layer, DSTAR's and the INT8 core's alike (the INT8 core's pieces share the tile's
  exponent: its numbers do not change), the chip takes the plan of :func:`linear_cost`: of
  the plans that fit the buffer, the one whose time, the longer of its compute at its pieces
  and its HBM traffic, is least (recorded as ``reduction_pieces``).
* **The chip**: 32 cores share each layer (token tiles first, then column blocks; attention
  by (sequence, head, query tile), head-major, so that a core makes K and V weights only for
  the heads its query tiles belong to: :func:`heads_per_core`); a layer takes the longer of
  its compute and its HBM traffic (a roofline per layer: the working set double-buffers the
  traffic). **Every byte is charged** (issue 47): the weights once per round of token tiles
  (multicast to the cores that share a round), the activations of every linear layer,
  attention and element-wise row whose tensors do not fit the 512 KB scratchpad, FMDQ's state
  (:func:`state_bytes`: ``x̂`` and ``Y`` of every differential layer read and written every
  step it runs, at the widths the core stores), what the plan re-fetches (groups, partial
  sums), K and V when a core's heads do not fit half its buffer (:func:`attention_bytes`), and
  the P cache (numerics §2.6 record), which stays in the scratchpad when every layer's cache
  fits next to one layer's activations and otherwise lives in HBM (written on cache steps,
  read on reuse steps). HBM capacity is checked against the weights, the state, the P cache
  and two layers' activations (``fits_hbm``).
* **The baseline**: the same chip with the INT8 core (``datapath = "int8"``, numerics §2.8,
  docs/architecture.md §16): the INT8 array of the same size (one beat per input channel, tile
  period ``L + rows``), dense layers (no differential quantization), the INT8 quantizer's two
  passes per QUANT (``2·nch + 4`` cycles), and the same SAR schedule as DSTAR (kept blocks,
  cache and reuse steps; P quantized to 8 bits). Modelled as DSTAR's workload at 8 bits with a
  full lane fill (one group per sub-channel) on :func:`int8_timing`.

PE utilization
--------------
Useful products over what the PEs could have done in the cycles they took: for DSTAR, the
lane-digit products (a slice column of a sub-channel times one weight: ``tokens · cin · cout ·
bits/2`` for a linear layer) over ``lanes · rows · cols · cores · cycles``; for the INT8 array
the MACs over ``rows · cols · cores · cycles``. *FFN* is every ``fc1`` and ``fc2`` layer of a
cache step (Flux's fused single-block layers are not counted as FFN); *attention* is QKᵀ over the
kept key blocks at the activations' bits plus P·V at P's bits, over the attention cycles of a
cache step (the K and V quantization and whatever of the softmax the S GEMMs beside it do not
hide included, since the M engine waits for them). Compute cycles only: a layer bound by HBM
traffic has a lower utilization than shown.

GPU reference
-------------
Each model also gets an A100 roofline bound (:mod:`perf.gpu_bound`: dense FP16 FLOPs
at the tensor cores' peak or the minimum HBM traffic, whichever is longer, every step), a bound in
the GPU's favour; ``a100_over_dstar`` is its time per image over DSTAR's, so the chip's real
lead over an A100 is at least that.

What it does not model: NoC contention (the multicasts included), HBM latency (bandwidth
only), HBM's own row-buffer behaviour, the host. Layer fusion (element-wise rows applied to a
linear layer's tiles while they are on the core, :data:`_FUSED_ACCESSES`) is a lever
(``fused``, :mod:`app.reports.state_levers`), not the default: the compiler emits each row as
a pass of its own. The energy per image is :mod:`perf.chip_energy`'s.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from dstar_rtl.golden.config import Config, preset
from dstar_rtl.golden.layouts import gmem_layout, layout_width
from dstar_rtl.models.dit_shapes import Attention, DiTModel, Linear
from dstar_rtl.models.published import PAPER_CHIP
from dstar_rtl.perf.chip_memory import PAPER_MEMORY, MemorySystem, linear_plans
from dstar_rtl.perf.core_work import Work
from dstar_rtl.perf.gpu_bound import A100, roofline
from dstar_rtl.perf.perf_model import INT8_QUANT_FIXED, Timing, simulate
from dstar_rtl.perf.timing import array_tile_period
from dstar_rtl.program.compiler import FREE, FULL, P_READY, S_READY

__all__ = ["Chip", "Workload", "paper_timing", "int8_timing", "int8_workload", "heads_per_core",
           "project_model", "attention_parts", "pe_utilization", "attention_bound", "linear_cycles",
           "stream_cycles", "linear_cost", "attention_bytes", "vector_bytes", "state_bytes",
           "vector_rows"]


@dataclass(frozen=True)
class Chip:
    """The paper's chip (numerics §1): its cores, clock and memories
    (:class:`perf.chip_memory.MemorySystem`: the paper's 3.1 MB of SRAM and HBM2)."""

    cores: int = preset("paper").cores
    freq_hz: float = PAPER_CHIP["freq_hz"]
    memory: MemorySystem = PAPER_MEMORY


@dataclass(frozen=True)
class Workload:
    """Statistics of the activations: FMDQ average ``bits`` of linear-layer inputs and of
    ``P`` (``p_bits``), lane ``fill``, SAR ``kept`` fraction of attention blocks and ``interval``
    (1 cache step every ``interval`` steps); ``dense_bits``: the average bits of an input
    quantized whole (the first step's, against a zero state), None when unknown."""

    name: str
    bits: float
    p_bits: float
    fill: float
    kept: float
    interval: int = 2
    dense_bits: float | None = None


# ----------------------------------------------------------------------------- timing
_OFFSETS = ("quant_fixed", "gemm_fixed", "tile_period")


def _structural(cfg: Config) -> dict:
    s = Timing.structural(cfg)
    return {k: getattr(s, k) for k in _OFFSETS}


def paper_timing(calibrated: dict, cfg: Config | None = None) -> tuple:
    """``(Timing, notes)`` for ``cfg`` (default the ``paper`` preset) from calibrated timings
    ``{preset: Timing dict}`` (see the module docstring)."""
    cfg = cfg or preset("paper")
    pts = []
    for name, t in sorted(calibrated.items()):
        c = preset(name)
        s = _structural(c)
        pts.append((c.rows, {k: t[k] - s[k] for k in _OFFSETS}, t))
    s = _structural(cfg)
    over, notes = {}, []
    for k in _OFFSETS:
        if len(pts) >= 2 and pts[0][1][k] != pts[-1][1][k]:
            (r0, a, _), (r1, b, _) = pts[0], pts[-1]
            off = a[k] + (b[k] - a[k]) * (cfg.rows - r0) / (r1 - r0)
            notes.append(f"{k}: offset {a[k]} at rows {r0}, {b[k]} at rows {r1}, extrapolated "
                         f"to {off:.1f} at rows {cfg.rows}")
        else:
            off = pts[-1][1][k]
            notes.append(f"{k}: offset {off} over the structural value (same on every preset)")
        over[k] = max(0, round(s[k] + off))
    last = pts[-1][2]
    keep = {k: last[k] for k in ("replay_fixed", "replay_busy", "queue_release", "idle_latency",
                                 "signal_latency", "vrow_fixed", "vrow_lat", "vrow_curve")}
    return Timing.structural(cfg, **keep, **over), notes


def int8_timing(t: Timing, dstar_cfg: Config, int8_cfg: Config) -> Timing:
    """The INT8 core's timing on the same core: ``t`` (calibrated on the DSTAR core of
    ``dstar_cfg``) with the INT8 quantizer's QUANT (two passes,
    :data:`perf.perf_model.INT8_QUANT_FIXED`) and the INT8 array's tile period and GEMM latency
    moved by the difference of :func:`perf.timing.array_tile_period` between ``int8_cfg`` and
    ``dstar_cfg`` (its PE stages, :data:`golden.config.INT8_CHOSEN`); the same tile flow and
    drain."""
    d = array_tile_period(int8_cfg) - array_tile_period(dstar_cfg)
    return t.with_(quant_passes=2, quant_fixed=INT8_QUANT_FIXED,
                   tile_period=t.tile_period + d, gemm_fixed=t.gemm_fixed + d)


def int8_workload(wl: "Workload") -> "Workload":
    """What the INT8 core sees of workload ``wl``: 8 bits on every sub-channel at a full lane
    fill (one group per sub-channel), P at 8 bits, the same SAR kept fraction and interval."""
    return replace(wl, name=f"{wl.name} (INT8 core)", bits=8.0, p_bits=8.0, fill=1.0)


# ----------------------------------------------------------------------------- one core
def _groups(nch: int, bits: float, cfg: Config, fill: float) -> int:
    cols = nch * bits / 2
    return max(1, math.ceil(cols / (cfg.lanes * fill)))


def _quant(nch: int, groups: int, **k) -> Work:
    return Work("QUANT", dict(nch=nch), ev=dict(gmem_writes=groups), **k)


def _gemm(groups: int, **k) -> Work:
    return Work("GEMM", {}, ev=dict(groups_replayed=groups), **k)


def _stream(tiles: list) -> list:
    """Commands of a GEMM stream: ``tiles`` is ``[(nch, groups, gemms)]``; the double-buffered
    QUANT/GEMM protocol of the compiler (program/compiler.py)."""
    out = [_quant(*tiles[0][:2], signal=FULL)] if tiles else []
    for i, (_nch, g, gemms) in enumerate(tiles):
        if i + 1 < len(tiles):
            out.append(_quant(*tiles[i + 1][:2], signal=FULL, wait=FREE if i + 1 >= 2 else 0))
        for j in range(gemms):
            sig = FREE if j == gemms - 1 and i + 2 < len(tiles) else 0
            out.append(_gemm(g, wait=FULL if j == 0 else 0, signal=sig))
    return out


def _run(t: Timing, works: list) -> int:
    return simulate(t, works + [Work("BARRIER", {})]).cycles if works else 0


def _share(n: int, cores: int) -> int:
    return math.ceil(n / cores)


def linear_cycles(t: Timing, cfg: Config, x: Linear, bits: float | None, fill: float,
                  cores: int, pieces: int = 1) -> int:
    """Cycles of one core for its share of linear layer ``x`` (``bits`` None: the INT8 array,
    one beat per input channel), each token tile's reduction in ``pieces`` pieces (at least
    the ``ceil(cin / max_reduction)`` the accumulator needs): each piece a tile of the
    QUANT/GEMM protocol, so a piece's QUANT runs beside the previous piece's GEMMs, every piece
    charged the longest one's ``ceil(cin / pieces)`` channels (the compiler's pieces differ by
    at most one channel, :func:`golden.schedule.piece_bounds`)."""
    T = cfg.tile
    nt, nb = math.ceil(x.tokens / T), math.ceil(x.cout / T)
    parts = max(pieces, math.ceil(x.cin / cfg.max_reduction))
    nch = math.ceil(x.cin / parts)
    g = nch if bits is None else _groups(nch, bits, cfg, fill)
    if nt >= cores:
        return stream_cycles(t, (nch, g, nb), _share(nt, cores) * parts)
    per = _share(nt * nb, cores)                # GEMMs per core, tiles of at most nb
    return stream_cycles(t, (nch, g, min(nb, per)), math.ceil(per / nb) * parts)


_STREAMS: dict = {}


def stream_cycles(t: Timing, tile: tuple, n: int) -> int:
    """Cycles of a GEMM stream (:func:`_stream`) of ``n`` equal tiles ``(nch, groups, gemms)``.
    From the fourth tile on every tile adds the same cycles (the double-buffered protocol has
    reached its steady state), so a longer stream is the fourth tile's count plus that step per
    tile (``tests/test_project.py`` checks it against the whole run); memoized per timing."""
    key = (id(t), tile, min(n, 4))
    if key not in _STREAMS:
        _STREAMS[key] = (t, {k: _run(t, _stream([tile] * k)) for k in (3, 4) if k <= n}
                         if n >= 3 else {n: _run(t, _stream([tile] * n))})
    runs = _STREAMS[key][1]
    if n < 3:
        return runs[n]
    return runs[4] + (n - 4) * (runs[4] - runs[3]) if n >= 4 else runs[3]


def heads_per_core(units: int, nq: int, heads: int) -> int:
    """The (sequence, head) pairs whose K and V one core makes INT8 weights for: the chip splits
    the ``heads × nq`` (sequence, head, query tile) units head-major, ``units`` consecutive
    units per core, so a core's query tiles share heads (two cores on one head each make its
    K and V). A run of ``units`` spans ``ceil(units / nq)`` heads when it starts at a head's
    first query tile (``nq`` and ``units`` divide one another), one more when it may straddle
    a head boundary; at most ``heads``."""
    span = -(-units // nq)
    aligned = nq % units == 0 or units % nq == 0
    return min(heads, span if aligned else span + 1)


def _vrow_work(cfg: Config, op: str, rows: int, n: int, walk: str = "tok", **k) -> Work:
    """The :class:`Work` of a VROW of ``rows`` rows of ``n`` elements: token walk (``ceil(n/T)``
    beats a row) or sub-channel walk (``n`` beats a row), the ISA's counting
    (program/executor.py); ``k``: ``wait``, ``signal``, ``overlap``."""
    beats = rows * (math.ceil(n / cfg.tile) if walk == "tok" else n)
    sem = {x: k.pop(x) for x in ("wait", "signal") if x in k}
    return Work("VROW", dict(vop_name=f"{op}/{walk}", **k),
                ev=dict(vpu_rows=rows, vpu_beats=beats), **sem)


def _vrow(t: Timing, cfg: Config, op: str, rows: int, n: int, walk: str = "tok") -> int:
    """Cycles of a VROW alone (:func:`_vrow_work`), its dispatch included."""
    return t.vrow(_vrow_work(cfg, op, rows, n, walk)) + t.dispatch


def _scores_run(t: Timing, cfg: Config, tiles: int, d: int, g_q: int, kept: int, keys: int,
                g_p: int | None) -> tuple:
    """One head's cache-step scores on one core, ``tiles`` query tiles in the compiler's
    software-pipelined order (program/compiler.py ``_attention_cache``): tile q's softmax (a
    VROW with ``overlap``) beside tile q+1's Q quantization and S GEMMs on the ``kept`` key
    blocks, then tile q's P quantization (``g_p`` None: none). As the compiler emits them, the
    softmax rows and P's QUANT run over all ``keys`` (dropped blocks are zeros; they make no
    groups). Returns ``(cycles, softmax, tail)``: the run, the V engine's busy cycles in it, and
    the cycles after the last softmax (the last P)."""
    def scores():
        return ([_quant(d, g_q, signal=FULL)]
                + [_gemm(g_q, wait=FULL if j == 0 else 0, signal=S_READY if j == kept - 1 else 0)
                   for j in range(kept)])

    works = scores()
    for q in range(tiles):
        works.append(_vrow_work(cfg, "softmax_mx", cfg.tile, keys, wait=S_READY,
                                signal=P_READY, overlap=1))
        if q + 1 < tiles:
            works += scores()
        if g_p is not None:
            works.append(_quant(keys, g_p, wait=P_READY))
    r = simulate(t, works + [Work("BARRIER", {})])
    sm = [i for i, w in enumerate(works) if w.op == "VROW"]
    return r.cycles, r.busy["V"], r.cycles - r.complete[sm[-1]]


def attention_parts(t: Timing, cfg: Config, a: Attention, wl: Workload | None, cache: bool,
                    cores: int) -> dict:
    """Cycles of one core for its share of attention ``a`` on a cache (or dense) or reuse step
    (``wl`` None: every block kept and every step a full attention, dense), by part: ``kv`` (K and
    V made INT8 weights on the V engine), ``qk`` (the QKᵀ GEMM streams), ``softmax``,
    ``p_quant`` (P into the P cache) and ``pv`` (the P·V GEMM stream). The cache step's scores run
    software-pipelined (:func:`_scores_run`): ``softmax`` is the V engine's busy cycles there,
    ``p_quant`` what follows the last softmax of each head, ``qk`` the rest (the S GEMMs and Q
    quantizations the softmaxes do not hide). The other parts run one after the other, as the
    compiler's program orders them."""
    T = cfg.tile
    nq, nk = math.ceil(a.queries / T), math.ceil(a.keys / T)
    kept = nk if wl is None else max(1, round(nk * wl.kept))
    units = _share(a.seqs * a.heads * nq, cores)          # (sequence, head, query tile) per core
    heads = heads_per_core(units, nq, a.seqs * a.heads)
    bits = None if wl is None else wl.bits
    fill = 1.0 if wl is None else wl.fill
    d_blocks = math.ceil(a.head_dim / T)
    parts = dict.fromkeys(("kv", "qk", "softmax", "p_quant", "pv"), 0)
    # K (cache steps) and V (every step) become INT8 weights per head: kv_amax over the key
    # tiles' sub-channels, then kv_quant into WMEM (K by sub-channels, V by token rows), as the
    # compiler emits them.
    if cache or wl is None:
        parts["kv"] += heads * (_vrow(t, cfg, "kv_amax", nk, a.head_dim, "sub")
                                + _vrow(t, cfg, "kv_quant", nk, a.head_dim, "sub"))
    parts["kv"] += heads * (_vrow(t, cfg, "kv_amax", nk, a.head_dim, "sub")
                            + _vrow(t, cfg, "kv_quant", a.keys, a.head_dim))
    nch_p = kept * T
    g_p = nch_p if wl is None else _groups(nch_p, wl.p_bits, cfg, wl.fill)
    if cache or wl is None:
        g_q = a.head_dim if bits is None else _groups(a.head_dim, bits, cfg, fill)
        # The core's query tiles, split as evenly as they go over its heads.
        runs = [units // heads + (1 if i < units % heads else 0) for i in range(heads)]
        for tiles in set(runs) - {0}:
            n = runs.count(tiles)
            cyc, sm, tail = _scores_run(t, cfg, tiles, a.head_dim, g_q, kept, nk * T,
                                        None if wl is None else g_p)
            parts["softmax"] += n * sm
            parts["p_quant"] += n * tail
            parts["qk"] += n * (cyc - sm - tail)
    # P·V replays the P cache (no QUANT): one GEMM per query tile and column block of V.
    parts["pv"] = _run(t, [_gemm(g_p) for _ in range(units * d_blocks)])
    return parts


def attention_cycles(t: Timing, cfg: Config, a: Attention, wl: Workload | None, cache: bool,
                     cores: int) -> int:
    """The sum of :func:`attention_parts`."""
    return sum(attention_parts(t, cfg, a, wl, cache, cores).values())


def vector_rows(model: DiTModel) -> list:
    """The element-wise rows of one step, as the compiler's block program has them: per block
    two layernorms, two modulates, two gated residuals (hidden wide) and one GELU (MLP wide).
    ``[(blocks, tokens, [(op, width, times)])]``, one entry per kind of block."""
    out = []
    for x in model.linears:
        if x.name.endswith(".fc1") or x.name.endswith("v_mlp"):
            D = x.cin
            mlp = x.cout - (D if x.name.endswith("v_mlp") else 0)
            out.append((x.count, x.tokens, [("layernorm", D, 2), ("modulate", D, 2),
                                            ("gated_residual", D, 2), ("gelu", mlp, 1)]))
    return out


def vector_cycles(t: Timing, cfg: Config, model: DiTModel, cores: int) -> int:
    """Element-wise work of one core per step (:func:`vector_rows`), its share of the tokens."""
    return sum(count * sum(k * _vrow(t, cfg, op, _share(tokens, cores), n) for op, n, k in ops)
               for count, tokens, ops in vector_rows(model))


def _is_ffn(x: Linear) -> bool:
    return x.name.endswith(".fc1") or x.name.endswith(".fc2")


def attention_bound(model: DiTModel, cfg: Config, wl: Workload | None,
                    dense: bool = False, drain: bool = True) -> float:
    """The highest attention PE utilization (:func:`pe_utilization`'s products) the array can
    reach on ``model`` with everything but the GEMMs hidden and tiles back to back: a GEMM
    takes at least ``max(groups, rows)`` cycles (its reduction, or its drain of ``rows`` tokens
    at one a cycle), ``QKᵀ`` one GEMM per kept key block (``head_dim`` reduced), ``P·V`` one per
    column block of ``ceil(head_dim / T)`` (the last partly empty when ``T`` does not divide
    ``head_dim``). ``dense``: the INT8 array (one beat per channel, one product per PE);
    ``drain`` False: a drain of any width (a GEMM takes its groups only)."""
    T = cfg.tile
    floor = cfg.rows if drain else 0
    dense = dense or wl is None
    lanes = 1 if dense else cfg.lanes
    prod = cyc = 0.0
    for a in model.attentions:
        nq, nk = math.ceil(a.queries / T), math.ceil(a.keys / T)
        kept = nk if wl is None else max(1, round(nk * wl.kept))
        keys = min(a.keys, kept * T)
        if dense:
            g_q, g_p, dq, dp = a.head_dim, kept * T, 1.0, 1.0
        else:
            g_q = _groups(a.head_dim, wl.bits, cfg, wl.fill)
            g_p = _groups(kept * T, wl.p_bits, cfg, wl.fill)
            dq, dp = wl.bits / 2, wl.p_bits / 2
        n = a.count * a.seqs * a.heads * nq
        prod += n * T * keys * a.head_dim * (dq + dp)
        cyc += n * (kept * max(g_q, floor) + math.ceil(a.head_dim / T) * max(g_p, floor))
    return prod / (cfg.rows * cfg.cols * lanes * cyc) if cyc else 0.0


def pe_utilization(model: DiTModel, chip: Chip, cfg: Config, wl: Workload | None,
                   ffn_cycles: float, attention_cycles: float, dense: bool = False) -> dict:
    """PE utilization of a cache step (module docstring) from the cycles one core spent on the
    FFN layers and on attention: ``{"ffn", "attention"}``, each ``{products, capacity,
    utilization}``; ``dense``: the INT8 array (MACs over its PEs; ``wl`` None: every block
    kept)."""
    T = cfg.tile
    dense = dense or wl is None
    per_cycle = cfg.rows * cfg.cols * chip.cores * (1 if dense else cfg.lanes)
    digits = 1.0 if dense else wl.bits / 2
    p_digits = 1.0 if dense else wl.p_bits / 2
    f_prod = sum(x.count * x.tokens * x.cin * x.cout * digits
                 for x in model.linears if _is_ffn(x))
    a_prod = 0.0
    for a in model.attentions:
        nk = math.ceil(a.keys / T)
        kept = nk if wl is None else max(1, round(nk * wl.kept))
        keys = min(a.keys, kept * T)
        a_prod += (a.count * a.seqs * a.heads * a.queries * keys * a.head_dim
                   * (digits + p_digits))

    def entry(prod, cyc):
        cap = per_cycle * cyc
        return dict(products=prod, capacity=cap, utilization=prod / cap if cap else None)

    return dict(ffn=entry(f_prod, ffn_cycles), attention=entry(a_prod, attention_cycles))


# ----------------------------------------------------------------------------- the chip
def pcache_bytes(cfg: Config, a: Attention, wl: Workload) -> int:
    """P-cache record of one attention layer (numerics §2.6 with this project's 3-bit precision
    code, docs/architecture.md §2): per kept block and key, the code and ``T`` values at the
    average P bits."""
    T = cfg.tile
    nq, nk = math.ceil(a.queries / T), math.ceil(a.keys / T)
    kept = max(1, round(nk * wl.kept))
    per_key = 3 + T * wl.p_bits
    return math.ceil(a.seqs * a.heads * nq * kept * T * per_key / 8)


def state_bytes(cfg: Config, x: Linear) -> float:
    """FMDQ's state of ``x``'s ``count`` differential layers (numerics §2.5): ``x̂`` of every
    input and ``Y`` of every output element, at the widths the core stores them
    (``xhat_width``, ``ystate_width``)."""
    return x.count * x.tokens * (x.cin * cfg.xhat_width + x.cout * cfg.ystate_width) / 8


def _tile_split(x: Linear, T: int, cores: int) -> tuple:
    """``(rounds, kb, visits)`` of a linear layer on the chip, as :func:`linear_cycles` splits
    it: weight rounds (each core's token tiles in turn, every round needing every weight:
    ``ceil(nt / cores)`` rounds, or one when cores share token tiles), column blocks a core
    computes on one visit to a token tile, and the visits of all cores together."""
    nt, nb = math.ceil(x.tokens / T), math.ceil(x.cout / T)
    if nt >= cores:
        return _share(nt, cores), nb, nt
    per = _share(nt * nb, cores)
    kb = min(nb, per)
    return 1, kb, nt * math.ceil(nb / kb)


def linear_cost(t: Timing, cfg: Config, x: Linear, chip: Chip, *, bits: float | None,
                fill: float, stateful: bool, free: tuple = ()) -> dict:
    """One step of linear layer ``x`` (its ``count`` copies) on the chip with memory
    (:mod:`perf.chip_memory`): the plan of the core's loop (pieces, resident accumulators)
    that takes the least time, each plan's time the longer of its compute
    (:func:`linear_cycles` at its pieces) and its HBM traffic at the chip's bandwidth.
    ``bits`` None: the INT8 core (one group per channel, dense); ``stateful``: a differential
    layer whose ``x̂`` and ``Y`` go to HBM and back, its resident accumulators the stored ``Y``
    at ``ystate_width`` (a stored Y is rounded after each piece, numerics §2.5, as the core's
    YBUF holds it); ``free``: kinds of bytes charged nothing (a bound). Returns ``{"s",
    "cycles", "pieces", "plan", "bytes": {kind: bytes}}`` for all ``count`` layers."""
    mem, T = chip.memory, cfg.tile
    int8 = bits is None
    gcfg = cfg.replace(datapath="int8", ystate_frac=None) if int8 else cfg
    row = layout_width(gmem_layout(gcfg)) / 8
    gpc = row if int8 else row * bits / 2 / (cfg.lanes * fill)
    ab, wb = (cfg.act_width + 7) // 8, (cfg.weight_width + 7) // 8
    rounds, kb, visits = _tile_split(x, T, chip.cores)
    acts = x.tokens * (x.cin + x.cout) * ab
    fixed = dict(weights=x.cin * x.cout * wb * rounds,
                 activations=acts if acts > mem.scratchpad_bytes else 0,
                 state=2 * state_bytes(cfg, x) / x.count if stateful else 0)
    stage = cfg.act_width + (2 * cfg.xhat_width if stateful else 0)
    plans = linear_plans(T=T, cin=x.cin, kb=kb, group_bytes_per_channel=gpc,
                         acc_bits=(cfg.baseline_acc_width if int8 else
                                   cfg.ystate_width if stateful else cfg.acc_bits),
                         weight_bytes=wb, stage_bits=stage, buffer_bytes=mem.core_buffer_bytes,
                         min_pieces=math.ceil(x.cin / cfg.max_reduction))
    best = None
    for p in plans:
        nbytes = dict(fixed, restream=p.restream_bytes * visits)
        nbytes.update(dict.fromkeys(set(free) & set(nbytes), 0.0))
        cyc = linear_cycles(t, cfg, x, bits, fill, chip.cores, p.pieces)
        s = max(cyc / chip.freq_hz, sum(nbytes.values()) / mem.hbm_bytes_per_s)
        key = (s, sum(nbytes.values()), p.pieces)
        if best is None or key < best[0]:
            best = (key, dict(s=s, cycles=cyc, pieces=p.pieces, plan=asdict(p), bytes=nbytes))
    out = best[1]
    out["s"] *= x.count
    out["cycles"] *= x.count
    out["bytes"] = {k: v * x.count for k, v in out["bytes"].items()}
    return out


def attention_bytes(cfg: Config, a: Attention, wl: Workload | None, cache: bool, chip: Chip,
                    pcache_in_hbm: bool) -> dict:
    """HBM bytes of one step of attention ``a`` (its ``count`` layers): ``activations`` (Q, K
    and V read on a cache step, V alone on a reuse step, the output written; when they do not
    fit the scratchpad), ``operands`` (K and V as INT8 weights: when a core's heads' K and V do
    not fit half its buffer, written once and read again for every query tile, the kept key
    blocks of K and V), ``pcache`` (written on a cache step, read on a reuse step, when it lives
    in HBM). ``wl`` None: every block kept."""
    T, mem = cfg.tile, chip.memory
    ab = (cfg.act_width + 7) // 8
    nq, nk = math.ceil(a.queries / T), math.ceil(a.keys / T)
    kept = nk if wl is None else max(1, round(nk * wl.kept))
    heads = a.seqs * a.heads
    qkv = heads * (a.queries + 2 * a.keys) * a.head_dim if cache else heads * a.keys * a.head_dim
    tensors = (qkv + heads * a.queries * a.head_dim) * ab
    units = _share(heads * nq, chip.cores)
    own = heads_per_core(units, nq, heads) * a.keys * a.head_dim * 2
    operands = 0.0
    if own > mem.core_buffer_bytes / 2:
        operands = heads * a.keys * a.head_dim * 2 + heads * nq * kept * T * a.head_dim * 2
    pc = pcache_bytes(cfg, a, wl) if pcache_in_hbm and wl is not None else 0
    return {k: v * a.count for k, v in dict(
        activations=tensors if tensors > mem.scratchpad_bytes else 0, operands=operands,
        pcache=pc).items()}


#: Reads and writes of each element-wise row (:func:`vector_rows`) in HBM, as the compiler's
#: block program runs them (each row a pass of its own): the gated residual reads the residual
#: and the branch and writes the sum.
_VECTOR_ACCESSES = {"layernorm": 2, "modulate": 2, "gated_residual": 3, "gelu": 2}

#: The same with the rows fused into the linear layers beside them (``fused``; a schedule the
#: compiler does not emit yet): LayerNorm and modulate applied to the next layer's input as its
#: quantizer reads it, from row statistics made by one read of the residual; GELU applied to
#: ``fc1``'s output tile before it is written; the gated residual applied to ``proj``'s and
#: ``fc2``'s output tiles, reading the residual, its sum written in place of the branch.
_FUSED_ACCESSES = {"layernorm": 1, "modulate": 0, "gated_residual": 1, "gelu": 0}


def vector_bytes(cfg: Config, model: DiTModel, chip: Chip, fused: bool = False) -> float:
    """HBM bytes of one step's element-wise rows (:func:`vector_rows`): each reads and writes
    its activations there when a row set does not fit the scratchpad; ``fused``: the rows fused
    into the linear layers beside them (:data:`_FUSED_ACCESSES`)."""
    ab = (cfg.act_width + 7) // 8
    acc = _FUSED_ACCESSES if fused else _VECTOR_ACCESSES
    out = 0.0
    for count, tokens, ops in vector_rows(model):
        for op, n, k in ops:
            b = tokens * n * ab
            if b > chip.memory.scratchpad_bytes:
                out += count * k * acc[op] * b
    return out


def project_model(model: DiTModel, chip: Chip, t_dstar: Timing, t_base: Timing, cfg: Config,
                  wl: Workload, stateless: bool = False, fused: bool = False,
                  free: tuple = ()) -> dict:
    """Latency of ``model`` per step and per image on DSTAR (``t_dstar``, workload ``wl``) and on
    the INT8 core (``t_base``, :func:`int8_workload` of ``wl``), every byte charged (module
    docstring): per step and side ``{"cache", "reuse"}`` with the seconds by part and the HBM
    bytes by kind. ``stateless``: a DSTAR layer may run without state (its input quantized
    whole at ``wl.dense_bits``, nothing kept) where that is faster; ``fused``: the element-wise
    rows fused into the linear layers beside them (:func:`vector_bytes`), on both chips;
    ``free``: kinds of HBM bytes (keys of ``hbm_bytes``) charged nothing on both chips, for a
    bound on what a better dataflow could reach."""
    mem = chip.memory
    bw = mem.hbm_bytes_per_s
    act_bytes = (cfg.act_width + 7) // 8
    act_peak = max(x.tokens * max(x.cin, x.cout) * act_bytes for x in model.linears)
    pc_side = {side: sum(pcache_bytes(cfg, a, w) * a.count for a in model.attentions)
               for side, w in (("dstar", wl), ("int8", int8_workload(wl)))}
    pc_on_chip = {side: pc + min(act_peak, mem.scratchpad_bytes // 2) <= mem.scratchpad_bytes
                  for side, pc in pc_side.items()}
    res = {}
    for side in ("dstar", "int8"):
        t = t_dstar if side == "dstar" else t_base
        swl = wl if side == "dstar" else int8_workload(wl)
        out, pieces, modes = {}, {}, {}
        for cache in (True, False):
            lin = att = 0.0
            ffn_cyc = compute = 0
            nbytes = dict.fromkeys(("weights", "activations", "state", "restream", "operands",
                                    "pcache"), 0.0)
            parts = dict.fromkeys(("kv", "qk", "softmax", "p_quant", "pv"), 0)
            for x in model.linears:
                if x.cache_only and not cache:
                    continue
                if side == "dstar":
                    opts = {"differential": linear_cost(t, cfg, x, chip, bits=wl.bits,
                                                        fill=wl.fill, stateful=True,
                                                        free=free)}
                    if stateless and wl.dense_bits is not None:
                        opts["stateless"] = linear_cost(t, cfg, x, chip, bits=wl.dense_bits,
                                                        fill=wl.fill, stateful=False,
                                                        free=free)
                    mode = min(opts, key=lambda k: opts[k]["s"]) if cache else modes[x.name]
                    c = opts[mode]
                else:
                    mode, c = "dense", linear_cost(t, cfg, x, chip, bits=None, fill=1.0,
                                                   stateful=False, free=free)
                if cache:
                    pieces[x.name], modes[x.name] = c["pieces"], mode
                ffn_cyc += c["cycles"] if _is_ffn(x) else 0
                compute += c["cycles"]
                lin += c["s"]
                for k, v in c["bytes"].items():
                    nbytes[k] += v
            for a in model.attentions:
                part = attention_parts(t, cfg, a, swl, cache, chip.cores)
                for k, v in part.items():
                    parts[k] += a.count * v
                compute += a.count * sum(part.values())
                ab = attention_bytes(cfg, a, swl, cache, chip, not pc_on_chip[side])
                ab.update(dict.fromkeys(set(free) & set(ab), 0.0))
                att += max(a.count * sum(part.values()) / chip.freq_hz,
                           sum(ab.values()) / bw)
                for k, v in ab.items():
                    nbytes[k] += v
            vb = vector_bytes(cfg, model, chip, fused)
            nbytes["activations"] += vb
            vcyc = vector_cycles(t, cfg, model, chip.cores)
            compute += vcyc
            vec = max(vcyc / chip.freq_hz, vb / bw)
            out["cache" if cache else "reuse"] = dict(
                linear_s=lin, attention_s=att, vector_s=vec, compute_s=compute / chip.freq_hz,
                hbm_s=sum(nbytes.values()) / bw, total_s=lin + att + vec, hbm_bytes=nbytes)
            if cache:
                out["pe_utilization"] = pe_utilization(
                    model, chip, cfg, swl, ffn_cyc, sum(parts.values()), dense=side == "int8")
                out["attention_bound"] = attention_bound(model, cfg, swl,
                                                         dense=side == "int8")
                out["attention_bound_any_drain"] = attention_bound(
                    model, cfg, swl, dense=side == "int8", drain=False)
                out["attention_parts_cycles"] = parts
        n_cache = math.ceil(model.steps / wl.interval)
        per_image, compute_image = ((n_cache * out["cache"][k]
                                     + (model.steps - n_cache) * out["reuse"][k])
                                    for k in ("total_s", "compute_s"))
        state = sum(state_bytes(cfg, x) for x in model.linears
                    if modes[x.name] == "differential")
        weights = sum(x.cin * x.cout * x.count for x in model.linears) \
            * ((cfg.weight_width + 7) // 8)
        hbm_used = weights + state + (0 if pc_on_chip[side] else pc_side[side]) + 2 * act_peak
        res[side] = dict(out, per_image_s=per_image, compute_per_image_s=compute_image,
                         reduction_pieces=pieces,
                         layer_modes=modes, state_bytes=state, hbm_used_bytes=hbm_used,
                         fits_hbm=hbm_used <= mem.hbm_capacity_bytes)
    pc_total = pc_side["dstar"]
    res.update(model=model.name, steps=model.steps, dense_gmacs_per_step=model.macs() / 1e9,
               pcache_bytes=pc_total,
               pcache_location="scratchpad" if pc_on_chip["dstar"] else "HBM",
               int8_pcache_bytes=pc_side["int8"],
               pcache_traffic_s_per_step=res["dstar"]["cache"]["hbm_bytes"]["pcache"] / bw,
               on_chip_sram_bytes=mem.on_chip_bytes(chip.cores),
               speedup=res["int8"]["per_image_s"] / res["dstar"]["per_image_s"])
    gpu = roofline(model, A100)
    res.update(gpu=gpu, a100_over_dstar=gpu["per_image_s"] / res["dstar"]["per_image_s"],
               a100_over_int8=gpu["per_image_s"] / res["int8"]["per_image_s"])
    return res
