"""The float reference DiT with the integer block golden in place of its blocks, against the float
run at the same seed (numerics §2.7: "the float reference DiT only measures how far the integer
one strays").

:class:`IntBlockDiT` is :class:`models.dit.DiT` whose :meth:`~models.dit.DiT.block` runs an
:class:`golden.dit_int.IntDiTBlock`: the block input and the six adaLN vectors (computed on the host
in float, as numerics §2.7 says) are converted to the act format by :func:`golden.fmdq.to_fixed`
(round half away from zero, saturate), the block runs in integers, and its output returns to float
(exact: between two blocks the tokens stay integers). Patch embedding, the conditioning MLPs, the
final layer and the DDIM sampler stay float. Each block also runs the float block on the same float
input ("local" error: the block's own error, without what the earlier blocks and steps added).

:func:`compare_int` samples the float DiT and this model from one seed and reports per denoising
step the max abs error and PSNR of the model output (``eps``), of the sample after the step and of
every block's output, against the float run. PSNR uses the peak-to-peak of the float reference
tensor: ``10·log10(ptp(ref)**2 / mse)``; None when the tensors are equal.
"""

from __future__ import annotations

import math

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.dit_int8 import make_block
from dstar_rtl.golden.fmdq import from_fixed, to_fixed
from dstar_rtl.golden.sar import is_cache_step
from dstar_rtl.models.dit import (
    DiT,
    DiTSpec,
    _silu,
    calibrate_masks,
    ddim_sample,
    ddim_timesteps,
    init_params,
)

__all__ = ["IntBlockDiT", "RecordingDiT", "compare_int", "error_stats"]


def error_stats(ref, got) -> dict:
    """``{"max_abs_err", "psnr_db"}`` of ``got`` against the float reference ``ref``; the PSNR
    peak is ``ptp(ref)`` (1 if ``ref`` is constant); ``psnr_db`` is None when they are equal."""
    ref = np.asarray(ref, np.float64)
    err = np.asarray(got, np.float64) - ref
    mse = float((err ** 2).mean())
    peak = float(np.ptp(ref)) or 1.0
    return dict(max_abs_err=float(np.abs(err).max()),
                psnr_db=(10 * math.log10(peak ** 2 / mse) if mse > 0 else None))


