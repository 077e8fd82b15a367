"""The whole DiT sampled on the generated core (tb.test_sample through bench.sample): the
tiny
model for 2 steps on both simulators (``make test``); in ``make regress`` the tiny model with
every layer streamed and two batch rows on both, and the trained digits DiT at ``fpga`` with
buffers deep enough for the whole model, 10 steps, labels 0-9, on Verilator, and a hidden-96
reference-layout checkpoint whose fc2 is longer than max_reduction (issue 31).
The cocotb loop checks every step against the integer golden bit for bit; here the images must
equal the golden-int backend's exactly, and the record must hold the core's figures."""

import json

import numpy as np
import pytest

from dstar_rtl.bench.sample import run_samples
from dstar_rtl.golden.config import preset
from dstar_rtl.models.dit import DIT_MODELS, init_params


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_tiny_model_on_the_core(simulator):
    spec, cfg = DIT_MODELS["tiny"], preset("tiny")
    params = init_params(spec, 0)
    kw = dict(steps=2, labels=[1], guidance=1.0, seed=4)
    rtl = run_samples(spec, params, cfg, backend=simulator, optimize=False, **kw)
    ref = run_samples(spec, params, cfg, backend="golden-int", **kw)
    assert np.array_equal(rtl["images"], ref["images"])
    rec = rtl["record"]
    steps = rec["samples"][0]["per_step"]
    assert [s["cache_step"] for s in steps] == [True, False]
    gold = ref["record"]["samples"][0]["per_step"]
    # The core's QPU counters (checked in the loop at every step) against the golden-int
    # backend's count, and the average bits each derives from its own.
    assert [s["qpu_counters"] for s in steps] == [s["qpu_counters"] for s in gold]
    assert [s["average_bits"] for s in steps] == [s["average_bits"] for s in gold]
    assert all(s["values_checked"] > 0 for s in steps)
    for s in steps:
        c = s["core_counters"]
        assert s["cycles"] >= c["busy_M"] > 0 and c["qpu_subchannels"] > 0
    reuse = steps[1]["core_counters"]
    assert reuse["pcache_groups_read"] > 0 and reuse["pcache_groups_written"] == 0
    core = rec["core"]
    assert core["bit_exact"] and core["streamed"]["YBUF"]      # tiny streams part of Y
    assert core["cycles_per_image"] == sum(s["cycles"] for s in steps)


def _streamed_tiny(cfg, simulator: str, kw: dict) -> dict:
    """The tiny model on ``simulator`` with every layer's weights, x-hat and Y streamed (through
    the host port, or DRAM on a core with one); its images must equal golden-int's."""
    spec = DIT_MODELS["tiny"]
    params = init_params(spec, 0)
    rtl = run_samples(spec, params, cfg, backend=simulator, optimize=False,
                      stream=("WMEM", "XBUF", "YBUF"), **kw)
    ref = run_samples(spec, params, cfg, backend="golden-int", **kw)
    assert np.array_equal(rtl["images"], ref["images"])
    return rtl


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_tiny_model_streamed_with_guidance(simulator):
    """Every layer's weights, x-hat and Y through the host port, two batch rows (guidance 2),
    no reuse step (interval 1, so one P-cache serves both rows): the images equal golden-int's."""
    rtl = _streamed_tiny(preset("tiny", sar_interval=1), simulator,
                         dict(steps=3, labels=[2], guidance=2.0, seed=1))
    core = rtl["record"]["core"]
    assert core["batch_rows"] == 2 and all(len(v) == 7 for v in core["streamed"].values())
    steps = rtl["record"]["samples"][0]["per_step"]
    assert all(s["cache_step"] for s in steps)
    assert all(s["core_counters"]["host_words_in"] > 0 for s in steps)


