"""The trained digits workload: dataset, quality classifier, trained weights, NumPy-vs-JAX
sampling, ``compare(params=...)``, the profile's fast layers and ``dstar profile --quick``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.models import digits
from dstar_rtl.models.dit import (
    DIT_MODELS,
    DiT,
    QuantizedDiT,
    calibrate_masks,
    compare,
    ddim_sample,
    init_params,
    linear_layer_names,
)

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
    with pytest.raises(FileNotFoundError,
                       match=r"none\.npz.*python -m dstar_rtl\.models\.train_dit"):
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

    from dstar_rtl.analysis.profile import mean_ci

    v = [1.0, 2.0, 4.0, 7.0]
    ci = mean_ci(v)
    half = t.ppf(0.975, 3) * np.std(v, ddof=1) / 2
    assert ci["mean"] == pytest.approx(3.5)
    assert (ci["lo"], ci["hi"]) == pytest.approx((3.5 - half, 3.5 + half))
    assert mean_ci([0.0, 1.0], bounds=(0, 1))["lo"] == 0.0
    assert mean_ci([None, 2.0])["n"] == 1


def test_layer_types():
    from dstar_rtl.analysis.profile import LAYER_TYPES, layer_type

    spec = DIT_MODELS["small"]
    names = linear_layer_names(spec) + ["blocks.0.attn.qkv[qk]", "blocks.1.attn.qkv[v]"]
    assert {layer_type(n) for n in names} == set(LAYER_TYPES)


def test_cli_profile_quick(tmp_path, capsys):
    from dstar_rtl.app.cli import main

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
    from dstar_rtl.app.cli import main

    rc = main(["profile", "--quick", "--weights", str(tmp_path / "x.npz"),
               "--out-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "dstar_rtl.models.train_dit" in err


@pytest.mark.slow
def test_training_smoke(tmp_path):
    """A few optimizer steps of a tiny model; its saved JAX samples match NumPy sampling. Needs
    the ``train`` extra (JAX), which ``make regress`` installs."""
    from dstar_rtl.models import train_dit

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


# ------------------------------------------------------------------ threshold and base sweep

def _pt(name, bits, psnr_mean, screen, confirm=None):
    s = dict(avg_bits=dict(mean=bits), psnr_db=dict(mean=psnr_mean, lo=psnr_mean - 1, hi=None, n=5),
             agrees_with_float=dict(mean=1.0))
    c = None if confirm is None else dict(
        summary=dict(s, psnr_db=dict(mean=confirm, lo=confirm - 1, hi=None, n=5)),
        passes=confirm - 1 >= 40)
    return dict(name=name, summary=s, screen=screen, confirm=c)


def test_select_point_fewest_bits_among_confirmed():
    from dstar_rtl.analysis.profile import select_point

    pts = [_pt("a", 3.0, 45, True, confirm=39), _pt("b", 3.5, 44, True, confirm=43),
           _pt("c", 3.2, 38, False), _pt("d", 4.0, 50, True)]
    assert select_point(pts)["name"] == "b"
    # a cheaper screened point that was never confirmed: no choice yet
    pts.append(_pt("e", 3.4, 41, True))
    assert select_point(pts) is None
    assert select_point([_pt("c", 3.2, 38, False)]) is None


def test_layer_base_dit_is_quantized_dit_at_a_uniform_base(trained):
    from dstar_rtl.analysis.profile import LayerBaseDiT

    spec, params = trained
    cfg = preset("fpga")
    a, _ = ddim_sample(QuantizedDiT(spec, cfg, None, params=params, sar=False, schedule=False,
                                    base_log2=5), 2, 0, 0)
    m = LayerBaseDiT(spec, cfg, None, params=params, sar=False, schedule=False,
                     bases={n: 5 for n in linear_layer_names(spec)})
    b, _ = ddim_sample(m, 2, 0, 0)
    assert np.array_equal(a, b)
    assert {layer.B for layer in m.layers.values()} == {5}


@pytest.fixture(scope="module")
def quick_sweep():
    """The quick sweep with a PSNR target one 2-step confirmation meets and another misses (at
    the paper's 40 dB no point of a 1-step sweep passes: with one or two DDIM steps the x0
    prediction amplifies the integer model's error in eps)."""
    from dstar_rtl.analysis.profile import ThresholdSweep, run_sweep

    logs = []
    rep = run_sweep(preset("fpga"), ThresholdSweep.quick(min_psnr_db=0.0), log=logs.append)
    return rep, logs


def _typed_sweep(rep):
    """The sweep's record as the command stores it (:class:`ProfileSweep`)."""
    from dstar_rtl.results.base import Provenance, build, plain
    from dstar_rtl.results.profile import ProfileSweep

    body = {k: v for k, v in rep.items() if k != "kind"}
    return build(ProfileSweep, dict(body, provenance=plain(Provenance.unrecorded())))


def test_sweep_table_has_every_point(quick_sweep):
    from dstar_rtl.app.reports.profile_report import sweep_markdown

    rep, logs = quick_sweep
    g = rep["grid"]
    # the grid, today's point and the initial variant's
    n = len(g["thr2"]) * len(g["thr4"]) * len(g["thr6"]) * len(g["base_offsets"]) + 2
    assert len(rep["points"]) == n and len({p["name"] for p in rep["points"]}) == n
    assert sum(1 for ln in logs if ln.startswith("[")) == n       # one progress line per point
    md = sweep_markdown(_typed_sweep(rep))
    for p in rep["points"]:
        assert f"| {p['name']} |" in md or f"| **{p['name']}** |" in md
        s = p["summary"]
        assert abs(sum(s["mix"].values()) - 1) < 1e-9
        assert 0 < s["avg_bits"]["mean"] <= 8 and s["agreement_count"][1] == len(rep["seeds"])
    today, initial = rep["points"][-2:]
    assert today["base"] == "profiled" and today["base_offset"] == -2 and today["thr"] == [2, 7, 31]
    assert initial["base"] == "preset" and initial["thr"] == [1, 7, 31]
    assert f"| {rep['initial']['name']} |" in md.split("## Confirmation")[1]
    json.dumps(rep)


def test_sweep_choice_follows_the_rule(quick_sweep):
    from dstar_rtl.analysis.profile import meets_rule, screens

    rep, _ = quick_sweep
    rule = {k: rep["rule"][k] for k in ("min_psnr_db", "min_agreement")}
    op = rep["operating_point"]
    assert op is not None, rep["message"]
    chosen = next(p for p in rep["points"] if p["name"] == rep["chosen"])
    # the chosen point meets the rule on its own confirmation numbers and passed the screen
    s = chosen["confirm"]["summary"]
    assert meets_rule(s, **rule) and chosen["screen"] and screens(chosen["summary"], **rule)
    assert s["psnr_db"]["lo"] >= rule["min_psnr_db"]
    assert s["agrees_with_float"]["mean"] >= rule["min_agreement"]
    # every screened point with fewer bits was refuted at the confirmation's seed count
    for p in rep["points"]:
        assert p["screen"] == screens(p["summary"], **rule)
        if p["screen"] and p["summary"]["avg_bits"]["mean"] < chosen["summary"]["avg_bits"]["mean"]:
            assert p["confirm"] is not None and not meets_rule(p["confirm"]["summary"], **rule)
    assert op["thr"] == chosen["thr"] and op["base_log2"] == chosen["base_log2"]
    assert set(op["base_log2"]) == set(rep["profiled_base_log2"])


def test_sweep_report_files_and_operating_point(quick_sweep, tmp_path):
    import io

    from dstar_rtl.analysis.profile import load_operating_point
    from dstar_rtl.app.reports.profile_report import sweep_report_files, sweep_report_names

    rep, _ = quick_sweep
    typed = _typed_sweep(rep)
    files = sweep_report_files(typed, tmp_path)
    js, md, png = sweep_report_names(tmp_path)
    assert files[js] == typed.to_json()
    assert files[md].startswith("# FMDQ thresholds")
    buf = io.BytesIO()
    files[png](buf)
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
    js.write_text(files[js])
    op = load_operating_point(js)
    assert op["thr"] == tuple(rep["operating_point"]["thr"])
    preset("fpga", thr=op["thr"])       # a configuration the rest of the project can build


def test_sweep_without_a_passing_point_says_so(tmp_path, capsys):
    from dstar_rtl.analysis.profile import load_operating_point
    from dstar_rtl.app.cli import main

    rc = main(["profile", "--sweep", "--quick", "--thr2", "1", "--base-offsets=0",
               "--min-psnr", "1000", "--out-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "no operating point: no point of the sweep passes the screen" in out
    rep = json.loads((tmp_path / "profile_sweep.json").read_text())
    assert rep["operating_point"] is None and rep["chosen"] is None
    assert "no operating point" in (tmp_path / "profile_sweep.md").read_text()
    assert err.count("\n") == len(rep["points"])           # progress on stderr, one per point
    with pytest.raises(ValueError, match="no operating point"):
        load_operating_point(tmp_path / "profile_sweep.json")
