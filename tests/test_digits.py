"""The trained digits workload: dataset, quality classifier, trained weights, NumPy-vs-JAX
sampling, ``compare(params=...)``, the profile's fast layers and ``dstar profile --quick``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from golden import digits
from golden.config import preset
from golden.dit import (DIT_MODELS, DiT, QuantizedDiT, calibrate_masks, compare, ddim_sample,
                        init_params, linear_layer_names)

# NumPy float64 against the training run's float32 JAX samples (DDIM, 20 steps). Measured on the
# committed weights: at most 7.6e-7 over the four references (float32 rounding through 4 blocks
# and 20 steps). 1e-4 leaves two orders of margin for other BLAS/XLA builds while any
# architectural mismatch (an eps, a split order, a transposed patch) gives errors of O(0.1).
JAX_NUMPY_BOUND = 1e-4


@pytest.fixture(scope="module")
def trained():
    return digits.load_trained()


def test_dataset_shape_and_range():
    x, y = digits.load_dataset()
    assert x.shape == (1797, 1, 16, 16) and x.dtype == np.float64
    assert x.min() == -1.0 and x.max() == 1.0
    assert set(y.tolist()) == set(range(10))
    U = digits.upsample_matrix(8, 16)
    np.testing.assert_allclose(U.sum(axis=1), 1.0)
    assert (U >= 0).all()


def test_classifier_accurate_on_real_digits():
    assert digits.classifier_holdout_accuracy() > 0.9


def test_psnr():
    a = np.zeros((1, 16, 16))
    assert digits.psnr(a, a) == math.inf
    assert digits.psnr(a + 0.1, a) == pytest.approx(10 * math.log10(4 / 0.01))


def test_trained_weights_load_with_spec_shapes(trained):
    spec, params = trained
    ref = init_params(spec, 0)
    assert set(params) == set(ref)
    for k, v in ref.items():
        assert params[k].shape == v.shape, k
        assert params[k].dtype == np.float64
    # Every quantized layer fits the fpga preset's reduction (qkv is split, same input).
    cfg = preset("fpga")
    for name in linear_layer_names(spec):
        assert params[f"{name}.W"].shape[0] <= cfg.max_reduction, name
    assert spec.tokens % cfg.tile == 0


def test_missing_weights_name_the_file_and_the_command(tmp_path):
    missing = tmp_path / "none.npz"
    with pytest.raises(FileNotFoundError, match=r"none\.npz.*python -m golden\.train_dit"):
        digits.load_trained(missing)


def test_numpy_ddim_reproduces_jax_samples(trained):
    spec, params = trained
    ref = digits.load_reference_samples()
    model = DiT(spec, params=params)
    for seed, label, img in zip(ref["seeds"], ref["labels"], ref["images"]):
        x, lab = ddim_sample(model, ref["steps"], int(seed), int(label))
        assert lab == label
        assert np.abs(x - img).max() < JAX_NUMPY_BOUND


def test_float_samples_are_classified_as_their_label(trained):
    spec, params = trained
    model = DiT(spec, params=params)
    imgs, labels = [], []
    for seed in range(10):
        x, lab = ddim_sample(model, 20, seed, seed % spec.classes)
        imgs.append(x)
        labels.append(lab)
    # Chance is 0.1; a model that learnt the classes gets most of them.
    assert digits.class_accuracy(np.stack(imgs), labels) >= 0.7


def test_compare_uses_given_params(trained):
    spec, params = trained
    cfg = preset("fpga")
    xf, xq, st = compare(spec, cfg, steps=2, seed=3, label=4, params=params)
    ref, _ = ddim_sample(DiT(spec, params=params), 2, 3, 4)
    np.testing.assert_array_equal(xf, ref)
    assert st["label"] == 4 and st["output"]["psnr_db"] > 10
    assert set(st["linear"]) >= {"x_embed", "final.linear"}


def test_compare_params_default_is_weight_seed():
    spec, cfg = DIT_MODELS["tiny"], preset("tiny")
    a = compare(spec, cfg, steps=2, seed=0, weight_seed=5)
    b = compare(spec, cfg, steps=2, seed=0, params=init_params(spec, 5))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_profile_layers_match_the_exact_layers():
    """The profile's model (no group schedule) samples exactly as the scheduled one."""
    spec, cfg = DIT_MODELS["tiny"], preset("tiny")
    params = init_params(spec, 1)
    masks = calibrate_masks(spec, cfg, 4, 7, params=params)
    exact = QuantizedDiT(spec, cfg, masks, params=params)
    fast = QuantizedDiT(spec, cfg, masks, params=params, schedule=False)
    xa, _ = ddim_sample(exact, 4, 2, 1)
    xb, _ = ddim_sample(fast, 4, 2, 1)
    np.testing.assert_array_equal(xa, xb)
    for name, s in exact.stats.items():
        assert fast.stats[name].avg_bits == s.avg_bits
        assert fast.stats[name].hist == s.hist
        assert fast.stats[name].saturated == s.saturated


