"""Layer shapes of the seven DiTs the DSTAR paper evaluates, per denoising step: the input of the
paper-scale projection (:mod:`perf.chip_model`).

Shapes come from the models' public configurations (hidden size, depth, heads, MLP ratio, text
tokens); image tokens are ``(resolution / 16)²`` for every model here (an 8× VAE and 2×2
patches, or Flux's 2×2 packing). Host-side layers (timestep and class/text conditioning, adaLN
modulation vectors, the text encoders) are left out, as on the core (numerics §2.7).

Simplifications, stated once: PixArt-Σ's cross-attention keys and values come from the fixed
caption (computed once per image, not per step); SD3.5's MMDiT-X extra self-attention in its
first blocks is left out (a few percent of its work); Latte alternates spatial blocks (attention
within a frame) and temporal blocks (attention across the 16 frames at one position).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Linear", "Attention", "DiTModel", "MODELS"]


@dataclass(frozen=True)
class Linear:
    """``count`` linear layers of ``tokens`` × ``cin`` → ``cout`` per step; ``cache_only``
    marks the SAR-skipped Q/K projections (run on cache steps only)."""

    name: str
    tokens: int
    cin: int
    cout: int
    count: int = 1
    cache_only: bool = False


@dataclass(frozen=True)
class Attention:
    """``count`` attention layers per step: ``seqs`` independent sequences of ``queries`` ×
    ``keys`` tokens, ``heads`` heads of width ``head_dim``."""

    name: str
    queries: int
    keys: int
    heads: int
    head_dim: int
    count: int = 1
    seqs: int = 1


@dataclass(frozen=True)
class DiTModel:
    name: str
    steps: int
    linears: tuple = field(default_factory=tuple)
    attentions: tuple = field(default_factory=tuple)
    video: bool = False

    def macs(self) -> int:
        """Dense multiply-accumulates of one step (every layer, no SAR)."""
        lin = sum(x.tokens * x.cin * x.cout * x.count for x in self.linears)
        att = sum(2 * a.queries * a.keys * a.heads * a.head_dim * a.count * a.seqs
                  for a in self.attentions)
        return lin + att


def _block(tag: str, N: int, D: int, heads: int, mlp: int, count: int) -> list:
    """qkv (split: q/k cache-only, v every step), output projection, two-layer MLP."""
    return [Linear(f"{tag}.qk", N, D, 2 * D, count, cache_only=True),
            Linear(f"{tag}.v", N, D, D, count),
            Linear(f"{tag}.proj", N, D, D, count),
            Linear(f"{tag}.fc1", N, D, mlp, count),
            Linear(f"{tag}.fc2", N, mlp, D, count)]


def _dit(name, res, D, depth, heads, steps, mlp_ratio=4, patch_in=16):
    N = (res // 16) ** 2
    lin = [Linear("x_embed", N, patch_in, D)] + _block("blk", N, D, heads, mlp_ratio * D, depth)
    lin.append(Linear("final", N, D, patch_in))
    return DiTModel(name, steps, tuple(lin), (Attention("attn", N, N, heads, D // heads, depth),))


def _pixart(res=1024, steps=20):
    D, depth, heads, txt = 1152, 28, 16, 300
    N = (res // 16) ** 2
    lin = [Linear("x_embed", N, 16, D)] + _block("blk", N, D, heads, 4 * D, depth)
    lin += [Linear("cross.q", N, D, D, depth), Linear("cross.proj", N, D, D, depth),
            Linear("final", N, D, 32)]
    att = (Attention("self", N, N, heads, D // heads, depth),
           Attention("cross", N, txt, heads, D // heads, depth))
    return DiTModel(f"PixArt-Σ {res}", steps, tuple(lin), att)


def _mmdit(name, D, depth, steps, res=1024, txt=333):
    heads = D // 64
    N = (res // 16) ** 2
    lin = ([Linear("x_embed", N, 64, D)] + _block("img", N, D, heads, 4 * D, depth)
           + _block("txt", txt, D, heads, 4 * D, depth) + [Linear("final", N, D, 64)])
    return DiTModel(name, steps, tuple(lin),
                    (Attention("joint", N + txt, N + txt, heads, 64, depth),))


def _flux(name, res, steps, txt):
    D, heads, mlp = 3072, 24, 12288
    N = (res // 16) ** 2
    S = N + txt
    lin = ([Linear("x_embed", N, 64, D), Linear("txt_embed", txt, 4096, D)]
           + _block("double.img", N, D, heads, mlp, 19) + _block("double.txt", txt, D, heads, mlp,
                                                                  19)
           # Single-stream block: one fused projection (q, k, v and the MLP's first layer), one
           # fused output (attention output and MLP hidden → D).
           + [Linear("single.qk", S, D, 2 * D, 38, cache_only=True),
              Linear("single.v_mlp", S, D, D + mlp, 38),
              Linear("single.out", S, D + mlp, D, 38),
              Linear("final", N, D, 64)])
    att = (Attention("double", S, S, heads, 128, 19), Attention("single", S, S, heads, 128, 38))
    return DiTModel(name, steps, tuple(lin), att)


def _latte(steps=50, frames=16, res=256):
    D, heads = 1152, 16
    n = (res // 16) ** 2            # tokens per frame
    N = frames * n
    lin = [Linear("x_embed", N, 16, D)] + _block("blk", N, D, heads, 4 * D, 28)
    lin.append(Linear("final", N, D, 32))
    att = (Attention("spatial", n, n, heads, D // heads, 14, seqs=frames),
           Attention("temporal", frames, frames, heads, D // heads, 14, seqs=n))
    return DiTModel(f"Latte {frames}×{res}", steps, tuple(lin), att, video=True)


#: The seven DiTs (Flux.1-dev at three resolutions), with their usual sampling steps.
MODELS = {m.name: m for m in (
    _dit("DiT-XL/2 512", 512, 1152, 28, 16, steps=250),
    _pixart(),
    _mmdit("SD3.5 Medium", 1536, 24, steps=40),
    _mmdit("SD3.5 Large", 2432, 38, steps=28),
    _flux("Flux.1-dev 256", 256, 50, 512),
    _flux("Flux.1-dev 512", 512, 50, 512),
    _flux("Flux.1-dev 1K", 1024, 50, 512),
    _flux("Flux.1-schnell 1K", 1024, 4, 256),
    _latte(),
)}