@pytest.mark.slow
@pytest.mark.cocotb
def test_digits_on_the_fpga_core(tmp_path, capsys):
    """The regress run of issue 18: the trained digits DiT, fpga datapath, buffers fitted,
    10 DDIM steps, labels 0-9, two simulator runs side by side."""
    from dstar_rtl.app.cli import main

    rc = main(["sample", "--backend", "verilator", "--preset", "fpga", "--fit-buffers",
               "--steps", "10", "--jobs", "2", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    rec = json.loads((tmp_path / "sample.json").read_text())
    assert rec["core"]["bit_exact"] and not any(rec["core"]["streamed"].values())
    assert rec["classifier_agreement"]["with_float"] >= 9
    assert all(len(s["per_step"]) == 10 for s in rec["samples"])


@pytest.mark.slow
@pytest.mark.cocotb
def test_hidden_96_reference_checkpoint_on_the_fpga_core(tmp_path, capsys):
    """Issue 31: a reference-layout checkpoint (hidden 96, 6 blocks, 6 heads, MLP 384: fc2 has
    more input channels than the fpga preset's max_reduction 256) samples on the fpga core with
    the default preset, buffers fitted, bit-exact at every step; fc2 runs in 2 pieces."""
    from dstar_rtl.app.cli import main
    from dstar_rtl.models.checkpoint import to_reference
    from dstar_rtl.models.dit import DiTSpec

    spec = DiTSpec(image_size=16, patch=2, channels=1, hidden=96, depth=6, heads=6,
                   mlp_ratio=4.0, classes=10)
    assert spec.mlp_hidden > preset("fpga").max_reduction
    ckpt = tmp_path / "h96.npz"
    np.savez(ckpt, **to_reference(spec, init_params(spec, 0)))
    rc = main(["sample", "--backend", "verilator", "--weights", str(ckpt), "--heads", "6",
               "--preset", "fpga", "--fit-buffers", "--steps", "2", "--labels", "3",
               "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert rc == 0, err
    rec = json.loads((tmp_path / "out" / "sample.json").read_text())
    assert rec["core"]["bit_exact"] and len(rec["samples"][0]["per_step"]) == 2


def _with_learned_sigma(sd: dict, spec, seed: int) -> dict:
    """``sd`` with the variance outputs of a ``learn_sigma`` checkpoint added (the final
    layer's rows ``(ky·p + kx)·2C + c``, ``c >= C`` the variance; models/checkpoint.py)."""
    rng = np.random.default_rng(seed)
    pp, C = spec.patch ** 2, spec.channels
    w, b = sd["final_layer.linear.weight"], sd["final_layer.linear.bias"]
    w2 = np.concatenate([w.reshape(pp, C, -1), rng.normal(0, 0.02, (pp, C, w.shape[1]))], 1)
    b2 = np.concatenate([b.reshape(pp, C), rng.normal(0, 0.02, (pp, C))], 1)
    return dict(sd, **{"final_layer.linear.weight": w2.reshape(2 * pp * C, -1).astype(w.dtype),
                       "final_layer.linear.bias": b2.reshape(-1).astype(b.dtype)})


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_reduced_dit_s_checkpoint_on_the_fpga_core(tmp_path, capsys, simulator):
    """Issue 31: DiT-S/2's layer shapes (hidden 384, 6 heads of 64, MLP 1,536, 4-channel
    latents, patch 2, learned sigma, 1,000 classes) with one block and 16 tokens, from a
    reference-layout checkpoint, on the fpga core: --fit-buffers raises ln_row_max to 384 (the
    VPU takes each LayerNorm row twice) and deepens the buffers; the heads are wider than a
    sub-channel row (64·8 > 256: K/V shifts by token rows), qkv/proj/fc1 in 2 pieces, fc2 in
    6; bit-exact at every step."""
    from dstar_rtl.app.cli import main
    from dstar_rtl.models.checkpoint import to_reference
    from dstar_rtl.models.dit import DiTSpec

    spec = DiTSpec(image_size=8, patch=2, channels=4, hidden=384, depth=1, heads=6,
                   mlp_ratio=4.0, classes=1000, freq_dim=256)
    ckpt = tmp_path / "dit_s_reduced.npz"
    np.savez(ckpt, **_with_learned_sigma(to_reference(spec, init_params(spec, 0)), spec, 1))
    rc = main(["sample", "--backend", simulator, "--weights", str(ckpt), "--heads", "6",
               "--preset", "fpga", "--fit-buffers", "--steps", "2", "--labels", "3",
               "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "ln_row_max raised to 384" in err
    rec = json.loads((tmp_path / "out" / "sample.json").read_text())
    assert rec["core"]["bit_exact"] and len(rec["samples"][0]["per_step"]) == 2


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("overrides", [{}, {"mlp_chunks": 2},
                                       {"datapath": "int8", "wmem_rows": 192}],
                         ids=["whole", "mlp-chunks", "int8-column-passes"])
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_tiny_model_through_dram(simulator, overrides):
    """Every layer's weights, x-hat and Y in DRAM behind the core's AXI4 port (cocotbext-axi's
    RAM, paused at random), each layer's objects loaded beside the layer before it: the images
    equal golden-int's, the state in DRAM is checked after every step, nothing streams through
    the host. In make regress: the fast tier runs the same program on the executor
    (tests/test_core_model.py) and the DRAM port's testbench on both simulators
    (tests/test_cocotb_core.py::test_core_dram_port)."""
    cfg = preset("tiny", dram_width=32, **overrides)
    # Icarus, about ten times slower per cycle: the cache step (both steps on Verilator).
    steps = 2 if simulator == "verilator" else 1
    rtl = _streamed_tiny(cfg, simulator, dict(steps=steps, labels=[3], guidance=1.0, seed=2))
    steps = rtl["record"]["samples"][0]["per_step"]
    for s in steps:
        c = s["core_counters"]
        assert c["dram_read_beats"] > 0 and c["dram_write_beats"] > 0 and c["busy_D"] > 0
        assert c["host_words_in"] < c["dram_read_beats"]
    # DRAM per image by kind adds up to the core's beat counters; the P cache moved groups.
    per = rtl["record"]["core"]["dram_bytes_per_image"]
    beats = sum(s["core_counters"][k] for s in steps
                for k in ("dram_read_beats", "dram_write_beats"))
    state = {"state"} if cfg.datapath == "dstar" else set()
    assert set(per) == {"weights", "pcache", "activations"} | state and per["pcache"] > 0
    assert sum(per.values()) == beats * cfg.dram_width // 8
    assert rtl["record"]["core"]["sram_bytes"]["YBUF"] > 0
