"""A reference Diffusion Transformer (DiT) with a DDIM sampler, in float and in DSTAR's quantized
mode (numerics §2.5, 2.6).

The float model (:class:`DiT`) is a small DiT with random weights from a seed: patchify, fixed 2-D
sin-cos position embedding, sinusoidal timestep embedding + 2-layer SiLU MLP, a class table with a
null class, ``depth`` blocks with adaLN-Zero modulation (multi-head self-attention with a fused qkv
projection, tanh-GELU MLP), a final adaLN layer and unpatchify. It predicts the noise ``eps``.

Every linear layer goes through :meth:`DiT.linear` and every attention through
:meth:`DiT.attention`; :class:`TracingDiT` records their inputs, :class:`QuantizedDiT` replaces
them by differential FMDQ layers (:class:`golden.differential.DiffLinear`, one per layer name, state
kept across the denoising steps) and SAR attention (:class:`golden.sar.SARAttention`). Linear layers
marked ``host=True`` (timestep MLP, adaLN conditioning) run in float in every mode: the host
computes them (numerics §2.7). LayerNorm, modulation, GELU and residuals stay float in the quantized
mode too; the integer VPU golden is a separate model.

Random weights: ``N(0, 1/fan_in)`` for every projection; the adaLN weights are small but not zero
(``ada_std / sqrt(hidden)``) so the blocks contribute; ``W_k`` starts as a noisy copy of ``W_q``
scaled by ``qk_gain`` so attention favours similar (nearby, through the position embedding) tokens
and shows block sparsity, as a trained DiT does.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.differential import DiffLinear, quantize_weights
from dstar_rtl.golden.fmdq import to_fixed
from dstar_rtl.golden.fmdq_stats import LayerStats
from dstar_rtl.golden.sar import SARAttention, is_cache_step, profile_mask

__all__ = ["DiTSpec", "DIT_MODELS", "init_params", "DiT", "TracingDiT", "QuantizedDiT",
           "ddim_timesteps", "ddim_loop", "ddim_update", "start_noise", "ddim_sample",
           "record_trace", "calibrate_masks", "masks_from_trace", "compare",
           "linear_layer_names", "attention_layer_names"]

TRAIN_STEPS = 1000
BETA_START, BETA_END = 1e-4, 0.02


@dataclass(frozen=True)
class DiTSpec:
    """Model dimensions of the reference DiT.

    ``image_size`` × ``image_size`` images of ``channels`` channels are cut into ``patch`` ×
    ``patch`` patches: ``(image_size / patch)**2`` tokens of ``hidden`` features. ``freq_dim`` is
    the width of the sinusoidal timestep embedding. ``ada_std`` scales the adaLN weights,
    ``qk_gain`` the query/key weights (see the module docstring).
    """

    image_size: int = 16
    patch: int = 2
    channels: int = 4
    hidden: int = 32
    depth: int = 2
    heads: int = 4
    mlp_ratio: float = 2.0
    classes: int = 10
    freq_dim: int = 32
    ada_std: float = 0.5
    qk_gain: float = 4.0

    def __post_init__(self):
        for f in ("image_size", "patch", "channels", "hidden", "depth", "heads", "classes",
                  "freq_dim"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"DiTSpec.{f} must be a positive integer, not {v!r}")
        if self.image_size % self.patch:
            raise ValueError(f"DiTSpec.image_size ({self.image_size}) must be a multiple of "
                             f"patch ({self.patch})")
        if self.hidden % self.heads:
            raise ValueError(f"DiTSpec.hidden ({self.hidden}) must be a multiple of heads "
                             f"({self.heads})")
        if self.freq_dim % 2:
            raise ValueError(f"DiTSpec.freq_dim must be even, not {self.freq_dim}")
        if not self.mlp_ratio > 0 or int(self.hidden * self.mlp_ratio) < 1:
            raise ValueError(f"DiTSpec.mlp_ratio must be > 0, not {self.mlp_ratio!r}")
        for f in ("ada_std", "qk_gain"):
            v = getattr(self, f)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"DiTSpec.{f} must be a finite number >= 0, not {v!r}")

    @property
    def grid(self) -> int:
        return self.image_size // self.patch

    @property
    def tokens(self) -> int:
        return self.grid ** 2

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def mlp_hidden(self) -> int:
        return int(self.hidden * self.mlp_ratio)

    @property
    def patch_dim(self) -> int:
        return self.patch * self.patch * self.channels

    def to_dict(self) -> dict:
        return asdict(self)


# Named model sizes for the command line. ``small`` keeps every quantized layer at <= 64 input
# channels so it runs on every preset (``tiny`` has max_reduction 64).
DIT_MODELS = {
    "small": DiTSpec(),
    "tiny": DiTSpec(image_size=8, patch=2, channels=4, hidden=16, depth=1, heads=2,
                    mlp_ratio=2.0, classes=4, freq_dim=16),
}


def linear_layer_names(spec: DiTSpec) -> list:
    """Names of the linear layers that run on the accelerator, in execution order."""
    names = ["x_embed"]
    for i in range(spec.depth):
        names += [f"blocks.{i}.attn.qkv", f"blocks.{i}.attn.proj", f"blocks.{i}.mlp.fc1",
                  f"blocks.{i}.mlp.fc2"]
    return names + ["final.linear"]


def attention_layer_names(spec: DiTSpec) -> list:
    return [f"blocks.{i}.attn" for i in range(spec.depth)]


def _pos_embed(grid: int, dim: int):
    """Fixed 2-D sin-cos position embedding (half the features per axis), shape (grid², dim)."""
    def one_axis(pos, d):
        half = d // 2
        omega = 1.0 / 10000 ** (np.arange(half) / max(half, 1))
        out = np.outer(pos, omega)
        emb = np.concatenate([np.sin(out), np.cos(out)], axis=1)
        return np.pad(emb, ((0, 0), (0, d - emb.shape[1])))
    gy, gx = np.meshgrid(np.arange(grid), np.arange(grid), indexing="ij")
    d0 = dim // 2
    return np.concatenate([one_axis(gy.ravel(), d0), one_axis(gx.ravel(), dim - d0)], axis=1)


def init_params(spec: DiTSpec, seed: int = 0) -> dict:
    """Random weights of ``spec`` from ``seed``: a dict name → float64 array (W is (in, out))."""
    rng = np.random.default_rng(seed)
    D, M, F = spec.hidden, spec.mlp_hidden, spec.freq_dim

    def lin(name, cin, cout, std=None, bias_std=0.02):
        std = 1.0 / math.sqrt(cin) if std is None else std
        p[f"{name}.W"] = rng.normal(0.0, std, (cin, cout))
        p[f"{name}.b"] = rng.normal(0.0, bias_std, cout) if bias_std else np.zeros(cout)

    p = {}
    lin("x_embed", spec.patch_dim, D)
    p["pos_embed"] = _pos_embed(spec.grid, D)
    lin("t_embed.fc1", F, D)
    lin("t_embed.fc2", D, D)
    p["y_embed"] = rng.normal(0.0, 1.0, (spec.classes + 1, D))  # last row: the null class
    ada = spec.ada_std / math.sqrt(D)
    for i in range(spec.depth):
        n = f"blocks.{i}"
        lin(f"{n}.adaLN", D, 6 * D, std=ada, bias_std=0.0)
        wq = rng.normal(0.0, math.sqrt(spec.qk_gain / D), (D, D))
        wk = wq + rng.normal(0.0, math.sqrt(0.25 * spec.qk_gain / D), (D, D))
        wv = rng.normal(0.0, 1.0 / math.sqrt(D), (D, D))
        p[f"{n}.attn.qkv.W"] = np.concatenate([wq, wk, wv], axis=1)
        p[f"{n}.attn.qkv.b"] = rng.normal(0.0, 0.02, 3 * D)
        lin(f"{n}.attn.proj", D, D)
        lin(f"{n}.mlp.fc1", D, M)
        lin(f"{n}.mlp.fc2", M, D)
    lin("final.adaLN", D, 2 * D, std=ada, bias_std=0.0)
    lin("final.linear", D, spec.patch_dim)
    return p


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _layernorm(x, eps=1e-6):
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


def _modulate(x, shift, scale):
    return x * (1.0 + scale) + shift


def timestep_embedding(t, dim: int, max_period: float = 10000.0):
    """Sinusoidal embedding of the integer timestep ``t``: ``[cos(t·f), sin(t·f)]``,
    shape (dim,)."""
    half = dim // 2
    freqs = np.exp(-math.log(max_period) * np.arange(half) / half)
    args = float(t) * freqs
    return np.concatenate([np.cos(args), np.sin(args)])


def softmax_attention(q, k, v):
    """Dense float attention of (heads, N, d) arrays: returns ``(O, P)``."""
    S = np.einsum("hnd,hmd->hnm", q, k) / math.sqrt(q.shape[-1])
    S = S - S.max(axis=-1, keepdims=True)
    P = np.exp(S)
    P /= P.sum(axis=-1, keepdims=True)
    return np.einsum("hnm,hmd->hnd", P, v), P


class DiT:
    """The float reference DiT.

    Parameters
    ----------
    spec : model dimensions.
    weight_seed : seed of the random weights (ignored when ``params`` is given).
    params : weights from :func:`init_params`, to share them between models.
    """

    def __init__(self, spec: DiTSpec | None = None, weight_seed: int = 0, params=None):
        self.spec = DiTSpec() if spec is None else spec
        self.params = init_params(self.spec, weight_seed) if params is None else params

    # ------------------------------------------------------------------ hooks
    def linear(self, name: str, x, W, b, host: bool = False):
        """``x @ W + b`` for (tokens, in) ``x``. ``host`` marks a conditioning layer
        (numerics §2.7)."""
        return x @ W + b

    def attention(self, name: str, q, k, v, step: int):
        """Self-attention of (heads, N, d) arrays; returns (heads, N, d)."""
        return softmax_attention(q, k, v)[0]

    def qkv(self, name: str, h, W, b, step: int):
        """The fused qkv projection; returns ``(q, k, v)`` each (heads, N, d)."""
        return self._heads(self.linear(name, h, W, b), 3)

    # ------------------------------------------------------------------ model
    def _heads(self, y, parts):
        s = self.spec
        N = y.shape[0]
        y = y.reshape(N, parts, s.heads, s.head_dim).transpose(1, 2, 0, 3)
        return tuple(y[i] for i in range(parts))

    def patchify(self, img):
        """(C, H, W) image → (tokens, patch·patch·C), patches in raster order."""
        s = self.spec
        g, p = s.grid, s.patch
        x = np.asarray(img).reshape(s.channels, g, p, g, p)
        return x.transpose(1, 3, 2, 4, 0).reshape(g * g, p * p * s.channels)

    def unpatchify(self, tok):
        """Inverse of :meth:`patchify`."""
        s = self.spec
        g, p = s.grid, s.patch
        x = np.asarray(tok).reshape(g, g, p, p, s.channels)
        return x.transpose(4, 0, 2, 1, 3).reshape(s.channels, g * p, g * p)

    def condition(self, t: int, label: int):
        """The conditioning vector ``c``: timestep MLP + class embedding (host side, float)."""
        P, s = self.params, self.spec
        te = timestep_embedding(t, s.freq_dim)[None]
        c = _silu(self.linear("t_embed.fc1", te, P["t_embed.fc1.W"], P["t_embed.fc1.b"], host=True))
        c = self.linear("t_embed.fc2", c, P["t_embed.fc2.W"], P["t_embed.fc2.b"], host=True)[0]
        return c + P["y_embed"][label]

    def block(self, i: int, h, c, step: int):
        P, s = self.params, self.spec
        n = f"blocks.{i}"
        mod = self.linear(f"{n}.adaLN", _silu(c)[None], P[f"{n}.adaLN.W"], P[f"{n}.adaLN.b"],
                          host=True)[0]
        sh1, sc1, g1, sh2, sc2, g2 = np.split(mod, 6)
        a = _modulate(_layernorm(h), sh1, sc1)
        q, k, v = self.qkv(f"{n}.attn.qkv", a, P[f"{n}.attn.qkv.W"], P[f"{n}.attn.qkv.b"], step)
        o = self.attention(f"{n}.attn", q, k, v, step)
        o = o.transpose(1, 0, 2).reshape(h.shape[0], s.hidden)
        o = self.linear(f"{n}.attn.proj", o, P[f"{n}.attn.proj.W"], P[f"{n}.attn.proj.b"])
        h = h + g1 * o
        m = _modulate(_layernorm(h), sh2, sc2)
        m = _gelu_tanh(self.linear(f"{n}.mlp.fc1", m, P[f"{n}.mlp.fc1.W"], P[f"{n}.mlp.fc1.b"]))
        m = self.linear(f"{n}.mlp.fc2", m, P[f"{n}.mlp.fc2.W"], P[f"{n}.mlp.fc2.b"])
        return h + g2 * m

    def forward(self, img, t: int, label: int, step: int):
        """Predict ``eps`` for the (C, H, W) image ``img`` at timestep ``t``; ``step`` is the
        0-based denoising step (SAR cache/reuse schedule)."""
        P = self.params
        if not 0 <= label <= self.spec.classes:
            raise ValueError(f"label must be in [0, {self.spec.classes}] "
                             f"({self.spec.classes} is the null class), not {label}")
        h = self.linear("x_embed", self.patchify(img), P["x_embed.W"], P["x_embed.b"])
        h = h + P["pos_embed"]
        c = self.condition(t, label)
        for i in range(self.spec.depth):
            h = self.block(i, h, c, step)
        mod = self.linear("final.adaLN", _silu(c)[None], P["final.adaLN.W"], P["final.adaLN.b"],
                          host=True)[0]
        shift, scale = np.split(mod, 2)
        out = self.linear("final.linear", _modulate(_layernorm(h), shift, scale),
                          P["final.linear.W"], P["final.linear.b"])
        return self.unpatchify(out)


class TracingDiT(DiT):
    """Float DiT that records, per step, every accelerator linear layer's input and every
    attention's probabilities and ``V`` (the trace format of :mod:`analysis.trace`)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.records = {}

    def _rec(self, key, value):
        self.records.setdefault(key, []).append(np.asarray(value, dtype=np.float32))

    def linear(self, name, x, W, b, host=False):
        if not host:
            self._rec(f"{name}.x", x)
        return super().linear(name, x, W, b, host)

    def attention(self, name, q, k, v, step):
        o, P = softmax_attention(q, k, v)
        self._rec(f"{name}.attn", P)
        self._rec(f"{name}.v", v)
        return o

    def trace(self) -> dict:
        """Recorded arrays stacked over steps: ``{name: (steps, ...)}``."""
        return {k: np.stack(v) for k, v in self.records.items()}


