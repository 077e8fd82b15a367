"""A real, download-free workload for the reference DiT: scikit-learn's handwritten digits.

Why: a random-weight DiT says little about quantization quality. The digits (1,797 images of 8×8
pixels, values 0..16, ten classes, bundled with scikit-learn) are small enough to train a DiT on one
CPU core (:mod:`models.train_dit`) and come with labels, so sample quality can be measured without
a download:

- :func:`load_dataset`: images upsampled **bilinearly** to 16×16 (half-pixel centres, edges
  clamped; the same separable matrix on rows and columns, so values stay in 0..16) and scaled to
  [-1, 1], one channel: shape (n, 1, 16, 16), float64.
- :func:`classifier`: an RBF support-vector classifier trained deterministically on a fixed 80 %
  split of those 16×16 images (:func:`classifier_holdout_accuracy` reports the other 20 %). The
  quality number of generated samples is :func:`class_accuracy`: the share of samples that it
  assigns to the label they were generated for.
- :func:`psnr`: PSNR of a quantized sample against the float sample from the same seed, peak to
  peak 2 (samples lie in [-1, 1]).
- :func:`load_trained`: the weights written by ``python -m dstar_rtl.models.train_dit`` (float64
dicts for
  :class:`models.dit.DiT` / :class:`models.dit.QuantizedDiT`).
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np

from dstar_rtl.models.dit import DiTSpec

__all__ = ["IMAGE_SIZE", "DIGITS_SPEC", "TRAINED_PATH", "REGENERATE", "upsample_matrix",
           "load_dataset", "classifier", "classifier_holdout_accuracy", "classify",
           "class_accuracy", "psnr", "load_trained", "load_reference_samples", "training_metadata"]

IMAGE_SIZE = 16
# The trained model: about 1.0M parameters, 64 tokens of 128 features; the widest quantized input
# is fc2 (256 channels), inside the fpga preset's max_reduction.
DIGITS_SPEC = DiTSpec(image_size=IMAGE_SIZE, patch=2, channels=1, hidden=128, depth=4, heads=4,
                      mlp_ratio=2.0, classes=10, freq_dim=64)
TRAINED_PATH = Path(__file__).resolve().parent / "data" / "digits_dit.npz"
REGENERATE = "python -m dstar_rtl.models.train_dit --out dstar_rtl/models/data/digits_dit.npz"
_SPLIT_SEED = 0
_TRAIN_SHARE = 0.8


def upsample_matrix(n_in: int = 8, n_out: int = IMAGE_SIZE):
    """(n_out, n_in) bilinear interpolation matrix with half-pixel centres and clamped edges; each
    row sums to 1, so ``U @ img @ U.T`` keeps values inside the input's range."""
    centre = (np.arange(n_out) + 0.5) * n_in / n_out - 0.5
    lo = np.clip(np.floor(centre).astype(int), 0, n_in - 1)
    hi = np.clip(lo + 1, 0, n_in - 1)
    w = np.clip(centre - lo, 0.0, 1.0)
    U = np.zeros((n_out, n_in))
    U[np.arange(n_out), lo] += 1.0 - w
    U[np.arange(n_out), hi] += w
    return U


@functools.lru_cache(maxsize=1)
def _dataset():
    from sklearn.datasets import load_digits

    d = load_digits()
    U = upsample_matrix(8, IMAGE_SIZE)
    img = np.einsum("ij,njk,lk->nil", U, d.images.astype(np.float64), U)
    x = img / 8.0 - 1.0  # 0..16 -> [-1, 1]
    x = x[:, None]
    x.setflags(write=False)
    y = d.target.astype(np.int64)
    y.setflags(write=False)
    return x, y


def load_dataset():
    """The digits as ``(images, labels)``: (1797, 1, 16, 16) float64 in [-1, 1], (1797,) int64."""
    x, y = _dataset()
    return x.copy(), y.copy()


