"""Trace format (analysis/trace.py): round trip, one-line errors for every bad input, and the FMDQ
and SAR analyses on synthetic traces with known answers."""

import json
import os
import zipfile

import numpy as np
import pytest

from dstar_rtl.analysis.trace import (
    analyze_fmdq,
    analyze_sar,
    load_trace,
    profile_base_log2,
    split_name,
    validate_trace,
    write_trace,
)
from dstar_rtl.golden.config import preset


def _probs(S=2, H=1, N=8, seed=0):
    rng = np.random.default_rng(seed)
    e = np.exp(rng.normal(size=(S, H, N, N)))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def good_trace():
    rng = np.random.default_rng(0)
    return {"a.fc.x": rng.normal(size=(3, 8, 4)).astype(np.float32),
            "a.attn.attn": _probs(3, 2, 8),
            "a.attn.v": rng.normal(size=(3, 2, 8, 4)).astype(np.float32)}


def _save(path, **arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def test_split_name():
    assert split_name("blocks.0.attn.v") == ("blocks.0.attn", "v")
    assert split_name("blocks.0.attn.qkv[qk].x") == ("blocks.0.attn.qkv[qk]", "x")
    for bad in ("x", ".x", "a..x", "a.y", "a b.x", "a.x.npy"):
        assert split_name(bad) is None


def test_round_trip(tmp_path):
    tr = good_trace()
    p = tmp_path / "t.trace"  # the exact name: no ".npz" appended
    write_trace(p, tr)
    assert os.listdir(tmp_path) == ["t.trace"]
    back = load_trace(p)
    assert list(back) == list(tr)
    for k in tr:
        assert back[k].dtype == np.float32
        np.testing.assert_array_equal(back[k], tr[k])


def test_float64_and_integer_inputs_are_accepted(tmp_path):
    tr = {"l.x": np.arange(24).reshape(1, 6, 4)}
    write_trace(tmp_path / "t.npz", tr)
    assert load_trace(tmp_path / "t.npz")["l.x"].dtype == np.float32


# (arrays, fragment of the message)
BAD = {
    "empty": ({}, "holds no arrays"),
    "bad name": ({"fc.weights": np.zeros((1, 2, 2))}, "'fc.weights' is not named"),
    "x ndim": ({"fc.x": np.zeros((2, 4))}, "'fc.x' must have 3 dimensions"),
    "attn ndim": ({"at.attn": np.full((2, 4, 4), 0.25)}, "'at.attn' must have 4 dimensions"),
    "attn not square": ({"at.attn": np.full((1, 1, 4, 2), 0.5)}, "'at.attn' must be square"),
    "attn rows": ({"at.attn": np.full((1, 1, 4, 4), 0.3)}, "'at.attn' has rows that do not sum"),
    "attn negative": ({"at.attn": np.tile([[1.5, -0.5], [0.5, 0.5]], (1, 1, 1, 1))},
                      "'at.attn' holds values outside"),
    "nan": ({"fc.x": np.array([[[0.0, np.nan]]])}, "'fc.x' holds NaN or Inf"),
    "inf": ({"fc.x": np.array([[[np.inf, 0.0]]])}, "'fc.x' holds NaN or Inf"),
    "empty array": ({"fc.x": np.zeros((0, 4, 4))}, "'fc.x' is empty"),
    "bool": ({"fc.x": np.zeros((1, 2, 2), bool)}, "'fc.x' must hold real numbers"),
    "complex": ({"fc.x": np.zeros((1, 2, 2), complex)}, "'fc.x' must hold real numbers"),
    "v alone": ({"at.v": np.zeros((1, 1, 4, 2))}, "'at.v' has no matching 'at.attn'"),
    "v shape": ({"at.attn": _probs(2, 1, 8), "at.v": np.zeros((2, 1, 4, 3))},
                "'at.v' has shape (2, 1, 4, 3)"),
    "v ndim": ({"at.attn": _probs(2, 1, 8), "at.v": np.zeros((2, 8, 3))},
               "'at.v' must have 4 dimensions"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_traces_give_one_clear_line(tmp_path, case):
    arrays, frag = BAD[case]
    p = tmp_path / "bad.npz"
    _save(p, **arrays)
    with pytest.raises(ValueError) as ei:
        load_trace(p)
    msg = str(ei.value)
    assert frag in msg and str(p) in msg
    assert "\n" not in msg
    # write_trace refuses the same dict and leaves nothing behind.
    with pytest.raises(ValueError, match="trace"):
        write_trace(tmp_path / "out.npz", arrays)
    assert sorted(os.listdir(tmp_path)) == ["bad.npz"]


def test_bad_files(tmp_path):
    cases = {}
    cases["missing"] = (tmp_path / "nope.npz", "no such file")
    cases["directory"] = (tmp_path, "is a directory")
    txt = tmp_path / "text.npz"
    txt.write_text("hello\n")
    cases["text"] = (txt, "not a NumPy .npz archive")
    npy = tmp_path / "one.npy"
    np.save(npy, np.zeros(3))
    cases["npy"] = (npy, "a single .npy array")
    obj = tmp_path / "obj.npz"
    _save(obj, **{"fc.x": np.array([1, "a"], dtype=object)})
    cases["object"] = (obj, "'fc.x' holds Python objects")
    broken = tmp_path / "broken.npz"
    with zipfile.ZipFile(broken, "w") as z:
        z.writestr("fc.x.npy", b"\x93NUMPY garbage")
    cases["broken member"] = (broken, "'fc.x' cannot be read")
    for name, (path, frag) in cases.items():
        with pytest.raises(ValueError) as ei:
            load_trace(path)
        assert frag in str(ei.value), name
        assert "\n" not in str(ei.value), name


# ------------------------------------------------------------------------------------ FMDQ
def test_fmdq_closed_loop_error_bound_and_stats():
    cfg = preset("tiny")
    rng = np.random.default_rng(1)
    # |x| <= 0.9 and |Δx| <= 1.8: at B = 6 every difference fits INT8 at the base step (e = 0),
    # so closed loop keeps |x - x̂| <= step/2 (+ the fixed-point rounding of x).
    X = np.clip(np.cumsum(rng.normal(0, 0.2, (6, 10, 5)), axis=0), -0.9, 0.9)
    res = analyze_fmdq({"l.x": X}, cfg)
    d = res["layers"]["l"]
    assert d["share_e_pos"] == 0 and d["base_log2"] == 6
    assert d["recon_err_max"] <= 2.0 ** -7 + 2.0 ** -9
    assert 0 < d["avg_bits"] <= 8 and 0 < d["lane_fill"] <= 1
    assert d["steps"] == 6 and d["subchannels"] == 6 * 3 * 5  # 10 tokens -> 3 tiles of 4
    assert sum(d["hist"].values()) == d["subchannels"]
    assert res["summary"]["avg_bits"] == pytest.approx(d["avg_bits"])
    json.dumps(res, allow_nan=False)
    # A coarser base takes fewer bits and a larger error.
    d3 = analyze_fmdq({"l.x": X}, cfg, base_log2=3)["layers"]["l"]
    assert d3["avg_bits"] < d["avg_bits"] and d3["recon_err_max"] > d["recon_err_max"]
    # Open loop drifts: its error is not bounded by the step.
    do = analyze_fmdq({"l.x": X}, cfg.replace(closed_loop=False))["layers"]["l"]
    assert do["recon_err_max"] >= d["recon_err_max"]


def test_fmdq_profile_base_rule():
    cfg = preset("tiny")
    X = np.zeros((4, 8, 3))
    signs = np.where(np.random.default_rng(2).random((8, 3)) < 0.5, -1.0, 1.0)
    for t in range(1, 4):
        X[t] = X[t - 1] + signs  # every difference is ±1.0: 64 at B = 6, 128 (> 127) at B = 7
    assert profile_base_log2(X, cfg) == 6
    res = analyze_fmdq({"l.x": X, "m.x": X / 4}, cfg, profile_base=True)
    assert res["layers"]["l"]["base_log2"] == 6
    assert res["layers"]["m"]["base_log2"] == 8  # ±0.25 fits even the finest base
    assert res["base_rule"] == "profile"


def test_fmdq_argument_errors():
    cfg = preset("tiny")
    tr = {"l.x": np.zeros((1, 4, 4))}
    with pytest.raises(ValueError, match="base_log2 must be"):
        analyze_fmdq(tr, cfg, base_log2=9)
    with pytest.raises(ValueError, match="either"):
        analyze_fmdq(tr, cfg, base_log2=3, profile_base=True)
    with pytest.raises(ValueError, match="no linear-layer inputs"):
        analyze_fmdq({"a.attn": _probs()}, cfg)
    with pytest.raises(ValueError, match="max_reduction"):
        analyze_fmdq({"l.x": np.zeros((1, 4, 65))}, cfg)


# ------------------------------------------------------------------------------------- SAR
def _block_diag_trace(S=4, N=8, leak=1e-6):
    P = np.full((S, 1, N, N), leak)
    for b in range(0, N, 4):
        P[:, :, b:b + 4, b:b + 4] = 1.0
    P /= P.sum(-1, keepdims=True)
    return P


def test_sar_block_diagonal():
    cfg = preset("tiny")  # Bs = T = 4, interval 2
    P = _block_diag_trace()
    V = np.random.default_rng(0).normal(size=(4, 1, 8, 3))
    res = analyze_sar({"at.attn": P, "at.v": V}, cfg)
    d = res["layers"]["at"]
    assert d["mask"] == [[[1, 0], [0, 1]]]
    assert d["kept_fraction"] == 0.5
    # steps: cache, reuse, cache, reuse -> (0.5 + 0.25 + 0.5 + 0.25) / 4 of the dense work
    assert d["work_removed"] == pytest.approx(1 - 1.5 / 4)
    steps = d["per_step"]
    assert [s["kind"] for s in steps] == ["cache", "reuse", "cache", "reuse"]
    assert steps[0]["bytes_written"] == d["pcache_bytes"] > 0
    assert steps[1]["bytes_read"] == d["pcache_bytes"] and steps[1]["bytes_written"] == 0
    assert d["err_kind"] == "output" and d["err_max"] < 0.05
    json.dumps(res, allow_nan=False)
    # Without V the error is on the probabilities.
    d2 = analyze_sar({"at.attn": P}, cfg)["layers"]["at"]
    assert d2["err_kind"] == "probability" and d2["err_max"] < 2 ** -7
    # A bigger block keeps everything; interval 1 never reuses.
    d3 = analyze_sar({"at.attn": P}, cfg, block=8, interval=1)["layers"]["at"]
    assert d3["kept_fraction"] == 1.0 and d3["work_removed"] == 0.0
    # A threshold of 0 keeps every block.
    assert analyze_sar({"at.attn": P}, cfg, thr=0.0)["layers"]["at"]["kept_fraction"] == 1.0


def test_sar_argument_errors():
    cfg = preset("tiny")
    tr = {"at.attn": _probs()}
    with pytest.raises(ValueError, match="sar_thr"):
        analyze_sar(tr, cfg, thr=1.5)
    with pytest.raises(ValueError, match="sar_interval"):
        analyze_sar(tr, cfg, interval=0)
    with pytest.raises(ValueError, match="rows"):
        analyze_sar(tr, cfg, block=0)
    with pytest.raises(ValueError, match="no attention probabilities"):
        analyze_sar({"l.x": np.zeros((1, 4, 4))}, cfg)


def test_validate_trace_converts_integers():
    out = validate_trace({"l.x": np.ones((1, 2, 2), np.int16)})
    assert out["l.x"].dtype == np.float64