class QuantizedDiT(DiT):
    """The DiT as DSTAR runs it: differential FMDQ linear layers and SAR attention.

    Parameters
    ----------
    spec, weight_seed, params : as :class:`DiT`.
    cfg : the hardware configuration (tile, widths, loop mode, SAR interval).
    masks : ``{attention name: (heads, nb, nb) bool}`` SAR block masks (needed when ``sar``).
    sar : run attention with SAR; otherwise dense float attention and ``QK`` every step.
    base_log2 : static base ``B`` of every layer (default ``cfg.base_log2``).
    schedule : build every layer's QPU group schedule (lane fill, groups); False runs the same
        integer numerics about ten times faster (:class:`~golden.differential.DiffLinear`).

    The fused qkv is two differential layers reading the same input (numerics §2.5): ``<name>[qk]``,
    stepped only on SAR cache steps, and ``<name>[v]``, stepped every step. Statistics are in
    :attr:`stats` (one :class:`~golden.fmdq_stats.LayerStats` per layer, errors against the float
    layer on the same input) and :attr:`attn` (the :class:`~golden.sar.SARAttention` per layer).
    """

    def __init__(self, spec=None, cfg: Config | None = None, masks=None, weight_seed=0,
                 params=None, sar=True, base_log2=None, schedule=True):
        super().__init__(spec, weight_seed, params)
        if cfg is None:
            raise ValueError("QuantizedDiT needs a configuration")
        if sar and masks is None:
            raise ValueError("QuantizedDiT with SAR needs masks (see calibrate_masks)")
        self.cfg = cfg
        self.masks = masks or {}
        self.sar = sar
        self.base_log2 = base_log2
        self.schedule = schedule
        self.layers = {}
        self.stats = {}
        self.attn = {}

    def linear(self, name, x, W, b, host=False):
        if host:
            return super().linear(name, x, W, b, host)
        cfg = self.cfg
        if name not in self.layers:
            Wq, s_w = quantize_weights(W, cfg.weight_width)
            self.layers[name] = DiffLinear(Wq, s_w, cfg, bias=b, base_log2=self.base_log2,
                                           name=name, schedule=self.schedule)
            self.stats[name] = LayerStats(cfg)
        layer, st = self.layers[name], self.stats[name]
        xi, nsat = to_fixed(x, cfg.act_width, cfg.act_frac)
        before = layer.flags["y_saturated"]
        r = layer.step(xi)
        y = r.y * 2.0 ** -cfg.act_frac
        st.add(r.qz, r.tiles, x.shape[0])
        st.input_saturated += nsat
        st.output_saturated += layer.flags["y_saturated"] - before
        st.add_error(y - (x @ W + b))
        return y

    def qkv(self, name, h, W, b, step):
        D = self.spec.hidden
        q = k = None
        if not self.sar or is_cache_step(step, self._interval):
            q, k = self._heads(self.linear(f"{name}[qk]", h, W[:, :2 * D], b[:2 * D]), 2)
        (v,) = self._heads(self.linear(f"{name}[v]", h, W[:, 2 * D:], b[2 * D:]), 1)
        return q, k, v

    @property
    def _interval(self):
        return self.cfg.sar_interval

    def attention(self, name, q, k, v, step):
        if not self.sar:
            return super().attention(name, q, k, v, step)
        if name not in self.attn:
            if name not in self.masks:
                raise ValueError(f"no SAR mask for attention layer {name!r}")
            self.attn[name] = SARAttention(self.masks[name], self.cfg, self._interval)
        return self.attn[name].step(step, q, k, v)


