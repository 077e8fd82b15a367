"""The reference DiT (models/dit.py): shapes, the float DDIM sampler, tracing, and the quantized
mode (differential FMDQ layers, SAR attention, the QK/V split of the fused qkv)."""

import json
import math

import numpy as np
import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.golden.fmdq_stats import LayerStats
from dstar_rtl.models.dit import (
    DiT,
    DiTSpec,
    QuantizedDiT,
    TracingDiT,
    attention_layer_names,
    calibrate_masks,
    compare,
    ddim_sample,
    ddim_timesteps,
    init_params,
    linear_layer_names,
    record_trace,
)

# 16 tokens of 16 features: fast on the tiny preset (T = 4).
SPEC = DiTSpec(image_size=8, patch=2, channels=2, hidden=16, depth=1, heads=2, mlp_ratio=2.0,
               classes=3, freq_dim=8)
STEPS = 5


@pytest.fixture(scope="module")
def cfg():
    return preset("tiny")


@pytest.fixture(scope="module")
def run(cfg):
    return compare(SPEC, cfg, steps=STEPS, seed=3)


@pytest.mark.parametrize("kw, match", [
    (dict(image_size=10, patch=4), "multiple of patch"),
    (dict(hidden=10, heads=4), "multiple of heads"),
    (dict(depth=0), "depth"),
    (dict(freq_dim=7), "even"),
    (dict(mlp_ratio=0.0), "mlp_ratio"),
])
def test_spec_validation(kw, match):
    with pytest.raises(ValueError, match=match):
        DiTSpec(**kw)


def test_shapes_and_patchify_roundtrip():
    m = DiT(SPEC)
    img = np.random.default_rng(0).normal(size=(2, 8, 8))
    tok = m.patchify(img)
    assert tok.shape == (SPEC.tokens, SPEC.patch_dim) == (16, 8)
    np.testing.assert_array_equal(m.unpatchify(tok), img)
    # A patch holds its own pixels: token 1 is rows 0-1, columns 2-3.
    assert set(tok[1]) == set(img[:, 0:2, 2:4].ravel())
    eps = m.forward(img, 500, 1, 0)
    assert eps.shape == img.shape and np.all(np.isfinite(eps))
    p = init_params(SPEC, 0)
    assert p["blocks.0.attn.qkv.W"].shape == (16, 48)
    assert p["y_embed"].shape == (SPEC.classes + 1, 16)  # null class
    assert np.abs(p["blocks.0.adaLN.W"]).max() > 0  # not adaLN-*Zero*: blocks do something


def test_label_range():
    with pytest.raises(ValueError, match="label"):
        DiT(SPEC).forward(np.zeros((2, 8, 8)), 10, SPEC.classes + 1, 0)
    DiT(SPEC).forward(np.zeros((2, 8, 8)), 10, SPEC.classes, 0)  # null class is fine


def test_timesteps():
    ts = ddim_timesteps(4)
    assert list(ts) == [999, 666, 333, 0]
    assert list(ddim_timesteps(1)) == [999]
    for bad in (0, 1001):
        with pytest.raises(ValueError, match="steps"):
            ddim_timesteps(bad)


def test_float_sampler_is_deterministic():
    m = DiT(SPEC)
    a, la = ddim_sample(m, 4, seed=7)
    b, lb = ddim_sample(DiT(SPEC), 4, seed=7)
    c, _ = ddim_sample(m, 4, seed=8)
    np.testing.assert_array_equal(a, b)
    assert la == lb
    assert not np.array_equal(a, c)
    assert a.shape == (2, 8, 8) and np.abs(a).max() <= 1.0  # x0 is clipped to [-1, 1]
    d, _ = ddim_sample(DiT(SPEC, weight_seed=1), 4, seed=7)
    assert not np.array_equal(a, d)


def test_trace_recording_matches_float_run():
    tr = record_trace(SPEC, steps=3, seed=1)
    xs = {n[:-2] for n in tr if n.endswith(".x")}
    assert xs == set(linear_layer_names(SPEC))
    for name in attention_layer_names(SPEC):
        P = tr[f"{name}.attn"]
        assert P.shape == (3, 2, 16, 16) and P.dtype == np.float32
        np.testing.assert_allclose(P.sum(-1), 1, atol=1e-5)
        assert tr[f"{name}.v"].shape == (3, 2, 16, 8)
    assert tr["blocks.0.mlp.fc2.x"].shape == (3, 16, 32)
    # Tracing does not change the computation.
    m = TracingDiT(SPEC)
    a, _ = ddim_sample(m, 3, seed=1)
    b, _ = ddim_sample(DiT(SPEC), 3, seed=1)
    np.testing.assert_array_equal(a, b)