def test_mean_ci_is_a_t_interval():
    from scipy.stats import t

    from golden.profile import mean_ci

    v = [1.0, 2.0, 4.0, 7.0]
    ci = mean_ci(v)
    half = t.ppf(0.975, 3) * np.std(v, ddof=1) / 2
    assert ci["mean"] == pytest.approx(3.5)
    assert (ci["lo"], ci["hi"]) == pytest.approx((3.5 - half, 3.5 + half))
    assert mean_ci([0.0, 1.0], bounds=(0, 1))["lo"] == 0.0
    assert mean_ci([None, 2.0])["n"] == 1


def test_layer_types():
    from golden.profile import LAYER_TYPES, layer_type

    spec = DIT_MODELS["small"]
    names = linear_layer_names(spec) + ["blocks.0.attn.qkv[qk]", "blocks.1.attn.qkv[v]"]
    assert {layer_type(n) for n in names} == set(LAYER_TYPES)


def test_cli_profile_quick(tmp_path, capsys):
    from gen.cli import main

    assert main(["profile", "--quick", "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "[1/" in out and "wrote" in out
    rep = json.loads((tmp_path / "profile.json").read_text())
    assert (tmp_path / "profile.md").read_text().startswith("# FMDQ and SAR")
    assert (tmp_path / "profile.png").stat().st_size > 0
    assert rep["runs"][0]["sar"] is False and any(r["sar"] for r in rep["runs"])
    for r in rep["runs"]:
        s = r["summary"]
        for k in ("avg_bits", "psnr_db", "attention_work_removed"):
            ci = s[k]
            assert ci["n"] == len(rep["seeds"]) >= 2
            assert ci["lo"] <= ci["mean"] <= ci["hi"]
        assert set(s["layer_types"]) == {"x_embed", "qkv", "proj", "fc1", "fc2", "final"}
        assert 0 < s["avg_bits"]["mean"] <= 8


def test_cli_profile_missing_weights_is_one_line(tmp_path, capsys):
    from gen.cli import main

    rc = main(["profile", "--quick", "--weights", str(tmp_path / "x.npz"),
               "--out-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "golden.train_dit" in err


@pytest.mark.slow
def test_training_smoke(tmp_path):
    """A few optimizer steps of a tiny model; its saved JAX samples match NumPy sampling. Needs
    the ``train`` extra (JAX), which ``make regress`` installs."""
    from golden import train_dit

    out = tmp_path / "w.npz"
    assert train_dit.main(["--out", str(out), "--steps", "3", "--batch", "8", "--hidden", "32",
                           "--depth", "1", "--log-every", "1"]) == 0
    spec, params = digits.load_trained(out)
    assert spec.hidden == 32 and spec.depth == 1
    meta = digits.training_metadata(out)
    assert meta["steps"] == 3 and math.isfinite(meta["final_loss"])
    ref = digits.load_reference_samples(out)
    x, _ = ddim_sample(DiT(spec, params=params), ref["steps"], int(ref["seeds"][0]),
                       int(ref["labels"][0]))
    assert np.abs(x - ref["images"][0]).max() < JAX_NUMPY_BOUND