def ddim_timesteps(steps: int, train_steps: int = TRAIN_STEPS):
    """Evenly spaced timesteps from ``train_steps - 1`` down to 0 (``steps`` of them)."""
    if not isinstance(steps, int) or not 1 <= steps <= train_steps:
        raise ValueError(f"steps must be an integer in [1, {train_steps}], not {steps!r}")
    return np.round(np.linspace(train_steps - 1, 0, steps)).astype(np.int64)


def ddim_loop(x, steps: int, eps_fn):
    """Deterministic DDIM (eta = 0) from the start noise ``x`` with the model as a function:
    ``eps_fn(x, t, i)`` is the noise estimate of image ``x`` at timestep ``t``, step ``i``
    (eps prediction, linear betas; each update is :func:`ddim_update`). Returns the image."""
    ts = ddim_timesteps(steps)
    for i, t in enumerate(ts):
        x = ddim_update(x, eps_fn(x, int(t), i), i, ts)
    return x


def ddim_update(x, eps, i: int, ts):
    """One DDIM update of image ``x`` with the noise estimate ``eps`` at step ``i`` of the
    timesteps ``ts`` (:func:`ddim_timesteps`). The predicted ``x0`` is clipped to [-1, 1] (and
    ``eps`` re-derived from it) so that a random-weight model's trajectory stays bounded."""
    abar = np.cumprod(1.0 - np.linspace(BETA_START, BETA_END, TRAIN_STEPS))
    ab = abar[ts[i]]
    ab_prev = abar[ts[i + 1]] if i + 1 < len(ts) else 1.0
    x0 = np.clip((x - math.sqrt(1 - ab) * eps) / math.sqrt(ab), -1.0, 1.0)
    eps = (x - math.sqrt(ab) * x0) / math.sqrt(1 - ab)
    return math.sqrt(ab_prev) * x0 + math.sqrt(1 - ab_prev) * eps


