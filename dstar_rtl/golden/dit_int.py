"""The integer DiT-block golden (numerics §2.7, last paragraph): one DiT block over the denoising
steps, entirely in integers, as the core must compute it bit for bit.

:class:`IntDiTBlock` takes one block's float weights (:func:`models.dit.init_params` names), a
:class:`~golden.config.Config` and the block's SAR masks; :meth:`IntDiTBlock.step` takes the
step's tokens ``x`` (N, D) and the six adaLN vectors (6, D), both in the activation format
(``act_width`` bits signed, ``act_frac`` fractional bits), and returns a :class:`BlockStep` with
every intermediate and every state after the step. The dataflow is that of
:meth:`models.dit.DiT.block`::

    ln1 = layernorm(x);  a = modulate(ln1, shift1, scale1)                  VPU (2.7)
    [q|k] = QK(a)  (cache steps only);  v = V(a)                            differential (2.5)
    cache step: S = requant(FMDQ(q)·kv_int8(k)ᵀ), 1/sqrt(d) in its scale    MPU (2.4, 2.6)
                P = softmax(S | block mask) (0..127);  P-cache = FMDQ(P, r0 = 0)
    every step: o = requant(P-cache · kv_int8(v))                           MPU (2.6)
    h1 = gated_residual(x, gate1, proj(o))                                  differential, VPU
    ln2 = layernorm(h1);  m = modulate(ln2, shift2, scale2)                 VPU
    out = gated_residual(h1, gate2, fc2(gelu(fc1(m))))                      differential, VPU

Every linear layer (``qk``, ``v``, ``proj``, ``fc1``, ``fc2``) is a closed-loop (default)
differential FMDQ layer, :class:`golden.differential.DiffLinear`: state ``x̂`` (``act_width + 1``
bits) and running sum ``Y`` (``acc_bits``), output ``y = sat(rnd(Y·m + b·2**sh, sh))`` in the
act format. The fused qkv is two layers on the same input (numerics §2.5): ``qk`` (2D outputs,
stepped only on cache steps ``t % interval == 0``) and ``v`` (D outputs, every step).

Choices where the numerics contract is silent (docs/architecture.md, "Integer DiT-block golden"):

* **One activation format for every tensor.** All activations of the block (tokens, LayerNorm,
  modulation, layer outputs, ``Q``, ``K``, ``V``, logits ``S``, attention output, GELU) are in the
  configuration's act format; there are no per-tensor activation scales and no calibration of
  them. The float constants are the INT8 weight scales ``s_w`` (per output channel, from the float
  weights, :func:`golden.differential.quantize_weights`), the biases (rounded to act LSBs) and the
  two attention scales below; all become ``(m, sh)`` by :func:`golden.fmdq.requant_params` when
  the block is built.
* **A static base ``B`` per layer** (default ``cfg.base_log2`` for all; or per float layer,
  :data:`BASE_KEYS`), ``Q`` in ``Q·Kᵀ`` at the qkv layer's.
* **Q·Kᵀ**: ``Q`` of each head (N tokens × d channels) goes through the FMDQ quantizer, not
  differentially (numerics §2.4), with base ``B``; a sub-channel is T queries × one channel. ``K``
  per head becomes INT8 by :func:`golden.vpu.kv_int8` (``K ≈ k_w·2**k_e``). The product
  ``acc = Σ_c q·2**e · k_w`` (:func:`golden.schedule.reference_product`, equal to the MPU
  executor) becomes ``S = sat(rnd(acc·m_S, sh_S - k_e))`` with
  ``(m_S, sh_S) = requant_params(2**-B / sqrt(d))``: ``1/sqrt(d)`` and the base are in the float
  scale, ``2**k_e`` folds in as a shift. Only kept entries are computed; dropped ones are 0 in
  :attr:`AttnStep.s` and take no part in the softmax.
* **P·V**: ``P`` from :func:`golden.vpu.softmax` is quantized by :func:`golden.sar.quantize_p`
  (FMDQ, ``r0 = 0``, ``e = 0``) into the P-cache record; ``V`` per head by ``kv_int8``;
  ``o = sat(rnd(acc·m_O, sh_O - v_e))`` with ``(m_O, sh_O) = requant_params(2**-p_base_log2)``
  and ``acc = P_cache · v_w``. A reuse step multiplies the cached record by the new ``v_w``.
  Attention products have no bias.
* Build-time refusal (numerics §2.1): every requantization shift, including ``sh_S - k_e`` and
  ``sh_O - v_e`` for the largest runtime exponent ``kv_e_max`` an act-format tensor can need,
  must lie in ``[0, sh_max]``.
* **LayerNorm eps** ``1e-6`` (as the float DiT) becomes the program constant
  :func:`golden.vpu.layernorm_eps_int` once.
* **Step counter**: the block counts its own steps from 0 (:attr:`IntDiTBlock.t`);
  :meth:`IntDiTBlock.reset` restarts it with zero state. The first step is a cache step.
* **Packed P-cache bytes** (:func:`pack_pcache`): numerics §2.6's record with a 3-bit precision code
  ``b/2`` (:data:`golden.sar.PRECISION_CODE_BITS`), then the T values of the sub-channel, queries
  in order, ``b``-bit two's complement; kept blocks in row-major (query block, key block) order,
  keys in order inside a block; the first field at bit 0, bytes little-endian (the bit order of
  :func:`golden.layouts.pack`), padded with zero bits to a whole byte per head.
* The derived accumulator width only: a narrower explicit ``acc_width`` is refused (the attention
  products would need the saturating, order-dependent MPU executor).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dstar_rtl.golden import vpu
from dstar_rtl.golden.config import Config
from dstar_rtl.golden.differential import DiffLinear, quantize_weights
from dstar_rtl.golden.fmdq import Quantized, requant_params, requantize
from dstar_rtl.golden.sar import (
    PRECISION_CODE_BITS,
    PCacheRecord,
    expand_mask,
    is_cache_step,
    quantize_p,
)
from dstar_rtl.golden.schedule import (
    Counters,
    quantize_counted,
    reduction_pieces,
    reference_product,
)

__all__ = ["IntDiTBlock", "BlockStep", "LayerStep", "AttnStep", "LAYERS", "MOD_NAMES", "BASE_KEYS",
           "pack_pcache", "unpack_pcache", "kv_e_max"]

# The block's differential layers in execution order, and the adaLN vectors in DiT.block order.
LAYERS = ("qk", "v", "proj", "fc1", "fc2")
#: Each layer's name in a per-layer base (``base_log2`` as a dict): the float layer it comes
#: from (``qk`` and ``v`` are the fused qkv's two parts and share its base; ``Q`` too).
BASE_KEYS = {"qk": "attn.qkv", "v": "attn.qkv", "proj": "attn.proj", "fc1": "mlp.fc1",
             "fc2": "mlp.fc2"}
MOD_NAMES = ("shift1", "scale1", "gate1", "shift2", "scale2", "gate2")


def kv_e_max(cfg: Config) -> int:
    """Largest exponent :func:`golden.vpu.kv_int8` can return for an act-format tensor: the
    smallest ``e`` with ``rnd(2**(act_width-1), e) <= 127``."""
    return vpu.kv_shift(1 << (cfg.act_width - 1))


# =============================================================================== records
@dataclass
class LayerStep:
    """One differential layer in one step (all int64).

    ``updated`` is False for ``qk`` on a reuse step: then ``x``, ``dx``, ``qz``, ``acc`` are None,
    ``xhat``/``Y`` are the unchanged state and ``y`` the last cache step's output (what ABUF
    still holds; with a stored Y not ``requant(Y)`` of the rounded state).

    x     (N, cin)   input, act_width bits
    dx    (N, cin)   ``x - x̂_{t-1}`` (closed loop), act_width + 2 bits
    qz               the FMDQ sub-channels of ``dx`` (:class:`golden.fmdq.Quantized`,
                     (tile, channel) order); ``qz.saturated`` marks clipped sub-channels
    xhat  (N, cin)   ``x̂_t`` after the step, act_width + 1 bits (open loop: ``x_t``)
    acc   (N, cout)  this step's MPU result ``Σ q·2**e·W``, acc_bits
    Y     (N, cout)  running sum after the step, acc_bits
    y     (N, cout)  requantized output, act_width bits

    The INT8 core's dense layers (:class:`golden.dit_int8.Int8DiTBlock`) have no state: ``xhat``,
    ``Y``, ``dx`` and ``qz`` are None, ``tiles`` holds the :class:`golden.dense_int8.Int8Tile` of
    each token tile, and ``y`` of a skipped ``qk`` is the last cache step's output.
    """

    name: str
    updated: bool
    xhat: np.ndarray
    Y: np.ndarray
    x: np.ndarray | None = None
    dx: np.ndarray | None = None
    qz: Quantized | None = None
    acc: np.ndarray | None = None
    y: np.ndarray | None = None
    y_saturated: int = 0
    counters: dict = field(default_factory=dict)
    flags: dict = field(default_factory=dict)
    tiles: list | None = None


@dataclass
class AttnStep:
    """The attention of one step (all int64; heads H, tokens N, head width d).

    Cache-step only (None on reuse steps): ``q`` (H, N, d) act; ``q_qz`` per head the FMDQ
    sub-channels of ``Q`` (T queries × 1 channel); ``k_w`` (H, N, d) INT8 and ``k_e`` (H,);
    ``s_acc`` (H, N, N) the product ``Σ q·2**e·k_w`` (acc_bits; 0 on dropped blocks); ``s``
    (H, N, N) logits, act format (0 on dropped blocks); ``p`` (H, N, N) softmax, unsigned
    ``p_base_log2`` bits.

    Every step: ``pcache`` per head the :class:`golden.sar.PCacheRecord` used (written on a cache
    step, read on a reuse step) and ``pcache_bytes`` its packed bytes per head
    (:func:`pack_pcache`); ``counters`` the QPU counters of the step's attention quantization as
    the core runs it (cache step: ``Q`` per head and query tile, and ``P`` per head and query
    tile over all ``N`` key columns, a dropped block's columns zero sub-channels; reuse step:
    none); ``v_w`` (H, N, d) INT8, ``v_e`` (H,); ``o_acc`` (H, N, d)
    ``P_cache · v_w`` (at most ``bitlen(N·127·127) + 1`` bits); ``o`` (H, N, d) act;
    ``o_tokens`` (N, H·d) act, the heads side by side (input of ``proj``).
    """

    cache_step: bool
    pcache: list
    pcache_bytes: list
    v_w: np.ndarray
    v_e: np.ndarray
    o_acc: np.ndarray
    o: np.ndarray
    o_tokens: np.ndarray
    q: np.ndarray | None = None
    q_qz: list | None = None
    k_w: np.ndarray | None = None
    k_e: np.ndarray | None = None
    s_acc: np.ndarray | None = None
    s: np.ndarray | None = None
    p: np.ndarray | None = None
    counters: dict = field(default_factory=dict)


@dataclass
class BlockStep:
    """Everything one step of :class:`IntDiTBlock` produced (int64, act format unless noted).

    ``x`` (N, D) input; ``mod`` (6, D) adaLN vectors (:data:`MOD_NAMES`); ``ln1``, ``a``
    (modulated), ``h1`` (after the attention's gated residual), ``ln2``, ``m``, ``gelu`` (N, D or
    N, M); ``out`` (N, D) the block output; ``layers`` one :class:`LayerStep` per name of
    :data:`LAYERS`; ``attn`` the :class:`AttnStep`; ``saturation`` per stage the number of values
    that saturated in this step (``<layer>.fmdq``: clipped sub-channels of the quantizer;
    ``p_quant``: P values changed by the P-cache quantizer).
    """

    step: int
    cache_step: bool
    x: np.ndarray
    mod: np.ndarray
    ln1: np.ndarray
    a: np.ndarray
    attn: AttnStep
    h1: np.ndarray
    ln2: np.ndarray
    m: np.ndarray
    gelu: np.ndarray
    out: np.ndarray
    layers: dict
    saturation: dict

    @property
    def saturated(self) -> int:
        """Total saturations of the step."""
        return int(sum(self.saturation.values()))

    @property
    def pcache_bytes(self) -> int:
        """P-cache bytes of the block (all heads)."""
        return sum(len(b) for b in self.attn.pcache_bytes)


# ============================================================================ P-cache bytes
def _nb(N: int, Bs: int) -> int:
    return -(-N // Bs)


def pack_pcache(rec: PCacheRecord, mask, cfg: Config) -> bytes:
    """The P-cache record of one head as bytes (numerics §2.6; bit order in the module docstring).

    ``rec`` from :func:`golden.sar.quantize_p` with the head's block ``mask`` (nb, nb). Per kept
    block (row-major) and key column: the code ``b/2`` on :data:`PRECISION_CODE_BITS` bits, then
    (when ``b > 0``) the ``Bs`` quantized values of the queries, ``b`` bits two's complement each.
    Length ``rec.bytes``.
    """
    Bs = cfg.tile
    mask = np.asarray(mask, bool)
    N = rec.values.shape[-1]
    nb = _nb(N, Bs)
    p = np.zeros((nb * Bs, nb * Bs), np.int64)
    p[:N, :N] = rec.values
    word, off = 0, 0
    for qa, kb in zip(*np.nonzero(mask)):
        for j in range(Bs):
            b = int(rec.b[qa, kb, j])
            word |= (b // 2) << off
            off += PRECISION_CODE_BITS
            if b:
                lim = (1 << b) - 1
                for i in range(Bs):
                    word |= (int(p[qa * Bs + i, kb * Bs + j]) & lim) << off
                    off += b
    if off != rec.bits:   # the record's own size and the packing must agree
        raise AssertionError(f"P-cache packing produced {off} bits, record says {rec.bits}")
    return word.to_bytes(rec.bytes, "little")


def unpack_pcache(data: bytes, mask, N: int, cfg: Config):
    """Inverse of :func:`pack_pcache`: ``(values (N, N), b (nb, nb, Bs))`` as int64."""
    Bs = cfg.tile
    mask = np.asarray(mask, bool)
    nb = _nb(N, Bs)
    word = int.from_bytes(bytes(data), "little")
    p = np.zeros((nb * Bs, nb * Bs), np.int64)
    bmap = np.zeros((nb, nb, Bs), np.int64)
    off = 0
    for qa, kb in zip(*np.nonzero(mask)):
        for j in range(Bs):
            b = 2 * ((word >> off) & ((1 << PRECISION_CODE_BITS) - 1))
            off += PRECISION_CODE_BITS
            bmap[qa, kb, j] = b
            for i in range(Bs if b else 0):
                v = (word >> off) & ((1 << b) - 1)
                p[qa * Bs + i, kb * Bs + j] = v - (1 << b) if v >> (b - 1) else v
                off += b
    return p[:N, :N], bmap


# ============================================================================== the block
def _int_array(name: str, v, shape: tuple, width: int):
    """``v`` as int64 of ``shape`` within ``width`` signed bits, else ValueError naming ``name``."""
    a = np.asarray(v)
    if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name} must hold integers (act format), not {a.dtype}")
    if a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, not {a.shape}")
    a = a.astype(np.int64)
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    if a.size and (a.min() < lo or a.max() > hi):
        raise ValueError(f"{name} exceeds the {width}-bit act range [{lo}, {hi}]: "
                         f"{int(a.min())}..{int(a.max())}")
    return a


class IntDiTBlock:
    """Block ``index`` of a DiT in integers over denoising steps (module docstring).

    Parameters
    ----------
    params : dict of float weights (:func:`models.dit.init_params` names ``blocks.<i>.…``).
    index : the block number.
    spec : the :class:`models.dit.DiTSpec` (hidden, heads, mlp width, tokens).
    cfg : the :class:`~golden.config.Config`.
    mask : (heads, nb, nb) bool SAR block mask (diagonal kept); None keeps every block.
    interval : SAR cache-step interval (default ``cfg.sar_interval``; 1 = every step a cache step).
    base_log2 : static base ``B`` of every layer and of ``Q`` (default ``cfg.base_log2``), or a
        dict ``{name: B}`` over the names of :data:`BASE_KEYS` (``attn.qkv`` for ``qk``, ``v``
        and ``Q``; a name left out takes ``cfg.base_log2``).
    eps : LayerNorm eps (float, converted once).
    schedule : build the QPU group schedule of every quantization (default). ``False`` takes
        the same integers about five times faster, with only the precision counters
        (:func:`golden.schedule.precision_counters`): for sweeps over many samples.

    State (inspectable, changed only by :meth:`step` and :meth:`reset`): :attr:`layers`
    (``DiffLinear`` per name of :data:`LAYERS`: ``.state`` is ``x̂``, ``.Y`` the running sum,
    ``.flags`` the sticky flags), :attr:`pcache` (the :class:`~golden.sar.PCacheRecord` per head
    of the last cache step), :attr:`t` (steps done). :meth:`state` copies all of it.
    """

    def __init__(self, params: dict, index: int, spec, cfg: Config, mask=None, *,
                 interval: int | None = None, base_log2: int | None = None, eps: float = 1e-6,
                 schedule: bool = True, pieces: dict | None = None):
        if not isinstance(cfg, Config):
            raise ValueError(f"cfg must be a golden.config.Config, not {type(cfg).__name__}")
        self.schedule = bool(schedule)
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < spec.depth:
            raise ValueError(f"index must be a block number in [0, {spec.depth}), not {index!r}")
        if cfg.acc_bits < cfg.safe_acc_width:
            raise ValueError(f"cfg.acc_width {cfg.acc_width} is narrower than the derived "
                             f"{cfg.safe_acc_width}; the integer DiT block supports only the "
                             f"width that cannot overflow")
        self.cfg, self.spec, self.index = cfg, spec, index
        #: Reduction pieces per layer beyond the least (``{layer: p}``; the compiler runs them):
        #: ``fc2`` in a multiple of ``cfg.mlp_chunks`` (the least one at or above what
        #: ``max_reduction`` needs) unless ``pieces`` says otherwise.
        k = cfg.mlp_chunks
        chunks = ({"fc2": k * -(-reduction_pieces(spec.mlp_hidden, cfg) // k)} if k > 1
                  else {})
        self.layer_pieces = {**chunks, **dict(pieces or {})}
        unknown = sorted(set(self.layer_pieces) - set(LAYERS))
        if unknown:
            raise ValueError(f"pieces: no layer {unknown[0]!r}; layers are {list(LAYERS)}")
        N, D, H, d = spec.tokens, spec.hidden, spec.heads, spec.head_dim
        for what, n, bound, name in (
                ("spec.tokens (softmax row and P·V reduction)", N, cfg.max_reduction,
                 "max_reduction"),
                ("spec.head_dim (Q·Kᵀ reduction)", d, cfg.max_reduction, "max_reduction"),
                ("spec.hidden (LayerNorm row)", D, cfg.ln_max, "ln_row_max")):
            if n > bound:
                raise ValueError(f"{what} is {n}; {name} of {cfg.name!r} is {bound}")
        self.interval = cfg.sar_interval if interval is None else interval
        if not isinstance(self.interval, int) or isinstance(self.interval, bool) \
                or self.interval < 1:
            raise ValueError(f"interval must be an integer >= 1, not {self.interval!r}")
        if isinstance(base_log2, dict):
            bad = sorted(set(base_log2) - set(BASE_KEYS.values()))
            if bad:
                raise ValueError(f"base_log2 names {bad} are not layers of a block; names are "
                                 f"{sorted(set(BASE_KEYS.values()))}")
            self.bases = {k: base_log2.get(BASE_KEYS[k], cfg.base_log2) for k in LAYERS}
        else:
            self.bases = dict.fromkeys(LAYERS, cfg.base_log2 if base_log2 is None else base_log2)
        for B in self.bases.values():
            if not isinstance(B, int) or isinstance(B, bool) or not 0 <= B <= cfg.B_max:
                raise ValueError(f"base_log2 must be an integer in [0, {cfg.B_max}], not {B!r}")
        self.B = self.bases["qk"]
        nb = _nb(N, cfg.tile)
        if mask is None:
            mask = np.ones((H, nb, nb), bool)
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != (H, nb, nb):
            raise ValueError(f"mask must be a bool array of shape {(H, nb, nb)} (heads, blocks, "
                             f"blocks), not {mask.dtype} {mask.shape}")
        if not mask[:, np.arange(nb), np.arange(nb)].all():
            raise ValueError("mask must keep every diagonal block (numerics §2.6)")
        self.mask = mask.copy()
        self.mask_el = expand_mask(self.mask, N, cfg.tile)
        self.tables = vpu.vpu_tables(cfg)
        self.eps_q = vpu.layernorm_eps_int(D, eps, cfg, self.tables)

        n = f"blocks.{index}"
        M = spec.mlp_hidden
        shapes = {"attn.qkv": (D, 3 * D), "attn.proj": (D, D), "mlp.fc1": (D, M),
                  "mlp.fc2": (M, D)}
        w = {}
        for k, shp in shapes.items():
            for suffix, s in (("W", shp), ("b", shp[1:])):
                key = f"{n}.{k}.{suffix}"
                if key not in params:
                    raise ValueError(f"params lacks {key!r}")
                a = np.asarray(params[key], np.float64)
                if a.shape != s or not np.all(np.isfinite(a)):
                    raise ValueError(f"params[{key!r}] must be finite with shape {s}, not "
                                     f"{a.shape}")
                w[f"{k}.{suffix}"] = a
        Wqkv, bqkv = w["attn.qkv.W"], w["attn.qkv.b"]
        parts = {"qk": (Wqkv[:, :2 * D], bqkv[:2 * D], f"{n}.attn.qkv[qk]"),
                 "v": (Wqkv[:, 2 * D:], bqkv[2 * D:], f"{n}.attn.qkv[v]"),
                 "proj": (w["attn.proj.W"], w["attn.proj.b"], f"{n}.attn.proj"),
                 "fc1": (w["mlp.fc1.W"], w["mlp.fc1.b"], f"{n}.mlp.fc1"),
                 "fc2": (w["mlp.fc2.W"], w["mlp.fc2.b"], f"{n}.mlp.fc2")}
        self.layers = {}
        for k in LAYERS:
            Wf, bf, name = parts[k]
            Wq, s_w = quantize_weights(Wf, cfg.weight_width)
            self.layers[k] = self._make_layer(k, Wq, s_w, bf, name)
        self._attention_scales(d)
        self.t = 0
        self.pcache = None
        self.qk_y = None            # the last cache step's qk output (ABUF keeps it)

    def _make_layer(self, k, Wq, s_w, bias, name):
        """Layer ``k`` of the block: a closed-loop differential FMDQ layer at its base."""
        return DiffLinear(Wq, s_w, self.cfg, bias=bias, base_log2=self.bases[k], name=name,
                          schedule=self.schedule, pieces=self.layer_pieces.get(k))

    def _attention_scales(self, d: int):
        """The attention requantizations (module docstring); runtime exponents fold in as
        shifts, which must stay in ``[0, sh_max]`` for the largest K/V exponent."""
        cfg = self.cfg
        self.s_m, self.s_sh = requant_params(2.0 ** -self.B / math.sqrt(d), cfg.mult_width)
        self.o_m, self.o_sh = requant_params(2.0 ** -cfg.p_base_log2, cfg.mult_width)
        emax = kv_e_max(cfg)
        for what, sh in (("S (2**-B / sqrt(d))", self.s_sh), ("O (2**-p_base_log2)", self.o_sh)):
            if sh - emax < 0 or sh > cfg.sh_max:
                raise ValueError(f"block {self.index}: requantization of {what} needs shifts "
                                 f"{sh - emax}..{sh}, outside [0, {cfg.sh_max}]")

    @classmethod
    def from_model(cls, model, index: int, cfg: Config, mask=None, **kw) -> "IntDiTBlock":
        """The block ``index`` of a :class:`models.dit.DiT` instance (its params and spec)."""
        return cls(model.params, index, model.spec, cfg, mask, **kw)

    # ------------------------------------------------------------------ state
    def reset(self):
        """Zero state (``x̂ = 0``, ``Y = 0``, no P cache, sticky flags cleared), step 0."""
        for layer in self.layers.values():
            layer.reset()
            layer.flags = dict(y_saturated=0, Y_saturated=False, xhat_saturated=False,
                               acc_overflow=False)
        self.t = 0
        self.pcache = None
        self.qk_y = None

    def _layer_state(self, k):
        layer = self.layers[k]
        N = self.spec.tokens
        cin, cout = layer.W.shape
        xh = np.zeros((N, cin), np.int64) if layer.state is None else layer.state.copy()
        Y = np.zeros((N, cout), np.int64) if layer.Y is None else layer.Y.copy()
        return xh, Y

    def state(self) -> dict:
        """Copies of the state: ``{layer: {"xhat", "Y", "flags"}}``, ``"pcache"`` (per head the
        record's values, or None before the first step) and ``"t"``."""
        out = {}
        for k in LAYERS:
            xh, Y = self._layer_state(k)
            out[k] = dict(xhat=xh, Y=Y, flags=dict(self.layers[k].flags))
        out["pcache"] = None if self.pcache is None else [r.values.copy() for r in self.pcache]
        out["t"] = self.t
        return out

    # ------------------------------------------------------------------ one step
    def _run_layer(self, k, x, sat) -> LayerStep:
        layer = self.layers[k]
        before = layer.flags["y_saturated"]
        r = layer.step(x)
        ys = layer.flags["y_saturated"] - before
        sat[k] = ys
        sat[f"{k}.fmdq"] = int(np.count_nonzero(r.qz.saturated))
        if k == "qk":
            self.qk_y = r.y.copy()
        xh, Y = self._layer_state(k)
        return LayerStep(name=layer.name, updated=True, xhat=xh, Y=Y, x=x, dx=r.dx, qz=r.qz,
                         acc=r.acc, y=r.y, y_saturated=ys, counters=dict(r.counters.values),
                         flags=dict(layer.flags))

    def _idle_layer(self, k) -> LayerStep:
        xh, Y = self._layer_state(k)
        y = self.qk_y.copy() if k == "qk" and self.qk_y is not None else None
        return LayerStep(name=self.layers[k].name, updated=False, xhat=xh, Y=Y, y=y,
                         flags=dict(self.layers[k].flags))

    def _heads(self, y):
        """(N, H·d) → (H, N, d)."""
        s = self.spec
        return y.reshape(s.tokens, s.heads, s.head_dim).transpose(1, 0, 2)

    def _attention(self, cache: bool, yqk, yv, sat) -> AttnStep:
        """The attention of one step (module docstring); the datapath's parts are
        :meth:`_scores`, :meth:`_cache_p`, :meth:`_requant_o` and :meth:`_packed`."""
        s = self.spec
        N, D, H, d = s.tokens, s.hidden, s.heads, s.head_dim
        extra, ctr = {}, Counters()
        if cache:
            q, k = self._heads(yqk[:, :D]), self._heads(yqk[:, D:])
            k_w, k_e = vpu.kv_int8(k, self.cfg)
            s_acc = np.zeros((H, N, N), np.int64)
            S = np.zeros((H, N, N), np.int64)
            q_qz = []
            sat["s"] = 0
            for h in range(H):
                q_qz.append(self._scores(h, q[h], k_w[h], int(k_e[h]), s_acc[h], S[h], sat, ctr))
            P, sat["softmax"] = vpu.softmax(S, self.mask_el, self.cfg, self.tables)
            self._cache_p(P, sat, ctr)
            extra = dict(q=q, q_qz=q_qz, k_w=k_w, k_e=k_e, s_acc=s_acc, s=S, p=P)
        recs = self.pcache
        v_w, v_e = vpu.kv_int8(self._heads(yv), self.cfg)
        o_acc = np.stack([recs[h].values @ v_w[h] for h in range(H)])
        o = np.zeros_like(o_acc)
        sat["o"] = 0
        for h in range(H):
            o[h], ns = self._requant_o(o_acc[h], self.o_sh - int(v_e[h]))
            sat["o"] += ns
        return AttnStep(cache_step=cache, pcache=list(recs),
                        pcache_bytes=[self._packed(h, r) for h, r in enumerate(recs)],
                        v_w=v_w, v_e=v_e, o_acc=o_acc, o=o, counters=dict(ctr.values),
                        o_tokens=o.transpose(1, 0, 2).reshape(N, H * d), **extra)

    def _scores(self, h, q, k_w, k_e, s_acc, S, sat, ctr):
        """Head ``h``'s ``Q·Kᵀ`` into ``s_acc`` and ``S`` (kept entries; views, written in
        place): ``Q`` through the FMDQ quantizer at base ``B``. Returns its sub-channels."""
        cfg, N = self.cfg, self.spec.tokens
        qz, tiles = self._quantize(q, self.B, None, ctr)
        sat["q.fmdq"] = sat.get("q.fmdq", 0) + int(np.count_nonzero(qz.saturated))
        acc = np.concatenate(reference_product(qz, tiles, k_w.T, cfg), axis=0)[:N]
        kept = self.mask_el[h]
        s_acc[kept] = acc[kept]
        S[kept], ns = requantize(acc[kept], self.s_m, self.s_sh - k_e, 0, cfg.act_width,
                                 cfg.sh_max)
        sat["s"] += ns
        return qz

    def _quantize(self, a, base_log2, r0, ctr):
        """The QPU's quantization of the matrix ``a`` (one QUANT per token tile), its counters
        merged into ``ctr``: through the group schedule, or without it when the block was built
        with ``schedule=False`` (the same sub-channels; only the precision counters). Returns
        ``(qz, tiles)``."""
        qz, _, n, counted = quantize_counted(a, self.cfg, base_log2, r0, self.schedule)
        ctr.merge(counted)
        return qz, n

    def _cache_p(self, P, sat, ctr):
        """The P cache of a cache step (:func:`golden.sar.quantize_p` per head) and the QPU's
        counters for it."""
        cfg, H, N = self.cfg, self.spec.heads, self.spec.tokens
        self.pcache = [quantize_p(P[h], self.mask[h], cfg) for h in range(H)]
        # The core quantizes each query tile's whole row of P (r0 = 0): quantize_p keeps the
        # kept blocks' sub-channels; the counters count them all, as the QPU sees them (a
        # row longer than max_reduction is one no core runs: no counters for it).
        for h in range(H if N <= cfg.max_reduction else 0):
            self._quantize(np.where(self.mask_el[h], P[h], 0), None, 0, ctr)
        sat["p_quant"] = int(sum(np.count_nonzero(r.values != np.where(self.mask_el[h], P[h], 0))
                                 for h, r in enumerate(self.pcache)))

    def _requant_o(self, acc, sh):
        """``o`` of one head from ``P·V`` at shift ``sh`` (``sh_O - v_e``)."""
        return requantize(acc, self.o_m, sh, 0, self.cfg.act_width, self.cfg.sh_max)

    def _packed(self, h, rec) -> bytes:
        """Head ``h``'s P-cache bytes (:func:`pack_pcache`)."""
        return pack_pcache(rec, self.mask[h], self.cfg)

    def step(self, x, mod) -> BlockStep:
        """One denoising step: tokens ``x`` (N, D) and adaLN vectors ``mod`` (6, D), both int in
        the act format (``act_width`` bits). Returns the :class:`BlockStep`; ``out`` is the
        block output (N, D), act format."""
        cfg, s = self.cfg, self.spec
        N, D = s.tokens, s.hidden
        x = _int_array("x", x, (N, D), cfg.act_width)
        mod = _int_array("mod", mod, (len(MOD_NAMES), D), cfg.act_width)
        sh1, sc1, g1, sh2, sc2, g2 = mod
        T = self.tables
        sat = {}
        ln1, sat["ln1"] = vpu.layernorm(x, cfg, tables=T, eps_q=self.eps_q)
        a, sat["mod1"] = vpu.modulate(ln1, sh1, sc1, cfg)
        cache = is_cache_step(self.t, self.interval) or self.pcache is None
        layers = {}
        layers["qk"] = self._run_layer("qk", a, sat) if cache else self._idle_layer("qk")
        layers["v"] = self._run_layer("v", a, sat)
        attn = self._attention(cache, layers["qk"].y, layers["v"].y, sat)
        layers["proj"] = self._run_layer("proj", attn.o_tokens, sat)
        h1, sat["res1"] = vpu.gated_residual(x, g1, layers["proj"].y, cfg)
        ln2, sat["ln2"] = vpu.layernorm(h1, cfg, tables=T, eps_q=self.eps_q)
        m, sat["mod2"] = vpu.modulate(ln2, sh2, sc2, cfg)
        layers["fc1"] = self._run_layer("fc1", m, sat)
        g, sat["gelu"] = vpu.gelu(layers["fc1"].y, cfg, T)
        layers["fc2"] = self._run_layer("fc2", g, sat)
        out, sat["res2"] = vpu.gated_residual(h1, g2, layers["fc2"].y, cfg)
        res = BlockStep(step=self.t, cache_step=cache, x=x, mod=mod, ln1=ln1, a=a, attn=attn,
                        h1=h1, ln2=ln2, m=m, gelu=g, out=out, layers=layers,
                        saturation={k: int(v) for k, v in sat.items()})
        self.t += 1
        return res

    def run(self, xs, mods) -> list:
        """:meth:`step` over a sequence of (x, mod) pairs; returns the list of BlockStep."""
        xs, mods = list(xs), list(mods)
        if len(xs) != len(mods):
            raise ValueError(f"mods must have one entry per step: {len(xs)} x, {len(mods)} mods")
        return [self.step(x, m) for x, m in zip(xs, mods)]
