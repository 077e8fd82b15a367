"""models/checkpoint.py: reference-layout (facebookresearch/DiT) checkpoints.

The reference side is written out here independently of models.dit: a NumPy forward pass that
reads the reference names and (out, in) weights directly, its Conv2d patch embedding as loops over
the image and its ``unpatchify`` as the einsum ``hwpqc->chpwq``. A checkpoint loaded into
models.dit.DiT must give the same eps as that forward pass, and an export of the bundled digits
DiT must load back to the same model.
"""

from __future__ import annotations

import argparse
import fractions
import math
import sys

import numpy as np
import pytest

from dstar_rtl.models import checkpoint as ckpt
from dstar_rtl.models.digits import TRAINED_PATH, load_trained
from dstar_rtl.models.dit import DiT, DiTSpec, _pos_embed

# A tiny reference-layout DiT with every size distinct where a mix-up would hide: 3 channels,
# patch 2, a 3x3 token grid (6x6 image), hidden 8, 2 heads, MLP 12 (ratio 1.5), 4 classes + null,
# frequency embedding 6, depth 2.
C, P, G, D, HEADS, M, K, F, DEPTH = 3, 2, 3, 8, 2, 12, 4, 6, 2


def _ref_sincos(dim, grid):
    """The reference's fixed table (get_2d_sincos_pos_embed), written out: the first half of the
    features encodes the column, the second the row; each half sin then cos."""
    rows, cols = np.divmod(np.arange(grid * grid), grid)

    def axis(pos, d):
        omega = 1.0 / 10000.0 ** (np.arange(d // 2) / (d / 2))
        a = np.outer(pos, omega)
        return np.concatenate([np.sin(a), np.cos(a)], axis=1)

    return np.concatenate([axis(cols, dim // 2), axis(rows, dim // 2)], axis=1)


def _tiny(seed=0, learn_sigma=False):
    """A random state dict in the reference layout, built directly (Conv2d weight included)."""
    rng = np.random.default_rng(seed)

    def lin(name, out, inp, std):
        sd[f"{name}.weight"] = rng.normal(0.0, std, (out, inp))
        sd[f"{name}.bias"] = rng.normal(0.0, 0.1, out)

    sd = {"pos_embed": _ref_sincos(D, G)[None],
          "x_embedder.proj.weight": rng.normal(0.0, 0.4, (D, C, P, P)),
          "x_embedder.proj.bias": rng.normal(0.0, 0.1, D)}
    lin("t_embedder.mlp.0", D, F, 0.4)
    lin("t_embedder.mlp.2", D, D, 0.4)
    sd["y_embedder.embedding_table.weight"] = rng.normal(0.0, 0.5, (K + 1, D))
    for i in range(DEPTH):
        lin(f"blocks.{i}.attn.qkv", 3 * D, D, 0.5)
        lin(f"blocks.{i}.attn.proj", D, D, 0.4)
        lin(f"blocks.{i}.mlp.fc1", M, D, 0.4)
        lin(f"blocks.{i}.mlp.fc2", D, M, 0.3)
        lin(f"blocks.{i}.adaLN_modulation.1", 6 * D, D, 0.2)
    lin("final_layer.linear", P * P * C, D, 0.4)
    lin("final_layer.adaLN_modulation.1", 2 * D, D, 0.2)
    if learn_sigma:
        sd = _with_sigma(sd, seed + 100)
    return sd


def _with_sigma(sd, seed):
    """``sd`` with C variance channels added after the C eps channels of every pixel, as the
    reference's learn_sigma final layer (p·p·2C rows, channel fastest) has them."""
    rng = np.random.default_rng(seed)
    sd = dict(sd)
    w = sd["final_layer.linear.weight"].reshape(P * P, C, D)
    b = sd["final_layer.linear.bias"].reshape(P * P, C)
    sd["final_layer.linear.weight"] = np.concatenate(
        [w, rng.normal(0.0, 3.0, w.shape)], axis=1).reshape(P * P * 2 * C, D)
    sd["final_layer.linear.bias"] = np.concatenate(
        [b, rng.normal(0.0, 3.0, b.shape)], axis=1).ravel()
    return sd


# ----------------------------------------------------------------- the reference, written out
def _conv_patch_embed(w, b, img):
    """Conv2d(C, D, kernel p, stride p) of a (C, H, W) image, flattened to raster tokens."""
    d, _, p, _ = w.shape
    g = img.shape[1] // p
    out = np.empty((g, g, d))
    for gy in range(g):
        for gx in range(g):
            patch = img[:, gy * p:(gy + 1) * p, gx * p:(gx + 1) * p]
            out[gy, gx] = np.einsum("dcyx,cyx->d", w, patch) + b
    return out.reshape(g * g, d)


def _ref_unpatchify(x, p, c):
    g = math.isqrt(x.shape[0])
    return np.einsum("hwpqc->chpwq", x.reshape(g, g, p, p, c)).reshape(c, g * p, g * p)


def _lin(sd, name, x):
    return x @ sd[f"{name}.weight"].T + sd[f"{name}.bias"]


def _ln(x):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-6)


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _reference_forward(sd, img, t, y, heads):
    """models.DiT.forward for one image, on the reference's own names and layouts."""
    w = sd["x_embedder.proj.weight"]
    d, p = w.shape[0], w.shape[2]
    x = _conv_patch_embed(w, sd["x_embedder.proj.bias"], img) + sd["pos_embed"][0]
    half = sd["t_embedder.mlp.0.weight"].shape[1] // 2
    args = t * np.exp(-math.log(10000.0) * np.arange(half) / half)
    temb = np.concatenate([np.cos(args), np.sin(args)])
    c = _lin(sd, "t_embedder.mlp.2", _silu(_lin(sd, "t_embedder.mlp.0", temb)))
    c = c + sd["y_embedder.embedding_table.weight"][y]
    n = x.shape[0]
    i = 0
    while f"blocks.{i}.attn.qkv.weight" in sd:
        b = f"blocks.{i}"
        sh1, sc1, g1, sh2, sc2, g2 = np.split(_lin(sd, f"{b}.adaLN_modulation.1", _silu(c)), 6)
        qkv = _lin(sd, f"{b}.attn.qkv", _ln(x) * (1 + sc1) + sh1)
        q, k, v = qkv.reshape(n, 3, heads, d // heads).transpose(1, 2, 0, 3)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d // heads)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = (a @ v).transpose(1, 0, 2).reshape(n, d)
        x = x + g1 * _lin(sd, f"{b}.attn.proj", o)
        h = _gelu(_lin(sd, f"{b}.mlp.fc1", _ln(x) * (1 + sc2) + sh2))
        x = x + g2 * _lin(sd, f"{b}.mlp.fc2", h)
        i += 1
    shift, scale = np.split(_lin(sd, "final_layer.adaLN_modulation.1", _silu(c)), 2)
    out = _lin(sd, "final_layer.linear", _ln(x) * (1 + scale) + shift)
    return _ref_unpatchify(out, p, out.shape[1] // (p * p))


def _img(seed, spec):
    return np.random.default_rng(seed).standard_normal(
        (spec.channels, spec.image_size, spec.image_size))


@pytest.fixture(scope="module")
def digits():
    return load_trained()


# ----------------------------------------------------------------- layouts
def test_sizes_inferred_from_shapes():
    spec, params = ckpt.from_reference(_tiny(), HEADS)
    assert spec == DiTSpec(image_size=G * P, patch=P, channels=C, hidden=D, depth=DEPTH,
                           heads=HEADS, mlp_ratio=1.5, classes=K, freq_dim=F)
    assert spec.mlp_hidden == M


def test_patch_embedding_equals_the_conv():
    sd = _tiny()
    spec, params = ckpt.from_reference(sd, HEADS)
    model = DiT(spec, params=params)
    w = sd["x_embedder.proj.weight"]
    # The index map: x_embed.W[(ky·p + kx)·C + c, :] = conv weight[:, c, ky, kx].
    for c in range(C):
        for ky in range(P):
            for kx in range(P):
                assert np.array_equal(params["x_embed.W"][(ky * P + kx) * C + c], w[:, c, ky, kx])
    for seed in range(3):
        img = _img(seed, spec)
        ours = model.patchify(img) @ params["x_embed.W"] + params["x_embed.b"]
        np.testing.assert_allclose(ours, _conv_patch_embed(w, sd["x_embedder.proj.bias"], img),
                                   rtol=1e-12, atol=1e-13)


def test_final_rows_follow_the_reference_unpatchify():
    sd = _tiny()
    spec, params = ckpt.from_reference(sd, HEADS)
    model = DiT(spec, params=params)
    # Row (ky·p + kx)·C + c of final_layer.linear is pixel (ky, kx) of channel c in both layouts.
    np.testing.assert_array_equal(params["final.linear.W"], sd["final_layer.linear.weight"].T)
    tok = np.random.default_rng(5).standard_normal((spec.tokens, D))
    ours = model.unpatchify(tok @ params["final.linear.W"] + params["final.linear.b"])
    ref = _ref_unpatchify(_lin(sd, "final_layer.linear", tok), P, C)
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-13)
    one = np.zeros((spec.tokens, P * P * C))
    one[G + 2, (1 * P + 0) * C + 2] = 1.0  # token (gy=1, gx=2), pixel ky=1, kx=0, channel 2
    img = _ref_unpatchify(one, P, C)
    assert img[2, 1 * P + 1, 2 * P + 0] == 1.0 and img.sum() == 1.0
    np.testing.assert_array_equal(model.unpatchify(one), img)


@pytest.mark.parametrize("t,label", [(999, 1), (37, K)])  # K: the null class
def test_loaded_model_equals_the_reference_forward(t, label):
    sd = _tiny()
    spec, params = ckpt.from_reference(sd, HEADS)
    img = _img(t, spec)
    ours = DiT(spec, params=params).forward(img, t, label, 0)
    ref = _reference_forward(sd, img, t, label, HEADS)
    assert np.abs(ref).max() > 0.1  # a forward with signal, not a vanishing one
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-12)


def test_learn_sigma_keeps_eps_only(tmp_path):
    plain, sigma = _tiny(), _tiny(learn_sigma=True)
    assert sigma["final_layer.linear.weight"].shape == (P * P * 2 * C, D)
    spec, params = ckpt.from_reference(plain, HEADS)
    spec2, params2 = ckpt.from_reference(sigma, HEADS)
    assert spec2 == spec
    assert params2.keys() == params.keys()
    for k in params:
        np.testing.assert_array_equal(params2[k], params[k], err_msg=k)
    for t, label in [(500, 0), (3, K)]:
        img = _img(t, spec)
        ours = DiT(spec2, params=params2).forward(img, t, label, 0)
        full = _reference_forward(sigma, img, t, label, HEADS)
        assert full.shape == (2 * C, G * P, G * P)
        np.testing.assert_allclose(ours, full[:C], rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(ours, DiT(spec, params=params).forward(img, t, label, 0))
    # Export writes eps only: the C-channel checkpoint again.
    back = ckpt.to_reference(spec2, params2, dtype=np.float64)
    assert back.keys() == plain.keys()
    for k in plain:
        np.testing.assert_array_equal(back[k], plain[k], err_msg=k)


def test_pos_embed_used_as_given(digits):
    sd = _tiny()
    _, params = ckpt.from_reference(sd, HEADS)
    np.testing.assert_array_equal(params["pos_embed"], sd["pos_embed"][0])
    # The reference's table is this project's _pos_embed with its halves swapped (column first),
    # so regenerating it would change the model.
    for dim, grid in [(D, G), (digits[0].hidden, digits[0].grid)]:
        ours = _pos_embed(grid, dim)
        ref = _ref_sincos(dim, grid)
        swapped = np.concatenate([ours[:, dim // 2:], ours[:, :dim // 2]], axis=1)
        np.testing.assert_allclose(ref, swapped, rtol=0, atol=1e-15)
        assert np.abs(ref - ours).max() > 0.5
    other = dict(sd, pos_embed=np.random.default_rng(1).normal(size=sd["pos_embed"].shape))
    _, p2 = ckpt.from_reference(other, HEADS)
    np.testing.assert_array_equal(p2["pos_embed"], other["pos_embed"][0])


# ----------------------------------------------------------------- files
def _check_digits(spec, params, spec2, params2):
    assert spec2 == spec
    assert params2.keys() == params.keys()
    for k in params:
        assert params2[k].dtype == np.float64 and params2[k].shape == params[k].shape
        np.testing.assert_array_equal(params2[k], params[k], err_msg=k)  # float32-exact weights
    for t, label in [(999, 7), (120, 2)]:
        img = _img(label, spec)
        a = DiT(spec, params=params).forward(img, t, label, 0)
        b = DiT(spec2, params=params2).forward(img, t, label, 0)
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def test_digits_npz_round_trip(digits, tmp_path):
    spec, params = digits
    path = ckpt.export_checkpoint(spec, params, tmp_path / "digits.npz")
    with np.load(path) as z:
        shapes = {k: z[k].shape for k in z.files}
        assert all(z[k].dtype == np.float32 for k in z.files)
    assert shapes == ckpt.reference_shapes(spec)
    assert len(shapes) == len(params) == 8 + 10 * spec.depth + 4
    assert shapes["x_embedder.proj.weight"] == (128, 1, 2, 2)
    assert shapes["pos_embed"] == (1, 64, 128)
    assert shapes["t_embedder.mlp.0.weight"] == (128, 64)
    assert shapes["y_embedder.embedding_table.weight"] == (11, 128)
    assert shapes["blocks.3.adaLN_modulation.1.weight"] == (768, 128)
    assert shapes["final_layer.linear.weight"] == (4, 128)
    _check_digits(spec, params, *ckpt.load_checkpoint(path, heads=spec.heads))


def test_digits_safetensors_round_trip(digits, tmp_path):
    from safetensors.numpy import save_file

    spec, params = digits
    path = ckpt.export_checkpoint(spec, params, tmp_path / "digits.safetensors")
    _check_digits(spec, params, *ckpt.load_checkpoint(path, heads=spec.heads))
    sd = _tiny()  # a file written elsewhere, float64
    save_file(sd, tmp_path / "tiny.safetensors")
    spec2, p2 = ckpt.load_checkpoint(tmp_path / "tiny.safetensors", HEADS)
    ref_spec, ref = ckpt.from_reference(sd, HEADS)
    assert spec2 == ref_spec
    for k in ref:
        np.testing.assert_array_equal(p2[k], ref[k], err_msg=k)


def test_float64_export_is_lossless(tmp_path):
    spec, params = ckpt.from_reference(_tiny(), HEADS)
    path = ckpt.export_checkpoint(spec, params, tmp_path / "t.npz", dtype=np.float64)
    _, back = ckpt.load_checkpoint(path, HEADS)
    for k in params:
        np.testing.assert_array_equal(back[k], params[k], err_msg=k)


def test_ddp_prefix_stripped():
    sd = {f"module.{k}": v for k, v in _tiny().items()}
    spec, params = ckpt.from_reference(sd, HEADS)
    assert spec.depth == DEPTH


def test_missing_extra_names_the_install(tmp_path, monkeypatch):
    for name, suffix, extra in [("safetensors", ".safetensors", ".[safetensors]"),
                                ("torch", ".pt", ".[torch]")]:
        path = tmp_path / f"x{suffix}"
        path.write_bytes(b"\0")
        monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.setitem(sys.modules, f"{name}.numpy", None)
        with pytest.raises(ImportError, match=f"pip install -e '{extra}'".replace("[", r"\[")
                           .replace(".", r"\.")):
            ckpt.load_checkpoint(path, HEADS)


# ----------------------------------------------------------------- bad input
def _drop(name):
    def f(sd):
        del sd[name]
    return f


def _set(name, value):
    def f(sd):
        sd[name] = value
    return f


BAD = {
    "missing": (_drop("blocks.1.mlp.fc2.bias"), HEADS,
                ["'blocks.1.mlp.fc2.bias' is missing", "(8,)"]),
    "missing_block": (lambda sd: [sd.pop(k) for k in list(sd) if k.startswith("blocks.0.")],
                      HEADS, ["'blocks.0.mlp.fc1.weight' is missing"]),
    "wrong_shape": (_set("blocks.0.attn.proj.weight", np.zeros((8, 7))), HEADS,
                    ["'blocks.0.attn.proj.weight' has shape (8, 7)", "expected (8, 8)"]),
    "unknown": (_set("blocks.0.attn.q_norm.weight", np.ones(4)), HEADS,
                ["unexpected tensor 'blocks.0.attn.q_norm.weight' of shape (4,)"]),
    "typo": (lambda sd: sd.update({"final_layer.linear.bais": sd.pop("final_layer.linear.bias")}),
             HEADS, ["'final_layer.linear.bias' is missing", "'final_layer.linear.bais'"]),
    "heads": (lambda sd: None, 3,
              ["divides the hidden size 8", "'x_embedder.proj.weight'", "(8, 3, 2, 2)", "not 3"]),
    "heads_zero": (lambda sd: None, 0, ["positive integer", "'x_embedder.proj.weight'", "not 0"]),
    "out_channels": (_set("final_layer.linear.weight", np.zeros((36, 8))), HEADS,
                     ["'final_layer.linear.weight' has shape (36, 8)", "(12, 8) or (24, 8)"]),
    "grid": (_set("pos_embed", np.zeros((1, 8, 8))), HEADS,
             ["'pos_embed' has shape (1, 8, 8)", "(1, grid*grid, 8)"]),
    "patch": (_set("x_embedder.proj.weight", np.zeros((8, 3, 2, 3))), HEADS,
              ["'x_embedder.proj.weight' has shape (8, 3, 2, 3)", "square"]),
    "conv_ndim": (_set("x_embedder.proj.weight", np.zeros((8, 12))), HEADS,
                  ["'x_embedder.proj.weight' has shape (8, 12)",
                   "(hidden, channels, patch, patch)"]),
    "freq_odd": (_set("t_embedder.mlp.0.weight", np.zeros((8, 5))), HEADS,
                 ["'t_embedder.mlp.0.weight' has shape (8, 5)", "even"]),
    "non_finite": (lambda sd: sd["blocks.1.attn.qkv.weight"].__setitem__((0, 0), np.nan), HEADS,
                   ["'blocks.1.attn.qkv.weight'", "(24, 8)", "non-finite"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_checkpoint_is_one_readable_error(case, tmp_path):
    mutate, heads, parts = BAD[case]
    sd = _tiny()
    mutate(sd)
    path = tmp_path / "bad.npz"
    np.savez(path, **sd)
    with pytest.raises(ValueError) as info:
        ckpt.load_checkpoint(path, heads)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(path))
    for part in parts:
        assert part in msg, (part, msg)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_project_layout_and_unknown_suffix(tmp_path):
    with pytest.raises(ValueError, match="load_trained"):
        ckpt.load_checkpoint(TRAINED_PATH, 4)
    path = tmp_path / "x.ckpt"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"unknown checkpoint format '\.ckpt'"):
        ckpt.load_checkpoint(path, 4)
    with pytest.raises(FileNotFoundError):
        ckpt.load_checkpoint(tmp_path / "none.npz", 4)


def test_export_checks_params(digits, tmp_path):
    spec, params = digits
    bad = dict(params)
    del bad["blocks.2.mlp.fc1.b"]
    with pytest.raises(ValueError, match=r"'blocks\.2\.mlp\.fc1\.b' is missing \(expected shape "
                                         r"\(256,\)\)"):
        ckpt.export_checkpoint(spec, bad, tmp_path / "x.npz")
    with pytest.raises(ValueError, match="unknown checkpoint format"):
        ckpt.export_checkpoint(spec, params, tmp_path / "x.bin")


# ----------------------------------------------------------------- PyTorch (extra `torch`)
@pytest.mark.slow
def test_torch_checkpoints(digits, tmp_path):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as tf

    spec, params = digits
    path = ckpt.export_checkpoint(spec, params, tmp_path / "digits.pt")
    _check_digits(spec, params, *ckpt.load_checkpoint(path, heads=spec.heads))

    # A training checkpoint as the reference's train.py writes it: the EMA weights are read.
    sd = {k: torch.from_numpy(v) for k, v in _tiny().items()}
    other = {k: torch.from_numpy(v) for k, v in _tiny(seed=9).items()}
    torch.save({"model": other, "ema": sd, "opt": {"state": {}},
                "args": argparse.Namespace(model="DiT-S/2", epochs=1)}, tmp_path / "train.pt")
    spec2, p2 = ckpt.load_checkpoint(tmp_path / "train.pt", HEADS)
    _, ref = ckpt.from_reference(_tiny(), HEADS)
    for k in ref:
        np.testing.assert_array_equal(p2[k], ref[k], err_msg=k)

    # torch's own Conv2d and the reference's unpatchify einsum against this project's layouts.
    model = DiT(spec2, params=p2)
    img = _img(0, spec2)
    conv = tf.conv2d(torch.from_numpy(img)[None], sd["x_embedder.proj.weight"],
                     sd["x_embedder.proj.bias"], stride=P).flatten(2).transpose(1, 2)[0]
    np.testing.assert_allclose(model.patchify(img) @ p2["x_embed.W"] + p2["x_embed.b"],
                               conv.numpy(), rtol=1e-12, atol=1e-13)
    tok = torch.from_numpy(np.random.default_rng(2).standard_normal((1, G * G, P * P * 2 * C)))
    x = torch.einsum("nhwpqc->nchpwq", tok.reshape(1, G, G, P, P, 2 * C))
    unp = x.reshape(1, 2 * C, G * P, G * P)[0, :C].numpy()  # eps channels of a learn_sigma output
    eps_rows = tok[0].numpy().reshape(G * G, P * P, 2 * C)[:, :, :C].reshape(G * G, P * P * C)
    np.testing.assert_array_equal(model.unpatchify(eps_rows), unp)

    # Half precision tensors are read too (converted to float64).
    half = {k: v.to(torch.bfloat16) for k, v in sd.items()}
    torch.save(half, tmp_path / "half.pth")
    _, p3 = ckpt.load_checkpoint(tmp_path / "half.pth", HEADS)
    np.testing.assert_array_equal(p3["y_embed"],
                                  half["y_embedder.embedding_table.weight"].double().numpy())
    torch.save({"weights": [1, 2]}, tmp_path / "odd.pt")
    with pytest.raises(ValueError, match="entry 'weights' is not a tensor but list"):
        ckpt.load_checkpoint(tmp_path / "odd.pt", HEADS)
    torch.save({"ema": sd, "step": fractions.Fraction(1, 2)}, tmp_path / "pickled.pt")
    with pytest.raises(ValueError, match=r"refused the file \(it holds a fractions\.Fraction "):
        ckpt.load_checkpoint(tmp_path / "pickled.pt", HEADS)
