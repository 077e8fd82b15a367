"""The DiT-block workload of the core's tests and benchmarks: the preset's test DiT, a sampled
run of the integer DiT for realistic activations, and a SAR mask with a few blocks dropped.
Used by the cocotb testbenches (``tb/core_tb.py``) and the performance model's validation
(``sim/perf_validate.py``)."""

from __future__ import annotations

from dataclasses import replace

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.dit_int import IntDiTBlock
from dstar_rtl.golden.dit_int8 import make_block as block_of
from dstar_rtl.models.dit import DIT_MODELS, DiTSpec
from dstar_rtl.models.dit_int_compare import compare_int

__all__ = ["SPECS", "block_workload"]

#: The DiT of each preset's block test: more than one tile on every dimension (tokens, hidden,
#: head width, MLP width).
SPECS = {
    "tiny": DIT_MODELS["tiny"],                          # N 16, D 16, d 8, M 32 (T = 4)
    "fpga": DiTSpec(image_size=8, patch=2, channels=4, hidden=32, depth=1, heads=2),  # T = 8
}


def block_workload(cfg: Config, steps: int, seed: int = 3, drop: bool = True,
                   mlp_ratio: float | None = None, hidden: int | None = None,
                   heads: int | None = None, pieces: dict | None = None):
    """``(make_block, inputs)``: a function building a fresh integer block of the preset's
    test DiT (:class:`IntDiTBlock`, or the INT8 core's :class:`golden.dit_int8.Int8DiTBlock`),
    and per step the ``(x, mod)`` the block sees when the integer DiT samples from ``seed``
    (realistic activations). ``drop`` removes a few off-diagonal SAR blocks per head
    (the diagonal stays) so that masked attention is exercised; ``mlp_ratio``, ``hidden`` and
    ``heads`` replace the test DiT's (a wider MLP or hidden size: reductions and LayerNorm rows
    longer than ``max_reduction``); ``pieces``: the reduction pieces the block runs (its
    layers' ``pieces``, which a stored Y's numbers depend on, numerics §2.5)."""
    spec = SPECS.get(cfg.name, DIT_MODELS["tiny"])
    changes = dict(mlp_ratio=mlp_ratio, hidden=hidden, heads=heads)
    spec = replace(spec, **{k: v for k, v in changes.items() if v is not None})
    im = compare_int(spec, cfg, steps=steps, seed=seed)[3]
    rec = im.int_steps[0]
    inputs = [(r.x, r.mod) for r in rec]
    mask = im.int_blocks[0].mask.copy()
    if drop:
        nb = mask.shape[1]
        for h in range(mask.shape[0]):
            for a in range(nb):
                b = (a + 1 + h) % nb
                if b != a:
                    mask[h, a, b] = False
    params = im.params

    def make_block() -> IntDiTBlock:
        return block_of(params, 0, spec, cfg, mask,
                        **({"pieces": pieces} if pieces and cfg.datapath == "dstar" else {}))

    return make_block, inputs