def start_noise(spec: DiTSpec, seed: int):
    """The start noise of a sample and the generator it came from (which then draws a random
    label, when one is needed): ``(x, rng)``."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((spec.channels, spec.image_size, spec.image_size)), rng


def ddim_sample(model: DiT, steps: int = 10, seed: int = 0, label: int | None = None):
    """:func:`ddim_loop` with ``model``. The start noise and, when ``label`` is None, the class
    label come from ``seed``. Returns ``(image, label)``."""
    s = model.spec
    x, rng = start_noise(s, seed)
    if label is None:
        label = int(rng.integers(s.classes))
    return ddim_loop(x, steps, lambda x, t, i: model.forward(x, t, label, i)), label


def record_trace(spec: DiTSpec | None = None, steps: int = 10, seed: int = 0,
                 label: int | None = None, weight_seed: int = 0) -> dict:
    """Float sampling run that returns the trace ``{"<layer>.x": (steps, tokens, channels),
    "<attn>.attn": (steps, heads, N, N), "<attn>.v": (steps, heads, N, d)}`` (float32)."""
    m = TracingDiT(spec, weight_seed)
    ddim_sample(m, steps, seed, label)
    return m.trace()


def calibrate_masks(spec: DiTSpec | None, cfg: Config, steps: int, seed: int,
                    weight_seed: int = 0, thr: float | None = None, params=None) -> dict:
    """SAR masks profiled on a float run (numerics §2.6): ``{attention name: mask}``."""
    m = TracingDiT(spec, weight_seed, params)
    ddim_sample(m, steps, seed)
    return masks_from_trace(m, cfg, thr)


def masks_from_trace(m: "TracingDiT", cfg: Config, thr: float | None = None) -> dict:
    """The SAR masks of a traced float run (at ``thr``, default ``cfg.sar_thr``)."""
    thr = cfg.sar_thr if thr is None else thr
    return {name: profile_mask(m.records[f"{name}.attn"], cfg.tile, thr)
            for name in attention_layer_names(m.spec)}


def _attn_stats(sa: SARAttention) -> dict:
    st = sa.stats
    w = [p["bytes_written"] for p in st.per_step]
    r = [p["bytes_read"] for p in st.per_step]
    return dict(kept_fraction=st.kept_fraction, work_removed=st.work_removed,
                cache_steps=st.cache_steps, reuse_steps=st.reuse_steps,
                pcache_bytes=sa.footprint_bytes, bytes_written_per_step=w, bytes_read_per_step=r,
                mean_bytes_written_per_step=float(np.mean(w)) if w else 0.0,
                mean_bytes_read_per_step=float(np.mean(r)) if r else 0.0,
                dense_macs=st.dense_macs, done_macs=st.done_macs)


def compare(spec: DiTSpec | None = None, cfg: Config | None = None, steps: int = 10,
            seed: int = 0, label: int | None = None, weight_seed: int = 0,
            calib_seed: int | None = None, sar: bool = True, base_log2: int | None = None,
            params: dict | None = None):
    """Sample the float and the quantized DiT from the same seed.

    The weights are ``params`` when given (e.g. the trained digits DiT of
    :func:`models.digits.load_trained`), otherwise ``init_params(spec, weight_seed)``.

    SAR masks come from a float calibration run with ``calib_seed`` (default ``seed + 1``).
    Returns ``(x_float, x_quant, stats)``; ``stats`` is a plain JSON-serialisable dict with
    ``linear`` (per layer, see :class:`~golden.fmdq_stats.LayerStats`; ``out_err_*`` is the
    layer's output error against the float layer on the same input), ``attention`` (per layer),
    ``summary`` and ``output`` (max abs error and PSNR of the sampled image, peak-to-peak 2 since
    samples lie in [-1, 1]; ``psnr_db`` is None when the images are identical).
    """
    spec = DiTSpec() if spec is None else spec
    if cfg is None:
        raise ValueError("compare needs a configuration")
    params = init_params(spec, weight_seed) if params is None else params
    xf, label = ddim_sample(DiT(spec, params=params), steps, seed, label)
    calib_seed = seed + 1 if calib_seed is None else calib_seed
    masks = calibrate_masks(spec, cfg, steps, calib_seed, params=params) if sar else None
    qm = QuantizedDiT(spec, cfg, masks, params=params, sar=sar, base_log2=base_log2)
    xq, _ = ddim_sample(qm, steps, seed, label)
    err = np.abs(xq - xf)
    mse = float((err ** 2).mean())
    attn = {n: _attn_stats(a) for n, a in qm.attn.items()}
    dense = sum(a["dense_macs"] for a in attn.values())
    done = sum(a["done_macs"] for a in attn.values())
    summary = LayerStats.summarize(qm.stats.values())
    summary.update(attention_work_removed=1.0 - done / dense if dense else 0.0,
                   attention_kept_fraction=(float(np.mean([a["kept_fraction"]
                                                           for a in attn.values()]))
                                            if attn else 1.0),
                   pcache_bytes=sum(a["pcache_bytes"] for a in attn.values()))
    stats = dict(
        model=spec.to_dict(), config=cfg.to_dict(), steps=steps, seed=seed, label=label,
        weight_seed=weight_seed, calib_seed=calib_seed if sar else None, sar=sar,
        sar_interval=cfg.sar_interval, sar_thr=cfg.sar_thr,
        linear={n: dict(s.to_dict("out_err"), base_log2=qm.layers[n].B,
                        flags={k: (int(v) if k == "y_saturated" else bool(v))
                               for k, v in qm.layers[n].flags.items()})
                for n, s in qm.stats.items()},
        attention=attn, summary=summary,
        output=dict(max_abs_err=float(err.max()),
                    psnr_db=(10 * math.log10(4.0 / mse) if mse > 0 else None), peak_to_peak=2.0))
    return xf, xq, stats
