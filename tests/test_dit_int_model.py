"""The integer golden of the whole DiT (models/dit_int_model.py) and ``dstar sample``."""

from __future__ import annotations

import json

import numpy as np
import pytest

import dstar_rtl.app.cli
from dstar_rtl.golden.config import preset
from dstar_rtl.golden.dit_int import IntDiTBlock
from dstar_rtl.golden.fmdq import to_fixed
from dstar_rtl.models.digits import psnr
from dstar_rtl.models.dit import DIT_MODELS, DiT, ddim_sample, init_params
from dstar_rtl.models.dit_int_model import IntDiT, ddim_sample_float, ddim_sample_int, guided_eps

SPEC = DIT_MODELS["tiny"]
CFG = preset("tiny")


@pytest.fixture(scope="module")
def params():
    return init_params(SPEC, 3)


def test_float_sampler_is_the_reference_ddim(params):
    m = DiT(SPEC, params=params)
    x, _ = ddim_sample(m, 3, seed=5, label=2)
    assert np.array_equal(ddim_sample_float(m, 3, 5, 2), x)


def test_the_integer_model_follows_the_float_model(params):
    """Every layer in integers, 4 DDIM steps: the sample stays close to float (the act format
    has 8 fractional bits; the bound has a margin of a few dB over what is measured)."""
    xi, recs = ddim_sample_int(IntDiT(SPEC, params, CFG), 4, seed=1, label=1)
    xf = ddim_sample_float(DiT(SPEC, params=params), 4, 1, 1)
    assert psnr(xi, xf) > 30                        # 34.6 dB measured
    assert len(recs) == 4


def test_blocks_see_the_embedding_plus_position(params):
    """The first block's input is sat(pos + x_embed(patches)), and each block runs as a
    stand-alone IntDiTBlock on the same inputs would."""
    m = IntDiT(SPEC, params, CFG)
    img = np.random.default_rng(0).standard_normal((SPEC.channels, SPEC.image_size,
                                                    SPEC.image_size))
    inp = m.host_inputs(img, 999, 1)
    r = m.step(inp)
    pos, _ = to_fixed(params["pos_embed"], CFG.act_width, CFG.act_frac)
    lim = 1 << (CFG.act_width - 1)
    assert np.array_equal(r.h0, np.clip(pos + r.embed, -lim, lim - 1))
    alone = IntDiTBlock(params, 0, SPEC, CFG)
    assert np.array_equal(alone.step(r.h0, inp.mods[0]).out, r.blocks[0].out)
    assert r.eps.shape == (SPEC.tokens, SPEC.patch_dim)


def test_reset_restarts_the_state(params):
    m = IntDiT(SPEC, params, CFG)
    a, _ = ddim_sample_int(m, 2, seed=4, label=0)
    b, _ = ddim_sample_int(m, 2, seed=4, label=0)   # ddim_sample_int resets first
    assert np.array_equal(a, b)


def test_guidance_rows_keep_their_own_state(params):
    """With guidance the conditional and unconditional rows are two models; each row's steps
    equal that row run alone on the same images."""
    rows = (IntDiT(SPEC, params, CFG), IntDiT(SPEC, params, CFG))
    x, recs = ddim_sample_int(rows, 2, seed=2, label=3, guidance=2.0)
    alone = IntDiT(SPEC, params, CFG)
    for k, label in ((0, 3), (1, SPEC.classes)):
        alone.reset()
        for step in recs:
            r = alone.step(step[k].inputs)
            assert np.array_equal(r.eps, step[k].eps)
            assert step[k].inputs.patches is not None
    assert np.array_equal(guided_eps(np.ones(2), np.zeros(2), 2.0), 2 * np.ones(2))
    with pytest.raises(ValueError, match="two models"):
        ddim_sample_int(rows[0], 2, seed=2, label=3, guidance=2.0)


