"""Train the reference DiT (:mod:`models.dit`) on the 16×16 digits (:mod:`models.digits`) in JAX.

Run as ``python -m dstar_rtl.models.train_dit --out dstar_rtl/models/data/digits_dit.npz``
(needs the ``train`` extra: ``pip install -e '.[train]'``). The rest of the project never
imports JAX; this module imports it only inside :func:`main`, after pinning XLA to one thread.

What it trains: a class-conditional eps-prediction DiT with exactly the architecture and the
parameter dict of :func:`models.dit.init_params` (same names and shapes, ``W`` is (in, out)); the
JAX forward :func:`forward` is :meth:`models.dit.DiT.forward` written batched (layernorm eps 1e-6,
tanh-GELU, adaLN-Zero split order shift/scale/gate ×2, fixed ``_pos_embed``, timestep embedding
[cos, sin]). Training: the linear beta schedule of ``models.dit`` (``TRAIN_STEPS``, ``BETA_START``,
``BETA_END``), uniform timesteps, MSE on eps, class dropout to the null class (label = classes)
with probability 0.1, Adam written out here (no optax) with linear warm-up and cosine decay,
global-norm gradient clipping at 1, and an exponential moving average (EMA) of the weights, which
are the ones saved. Initialisation follows DiT (Xavier-uniform projections, zero biases, zero
adaLN and final projection: adaLN-Zero) except for unit-variance class embeddings. Fixed seeds
and one XLA thread make the run deterministic on a given machine and JAX version.

The .npz holds ``param/<name>`` float32 arrays, ``spec`` and ``meta`` (JSON strings) and a few
reference samples (``ref/seeds``, ``ref/labels``, ``ref/images``, ``ref/steps``) drawn by
:func:`ddim_sample_jax`, the same DDIM as :func:`models.dit.ddim_sample` in float32, so the NumPy
model can be checked against the trained one (``tests/test_digits.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from dstar_rtl.models.digits import DIGITS_SPEC
from dstar_rtl.models.dit import (
    BETA_END,
    BETA_START,
    TRAIN_STEPS,
    DiTSpec,
    _pos_embed,
    ddim_timesteps,
)

__all__ = ["init_train_params", "forward", "ddim_sample_jax", "train", "main"]

SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
REF_SEEDS = (0, 1, 2, 3)
REF_STEPS = 20


def init_train_params(spec: DiTSpec, seed: int) -> dict:
    """DiT-style initial weights (float32) with the names and shapes of
    :func:`models.dit.init_params`."""
    rng = np.random.default_rng(seed)
    D, M, F = spec.hidden, spec.mlp_hidden, spec.freq_dim
    p = {}

    def lin(name, cin, cout, zero=False, std=None):
        if zero:
            W = np.zeros((cin, cout))
        elif std is not None:
            W = rng.normal(0.0, std, (cin, cout))
        else:
            a = math.sqrt(6.0 / (cin + cout))
            W = rng.uniform(-a, a, (cin, cout))
        p[f"{name}.W"] = W
        p[f"{name}.b"] = np.zeros(cout)

    lin("x_embed", spec.patch_dim, D)
    p["pos_embed"] = _pos_embed(spec.grid, D)
    lin("t_embed.fc1", F, D)
    lin("t_embed.fc2", D, D)
    # Unit-variance class rows (as models.dit.init_params): with DiT's 0.02 the class signal is
    # too weak to be learnt in a CPU-sized budget (1400 steps gave chance-level class accuracy).
    p["y_embed"] = rng.normal(0.0, 1.0, (spec.classes + 1, D))
    for i in range(spec.depth):
        n = f"blocks.{i}"
        lin(f"{n}.adaLN", D, 6 * D, zero=True)
        # Xavier over the fused (D, 3D) weight as three (D, D) projections, like DiT's timm init.
        a = math.sqrt(6.0 / (2 * D))
        p[f"{n}.attn.qkv.W"] = rng.uniform(-a, a, (D, 3 * D))
        p[f"{n}.attn.qkv.b"] = np.zeros(3 * D)
        lin(f"{n}.attn.proj", D, D)
        lin(f"{n}.mlp.fc1", D, M)
        lin(f"{n}.mlp.fc2", M, D)
    lin("final.adaLN", D, 2 * D, zero=True)
    lin("final.linear", D, spec.patch_dim, zero=True)
    return {k: v.astype(np.float32) for k, v in p.items()}


def _jnp():
    import jax.numpy as jnp
    return jnp


def forward(P: dict, spec: DiTSpec, x, t, labels):
    """Batched :meth:`models.dit.DiT.forward`: ``x`` (B, C, H, W), ``t`` and ``labels`` (B,)
    → eps (B, C, H, W)."""
    import jax
    jnp = _jnp()
    B = x.shape[0]
    g, p, C, D, H, hd = spec.grid, spec.patch, spec.channels, spec.hidden, spec.heads, spec.head_dim

    def ln(h):
        mu = h.mean(axis=-1, keepdims=True)
        var = ((h - mu) ** 2).mean(axis=-1, keepdims=True)
        return (h - mu) / jnp.sqrt(var + 1e-6)

    def gelu(h):
        return 0.5 * h * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)))

    silu = jax.nn.silu

    def lin(name, h):
        return h @ P[f"{name}.W"] + P[f"{name}.b"]

    tok = x.reshape(B, C, g, p, g, p).transpose(0, 2, 4, 3, 5, 1).reshape(B, g * g, p * p * C)
    h = lin("x_embed", tok) + P["pos_embed"]
    half = spec.freq_dim // 2
    freqs = jnp.exp(-math.log(10000.0) * jnp.arange(half) / half)
    args = t.astype(jnp.float32)[:, None] * freqs[None]
    te = jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=1)
    c = lin("t_embed.fc2", silu(lin("t_embed.fc1", te))) + P["y_embed"][labels]
    N = g * g
    for i in range(spec.depth):
        n = f"blocks.{i}"
        sh1, sc1, g1, sh2, sc2, g2 = jnp.split(lin(f"{n}.adaLN", silu(c)), 6, axis=1)
        a = ln(h) * (1.0 + sc1[:, None]) + sh1[:, None]
        qkv = lin(f"{n}.attn.qkv", a).reshape(B, N, 3, H, hd).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        S = jnp.einsum("bhnd,bhmd->bhnm", q, k) / math.sqrt(hd)
        o = jnp.einsum("bhnm,bhmd->bhnd", jax.nn.softmax(S, axis=-1), v)
        o = lin(f"{n}.attn.proj", o.transpose(0, 2, 1, 3).reshape(B, N, D))
        h = h + g1[:, None] * o
        m = ln(h) * (1.0 + sc2[:, None]) + sh2[:, None]
        m = lin(f"{n}.mlp.fc2", gelu(lin(f"{n}.mlp.fc1", m)))
        h = h + g2[:, None] * m
    shift, scale = jnp.split(lin("final.adaLN", silu(c)), 2, axis=1)
    out = lin("final.linear", ln(h) * (1.0 + scale[:, None]) + shift[:, None])
    return out.reshape(B, g, g, p, p, C).transpose(0, 5, 1, 3, 2, 4).reshape(B, C, g * p, g * p)


def _abar():
    return np.cumprod(1.0 - np.linspace(BETA_START, BETA_END, TRAIN_STEPS))


def ddim_sample_jax(P, spec: DiTSpec, seeds, labels, steps: int):
    """:func:`models.dit.ddim_sample` (eta 0, x0 clipped to [-1, 1]) in float32 JAX for a batch;
    the start noise of each seed comes from NumPy exactly as there."""
    import jax
    jnp = _jnp()
    x = np.stack([np.random.default_rng(s).standard_normal((spec.channels, spec.image_size,
                                                             spec.image_size)) for s in seeds])
    x = jnp.asarray(x, jnp.float32)
    lab = jnp.asarray(labels, jnp.int32)
    abar = _abar()
    ts = ddim_timesteps(steps)
    f = jax.jit(lambda P, x, t: forward(P, spec, x, t, lab))
    for i, t in enumerate(ts):
        eps = f(P, x, jnp.full((len(seeds),), int(t), jnp.int32))
        ab = abar[t]
        ab_prev = abar[ts[i + 1]] if i + 1 < len(ts) else 1.0
        x0 = jnp.clip((x - math.sqrt(1 - ab) * eps) / math.sqrt(ab), -1.0, 1.0)
        eps = (x - math.sqrt(ab) * x0) / math.sqrt(1 - ab)
        x = math.sqrt(ab_prev) * x0 + math.sqrt(1 - ab_prev) * eps
    return np.asarray(x)


def train(spec: DiTSpec = DIGITS_SPEC, steps: int = 3000, batch: int = 128, lr: float = 1e-3,
          warmup: int = 100, seed: int = 0, ema_decay: float = 0.995, p_uncond: float = 0.1,
          log_every: int = 50, log=print):
    """Train and return ``(ema_params, meta)`` (NumPy float32 dict, JSON-able dict)."""
    import jax
    jnp = _jnp()
    from dstar_rtl.models.digits import load_dataset

    images, labels_all = load_dataset()
    images = images.astype(np.float32)
    sqrt_ab = jnp.asarray(np.sqrt(_abar()), jnp.float32)
    sqrt_1mab = jnp.asarray(np.sqrt(1.0 - _abar()), jnp.float32)
    params = {k: jnp.asarray(v) for k, v in init_train_params(spec, seed).items()}
    frozen = {"pos_embed"}  # fixed sin-cos table, as in DiT
    b1, b2, eps_adam = 0.9, 0.999, 1e-8

    def loss_fn(P, x0, t, lab, noise):
        xt = sqrt_ab[t][:, None, None, None] * x0 + sqrt_1mab[t][:, None, None, None] * noise
        return jnp.mean((forward(P, spec, xt, t, lab) - noise) ** 2)

    @jax.jit
    def step_fn(P, m, v, ema, n, x0, t, lab, noise):
        loss, g = jax.value_and_grad(loss_fn)(P, x0, t, lab, noise)
        g = {k: (jnp.zeros_like(x) if k in frozen else x) for k, x in g.items()}
        gn = jnp.sqrt(sum(jnp.sum(x ** 2) for x in g.values()))
        g = {k: x * jnp.minimum(1.0, 1.0 / (gn + 1e-12)) for k, x in g.items()}
        nf = n.astype(jnp.float32) + 1.0
        rate = lr * jnp.minimum(1.0, nf / warmup) * 0.5 * (1.0 + jnp.cos(math.pi * nf / steps))
        m = {k: b1 * m[k] + (1 - b1) * g[k] for k in g}
        v = {k: b2 * v[k] + (1 - b2) * g[k] ** 2 for k in g}
        P = {k: P[k] - rate * (m[k] / (1 - b1 ** nf)) / (jnp.sqrt(v[k] / (1 - b2 ** nf)) + eps_adam)
             for k in P}
        d = jnp.minimum(ema_decay, (1.0 + nf) / (10.0 + nf))
        ema = {k: d * ema[k] + (1 - d) * P[k] for k in P}
        return P, m, v, ema, loss, gn

    m = {k: jnp.zeros_like(x) for k, x in params.items()}
    v = {k: jnp.zeros_like(x) for k, x in params.items()}
    ema = dict(params)
    rng = np.random.default_rng(seed + 1)
    t0 = time.time()
    losses = []
    for n in range(steps):
        idx = rng.integers(0, len(images), batch)
        t = rng.integers(0, TRAIN_STEPS, batch).astype(np.int32)
        lab = np.where(rng.random(batch) < p_uncond, spec.classes, labels_all[idx]).astype(np.int32)
        noise = rng.standard_normal(images[idx].shape).astype(np.float32)
        params, m, v, ema, loss, gn = step_fn(params, m, v, ema, jnp.int32(n), images[idx], t,
                                              lab, noise)
        losses.append(float(loss))
        if (n + 1) % log_every == 0 or n == 0 or n + 1 == steps:
            log(f"step {n + 1}/{steps}  loss {np.mean(losses[-log_every:]):.4f}  "
                f"grad-norm {float(gn):.3f}  elapsed {time.time() - t0:.0f} s")
    wall = time.time() - t0
    tail = max(1, min(200, steps // 10))
    meta = dict(steps=steps, batch=batch, lr=lr, warmup=warmup, seed=seed, ema_decay=ema_decay,
                p_uncond=p_uncond, optimizer="Adam(0.9, 0.999, 1e-8), cosine decay, clip 1.0",
                final_loss=float(np.mean(losses[-tail:])), final_loss_window=tail,
                first_loss=float(losses[0]), wall_seconds=round(wall, 1),
                jax_version=jax.__version__, parameters=int(sum(
                    np.size(x) for k, x in params.items() if k not in frozen)),
                dataset="sklearn load_digits, bilinear 8x8 -> 16x16, [-1, 1]")
    return {k: np.asarray(x, np.float32) for k, x in ema.items()}, meta


def save(path: Path, spec: DiTSpec, params: dict, meta: dict, ref: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {f"param/{k}": v.astype(np.float32) for k, v in params.items()}
    arrays.update({f"ref/{k}": np.asarray(v) for k, v in ref.items()})
    np.savez_compressed(path, spec=np.array(json.dumps(spec.to_dict())),
                        meta=np.array(json.dumps(meta)), **arrays)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dstar_rtl.models.train_dit",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("models/data/digits_dit.npz"))
    ap.add_argument("--steps", type=int, default=3000, help="optimizer steps (default 3000)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hidden", type=int, default=DIGITS_SPEC.hidden)
    ap.add_argument("--depth", type=int, default=DIGITS_SPEC.depth)
    ap.add_argument("--log-every", type=int, default=50)
    a = ap.parse_args(argv)
    os.environ.setdefault("XLA_FLAGS", SINGLE_THREAD_XLA)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax  # noqa: F401
    except ImportError:
        print("train_dit: error: JAX is not installed; pip install -e '.[train]'", file=sys.stderr)
        return 2
    spec = DiTSpec(**{**DIGITS_SPEC.to_dict(), "hidden": a.hidden, "depth": a.depth})
    print(f"training {spec} for {a.steps} steps, batch {a.batch}, seed {a.seed}", flush=True)
    params, meta = train(spec, a.steps, a.batch, a.lr, seed=a.seed, log_every=a.log_every,
                         log=lambda s: print(s, flush=True))
    labels = [s % spec.classes for s in REF_SEEDS]
    imgs = ddim_sample_jax(params, spec, REF_SEEDS, labels, REF_STEPS)
    from dstar_rtl.models.digits import class_accuracy
    meta["ref_class_accuracy"] = class_accuracy(imgs, labels)
    save(a.out, spec, params, meta, dict(seeds=np.array(REF_SEEDS), labels=np.array(labels),
                                         images=imgs.astype(np.float32), steps=REF_STEPS))
    print(f"wrote {a.out} ({a.out.stat().st_size / 1e6:.2f} MB): {meta['parameters']} parameters, "
          f"{a.steps} steps in {meta['wall_seconds']:.0f} s, final loss {meta['final_loss']:.4f}, "
          f"reference samples classified {meta['ref_class_accuracy']:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
