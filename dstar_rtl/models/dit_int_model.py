"""The integer golden of a whole DiT: every layer the core runs, in integers, bit for bit.

:class:`IntDiT` extends the integer DiT block (:class:`golden.dit_int.IntDiTBlock`) to the whole
model of :class:`models.dit.DiT`. Per denoising step the **host** (float, small, one token of
work each) computes, from the timestep ``t`` and the label:

- the conditioning vector ``c = t_mlp(timestep_embedding(t)) + y_embed[label]``;
- each block's six adaLN vectors ``adaLN_i(silu(c))`` and the final layer's two
  (``shift``, ``scale``);
- the patches of the noisy image ``x_t`` (``DiT.patchify``);

and hands them to the **core** in the activation format (``to_fixed``: ``act_width`` bits,
``act_frac`` fractional, saturating; :class:`HostInputs`). The core computes, in integers
(:meth:`IntDiT.step`)::

    e   = x_embed(patches)                          differential FMDQ layer (patch_dim → D)
    h   = gated_residual(pos, 1, e)                 = sat(pos + e); pos = to_fixed(pos_embed)
    h   = block_i(h, mod_i)                         IntDiTBlock, i = 0 .. depth-1
    f   = modulate(layernorm(h), shift, scale)      VPU
    eps = final(f)                                  differential FMDQ layer (D → patch_dim)

and the host reads ``eps`` (N, patch_dim) back, converts it to float (``eps / 2**act_frac``),
unpatchifies it and takes the DDIM step (:func:`ddim_sample_int`).

Choices (docs/architecture.md §8, "The whole DiT in integers"):

* With ``cfg.datapath == "int8"`` (the INT8 core, numerics §2.8) every layer, these two
  included, is a dense :class:`golden.dense_int8.DenseInt8Linear` and the blocks are
  :class:`golden.dit_int8.Int8DiTBlock`; there is no ``x̂``/``Y`` state (:attr:`ModelStep.state`
  is empty).
* The two new layers are differential like every other linear layer (closed loop by default),
  with their own ``x̂``/``Y`` state, the model's static base ``B`` and INT8 weights quantized per
  output channel from the float weights (:func:`golden.differential.quantize_weights`).
* The position embedding is a constant token matrix added by the VPU's gated residual with the
  gate ``1.0`` (``2**act_frac``), which makes the sum exact up to the saturation.
* Classifier-free guidance runs the conditional and the unconditional row as two models with the
  same weights, each with its own differential state (:func:`ddim_sample_int`): their inputs
  differ (the label), so their states must not mix.
* The DDIM update is the float one of :func:`models.dit.ddim_loop` (``x0`` clipped to
  ``[-1, 1]``), on the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dstar_rtl.golden import vpu
from dstar_rtl.golden.config import PRECISIONS, Config
from dstar_rtl.golden.dense_int8 import DenseInt8Linear
from dstar_rtl.golden.differential import DiffLinear, quantize_weights
from dstar_rtl.golden.dit_int import BASE_KEYS, MOD_NAMES, BlockStep
from dstar_rtl.golden.dit_int8 import make_block
from dstar_rtl.golden.fmdq import to_fixed
from dstar_rtl.golden.schedule import Counters
from dstar_rtl.models.dit import DiT, DiTSpec, _silu, ddim_loop, start_noise

__all__ = ["IntDiT", "HostInputs", "ModelStep", "ddim_sample_float", "ddim_sample_int",
           "guided_eps", "average_bits"]


@dataclass
class HostInputs:
    """What the host hands the core for one step, all int64 in the act format.

    ``patches`` (N, patch_dim): the noisy image's patches; ``mods`` (depth, 6, D): each block's
    adaLN vectors (:data:`golden.dit_int.MOD_NAMES` order); ``final_mod`` (2, D): the final
    layer's ``shift``, ``scale``; ``saturated``: values clipped by the float → act conversion.
    """

    patches: np.ndarray
    mods: np.ndarray
    final_mod: np.ndarray
    saturated: int = 0


@dataclass
class ModelStep:
    """One step of :class:`IntDiT` (int64, act format): the patch embedding's output ``embed``,
    the block input ``h0`` (with the position embedding), each block's
    :class:`~golden.dit_int.BlockStep`, the final LayerNorm ``ln``, modulation ``f`` and the
    model output ``eps`` (N, patch_dim); ``saturation`` counts saturated values per stage;
    ``state`` holds ``(x̂, Y)`` after the step of the two layers outside the blocks
    (``x_embed``, ``final.linear``; the blocks' are in their :class:`LayerStep` records)."""

    step: int
    inputs: HostInputs
    embed: np.ndarray
    h0: np.ndarray
    blocks: list
    ln: np.ndarray
    f: np.ndarray
    eps: np.ndarray
    saturation: dict = field(default_factory=dict)
    counters: dict = field(default_factory=dict)
    state: dict = field(default_factory=dict)

    @property
    def saturated(self) -> int:
        """Saturations of the step, the blocks' included."""
        return int(sum(self.saturation.values()) + sum(b.saturated for b in self.blocks))

    def layer_counters(self) -> dict:
        """QPU counters of every differential layer that ran this step: ``{name: {counter:
        value}}`` by the layers' own names (``x_embed``, ``blocks.<i>.attn.qkv[qk]``, ...,
        ``final.linear``)."""
        out = {"x_embed": self.counters["x_embed"]}
        for b in self.blocks:
            out.update({ls.name: ls.counters for ls in b.layers.values() if ls.updated})
        out["final.linear"] = self.counters["final.linear"]
        return out

    def average_bits(self) -> float:
        """Mean FMDQ precision over every sub-channel of the step's differential layers (a zero
        sub-channel counts 0 bits)."""
        return average_bits(self.layer_counters().values())

    def quant_counters(self) -> dict:
        """The QPU counters of every quantization of the step, summed: each differential layer
        that ran and every block's attention (``Q`` and ``P`` per query tile on a cache step).
        :func:`program.model.quant_counters` adds what a lowering adds (padded channels)."""
        total = Counters()
        for c in [*self.layer_counters().values(), *(b.attn.counters for b in self.blocks)]:
            for name, v in c.items():
                total.add(name, v)
        return dict(total.values)


def average_bits(counters, prefix: str = "") -> float:
    """Mean FMDQ precision of QPU counter sets (``<prefix>subchannels`` and
    ``<prefix>subchannels_b<b>`` of :data:`golden.layouts.COUNTER_NAMES`; the core's counters
    have the prefix ``qpu_``): a zero sub-channel counts 0 bits."""
    counters = list(counters)
    n = sum(c.get(f"{prefix}subchannels", 0) for c in counters)
    bits = sum(b * c.get(f"{prefix}subchannels_b{b}", 0) for c in counters for b in PRECISIONS)
    return bits / n if n else 0.0


def _layer(params, name, cfg, B, schedule=True):
    W, b = np.asarray(params[f"{name}.W"], np.float64), np.asarray(params[f"{name}.b"], np.float64)
    Wq, s_w = quantize_weights(W, cfg.weight_width)
    if cfg.datapath == "int8":
        return DenseInt8Linear(Wq, s_w, cfg, bias=b, name=name)
    return DiffLinear(Wq, s_w, cfg, bias=b, base_log2=B, name=name, schedule=schedule)


class IntDiT:
    """The whole DiT in integers (module docstring).

    Parameters
    ----------
    spec, params : the model (:class:`models.dit.DiTSpec` and the :func:`models.dit.init_params`
        names, e.g. from :func:`models.digits.load_trained` or
        :func:`models.checkpoint.load_checkpoint`).
    cfg : the configuration (the core's).
    masks : ``{"blocks.<i>.attn": (heads, nb, nb) bool}`` SAR masks, or None (every block kept).
    interval, eps : as :class:`golden.dit_int.IntDiTBlock`.
    schedule : as :class:`golden.dit_int.IntDiTBlock` (``False``: the same integers, faster,
        with only the precision counters).
    base_log2 : one static base for every layer (default ``cfg.base_log2``), or a dict over the
        model's float layer names (``x_embed``, ``blocks.<i>.attn.qkv``, ``blocks.<i>.attn.proj``,
        ``blocks.<i>.mlp.fc1``, ``blocks.<i>.mlp.fc2``, ``final.linear``: an operating point's
        ``base_log2``); a layer left out takes ``cfg.base_log2``.

    State: every layer's ``x̂`` and ``Y`` (changed only by :meth:`step` and :meth:`reset`);
    :attr:`t` counts the steps done.
    """

    def __init__(self, spec: DiTSpec, params: dict, cfg: Config, masks=None, *,
                 interval: int | None = None, base_log2: int | None = None, eps: float = 1e-6,
                 schedule: bool = True):
        if not isinstance(cfg, Config):
            raise ValueError(f"cfg must be a golden.config.Config, not {type(cfg).__name__}")
        masks = masks or {}
        self.spec, self.cfg = spec, cfg
        self.host = DiT(spec, params=params)
        if isinstance(base_log2, dict):
            known = {"x_embed", "final.linear"} | {f"blocks.{i}.{k}" for i in range(spec.depth)
                                                   for k in set(BASE_KEYS.values())}
            bad = sorted(set(base_log2) - known)
            if bad:
                raise ValueError(f"base_log2 names {bad} are not linear layers of the model")
            per_block = [{k[len(f"blocks.{i}."):]: v for k, v in base_log2.items()
                          if k.startswith(f"blocks.{i}.")} for i in range(spec.depth)]
            outer = {n: base_log2.get(n, cfg.base_log2) for n in ("x_embed", "final.linear")}
        else:
            per_block = [base_log2] * spec.depth
            B = cfg.base_log2 if base_log2 is None else base_log2
            outer = dict.fromkeys(("x_embed", "final.linear"), B)
        for n, B in outer.items():
            if not isinstance(B, int) or isinstance(B, bool) or not 0 <= B <= cfg.B_max:
                raise ValueError(f"base_log2 of {n} must be an integer in [0, {cfg.B_max}], "
                                 f"not {B!r}")
        self.blocks = [make_block(params, i, spec, cfg, masks.get(f"blocks.{i}.attn"),
                                  interval=interval, base_log2=per_block[i], eps=eps,
                                  schedule=schedule)
                       for i in range(spec.depth)]
        self.x_embed = _layer(params, "x_embed", cfg, outer["x_embed"], schedule)
        self.final = _layer(params, "final.linear", cfg, outer["final.linear"], schedule)
        pos = np.asarray(params["pos_embed"], np.float64)
        if pos.shape != (spec.tokens, spec.hidden):
            raise ValueError(f"pos_embed must have shape {(spec.tokens, spec.hidden)}, not "
                             f"{pos.shape}")
        self.pos, self.pos_saturated = to_fixed(pos, cfg.act_width, cfg.act_frac)
        self.one = np.full(spec.hidden, 1 << cfg.act_frac, np.int64)
        self.tables = vpu.vpu_tables(cfg)
        self.eps_q = vpu.layernorm_eps_int(spec.hidden, eps, cfg, self.tables)
        self.t = 0

    def reset(self):
        """Zero state in every layer, step 0."""
        for blk in self.blocks:
            blk.reset()
        for layer in (self.x_embed, self.final):
            layer.reset()
        self.t = 0

    # ------------------------------------------------------------------ host side (float)
    def host_inputs(self, img, t: int, label: int) -> HostInputs:
        """The step's inputs from the noisy image ``img`` (C, H, W), timestep ``t`` and
        ``label`` (``spec.classes`` is the null class), in the act format."""
        s, P, cfg = self.spec, self.host.params, self.cfg
        if not 0 <= label <= s.classes:
            raise ValueError(f"label must be in [0, {s.classes}] ({s.classes} is the null "
                             f"class), not {label}")
        c = _silu(self.host.condition(t, label))[None]
        mods = np.stack([(c @ P[f"blocks.{i}.adaLN.W"] + P[f"blocks.{i}.adaLN.b"])[0]
                         .reshape(len(MOD_NAMES), s.hidden) for i in range(s.depth)]) \
            if s.depth else np.zeros((0, len(MOD_NAMES), s.hidden))
        fin = (c @ P["final.adaLN.W"] + P["final.adaLN.b"])[0].reshape(2, s.hidden)
        sat = 0
        out = []
        for a in (self.host.patchify(img), mods, fin):
            q, n = to_fixed(a, cfg.act_width, cfg.act_frac)
            out.append(q)
            sat += n
        return HostInputs(patches=out[0], mods=out[1], final_mod=out[2], saturated=sat)

    # ------------------------------------------------------------------ core side (integers)
    def step(self, inputs: HostInputs) -> ModelStep:
        """One denoising step of every layer on the core; returns the :class:`ModelStep`."""
        cfg, T = self.cfg, self.tables
        sat = {}
        e = self.x_embed.step(inputs.patches)
        sat["x_embed"] = _clipped(e)
        h, sat["pos"] = vpu.gated_residual(self.pos, self.one, e.y, cfg)
        h0, steps = h, []
        for blk, mod in zip(self.blocks, inputs.mods):
            r: BlockStep = blk.step(h, mod)
            steps.append(r)
            h = r.out
        ln, sat["ln"] = vpu.layernorm(h, cfg, tables=T, eps_q=self.eps_q)
        f, sat["mod"] = vpu.modulate(ln, inputs.final_mod[0], inputs.final_mod[1], cfg)
        out = self.final.step(f)
        sat["final"] = _clipped(out)
        res = ModelStep(step=self.t, inputs=inputs, embed=e.y, h0=h0, blocks=steps, ln=ln, f=f,
                        eps=out.y, saturation=sat,
                        counters={"x_embed": dict(e.counters.values),
                                  "final.linear": dict(out.counters.values)},
                        state={} if cfg.datapath == "int8" else
                        {"x_embed": (self.x_embed.state.copy(), e.Y),
                         "final.linear": (self.final.state.copy(), out.Y)})
        self.t += 1
        return res

    def eps_image(self, step: ModelStep):
        """The model output of ``step`` as a float (C, H, W) image (host side)."""
        return self.eps_to_image(step.eps)

    def eps_to_image(self, eps):
        """A model output ``eps`` (N, patch_dim, act format) as a float (C, H, W) image."""
        return self.host.unpatchify(np.asarray(eps) / float(1 << self.cfg.act_frac))


def _clipped(r) -> int:
    """Sub-channels the quantizer clipped in a layer's step (the INT8 quantizer clips none)."""
    qz = getattr(r, "qz", None)
    return 0 if qz is None else int(np.count_nonzero(qz.saturated))


def guided_eps(eps_cond, eps_uncond, scale: float):
    """Classifier-free guidance: ``eps_u + scale · (eps_c - eps_u)`` (``scale = 1`` is the
    conditional model alone)."""
    return eps_uncond + scale * (eps_cond - eps_uncond)


def ddim_sample_float(model: DiT, steps: int, seed: int, label: int, guidance: float = 1.0):
    """:func:`models.dit.ddim_loop` from the noise of ``seed`` with the float DiT, with
    classifier-free guidance when ``guidance !=
    1`` (the unconditional row takes the null class ``spec.classes``)."""
    null = model.spec.classes

    def eps_fn(x, t, i):
        e = model.forward(x, t, label, i)
        return e if guidance == 1.0 else guided_eps(e, model.forward(x, t, null, i), guidance)
    return ddim_loop(start_noise(model.spec, seed)[0], steps, eps_fn)


def ddim_sample_int(models, steps: int, seed: int, label: int, guidance: float = 1.0,
                    on_step=None):
    """:func:`models.dit.ddim_loop` from the noise of ``seed`` with the integer model: per step
    the host's inputs, the core's step of every row, the host's float update.

    ``models``: one :class:`IntDiT` (``guidance == 1``: the conditional row only) or a pair
    ``(conditional, unconditional)`` with the same weights and separate state (``guidance !=
    1``; the unconditional row takes the null class). Both are reset first. ``on_step(i, t,
    done)`` is called after step ``i`` with the rows' :class:`ModelStep` list. Returns the image
    (C, H, W) and the list, per step, of the rows' :class:`ModelStep`.
    """
    rows = [models] if isinstance(models, IntDiT) else list(models)
    if guidance != 1.0 and len(rows) != 2:
        raise ValueError("classifier-free guidance needs two models (conditional, "
                         "unconditional), each with its own state")
    for m in rows:
        m.reset()
    labels = (label, rows[0].spec.classes)
    records = []

    def eps_fn(x, t, i):
        done = [m.step(m.host_inputs(x, t, labels[k])) for k, m in enumerate(rows)]
        records.append(done)
        if on_step is not None:
            on_step(i, t, done)
        eps = rows[0].eps_image(done[0])
        if len(rows) == 2 and guidance != 1.0:
            eps = guided_eps(eps, rows[1].eps_image(done[1]), guidance)
        return eps
    return ddim_loop(start_noise(rows[0].spec, seed)[0], steps, eps_fn), records