def test_average_bits_counts_every_layer(params):
    m = IntDiT(SPEC, params, CFG)
    r = m.step(m.host_inputs(np.zeros((SPEC.channels, SPEC.image_size, SPEC.image_size)),
                             999, 0))
    names = set(r.layer_counters())
    assert {"x_embed", "final.linear", "blocks.0.attn.qkv[qk]", "blocks.0.mlp.fc2"} <= names
    assert 0 <= r.average_bits() <= 8


def run_dstar(capsys, *argv):
    rc = dstar_rtl.app.cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_dstar_sample_writes_the_grid_and_the_record(tmp_path, capsys):
    # The preset's per-layer bases (profiled, -2) are the trained DiT's 20-step operating point;
    # on this random 2-step model they cost quality (about 19 dB), so it runs at one base.
    rc, out, err = run_dstar(capsys, "sample", "--model", "tiny", "--steps", "2", "--labels",
                             "0", "3", "--cfg", "1.5", "--preset", "tiny", "--set",
                             "base_offset=None", "--out", tmp_path)
    assert rc == 0, err
    rec = json.loads((tmp_path / "sample.json").read_text())
    assert (tmp_path / "sample.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert rec["backend"] == "golden-int" and rec["guidance"] == 1.5
    assert [s["label"] for s in rec["samples"]] == [0, 3]
    assert all(len(s["per_step"]) == 2 and s["psnr_db"] > 20 for s in rec["samples"])
    first = rec["samples"][0]["per_step"][0]
    assert first["cache_step"] and first["qpu_counters"]["qpu_subchannels"] > 0
    assert 0 < first["sar_kept_fraction"] <= 1
    md = (tmp_path / "sample.md").read_text()
    assert md.startswith("# Samples: golden-int, 2 DDIM steps") and "| 1 | 3 |" in md
    assert rec["classifier_agreement"] is None      # not a 16x16 digits model
    assert "sample 2/2" in err and out.startswith("wrote ")


@pytest.mark.parametrize("argv, message", [
    (["--labels", "4"], "--labels must be in [0, 3]"),
    (["--heads", "2"], "--heads goes with --weights"),
    (["--weights", "nope.npz", "--heads", "2"], "no such file"),
    (["--weights", "nope.npz"], "needs --heads"),
    (["--steps", "0"], "--steps must be >= 1"),
    (["--cfg", "0"], "--cfg must be > 0"),
    (["--set", "max_reduction=8"], "does not fit"),
    (["--stream", "XBUF"], "go with an RTL backend"),
    (["--fit-buffers"], "go with an RTL backend"),
    (["--backend", "verilator", "--jobs", "0"], "--jobs must be >= 1"),
    (["--backend", "verilator", "--set", "gmem_rows=512"], "GMEM needs 768 rows"),
    (["--backend", "icarus", "--cfg", "2"], "GMEM needs 1280 rows, the core has 1024"),
    (["--dram-latency", "9"], "--dram-latency and --dram-bandwidth go together"),
    (["--backend", "verilator", "--dram-latency", "9", "--dram-bandwidth", "4"],
     "a core with a DRAM port"),
    (["--backend", "verilator", "--set", "dram_width=32", "--dram-latency", "0",
      "--dram-bandwidth", "4"], "latency must be an integer >= 1"),
])
def test_dstar_sample_refuses_bad_input_in_one_line(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    rc, stdout, err = run_dstar(capsys, "sample", "--model", "tiny", "--preset", "tiny",
                                "--out", out, *argv)
    assert rc == 2 and stdout == "" and err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_dstar_sample_labels_digits_with_the_classifier(tmp_path, capsys):
    """The trained digits DiT is 16x16 with one channel: each sample gets the classifier's
    label; the float backend is its own reference, so there is no agreement with float."""
    rc, out, err = run_dstar(capsys, "sample", "--backend", "float", "--steps", "2", "--labels",
                             "3", "7", "--out", tmp_path)
    assert rc == 0, err
    rec = json.loads((tmp_path / "sample.json").read_text())
    assert rec["classifier_agreement"]["samples"] == 2
    assert rec["classifier_agreement"]["with_float"] is None
    assert all(0 <= s["classifier"] <= 9 and s["psnr_db"] is None for s in rec["samples"])
    assert "the classifier reads the label on" in out and "float on" not in out


def test_an_rtl_mismatch_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """The loop's first difference (its result file's ``error``) becomes the command's one-line
    error, exit 1, and no output appears."""
    import dstar_rtl.sim.runner
    from dstar_rtl.sim.sample_job import JOB_ENV, read_job, write_result

    def fake_run(unit, cfg, simulator, module, *, extra_env, **kw):
        job = read_job(extra_env[JOB_ENV])
        write_result(job.result, error="sample 0 (label 1) step 1 row 0: eps: first difference "
                                       "at index (3, 2): got 5, expected 4")
        raise AssertionError("dstar_rtl.tb.test_sample on verilator: 1 of 1 tests failed")

    monkeypatch.setattr(dstar_rtl.sim.runner, "build", lambda *a, **k: None)
    monkeypatch.setattr(dstar_rtl.sim.runner, "run_cocotb", fake_run)
    out = tmp_path / "out"
    rc, stdout, err = run_dstar(capsys, "sample", "--backend", "verilator", "--model", "tiny",
                                "--preset", "tiny", "--steps", "2", "--labels", "1", "--out", out)
    assert rc == 1 and stdout == "" and not out.exists()
    last = err.strip().splitlines()[-1]
    assert "the verilator core differs from the integer golden: sample 0 (label 1) step 1 " \
           "row 0: eps: first difference at index (3, 2)" in last, err


def test_without_the_schedule_the_same_integers_and_precision_counters(params):
    """``schedule=False`` (the sweep's fast path) gives the same model output and the same
    precision counters as the full group schedule, step by step (SAR on, cache and reuse)."""
    from dstar_rtl.analysis.calibration import calibrate

    spec = DIT_MODELS["tiny"]
    cfg = preset("tiny")
    cal = calibrate(spec, params, cfg, 3, 1000)
    runs = []
    for schedule in (True, False):
        m = IntDiT(spec, params, cfg, cal.masks, base_log2=cal.bases, schedule=schedule)
        runs.append(ddim_sample_int(m, 3, 1, 2))
    (xa, ra), (xb, rb) = runs
    assert np.array_equal(xa, xb)
    keys = ("subchannels", "subchannels_b2", "subchannels_b4", "subchannels_b6",
            "subchannels_b8", "subchannels_zero", "saturated")
    for a, b in zip(ra, rb):
        ca, cb = a[0].quant_counters(), b[0].quant_counters()
        assert ca["subchannels"] > 0 and {k: ca[k] for k in keys} == {k: cb[k] for k in keys}
        assert cb["groups"] == 0 < ca["groups"]       # the fast path builds no group stream


def test_calibration_bases_are_the_profiled_ones_plus_the_offset(params):
    from dstar_rtl.analysis.calibration import calibrate
    from dstar_rtl.models.dit import calibrate_masks, linear_layer_names

    spec = DIT_MODELS["tiny"]
    cfg = preset("tiny", base_offset=-1)
    cal = calibrate(spec, params, cfg, 3, 1000)
    assert set(cal.bases) == set(linear_layer_names(spec))
    assert cal.bases == {n: min(max(B - 1, 0), cfg.B_max) for n, B in cal.profiled.items()}
    masks = calibrate_masks(spec, cfg, 3, 1000, params=params)
    assert all(np.array_equal(masks[k], cal.masks[k]) for k in masks)
    one = calibrate(spec, params, cfg.replace(base_offset=None), 3, 1000)
    assert one.bases is None and set(one.masks) == set(masks)
    assert calibrate(spec, params, cfg.replace(base_offset=None), 3, 1000, sar=False).masks is None
