"""Paper-scale projection: the RTL-calibrated core model (:mod:`sim.perf_model`) scaled to the
paper's chip and run on the layer shapes of the paper's seven DiTs
(:mod:`dstar.reports.dit_shapes`).

``dstar measure projection`` → ``reports/projection.{json,md,png}``.

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
* **Reduction pieces**: a core whose share of a layer is a single token tile would wait for
  that tile's whole QUANT before its first GEMM; the compiler can split each token tile's
  reduction into pieces (``compile_block(..., pieces=)``, program/compiler.py: the same
  outputs, bit-exact on the RTL), so each piece's QUANT runs beside the previous piece's GEMMs.
  For every DSTAR layer the chip takes the fastest count of :data:`PIECE_CHOICES` by this model
  (recorded as ``reduction_pieces``); the INT8 core cannot split (its quantizer scales a whole
  tile by one exponent), so it keeps one piece.
* **The chip**: 32 cores share each layer (token tiles first, then column blocks; attention
  by (sequence, head, query tile), head-major, so that a core makes K and V weights only for
  the heads its query tiles belong to: :func:`heads_per_core`); every layer's
  INT8 weights stream from HBM once per step; a layer takes the longer of its compute and its
  HBM traffic (a roofline per layer). The P cache (numerics §2.6 record) stays in the 512 KB
  scratchpad when every layer's cache fits next to one layer's activations; otherwise it lives
  in HBM and costs its write on cache steps and its read on reuse steps.
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
Each model also gets an A100 roofline bound (:mod:`dstar.reports.gpu_bound`: dense FP16 FLOPs
at the tensor cores' peak or the minimum HBM traffic, whichever is longer, every step), a bound in
the GPU's favour; ``a100_over_dstar`` is its time per image over DSTAR's, so the chip's real
lead over an A100 is at least that.

What it does not model: NoC contention, HBM latency (bandwidth only), the host, energy.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from dstar.options import Parser
from dstar.reports.dit_shapes import MODELS, Attention, DiTModel, Linear
from dstar.reports.gpu_bound import A100, roofline
from gen.errors import UserError
from gen.outputs import check_output_dir, read_json, save_png, write_together
from gen.progress import say
from golden.config import Config, ConfigError, preset
from program.compiler import FREE, FULL, P_READY, S_READY
from sim.core_work import Work
from sim.perf_model import INT8_QUANT_FIXED, Timing, simulate
from sim.timing import array_tile_period

__all__ = ["Chip", "Workload", "paper_timing", "int8_timing", "int8_workload", "heads_per_core",
           "project_model", "attention_parts", "pe_utilization", "attention_bound", "linear_cycles",
           "best_pieces", "vector_rows", "PIECE_CHOICES", "main"]


@dataclass(frozen=True)
class Chip:
    """The paper's chip (numerics §1)."""

    cores: int = 32
    freq_hz: float = 1e9
    scratchpad_bytes: int = 512 * 1024
    hbm_bytes_per_s: float = 1.5e12


@dataclass(frozen=True)
class Workload:
    """Statistics of the activations: FMDQ average ``bits`` of linear-layer inputs and of
    ``P`` (``p_bits``), lane ``fill``, SAR ``kept`` fraction of attention blocks and ``interval``
    (1 cache step every ``interval`` steps)."""

    name: str
    bits: float
    p_bits: float
    fill: float
    kept: float
    interval: int = 2


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
    :data:`sim.perf_model.INT8_QUANT_FIXED`) and the INT8 array's tile period and GEMM latency
    moved by the difference of :func:`sim.timing.array_tile_period` between ``int8_cfg`` and
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


#: Reduction piece counts the chip's compiler chooses among for a DSTAR layer
#: (program/compiler.py ``pieces``); the INT8 core cannot split (one exponent per tile).
PIECE_CHOICES = (1, 2, 3, 4, 6, 8)


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
        tiles = [(nch, g, nb)] * (_share(nt, cores) * parts)
    else:
        per = _share(nt * nb, cores)            # GEMMs per core, tiles of at most nb
        tiles = [(nch, g, min(nb, per))] * (math.ceil(per / nb) * parts)
    return _run(t, _stream(tiles))


