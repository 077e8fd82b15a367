"""A roofline bound on a GPU's time per image for the paper-scale projection
(:mod:`perf.chip_model`): the reference line the paper's "7.33× lower latency than an
A100" is set against.

The bound is in the GPU's favour on every count:

* **work**: the model's dense FLOPs of every step (2 per multiply-accumulate, every layer and
  both attention products, :meth:`models.dit_shapes.DiTModel.macs`) at the tensor cores'
  dense FP16 peak, with no kernel launch, no softmax or normalization time and no idle unit;
* **traffic**: FP16 weights read once per step, and each linear layer's input and output and
  attention's Q, K, V and output once (a fused attention that never writes the scores), at the
  HBM's peak bandwidth;
* **overlap**: a step takes the longer of the two totals (not the sum of per-layer maxima), and
  steps and images are back to back at batch 1.

So a real A100 is slower than this bound, and the chip's ratio to it understates the chip's
lead. Figures: :data:`models.published.A100_40GB`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from dstar_rtl.models.dit_shapes import DiTModel
from dstar_rtl.models.published import A100_40GB

__all__ = ["GPU", "A100", "roofline"]


@dataclass(frozen=True)
class GPU:
    """A GPU's peaks: dense FP16 ``flops`` per second, HBM ``bytes_per_s``, board ``watts``."""

    name: str
    flops: float
    bytes_per_s: float
    watts: float
    bytes_per_value: int = 2          # FP16 weights and activations


#: NVIDIA A100 40 GB (PCIe), the GPU the paper compares with.
A100 = GPU(A100_40GB["name"], flops=A100_40GB["fp16_flops"],
           bytes_per_s=A100_40GB["hbm_bytes_per_s"], watts=A100_40GB["board_w"])


def step_bytes(model: DiTModel, gpu: GPU) -> int:
    """Bytes one step moves at least (module docstring): weights once, each linear layer's
    input and output once, each attention's Q, K, V and output once."""
    b = gpu.bytes_per_value
    weights = sum(x.cin * x.cout * x.count for x in model.linears)
    acts = sum(x.tokens * (x.cin + x.cout) * x.count for x in model.linears)
    att = sum(a.seqs * a.heads * a.head_dim * (2 * a.queries + 2 * a.keys) * a.count
              for a in model.attentions)
    return b * (weights + acts + att)


def roofline(model: DiTModel, gpu: GPU = A100) -> dict:
    """The bound for ``model`` on ``gpu``: FLOPs and bytes per step, seconds per step (the
    longer of compute and traffic), per image (``model.steps`` steps) and which bound binds."""
    flops = 2 * model.macs()
    nbytes = step_bytes(model, gpu)
    t_flops, t_bytes = flops / gpu.flops, nbytes / gpu.bytes_per_s
    step = max(t_flops, t_bytes)
    return dict(gpu=asdict(gpu), flops_per_step=flops, bytes_per_step=nbytes,
                compute_s_per_step=t_flops, traffic_s_per_step=t_bytes, s_per_step=step,
                per_image_s=step * model.steps,
                bound="compute" if t_flops >= t_bytes else "traffic")
