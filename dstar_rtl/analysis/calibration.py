"""The calibration run of a model: its SAR masks and per-layer static bases, profiled on one float
sampling run of a seed apart from the evaluated ones (numerics §2.4, 2.6).

One float DDIM run (:class:`models.dit.TracingDiT`) records every attention's probabilities and
every accelerator linear layer's input. From it:

- the SAR masks: :func:`golden.sar.profile_mask` of each attention at ``cfg.sar_thr``
  (:func:`models.dit.calibrate_masks` does the same from its own run);
- the per-layer static bases when ``cfg.base_offset`` is set: each layer's base by the
  ``--profile-base`` rule (:func:`analysis.trace.profile_base_log2`: the finest base for which at
  most 1 % of the differential steps' sub-channels need an exponent above 0) plus the offset,
  clipped to ``[0, B_max]``. With ``base_offset = None`` every layer runs at ``cfg.base_log2``.

``dstar sample``, ``dstar measure compare`` and ``dstar profile --sweep`` calibrate with seed
``seed + 1000`` (:data:`CALIBRATION_SEED_OFFSET`), so the sweep chooses its operating point on
the masks and bases the core then runs.

>>> from dstar_rtl.golden.config import preset
>>> from dstar_rtl.models.dit import DiTSpec, init_params
>>> spec = DiTSpec(image_size=8, patch=2, channels=1, hidden=16, depth=1, heads=2, classes=2)
>>> cal = calibrate(spec, init_params(spec, 0), preset("tiny", base_offset=-1), 2, 1000)
>>> sorted(cal.bases)[:2], sorted(cal.masks)
(['blocks.0.attn.proj', 'blocks.0.attn.qkv'], ['blocks.0.attn'])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.models.dit import (
    DiTSpec,
    TracingDiT,
    ddim_sample,
    linear_layer_names,
    masks_from_trace,
)

__all__ = ["Calibration", "CALIBRATION_SEED_OFFSET", "E_POS_BUDGET", "calibrate",
           "profile_layer_bases", "layer_bases"]

CALIBRATION_SEED_OFFSET = 1000
#: The ``--profile-base`` rule's budget: the share of sub-channels allowed an exponent above 0.
E_POS_BUDGET = 0.01


@dataclass
class Calibration:
    """``masks``: ``{"blocks.<i>.attn": (heads, nb, nb) bool}`` or None (SAR off); ``bases``:
    ``{layer: B}`` over :func:`models.dit.linear_layer_names` or None (every layer at
    ``cfg.base_log2``); ``profiled``: the rule's bases before the offset (None unless
    profiled)."""

    masks: dict | None
    bases: dict | None
    profiled: dict | None = None


def _traced(spec: DiTSpec, params, steps: int, seed: int) -> TracingDiT:
    m = TracingDiT(spec, params=params)
    ddim_sample(m, steps, seed)     # the label from the seed, as calibrate_masks
    return m


def profile_layer_bases(records: dict, spec: DiTSpec, cfg: Config,
                        e_pos_budget: float = E_POS_BUDGET) -> dict:
    """``{layer: B}`` by the ``--profile-base`` rule on a traced run's records (several runs'
    inputs may be concatenated along the token axis: every tile then belongs to one run)."""
    from dstar_rtl.analysis.trace import profile_base_log2

    return {n: int(profile_base_log2(np.asarray(records[n]), cfg, e_pos_budget))
            for n in linear_layer_names(spec)}


def layer_bases(profiled: dict, offset: int, cfg: Config) -> dict:
    """The profiled bases plus ``offset``, clipped to ``[0, cfg.B_max]``."""
    return {n: min(max(B + offset, 0), cfg.B_max) for n, B in profiled.items()}


def calibrate(spec: DiTSpec, params, cfg: Config, steps: int, seed: int,
              sar: bool = True) -> Calibration:
    """The masks (unless ``sar`` is off) and bases (when ``cfg.base_offset`` is set) of one float
    run of ``steps`` DDIM steps from ``seed`` (the label drawn from the seed, as
    :func:`models.dit.calibrate_masks`)."""
    if not sar and cfg.base_offset is None:
        return Calibration(None, None)
    m = _traced(spec, params, steps, seed)
    masks = masks_from_trace(m, cfg) if sar else None
    if cfg.base_offset is None:
        return Calibration(masks, None)
    profiled = profile_layer_bases({n: np.stack(m.records[f"{n}.x"])
                                    for n in linear_layer_names(spec)}, spec, cfg)
    return Calibration(masks, layer_bases(profiled, cfg.base_offset, cfg), profiled)