def _split():
    x, y = _dataset()
    perm = np.random.default_rng(_SPLIT_SEED).permutation(len(y))
    k = int(round(_TRAIN_SHARE * len(y)))
    return perm[:k], perm[k:]


def _features(images):
    """(n, 1, 16, 16) or (1, 16, 16) images → (n, 256) features, clipped to [-1, 1]."""
    a = np.asarray(images, dtype=np.float64)
    if a.ndim == 3:
        a = a[None]
    if a.shape[1:] != (1, IMAGE_SIZE, IMAGE_SIZE):
        raise ValueError(f"images must be (n, 1, {IMAGE_SIZE}, {IMAGE_SIZE}), not {a.shape}")
    return np.clip(a.reshape(len(a), -1), -1.0, 1.0)


@functools.lru_cache(maxsize=1)
def classifier():
    """The quality classifier: ``sklearn.svm.SVC`` (RBF, C=10, gamma="scale") fitted on the fixed
    80 % split of :func:`load_dataset`. Deterministic (no random state in SVC without
    probabilities); fitted once per process (about a second)."""
    from sklearn.svm import SVC

    x, y = _dataset()
    tr, _ = _split()
    return SVC(C=10.0, gamma="scale").fit(_features(x[tr]), y[tr])


def classifier_holdout_accuracy() -> float:
    """Accuracy of :func:`classifier` on the 20 % of real digits it was not fitted on."""
    x, y = _dataset()
    _, te = _split()
    return float((classifier().predict(_features(x[te])) == y[te]).mean())


def classify(images):
    """Predicted digit of each (1, 16, 16) image (values outside [-1, 1] are clipped)."""
    return classifier().predict(_features(images)).astype(np.int64)


def class_accuracy(images, labels) -> float:
    """Share of ``images`` that :func:`classify` assigns to their ``labels``."""
    labels = np.asarray(labels, dtype=np.int64).ravel()
    pred = classify(images)
    if len(pred) != len(labels):
        raise ValueError(f"{len(pred)} images but {len(labels)} labels")
    return float((pred == labels).mean())


def psnr(x, ref, peak_to_peak: float = 2.0):
    """PSNR in dB of ``x`` against ``ref``; ``inf`` when they are identical."""
    mse = float(np.mean((np.asarray(x, np.float64) - np.asarray(ref, np.float64)) ** 2))
    return math.inf if mse == 0 else 10.0 * math.log10(peak_to_peak ** 2 / mse)


def _open(path):
    path = Path(TRAINED_PATH if path is None else path)
    if not path.is_file():
        raise FileNotFoundError(f"trained DiT weights {path} not found; regenerate them with "
                                f"`{REGENERATE}` (about 30 minutes on one core)")
    return np.load(path, allow_pickle=False)


def load_trained(path=None):
    """The trained digits DiT: ``(spec, params)`` with float64 arrays, usable as
    ``DiT(spec, params=params)`` or ``QuantizedDiT(spec, cfg, masks, params=params)``.

    Raises FileNotFoundError naming the file and the command that regenerates it.
    """
    with _open(path) as z:
        spec = DiTSpec(**json.loads(str(z["spec"])))
        params = {k[len("param/"):]: z[k].astype(np.float64) for k in z.files
                  if k.startswith("param/")}
    return spec, params


def load_reference_samples(path=None) -> dict:
    """The JAX-sampled references saved by the training run: ``seeds``, ``labels``, ``images``
    (n, 1, 16, 16) float32 and ``steps`` (DDIM steps)."""
    with _open(path) as z:
        return dict(seeds=z["ref/seeds"].astype(np.int64), labels=z["ref/labels"].astype(np.int64),
                    images=z["ref/images"], steps=int(z["ref/steps"]))


def training_metadata(path=None) -> dict:
    """Training metadata (steps, loss, seed, wall time, jax version, ...) as a dict."""
    with _open(path) as z:
        return json.loads(str(z["meta"]))