def test_quantized_statistics_are_sane(run):
    xf, xq, st = run
    json.dumps(st, allow_nan=False)
    assert xf.shape == xq.shape == (2, 8, 8)
    assert set(st["linear"]) == {"x_embed", "blocks.0.attn.qkv[qk]", "blocks.0.attn.qkv[v]",
                                 "blocks.0.attn.proj", "blocks.0.mlp.fc1", "blocks.0.mlp.fc2",
                                 "final.linear"}
    for name, d in st["linear"].items():
        assert 0 < d["avg_bits"] <= 8, name
        assert 0 < d["lane_fill"] <= 1, name
        assert sum(d["hist"].values()) == d["subchannels"]
        assert math.isclose(d["share_zero"] + sum(d[f"share_b{b}"] for b in (2, 4, 6, 8)), 1.0)
        assert 0 <= d["share_e_pos"] <= 1
        assert d["groups_per_tile"] >= 1 and d["slice_columns_per_tile"] > 0
        assert d["saturated"] >= 0 and d["input_saturated"] == 0
        assert math.isfinite(d["out_err_max"]) and d["out_err_rms"] <= d["out_err_max"]
    assert 0 < st["summary"]["avg_bits"] <= 8
    assert 0 < st["summary"]["lane_fill"] <= 1
    out = st["output"]
    assert math.isfinite(out["max_abs_err"]) and out["max_abs_err"] > 0
    assert out["psnr_db"] is not None and math.isfinite(out["psnr_db"])
    a = st["attention"]["blocks.0.attn"]
    assert 0 < a["kept_fraction"] <= 1
    # 3 cache steps cost `kept` of the dense work, 2 reuse steps `kept / 2`.
    assert a["work_removed"] == pytest.approx(1 - a["kept_fraction"] * (3 + 2 / 2) / 5, abs=1e-6)
    assert a["cache_steps"] == 3 and a["reuse_steps"] == 2
    assert len(a["bytes_written_per_step"]) == STEPS
    assert all(w > 0 for w in a["bytes_written_per_step"][::2])
    assert a["bytes_read_per_step"][1] == a["bytes_written_per_step"][0]


def test_qkv_split_steps_qk_only_on_cache_steps(cfg):
    """QK is a differential layer stepped only on SAR cache steps; V every step (numerics §2.5)."""
    seen = []

    class Spy(QuantizedDiT):
        def qkv(self, name, h, W, b, step):
            q, k, v = super().qkv(name, h, W, b, step)
            seen.append((step, q is None, k is None, v is None))
            return q, k, v

    params = init_params(SPEC, 0)
    masks = calibrate_masks(SPEC, cfg, 3, seed=9, params=params)
    qm = Spy(SPEC, cfg.replace(sar_interval=3), masks, params=params)
    ddim_sample(qm, 7, seed=2)
    assert [s[:3] for s in seen] == [(t, t % 3 != 0, t % 3 != 0) for t in range(7)]
    assert not any(s[3] for s in seen)
    assert qm.stats["blocks.0.attn.qkv[qk]"].steps == 3  # steps 0, 3, 6
    assert qm.stats["blocks.0.attn.qkv[v]"].steps == 7
    assert qm.layers["blocks.0.attn.qkv[qk]"].W.shape == (16, 32)
    assert qm.layers["blocks.0.attn.qkv[v]"].W.shape == (16, 16)


def test_quantized_without_sar(cfg):
    _, _, st = compare(SPEC, cfg, steps=3, seed=0, sar=False)
    assert st["attention"] == {}
    assert st["linear"]["blocks.0.attn.qkv[qk]"]["steps"] == 3


def test_quantized_run_uses_the_config_tile():
    cfg = preset("tiny", rows=3, cols=3)  # 16 tokens: 6 tiles, the last one padded
    _, _, st = compare(SPEC, cfg, steps=2, seed=0, sar=False)
    d = st["linear"]["blocks.0.mlp.fc1"]
    assert d["subchannels"] == 2 * 6 * 16


def test_quantized_runs_a_layer_wider_than_max_reduction_in_pieces():
    """fc2 has 32 input channels; at max_reduction 16 it runs in two pieces (numerics §2.5;
    the pieces' numerics: tests/test_differential.py), every sub-channel counted once."""
    stats = compare(SPEC, preset("tiny", max_reduction=16), steps=2, seed=0, sar=False)[2]
    fc2 = next(v for k, v in stats["linear"].items() if k.endswith("fc2"))
    assert fc2["subchannels"] == 2 * SPEC.tokens // 4 * SPEC.mlp_hidden
    assert stats["output"]["psnr_db"] > 15


def test_quantized_needs_masks_for_sar(cfg):
    with pytest.raises(ValueError, match="masks"):
        QuantizedDiT(SPEC, cfg)


def test_layer_stats_weights_elements_and_ignores_padding(cfg):
    from dstar_rtl.golden.schedule import schedule_matrix

    # 6 tokens on T = 4: tile 0 has 4 real rows, tile 1 has 2. Channel 0 is zero, channel 1 needs
    # 8 bits in tile 0 and 2 bits in tile 1.
    dx = np.zeros((6, 2), np.int64)
    dx[0, 1] = 100 << cfg.r0
    dx[4, 1] = 1 << cfg.r0
    qz, tiles = schedule_matrix(dx, cfg)
    st = LayerStats(cfg)
    st.add(qz, tiles, 6)
    d = st.to_dict()
    assert d["hist"] == dict(b0=2, b2=1, b4=0, b6=0, b8=1)
    assert d["avg_bits"] == pytest.approx((4 * 8 + 2 * 2) / 12)
    assert 0 < d["lane_fill"] <= 1
