"""The layers ``dstar bench`` runs: from the bundled DiT (one block plus the embedding and the
final layer) or from any model, given as a trace and a weights file.

A :class:`LinearSpec` is one linear layer: its name, its float weights ``W`` as (in, out), its
bias and where its input lives in the trace. Any DiT can be benched with two files:

- a trace in the format of :mod:`analysis.trace`: ``<layer>.x`` (steps, tokens, in) for every
  linear layer to bench (other arrays are ignored);
- a weights ``.npz``: ``<layer>.weight`` as (out, in) (the PyTorch ``nn.Linear`` layout) and
  optionally ``<layer>.bias`` (out,) for each of those layers.

Every layer of the trace runs at every step (the SAR reuse of ``qkv[qk]`` belongs to the
bundled block's structure; a user's layer list has none).
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass

import numpy as np

__all__ = ["LinearSpec", "block_layers", "load_layer_weights", "file_layers", "check_widths"]


@dataclass(frozen=True)
class LinearSpec:
    """One linear layer to bench.

    Attributes
    ----------
    name : str, e.g. ``"blocks.0.mlp.fc1"``.
    kind : str, the layer type the report groups by (``"fc1"``; the last part of a user's name).
    x_key : str, the trace array of its input (``"<layer>.x"``).
    W : ndarray, (in, out) float weights.
    bias : ndarray, (out,) float.
    cache_only : bool, the layer steps on SAR cache steps only (``qkv[qk]``).
    """

    name: str
    kind: str
    x_key: str
    W: np.ndarray
    bias: np.ndarray
    cache_only: bool = False


def block_layers(spec, params, block: int) -> list:
    """The bundled DiT's layers of one block, in execution order: ``x_embed``, the fused ``qkv``
    as its two differential layers ``qkv[qk]`` and ``qkv[v]`` (numerics §2.5), ``proj``, ``fc1``,
    ``fc2``, and ``final.linear``. Raises ValueError for a block outside the model."""
    if not isinstance(block, int) or not 0 <= block < spec.depth:
        raise ValueError(f"block must be in [0, {spec.depth - 1}], not {block}")
    D = spec.hidden
    b = f"blocks.{block}"
    table = [("x_embed", "x_embed", "x_embed", slice(None)),
             (f"{b}.attn.qkv[qk]", "qkv", f"{b}.attn.qkv", slice(0, 2 * D)),
             (f"{b}.attn.qkv[v]", "qkv", f"{b}.attn.qkv", slice(2 * D, 3 * D)),
             (f"{b}.attn.proj", "proj", f"{b}.attn.proj", slice(None)),
             (f"{b}.mlp.fc1", "fc1", f"{b}.mlp.fc1", slice(None)),
             (f"{b}.mlp.fc2", "fc2", f"{b}.mlp.fc2", slice(None)),
             ("final.linear", "final.linear", "final.linear", slice(None))]
    return [LinearSpec(name, kind, f"{key}.x", params[f"{key}.W"][:, cs], params[f"{key}.b"][cs],
                       cache_only=name.endswith("[qk]"))
            for name, kind, key, cs in table]


def load_layer_weights(path) -> dict:
    """Read a weights ``.npz`` (``<layer>.weight``, ``<layer>.bias``); ValueError with one line
    naming the file and the problem."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"weights {path}: no such file")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: np.asarray(data[k]) for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, AttributeError) as exc:
        raise ValueError(f"weights {path}: not a NumPy .npz archive of plain arrays "
                         f"({type(exc).__name__})") from None
    for k, a in arrays.items():
        if not np.issubdtype(a.dtype, np.number) or not np.all(np.isfinite(a)):
            raise ValueError(f"weights {path}: array {k!r} is not finite numbers")
    return arrays


def file_layers(trace: dict, weights: dict, source: str = "weights") -> list:
    """A :class:`LinearSpec` for every ``<layer>.x`` of ``trace``, with ``<layer>.weight``
    (out, in) and ``<layer>.bias`` (out,; zeros when absent) from ``weights``. Raises ValueError
    for a layer without weights or with shapes that disagree with its trace."""
    from dstar_rtl.analysis.trace import linear_layers

    names = linear_layers(trace)
    if not names:
        raise ValueError("trace: no '<layer>.x' array, nothing to bench")
    out = []
    for name in names:
        cin = trace[f"{name}.x"].shape[2]
        w = weights.get(f"{name}.weight")
        if w is None:
            raise ValueError(f"{source}: no '{name}.weight' for the trace's layer {name!r}")
        if w.ndim != 2 or w.shape[1] != cin:
            raise ValueError(f"{source}: '{name}.weight' has shape {w.shape}; the trace's input "
                             f"has {cin} channels, so it must be (out, {cin})")
        b = weights.get(f"{name}.bias", np.zeros(w.shape[0]))
        if b.shape != (w.shape[0],):
            raise ValueError(f"{source}: '{name}.bias' has shape {b.shape}, not ({w.shape[0]},)")
        out.append(LinearSpec(name, name.rsplit(".", 1)[-1], f"{name}.x",
                              np.asarray(w, np.float64).T, np.asarray(b, np.float64)))
    return out


def check_widths(cfg, layers) -> None:
    """Refuse (ValueError) a layer wider than the preset's ``max_reduction``."""
    for ls in layers:
        cin = ls.W.shape[0]
        if cin > cfg.max_reduction:
            raise ValueError(f"layer {ls.name!r} has {cin} input channels; preset {cfg.name!r} "
                             f"has max_reduction {cfg.max_reduction} (choose a smaller model "
                             f"or a larger preset)")