class RecordingDiT(DiT):
    """The float DiT, recording per step the model input, every block output and the output."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.inputs, self.outputs, self.blocks = [], [], []

    def block(self, i, h, c, step):
        out = super().block(i, h, c, step)
        if i == 0:
            self.blocks.append([])
        self.blocks[-1].append(out)
        return out

    def forward(self, img, t, label, step):
        self.inputs.append(np.array(img))
        out = super().forward(img, t, label, step)
        self.outputs.append(out)
        return out


class IntBlockDiT(RecordingDiT):
    """The DiT with the integer blocks of ``cfg``'s datapath (:func:`golden.dit_int8.make_block`:
    :class:`~golden.dit_int.IntDiTBlock`, or :class:`~golden.dit_int8.Int8DiTBlock`).

    Parameters
    ----------
    spec, params : as :class:`models.dit.DiT` (``params`` default: ``init_params(spec, 0)``).
    cfg : the configuration.
    masks : ``{"blocks.<i>.attn": (heads, nb, nb) bool}`` or None (every block kept).
    interval : SAR cache-step interval (default ``cfg.sar_interval``).
    base_log2 : static base of every block (default ``cfg.base_log2``).

    ``int_steps[i]`` lists block ``i``'s :class:`~golden.dit_int.BlockStep` per step;
    ``local[i]`` the float block's output on the same input per step; ``input_saturated`` counts
    values clipped by the float → act conversions (block inputs and adaLN vectors).
    """

    def __init__(self, spec: DiTSpec, cfg: Config, masks=None, params=None, *,
                 interval: int | None = None, base_log2: int | None = None):
        super().__init__(spec, params=params)
        masks = masks or {}
        self.cfg = cfg
        self.int_blocks = [make_block(self.params, i, self.spec, cfg,
                                      masks.get(f"blocks.{i}.attn"), interval=interval,
                                      base_log2=base_log2)
                           for i in range(self.spec.depth)]
        self.int_steps = [[] for _ in self.int_blocks]
        self.local = [[] for _ in self.int_blocks]
        self.input_saturated = 0

    def block(self, i, h, c, step):
        cfg, P = self.cfg, self.params
        blk = self.int_blocks[i]
        if step != blk.t:
            raise ValueError(f"block {i} is at step {blk.t}, the sampler asks for step {step}")
        n = f"blocks.{i}"
        mod = self.linear(f"{n}.adaLN", _silu(c)[None], P[f"{n}.adaLN.W"], P[f"{n}.adaLN.b"],
                          host=True)[0]
        xi, s1 = to_fixed(h, cfg.act_width, cfg.act_frac)
        mi, s2 = to_fixed(mod.reshape(6, -1), cfg.act_width, cfg.act_frac)
        self.input_saturated += s1 + s2
        r = blk.step(xi, mi)
        self.int_steps[i].append(r)
        self.local[i].append(DiT.block(self, i, h, c, step))
        out = from_fixed(r.out, cfg.act_frac)
        if i == 0:
            self.blocks.append([])
        self.blocks[-1].append(out)
        return out


def compare_int(spec: DiTSpec | None = None, cfg: Config | None = None, steps: int = 8,
                seed: int = 0, label: int | None = None, weight_seed: int = 0,
                calib_seed: int | None = None, sar: bool = True, base_log2: int | None = None):
    """Sample the float DiT and :class:`IntBlockDiT` from one seed (deterministic).

    SAR masks come from a float calibration run with ``calib_seed`` (default ``seed + 1``), as
    :func:`models.dit.compare`; ``sar=False`` keeps every block and makes every step a cache step.
    Returns ``(x_float, x_int, stats, model)``: the two samples, a JSON-serialisable dict and the
    :class:`IntBlockDiT` (its per-step integer records). ``stats["per_step"][s]`` holds
    ``eps`` and ``sample`` (error of the model output and of the sample after the step),
    ``blocks`` (per block: error of the output in the sampling run, ``local`` error against the
    float block on the same input, saturations, P-cache bytes) and ``kind`` (cache/reuse).
    """
    spec = DiTSpec() if spec is None else spec
    if not isinstance(cfg, Config):
        raise ValueError("compare_int needs a configuration (cfg)")
    ts = ddim_timesteps(steps)
    params = init_params(spec, weight_seed)
    fm = RecordingDiT(spec, params=params)
    xf, label = ddim_sample(fm, steps, seed, label)
    calib_seed = seed + 1 if calib_seed is None else calib_seed
    masks = calibrate_masks(spec, cfg, steps, calib_seed, params=params) if sar else None
    interval = cfg.sar_interval if sar else 1
    im = IntBlockDiT(spec, cfg, masks, params, interval=interval, base_log2=base_log2)
    xi, _ = ddim_sample(im, steps, seed, label)

    per_step = []
    for s in range(steps):
        f_next = fm.inputs[s + 1] if s + 1 < steps else xf
        i_next = im.inputs[s + 1] if s + 1 < steps else xi
        blocks = []
        for b in range(spec.depth):
            r = im.int_steps[b][s]
            blocks.append(dict(
                block=b, **error_stats(fm.blocks[s][b], im.blocks[s][b]),
                local=error_stats(im.local[b][s], im.blocks[s][b]),
                saturated=r.saturated,
                saturation={k: v for k, v in r.saturation.items() if v},
                pcache_bytes=r.pcache_bytes))
        per_step.append(dict(step=s, t=int(ts[s]),
                             kind="cache" if is_cache_step(s, interval) else "reuse",
                             eps=error_stats(fm.outputs[s], im.outputs[s]),
                             sample=error_stats(f_next, i_next), blocks=blocks))

    eps_psnr = [v for v in (p["eps"]["psnr_db"] for p in per_step) if v is not None]
    local = [b["local"]["psnr_db"] for p in per_step for b in p["blocks"]
             if b["local"]["psnr_db"] is not None]
    sat_total = {}
    for p in per_step:
        for b in p["blocks"]:
            for k, v in b["saturation"].items():
                sat_total[k] = sat_total.get(k, 0) + v
    flags = {f"blocks.{i}.{k}": {f: (int(v) if f == "y_saturated" else bool(v))
                                 for f, v in layer.flags.items()}
             for i, blk in enumerate(im.int_blocks) for k, layer in blk.layers.items()}
    stats = dict(
        model=spec.to_dict(), config=cfg.to_dict(), steps=steps, seed=seed, label=label,
        weight_seed=weight_seed, calib_seed=calib_seed if sar else None, sar=sar,
        interval=interval, base_log2=im.int_blocks[0].B,
        kept_fraction=[float(blk.mask.mean()) for blk in im.int_blocks],
        input_saturated=im.input_saturated, flags=flags, per_step=per_step,
        summary=dict(
            sample=error_stats(xf, xi),
            eps_psnr_db_min=min(eps_psnr) if eps_psnr else None,
            eps_max_abs_err_max=max(p["eps"]["max_abs_err"] for p in per_step),
            block_local_psnr_db_min=min(local) if local else None,
            block_local_max_abs_err_max=max(b["local"]["max_abs_err"] for p in per_step
                                            for b in p["blocks"]),
            saturated=sum(b["saturated"] for p in per_step for b in p["blocks"]),
            saturation=sat_total))
    return xf, xi, stats, im