def best_pieces(t: Timing, cfg: Config, x: Linear, bits: float | None, fill: float,
                cores: int) -> tuple:
    """``(cycles, pieces)``: the fastest of :data:`PIECE_CHOICES` for a DSTAR layer (the
    fewest pieces among equals), 1 for the INT8 array (``bits`` None)."""
    choices = (1,) if bits is None else PIECE_CHOICES
    return min((linear_cycles(t, cfg, x, bits, fill, cores, p), p) for p in choices)


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


def project_model(model: DiTModel, chip: Chip, t_dstar: Timing, t_base: Timing, cfg: Config,
                  wl: Workload) -> dict:
    """Latency of ``model`` per step and per image on DSTAR (``t_dstar``, workload ``wl``) and on
    the INT8 core (``t_base``, :func:`int8_workload` of ``wl``)."""
    bw = chip.hbm_bytes_per_s
    act_bytes = (cfg.act_width + 7) // 8

    def layer_time(cycles, nbytes):
        return max(cycles / chip.freq_hz, nbytes / bw)

    act_peak = max(x.tokens * max(x.cin, x.cout) * act_bytes for x in model.linears)
    pc_side = {side: sum(pcache_bytes(cfg, a, w) * a.count for a in model.attentions)
               for side, w in (("dstar", wl), ("int8", int8_workload(wl)))}
    pc_on_chip = {side: pc + min(act_peak, chip.scratchpad_bytes // 2) <= chip.scratchpad_bytes
                  for side, pc in pc_side.items()}
    pc_total = pc_side["dstar"]
    res = {}
    pieces = {"dstar": {}, "int8": {}}
    for side in ("dstar", "int8"):
        t = t_dstar if side == "dstar" else t_base
        swl = wl if side == "dstar" else int8_workload(wl)
        out = {}
        for cache in (True, False):
            lin = att = 0.0
            mem = 0.0
            ffn_cyc = 0
            parts = dict.fromkeys(("kv", "qk", "softmax", "p_quant", "pv"), 0)
            for x in model.linears:
                if x.cache_only and not cache:
                    continue
                bits = wl.bits if side == "dstar" else None
                cyc, npieces = best_pieces(t, cfg, x, bits, swl.fill, chip.cores)
                if cache:
                    pieces[side][x.name] = npieces
                ffn_cyc += x.count * cyc if _is_ffn(x) else 0
                wbytes = x.cin * x.cout
                abytes = x.tokens * (x.cin + x.cout) * act_bytes
                abytes = abytes if abytes > chip.scratchpad_bytes else 0
                lin += x.count * layer_time(cyc, wbytes + abytes)
                mem += x.count * (wbytes + abytes) / bw
            for a in model.attentions:
                part = attention_parts(t, cfg, a, swl, cache, chip.cores)
                cyc = sum(part.values())
                for k, v in part.items():
                    parts[k] += a.count * v
                pc = 0 if pc_on_chip[side] else pcache_bytes(cfg, a, swl)
                att += a.count * layer_time(cyc, pc)
                mem += a.count * pc / bw
            vec = vector_cycles(t, cfg, model, chip.cores) / chip.freq_hz
            out["cache" if cache else "reuse"] = dict(linear_s=lin, attention_s=att,
                                                      vector_s=vec, hbm_s=mem,
                                                      total_s=lin + att + vec)
            if cache:
                out["pe_utilization"] = pe_utilization(
                    model, chip, cfg, swl, ffn_cyc, sum(parts.values()), dense=side == "int8")
                out["attention_bound"] = attention_bound(model, cfg, swl,
                                                         dense=side == "int8")
                out["attention_bound_any_drain"] = attention_bound(
                    model, cfg, swl, dense=side == "int8", drain=False)
                out["attention_parts_cycles"] = parts
        n_cache = math.ceil(model.steps / wl.interval)
        per_image = (n_cache * out["cache"]["total_s"]
                     + (model.steps - n_cache) * out["reuse"]["total_s"])
        res[side] = dict(out, per_image_s=per_image, reduction_pieces=pieces[side])
    pc_traffic = 0.0 if pc_on_chip["dstar"] else pc_total / bw
    res.update(model=model.name, steps=model.steps, dense_gmacs_per_step=model.macs() / 1e9,
               pcache_bytes=pc_total,
               pcache_location="scratchpad" if pc_on_chip["dstar"] else "HBM",
               int8_pcache_bytes=pc_side["int8"],
               pcache_traffic_s_per_step=pc_traffic,
               speedup=res["int8"]["per_image_s"] / res["dstar"]["per_image_s"])
    gpu = roofline(model, A100)
    res.update(gpu=gpu, a100_over_dstar=gpu["per_image_s"] / res["dstar"]["per_image_s"],
               a100_over_int8=gpu["per_image_s"] / res["int8"]["per_image_s"])
    return res


# ----------------------------------------------------------------------------- report
def _workloads(profile: Path, bench: Path) -> tuple:
    """``(workloads, notes)``: the paper's statistics and, when ``dstar profile`` and
    ``dstar bench`` have run, ours (the trained digits DiT at the profile's SAR point closest to
    the paper's setting, interval 2)."""
    wls = [Workload("paper", bits=4.3, p_bits=4.3, fill=0.88, kept=0.63)]
    notes = ["paper: 4.3 average bits (also used for P), lane fill 0.88 (its FFN utilisation), "
             "37 % of attention work removed taken as 63 % of blocks kept"]
    if not (profile.exists() and bench.exists()):
        notes.append("ours: not available (run `dstar profile` and `dstar bench`)")
        return wls, notes
    prof = read_json(profile, "--profile (the report of `dstar profile`)")
    b = read_json(bench, "--bench (the report of `dstar bench`)")
    try:
        return _our_workload(prof, b, wls, notes)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise UserError(f"{profile} or {bench} is not a report of `dstar profile` / `dstar "
                        f"bench` ({type(exc).__name__}: {exc})") from None


def _our_workload(prof: dict, b: dict, wls: list, notes: list) -> tuple:
    """:func:`_workloads` from the two reports' contents."""
    from dstar.benches.layers import packer_words
    runs = prof["runs"]
    sar = [r for r in runs if r.get("sar") and r.get("sar_interval") == 2]
    if not sar:
        notes.append("ours: the profile has no SAR point at interval 2")
        return wls, notes
    pick = max(sar, key=lambda r: r["summary"]["attention_work_removed"]["mean"]
               if r["summary"]["psnr_db"]["mean"] >= 35 else -1)
    later = [v for k, v in b["totals"]["by_step"].items() if k != "0"]
    if not later:
        notes.append("ours: the bench measured no step after the first")
        return wls, notes
    fill = (sum(v["lanes_valid"] for v in later)
            / (sum(v["groups"] for v in later) * b["config"]["lanes"]))
    bits = pick["summary"]["avg_bits"]["mean"]
    kept = pick["summary"]["attention_kept_fraction"]["mean"]
    wls.append(Workload("ours", bits=round(bits, 2), p_bits=round(bits, 2),
                        fill=round(fill, 3), kept=round(kept, 3)))
    notes.append(f"ours: trained digits DiT, profile point `{pick['name']}` (the most attention "
                 f"work removed at PSNR >= 35 dB: {bits:.2f} bits, {kept:.2f} of blocks kept; P "
                 f"bits taken equal to the activations'), lane fill {fill:.3f} from `dstar bench` "
                 f"on the steps after the first ({packer_words(b['config'])})")
    return wls, notes


def load_calibration(perf_model: Path) -> dict:
    """The calibrated timings ``{preset: Timing dict}`` of ``dstar measure perf``'s
    ``perf_model.json``; :class:`UserError` (one line) when the file is missing or is not
    one."""
    if not perf_model.is_file():
        raise UserError(f"{perf_model} not found; run `dstar measure perf` first")
    recs = read_json(perf_model, "--perf-model (the calibration of `dstar measure perf`)")
    try:
        calibrated = {r["preset"]: r["timing"] for r in recs["presets"]}
        if not calibrated:
            raise ValueError("no preset in it")
        paper_timing(calibrated, preset("paper"))
    except (ValueError, KeyError, TypeError, ConfigError) as exc:
        raise UserError(f"{perf_model} is not a calibration of `dstar measure perf` "
                        f"({type(exc).__name__}: {exc})") from None
    return calibrated


def run(perf_model: Path, profile: Path, bench: Path) -> dict:
    calibrated = load_calibration(perf_model)
    cfg = preset("paper")
    t, notes = paper_timing(calibrated, cfg)
    # The INT8 array has the same tile flow and drain; its GEMM is one beat per channel.
    t_base = int8_timing(t, cfg, preset("paper", datapath="int8"))
    chip = Chip()
    rows = []
    wls, wl_notes = _workloads(profile, bench)
    for wl in wls:
        for model in MODELS.values():
            r = project_model(model, chip, t, t_base, cfg, wl)
            r["workload"] = asdict(wl)
            rows.append(r)
            say(f"[project] {wl.name:>26} | {model.name:<18} | DSTAR "
                f"{r['dstar']['per_image_s']:8.3f} s/image | INT8 "
                f"{r['int8']['per_image_s']:8.3f} s | {r['speedup']:.2f}× | P cache "
                f"{r['pcache_bytes'] / 2**20:8.1f} MiB in {r['pcache_location']}")
    return dict(chip=asdict(chip), config_hash=cfg.hash(), timing=t.to_dict(),
                timing_notes=notes, workload_notes=wl_notes, rows=rows)


def markdown(rec: dict) -> str:
    c = rec["chip"]
    lines = ["# Paper-scale projection",
             "",
             "Generated by `dstar measure projection` from the RTL-calibrated core model "
             "(`reports/perf_model.json`). Chip: "
             f"{c['cores']} cores of the `paper` core (64×64, lanes 4), {c['freq_hz'] / 1e9:g} "
             f"GHz, {c['scratchpad_bytes'] // 1024} KB scratchpad, HBM "
             f"{c['hbm_bytes_per_s'] / 1e12:g} TB/s. The baseline is the same chip with the "
             "INT8 core (`datapath = \"int8\"`: the INT8 array, dense layers, the two-pass "
             "INT8 quantizer, the same SAR schedule and masks as DSTAR). Latency per image over "
             "each model's usual sampling steps; a layer takes the longer of its compute and "
             "its HBM traffic. See the module docstring of `dstar/reports/project.py` for what "
             "is and is not modelled.", "",
             "A100 bound: each model's dense FP16 FLOPs per step at 312 TFLOPS or its "
             "minimum FP16 traffic at 1.555 TB/s, whichever is longer, over every step at batch "
             "1 (`dstar/reports/gpu_bound.py`): a bound in the GPU's favour (no softmax, "
             "normalization or launch time, perfect overlap), so a real A100 is slower and the "
             "chip's lead over it at least the ratio shown. The paper claims up to 7.33× "
             "lower latency than an A100.", "",
             "Timing carried to the paper core: " + "; ".join(rec["timing_notes"]) + ".", "",
             "Workloads: " + "; ".join(rec["workload_notes"]) + ".", ""]
    for wl in dict.fromkeys(r["workload"]["name"] for r in rec["rows"]):
        w = next(r["workload"] for r in rec["rows"] if r["workload"]["name"] == wl)
        lines += [f"## Workload: {wl} (bits {w['bits']}, P bits {w['p_bits']}, lane fill "
                  f"{w['fill']}, kept {w['kept']}, interval {w['interval']})", "",
                  "| model | steps | dense GMAC/step | DSTAR s/image | INT8 s/image | speed-up "
                  "| A100 bound s/image | A100 bound / DSTAR "
                  "| cache step: linear / attn / vector ms | reuse step ms | P cache | lives in "
                  "| P-cache traffic ms/step |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|"]
        rows = [r for r in rec["rows"] if r["workload"]["name"] == wl]
        for r in rows:
            d = r["dstar"]
            cs = d["cache"]
            lines.append(
                f"| {r['model']} | {r['steps']} | {r['dense_gmacs_per_step']:.0f} "
                f"| {d['per_image_s']:.3f} | {r['int8']['per_image_s']:.3f} "
                f"| {r['speedup']:.2f}× | {r['gpu']['per_image_s']:.3f} "
                f"| {r['a100_over_dstar']:.2f}× | {1e3 * cs['linear_s']:.1f} / "
                f"{1e3 * cs['attention_s']:.1f} / {1e3 * cs['vector_s']:.1f} "
                f"| {1e3 * d['reuse']['total_s']:.1f} | {r['pcache_bytes'] / 2**20:.1f} MiB "
                f"| {r['pcache_location']} | {1e3 * r['pcache_traffic_s_per_step']:.2f} |")
        lines += ["", "PE utilization on a cache step (module docstring of "
                  "`dstar/reports/project.py`; the paper reports > 88 % on FFN and > 75 % on "
                  "attention). *Bound*: the most attention can reach on this array with "
                  "everything but its GEMMs hidden and tiles back to back (each GEMM at least "
                  "its drain of `rows` tokens, P·V's column blocks padded to `T`; "
                  "`attention_bound`); *any drain*: the same with a drain of any width:", "",
                  "| model | DSTAR FFN | DSTAR attention | bound | any drain | INT8 FFN "
                  "| INT8 attention | bound | any drain |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            u = []
            for side in ("dstar", "int8"):
                u += [r[side]["pe_utilization"][part]["utilization"]
                      for part in ("ffn", "attention")]
                u += [r[side]["attention_bound"], r[side]["attention_bound_any_drain"]]
            lines.append(f"| {r['model']} | " + " | ".join(
                "–" if v is None else f"{100 * v:.1f} %" for v in u) + " |")
        lines += ["", "Reduction pieces the chip's compiler takes for each DSTAR layer of a "
                  "cache step (module docstring; 1 for every INT8 layer):", "",
                  "| model | pieces |", "|---|---|"]
        for r in rows:
            pc = r["dstar"]["reduction_pieces"]
            lines.append(f"| {r['model']} | " + ", ".join(
                f"{k} {v}" for k, v in pc.items() if v > 1) + (" |" if any(
                    v > 1 for v in pc.values()) else "none split |"))
        lines += ["", "Where DSTAR's attention cycles go on a cache step (one core, share of the "
                  "attention cycles; the parts run one after the other, so the M engine idles "
                  "during `kv` and `softmax`, which run on the V engine):", "",
                  "| model | K, V to INT8 weights | QKᵀ | softmax | P into the P cache | P·V |",
                  "|---|---:|---:|---:|---:|---:|"]
        for r in rows:
            p = r["dstar"]["attention_parts_cycles"]
            tot = sum(p.values()) or 1
            lines.append(f"| {r['model']} | " + " | ".join(
                f"{100 * p[k] / tot:.0f} %" for k in ("kv", "qk", "softmax", "p_quant", "pv"))
                + " |")
        lines.append("")
    return "\n".join(lines)


def plot(rec: dict, path):
    """The speed-ups per model and workload, as a PNG to ``path`` (a file name or a binary file
    object)."""
    from matplotlib.figure import Figure
    names = list(dict.fromkeys(r["model"] for r in rec["rows"]))
    wls = list(dict.fromkeys(r["workload"]["name"] for r in rec["rows"]))
    fig = Figure(figsize=(9, 4))
    ax = fig.subplots()
    w = 0.8 / len(wls)
    for i, wl in enumerate(wls):
        sp = [next(r["speedup"] for r in rec["rows"] if r["model"] == n
                   and r["workload"]["name"] == wl) for n in names]
        ax.bar([k + i * w for k in range(len(names))], sp, w, label=wl)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([k + w * (len(wls) - 1) / 2 for k in range(len(names))])
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("speed-up over the INT8 core (same chip)")
    ax.set_title("Projected DSTAR latency per image (RTL-calibrated core model)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path, dpi=120)


def main(argv=None, prog=None) -> int:
    ap = Parser(prog=prog or "dstar measure projection",
                description="Project DSTAR's latency on the paper's chip.")
    ap.add_argument("--perf-model", default="reports/perf_model.json",
                    help="calibrated timings (dstar measure perf)")
    ap.add_argument("--profile", default="reports/profile.json",
                    help="our workload statistics (dstar profile), if present")
    ap.add_argument("--bench", default="reports/bench.json",
                    help="our lane fill (dstar bench), if present")
    ap.add_argument("--out-dir", default="reports", help="report directory (default: reports)")
    a = ap.parse_args(argv)
    out = check_output_dir(a.out_dir)
    pm = Path(a.perf_model)
    load_calibration(pm)
    rec = run(pm, Path(a.profile), Path(a.bench))
    write_together({out / "projection.json": json.dumps(rec, indent=1),
                    out / "projection.md": markdown(rec),
                    out / "projection.png": lambda f: plot(rec, f)})
    say(f"[project] wrote {out / 'projection.json'}, .md and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
