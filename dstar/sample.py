"""Sampling runs behind ``dstar sample``: a DiT sampled with DDIM by one backend, beside the float
model from the same seeds, with per-step statistics and per-sample quality.

Backends (:data:`BACKENDS`):

- ``float``: :class:`golden.dit.DiT` (float64), the reference;
- ``golden-int``: :class:`golden.dit_int_model.IntDiT`, every layer the core runs in integers
  (the model the RTL core must equal bit for bit).

Per step the record holds, for the conditional row, the average FMDQ bits, whether the step was
a SAR cache step, the saturations and the QPU counters summed over every differential layer
(:data:`golden.layouts.COUNTER_NAMES`: sub-channels per precision, slice columns, groups,
padded lanes, shifts). Per sample ``k`` the seed is ``seed + k`` (start noise) and the label
``labels[k]``. With a guidance scale ``!= 1`` every backend runs a conditional and an
unconditional row (the null class), each integer row with its own differential state. SAR masks
are profiled once on a float run (:func:`golden.dit.calibrate_masks`, seed ``seed + 1000``)
unless ``sar`` is off.
"""

from __future__ import annotations

import time

import numpy as np

from gen.progress import progress, say
from golden.config import Config
from golden.digits import IMAGE_SIZE, classify, psnr
from golden.dit import DiT, DiTSpec, calibrate_masks
from golden.dit_int_model import IntDiT, ddim_sample_float, ddim_sample_int

__all__ = ["BACKENDS", "run_samples", "is_digits_model", "grid_png"]

BACKENDS = ("float", "golden-int")
MASK_SEED_OFFSET = 1000


def is_digits_model(spec: DiTSpec) -> bool:
    """Whether the digits classifier (:func:`golden.digits.classify`) can label this model's
    samples: one channel of ``IMAGE_SIZE`` × ``IMAGE_SIZE``."""
    return spec.channels == 1 and spec.image_size == IMAGE_SIZE


def check_model(spec: DiTSpec, params: dict, cfg: Config):
    """Build the integer model once (raises ValueError naming what does not fit ``cfg``)."""
    IntDiT(spec, params, cfg)


def run_samples(spec: DiTSpec, params: dict, cfg: Config, *, backend: str, steps: int,
                labels: list, guidance: float, seed: int, sar: bool = True) -> dict:
    """Sample ``len(labels)`` images with ``backend`` and with the float model; returns
    ``{"images": (n, C, H, W) backend samples, "float": the float samples, "record": a
    JSON-serialisable dict}``."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    t0 = time.perf_counter()
    masks = (calibrate_masks(spec, cfg, steps, seed + MASK_SEED_OFFSET, params=params)
             if sar and backend != "float" else None)
    fm = DiT(spec, params=params)
    images, floats, samples = [], [], []
    for k, label in progress(enumerate(labels), "samples", total=len(labels)):
        s = seed + k
        xf = ddim_sample_float(fm, steps, s, label, guidance)
        per_step = []
        if backend == "float":
            x = xf
        else:
            rows = [IntDiT(spec, params, cfg, masks) for _ in range(1 if guidance == 1.0 else 2)]

            def on_step(i, t, done):
                totals = {}
                for c in done[0].layer_counters().values():
                    for name, v in c.items():
                        totals[name] = totals.get(name, 0) + int(v)
                per_step.append(dict(
                    step=i, t=t, average_bits=round(done[0].average_bits(), 4),
                    qpu_counters=totals,
                    cache_step=bool(done[0].blocks[0].cache_step) if done[0].blocks else None,
                    saturated=sum(d.saturated for d in done)))
            x, _ = ddim_sample_int(rows, steps, s, label, guidance, on_step=on_step)
        images.append(x)
        floats.append(xf)
        rec = dict(index=k, label=int(label), seed=s, per_step=per_step,
                   psnr_db=None if backend == "float" else _db(psnr(x, xf)))
        samples.append(rec)
        say(f"sample {k + 1}/{len(labels)} (label {label}) done"
            + ("" if rec["psnr_db"] is None else f", PSNR {rec['psnr_db']} dB against float"))
    images, floats = np.stack(images), np.stack(floats)
    record = dict(backend=backend, model=spec.to_dict(), config=cfg.to_dict(),
                  config_hash=cfg.hash(), steps=steps, guidance=guidance, seed=seed, sar=sar,
                  kept_fraction=None if masks is None else
                  {k: round(float(m.mean()), 4) for k, m in masks.items()},
                  samples=samples, seconds=round(time.perf_counter() - t0, 1))
    if is_digits_model(spec):
        got, ref = classify(images), classify(floats)
        for rec, g, r in zip(samples, got, ref):
            rec.update(classifier=int(g), classifier_float=int(r))
        record["classifier_agreement"] = dict(
            with_label=int(np.sum(got == np.array(labels))), samples=len(labels),
            **({} if backend == "float" else dict(with_float=int(np.sum(got == ref)))))
    return dict(images=images, float=floats, record=record)


def _db(v):
    return None if v is None or not np.isfinite(v) else round(float(v), 2)


def grid_png(images, labels, title: str):
    """A writer of the samples as one PNG grid (first channel, [-1, 1] as black..white) to a
    binary file object."""
    from matplotlib.figure import Figure

    n = len(images)
    cols = min(n, 10)
    rows = -(-n // cols)

    def write(f):
        fig = Figure(figsize=(1.1 * cols, 1.2 * rows + 0.35), layout="constrained")
        try:
            axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False).ravel())
            for ax in axes:
                ax.axis("off")
            for ax, img, label in zip(axes, images, labels):
                ax.imshow(np.clip(img[0], -1, 1), cmap="gray", vmin=-1, vmax=1)
                ax.set_title(str(label), fontsize=8)
            fig.suptitle(title, fontsize=9)
            fig.savefig(f, format="png", dpi=100)
        finally:
            fig.clear()
    return write
