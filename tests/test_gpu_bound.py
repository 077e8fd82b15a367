"""The A100 roofline bound of the paper-scale projection (perf/gpu_bound.py)."""

from dataclasses import replace

import pytest

from dstar_rtl.models.dit_shapes import MODELS, Attention, DiTModel, Linear
from dstar_rtl.perf.gpu_bound import A100, roofline, step_bytes


def tiny_model(tokens=64, steps=10):
    return DiTModel("t", steps, (Linear("fc", tokens, 32, 64, 2),),
                    (Attention("a", tokens, tokens, 2, 16, 3),))


def test_flops_and_bytes_are_counted_from_the_shapes():
    m = tiny_model()
    r = roofline(m)
    macs = 64 * 32 * 64 * 2 + 2 * 64 * 64 * 2 * 16 * 3
    assert r["flops_per_step"] == 2 * macs
    weights, acts = 32 * 64 * 2, 64 * (32 + 64) * 2
    att = 2 * 16 * (2 * 64 + 2 * 64) * 3
    assert r["bytes_per_step"] == step_bytes(m, A100) == 2 * (weights + acts + att)


def test_the_longer_of_compute_and_traffic_binds_every_step():
    m = tiny_model()
    r = roofline(m)
    assert r["bound"] == "traffic"              # a small model is traffic bound
    assert r["s_per_step"] == pytest.approx(r["bytes_per_step"] / A100.bytes_per_s)
    assert r["per_image_s"] == pytest.approx(10 * r["s_per_step"])
    slow_hbm = replace(A100, bytes_per_s=1e15)
    r2 = roofline(m, slow_hbm)
    assert r2["bound"] == "compute"
    assert r2["s_per_step"] == pytest.approx(r2["flops_per_step"] / A100.flops)


def test_dit_xl_512_is_compute_bound_at_its_published_work():
    """524.6 GMAC per forward at 512 px (../shared/REFERENCES.md)."""
    r = roofline(MODELS["DiT-XL/2 512"])
    assert r["flops_per_step"] / 2e9 == pytest.approx(524.6, rel=0.01)
    assert r["bound"] == "compute"
