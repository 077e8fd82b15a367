"""The paper-scale projection (perf/chip_model.py, models/dit_shapes.py): its behaviour, not its
numbers (those are in reports/projection.md)."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import dstar_rtl.app.cli
from dstar_rtl.app.benches.perf_validate import PerfModel, PresetFit
from dstar_rtl.app.reports.projection import MEASUREMENT
from dstar_rtl.golden.config import preset
from dstar_rtl.models.dit_shapes import MODELS, Attention, DiTModel, Linear
from dstar_rtl.perf.chip_model import Chip, Workload, paper_timing, pcache_bytes, project_model
from dstar_rtl.perf.perf_model import Timing
from dstar_rtl.results.base import Provenance
from dstar_rtl.results.projection import Projection

ROOT = Path(__file__).resolve().parent.parent

CFG = preset("paper")


def calibrated(offset_fpga=0):
    """Timing dicts as app.benches.perf_validate writes them: structural values plus offsets."""
    out = {}
    for name in ("tiny", "fpga"):
        s = Timing.structural(preset(name))
        extra = offset_fpga if name == "fpga" else 0
        out[name] = s.with_(quant_fixed=s.quant_fixed + 5, gemm_fixed=s.gemm_fixed + 11 + extra,
                            tile_period=s.tile_period + 3, replay_busy=1,
                            vrow_curve={"layernorm/tok": [[1, 24.0], [4, 30.0]],
                                        "softmax/tok": [[1, 28.0], [4, 35.0]]}).to_dict()
    return out


def write_calibration(path: Path):
    """A ``dstar measure perf`` result (:class:`PerfModel`) holding :func:`calibrated`'s
    timings and no validation."""
    fits = tuple(PresetFit(preset=k, config_hash=preset(k).hash(), simulator="verilator",
                           sim_seconds=0.0, timing=Timing(**v), shapes=0, rows=(), block=(),
                           block_bytes=(), calibration={}, summary={}, block_summary={})
                 for k, v in calibrated().items())
    path.write_text(PerfModel(Provenance.unrecorded(), presets=fits).to_json())


@pytest.fixture(scope="module")
def timing():
    return paper_timing(calibrated())[0]


def small_model(tokens=256, steps=10):
    D = 256
    return DiTModel("small", steps, (Linear("fc", tokens, D, 4 * D, 2),
                                     Linear("blk.qk", tokens, D, 2 * D, 2, cache_only=True)),
                    (Attention("attn", tokens, tokens, 4, 64, 2),))


def test_equal_offsets_carry_over_and_different_ones_extrapolate():
    t, notes = paper_timing(calibrated())
    s = Timing.structural(CFG)
    assert t.gemm_fixed == s.gemm_fixed + 11
    assert t.tile_period == s.tile_period + 3
    t2, notes2 = paper_timing(calibrated(offset_fpga=4))
    assert t2.gemm_fixed > t.gemm_fixed               # 11 at rows 4, 15 at rows 8 → more at 64
    assert any("extrapolated" in n for n in notes2)


def test_fewer_bits_and_fewer_kept_blocks_are_faster(timing):
    m, chip = small_model(), Chip()
    base = Workload("w", bits=6.0, p_bits=6.0, fill=0.85, kept=0.9)
    r0 = project_model(m, chip, timing, timing, CFG, base)
    r1 = project_model(m, chip, timing, timing, CFG, Workload("w", 3.0, 3.0, 0.85, 0.9))
    r2 = project_model(m, chip, timing, timing, CFG, Workload("w", 6.0, 6.0, 0.85, 0.4))
    assert r1["dstar"]["per_image_s"] < r0["dstar"]["per_image_s"]
    assert r2["dstar"]["cache"]["attention_s"] < r0["dstar"]["cache"]["attention_s"]
    assert r0["int8"] == r1["int8"]                   # the INT8 core ignores FMDQ's bits
    assert r2["int8"]["cache"]["attention_s"] < r0["int8"]["cache"]["attention_s"]   # not SAR
    assert r0["int8"]["reuse"]["total_s"] < r0["int8"]["cache"]["total_s"]
    assert r0["dstar"]["reuse"]["total_s"] < r0["dstar"]["cache"]["total_s"]


def test_pcache_lives_where_it_fits(timing):
    wl = Workload("w", 4.0, 4.0, 0.85, 0.6)
    small = project_model(small_model(tokens=128), Chip(), timing, timing, CFG, wl)
    big = project_model(MODELS["Flux.1-dev 1K"], Chip(), timing, timing, CFG, wl)
    assert small["pcache_location"] == "scratchpad" and small["pcache_traffic_s_per_step"] == 0
    assert big["pcache_location"] == "HBM" and big["pcache_traffic_s_per_step"] > 0
    a = MODELS["Flux.1-dev 1K"].attentions[0]
    assert pcache_bytes(CFG, a, wl) > pcache_bytes(CFG, a, Workload("w", 2.0, 2.0, 0.85, 0.6))


def test_every_paper_model_has_layers_and_attention():
    assert len(MODELS) >= 9          # seven DiTs, Flux.1-dev at three resolutions
    for m in MODELS.values():
        assert m.linears and m.attentions and m.steps > 0 and m.macs() > 0


@pytest.mark.parametrize("content", [None, "not json", "[]", '{"presets": []}',
                                     '{"presets": [{"preset": "tiny"}]}'])
def test_missing_calibration_is_one_line_and_exit_2(tmp_path, capsys, content):
    """No calibration, or a file that is not one: one line, exit 2, nothing written."""
    pm = tmp_path / "perf_model.json"
    if content is not None:
        pm.write_text(content)
    rc = dstar_rtl.app.cli.main(["measure", "projection", "--perf-model", str(pm),
                         "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dstar: error: ")
    assert "dstar measure perf" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if content is None else [pm.name])


def test_cli_writes_json_markdown_and_plot(tmp_path):
    pm = tmp_path / "perf_model.json"
    write_calibration(pm)
    assert MEASUREMENT.main(["--perf-model", str(pm), "--profile", str(tmp_path / "none"),
                             "--out", str(tmp_path), "--no-levers"]) == 0
    rec = json.loads((tmp_path / "projection.json").read_text())
    assert Projection.load(tmp_path / "projection.json").rows[0].model == rec["rows"][0]["model"]
    assert {r["model"] for r in rec["rows"]} == set(MODELS)
    assert (tmp_path / "projection.png").stat().st_size > 0
    assert "P cache" in (tmp_path / "projection.md").read_text()
    for r in rec["rows"]:              # the A100 bound, and DSTAR's ratio to it
        assert r["gpu"]["per_image_s"] == pytest.approx(r["gpu"]["s_per_step"] * r["steps"])
        assert r["a100_over_dstar"] == pytest.approx(r["gpu"]["per_image_s"]
                                                     / r["dstar"]["per_image_s"])
    assert "A100 bound" in (tmp_path / "projection.md").read_text()


def test_pe_utilization_counts_useful_products_within_capacity(timing):
    """Utilization lies in (0, 1]; DSTAR's useful products are the lane-digit products, so half
    the bits is half the FFN products; the INT8 side counts MACs and ignores the workload."""
    D = 256
    m = DiTModel("ffn", 10, (Linear("blk.fc1", 256, D, 4 * D, 2),
                             Linear("blk.fc2", 256, 4 * D, D, 2),
                             Linear("blk.qk", 256, D, 2 * D, 2, cache_only=True)),
                 (Attention("attn", 256, 256, 4, 64, 2),))
    chip = Chip()
    r6 = project_model(m, chip, timing, timing, CFG, Workload("w", 6.0, 6.0, 0.9, 0.5))
    r3 = project_model(m, chip, timing, timing, CFG, Workload("w", 3.0, 6.0, 0.9, 0.5))
    for r in (r6, r3):
        for side in ("dstar", "int8"):
            for part in ("ffn", "attention"):
                u = r[side]["pe_utilization"][part]
                assert 0 < u["utilization"] <= 1 and u["products"] <= u["capacity"]
    f6, f3 = (r["dstar"]["pe_utilization"]["ffn"]["products"] for r in (r6, r3))
    assert f6 == 2 * f3
    assert r6["int8"]["pe_utilization"] == r3["int8"]["pe_utilization"]
    fc = [x for x in m.linears if x.name.endswith((".fc1", ".fc2"))]
    assert r6["int8"]["pe_utilization"]["ffn"]["products"] == sum(
        x.count * x.tokens * x.cin * x.cout for x in fc)


@pytest.mark.parametrize("which, content", [("profile", "not json"), ("bench", "{}"),
                                            ("profile", '{"runs": 3}')])
def test_a_malformed_profile_or_bench_is_one_line_and_exit_2(tmp_path, capsys, which, content):
    """``--profile`` / ``--bench`` that are not those reports: one line naming the file, exit 2,
    nothing written."""
    pm = tmp_path / "perf_model.json"
    write_calibration(pm)
    files = {"profile": ROOT / "reports" / "profile.json",
             "bench": ROOT / "reports" / "bench.json"}
    files[which] = tmp_path / f"{which}.json"
    files[which].write_text(content)
    rc = dstar_rtl.app.cli.main(["measure", "projection", "--perf-model", str(pm), "--profile",
                         str(files["profile"]), "--bench", str(files["bench"]),
                         "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert str(files[which]) in err and not (tmp_path / "out").exists()


def test_a_core_makes_k_and_v_only_for_the_heads_of_its_query_tiles():
    """Head-major split: 8 query tiles per core of a head's 16 (DiT-XL/2 512 on 32 cores) touch
    one head; runs that do not divide the heads' tiles may straddle two; never more heads than
    there are."""
    from dstar_rtl.perf.chip_model import heads_per_core

    assert heads_per_core(8, 16, 16) == 1
    assert heads_per_core(16, 16, 16) == 1
    assert heads_per_core(32, 16, 16) == 2
    assert heads_per_core(6, 16, 16) == 2          # 6 does not divide 16: may straddle
    assert heads_per_core(40, 16, 16) == 4         # 2.5 heads, straddling
    assert heads_per_core(64, 4, 8) == 8           # capped at the heads there are
    assert heads_per_core(1, 1, 1) == 1


def test_a_layer_takes_the_fastest_plan_that_fits_its_core(timing):
    """fc2 of a 64-token model on 32 cores (one token tile per core, 4096 input channels): the
    core's 80 KB cannot hold the tile's groups and a block's weights whole, so the layer runs in
    pieces; of the plans that fit, the one with the least time (the longer of compute and
    traffic), and no faster plan exists. More buffer never makes it slower."""
    from dataclasses import replace

    from dstar_rtl.perf.chip_memory import MemorySystem
    from dstar_rtl.perf.chip_model import linear_cost, linear_cycles
    x = Linear("blk.fc2", 64, 4096, 1024, 1)
    chip = Chip()
    for bits in (4.0, None):
        c = linear_cost(timing, CFG, x, chip, bits=bits, fill=0.9, stateful=bits is not None)
        assert c["pieces"] > 1 and c["plan"]["buffer_bytes"] <= chip.memory.core_buffer_bytes
        assert c["cycles"] == linear_cycles(timing, CFG, x, bits, 0.9, 32, c["pieces"])
        assert c["s"] >= max(c["cycles"] / chip.freq_hz,
                             sum(c["bytes"].values()) / chip.memory.hbm_bytes_per_s) * 0.999
        big = replace(chip, memory=MemorySystem(core_buffer_bytes=1 << 20))
        assert linear_cost(timing, CFG, x, big, bits=bits, fill=0.9,
                           stateful=bits is not None)["s"] <= c["s"]
    r = project_model(small_model(), Chip(), timing, timing, CFG,
                      Workload("w", 4.0, 4.0, 0.9, 0.5))
    assert set(r["dstar"]["reduction_pieces"]) == set(r["int8"]["reduction_pieces"]) == {
        "fc", "blk.qk"}


def test_attention_bound_from_the_drain_and_the_head_padding():
    """The INT8 array with every block kept: QKᵀ reduces head_dim channels in head_dim beats
    (at least the drain's rows), P·V fills head_dim of ceil(head_dim/T)·T columns. head_dim 72
    on T = 64: QKᵀ at 72/72 and P·V at 72/128, equal products, so 2 / (1 + 128/72) = 0.72;
    head_dim 32: QKᵀ drain-bound at 32/64 and P·V at 32/64, 0.5 (any drain: QKᵀ 1, so
    2 / (1 + 2) = 2/3)."""
    from dstar_rtl.perf.chip_model import attention_bound

    def model(d):
        return DiTModel("m", 1, (), (Attention("attn", 1024, 1024, 4, d, 1),))
    assert attention_bound(model(72), CFG, None) == pytest.approx(0.72)
    assert attention_bound(model(32), CFG, None) == pytest.approx(0.5)
    assert attention_bound(model(32), CFG, None, drain=False) == pytest.approx(2 / 3)
    # DSTAR: fewer bits make QKᵀ's reduction shorter than the drain: the bound falls.
    lo, hi = (attention_bound(model(72), CFG, Workload("w", b, b, 1.0, 1.0)) for b in (3.0, 6.0))
    assert lo < hi


@pytest.mark.parametrize("tile", [(9, 5, 18), (1152, 600, 36), (384, 1152, 1), (40, 30, 2)])
def test_a_long_gemm_stream_is_its_steady_state_extended(timing, tile):
    """:func:`stream_cycles` extends a stream's fourth tile by its steady step: equal to the
    whole run of the command-level model."""
    from dstar_rtl.perf.chip_model import _run, _stream, stream_cycles
    for n in (1, 2, 3, 4, 7, 12):
        assert stream_cycles(timing, tile, n) == _run(timing, _stream([tile] * n)), n


def test_fused_rows_charge_the_statistics_read_and_the_residual_read_only():
    """Unfused, each block's element-wise rows move 22 hidden-wide tensors through HBM (two
    layernorms and two modulates read and write, two gated residuals read two and write one,
    GELU reads and writes four); fused, one read for the layernorm statistics and one residual
    read per gated residual: 4 (``chip_model._FUSED_ACCESSES``)."""
    from dstar_rtl.perf.chip_model import vector_bytes
    chip = Chip()
    tokens, D = 1024, 1152
    m = DiTModel("one", 1, (Linear("blk.fc1", tokens, D, 4 * D, 3),), ())
    unit = 3 * tokens * D * 2
    assert unit > chip.memory.scratchpad_bytes
    assert vector_bytes(CFG, m, chip) == 22 * unit
    assert vector_bytes(CFG, m, chip, fused=True) == 4 * unit


def test_free_bytes_are_charged_nothing_on_both_chips(timing):
    m, chip = small_model(tokens=2048), Chip()
    wl = Workload("w", 3.0, 3.0, 0.9, 0.9)
    r0 = project_model(m, chip, timing, timing, CFG, wl)
    r1 = project_model(m, chip, timing, timing, CFG, wl, free=("restream", "operands"))
    assert any(r0[s]["cache"]["hbm_bytes"][k] > 0 for s in ("dstar", "int8")
               for k in ("restream", "operands"))
    for side in ("dstar", "int8"):
        for step in ("cache", "reuse"):
            h0, h1 = r0[side][step]["hbm_bytes"], r1[side][step]["hbm_bytes"]
            assert h1["restream"] == h1["operands"] == 0
            assert h1["state"] == h0["state"] and h1["weights"] == h0["weights"]
        assert r1[side]["per_image_s"] <= r0[side]["per_image_s"]


def test_targets_say_met_only_when_both_are_reached():
    from dstar_rtl.app.reports import state_levers as sl

    def row(lever, speedup, energy):
        cs = dict(state=1e9, activations=1e9, weights=1e8, pcache=0.0, compute_s=1e-3,
                  hbm_s=2e-3)
        return SimpleNamespace(lever=lever, model="M", workload="ours",
                               buffer_kb=sl.BUFFERS_KB[0], speedup=speedup,
                               energy_ratio=energy, cache_step={"dstar": cs, "int8": cs})
    names = ["stored Y (the default)", sl.COMBINED, list(sl.LEVERS)[-1]]
    low = [row(n, 1.1, 0.9) for n in names]
    assert "not met" in sl.targets(low, "M")[0]
    assert "meets both targets on: none" in sl.targets(low, "M")[0]
    fast_hot = [row(n, 1.6, 0.9) for n in names]
    assert "not met" in sl.targets(fast_hot, "M")[0]
    good = [row(n, 1.6, 0.7) for n in names]
    assert "; met." in sl.targets(good, "M")[0]
    assert "meets both targets on: M" in sl.targets(good, "M")[0]
    assert sl.targets(low[:2], "M") == []


def test_every_lever_is_measured_against_the_same_int8_chip(timing):
    """:func:`state_levers.lever_rows` on a small model: a row per lever (the stateless ones
    only where a dense-bits figure exists) and per larger buffer; the overlapped drain takes
    no compute from either chip, the bound's charged bytes are at most every lever's."""
    from dstar_rtl.app.reports import state_levers as sl

    wl = Workload("w", 3.0, 3.0, 0.9, 0.9, dense_bits=7.0)
    rows = sl.lever_rows([small_model(tokens=2048)], [wl], Chip(),
                         lambda cfg: (timing, timing))
    kb0 = sl.BUFFERS_KB[0]
    assert [r["lever"] for r in rows if r["buffer_kb"] == kb0] == list(sl.LEVERS)
    assert {r["buffer_kb"] for r in rows if r["lever"] == sl.COMBINED} == set(sl.BUFFERS_KB)
    by = {r["lever"]: r for r in rows if r["buffer_kb"] == kb0}
    base, drain = by["stored Y (the default)"], by["stored Y + drain overlapped"]
    assert drain["dstar_compute_s"] <= base["dstar_compute_s"]
    assert drain["int8_compute_s"] <= base["int8_compute_s"]
    bound = by[list(sl.LEVERS)[-1]]
    for side in ("dstar", "int8"):
        assert bound["hbm_bytes_per_cache_step"][side] <= \
            by[sl.COMBINED]["hbm_bytes_per_cache_step"][side]
    assert by["stored Y + fused rows"]["options"] == {"fused": True}


def test_our_bits_are_the_operating_points(tmp_path):
    """Our workload runs at the bits of the thresholds and base a user's configuration runs
    (``dstar profile --sweep``'s operating point), the kept blocks of the profile's SAR point;
    a malformed operating point is one line."""
    from dataclasses import replace

    from dstar_rtl.bench.projection_inputs import workloads
    from dstar_rtl.gen.errors import UserError
    from dstar_rtl.results.profile import ProfileSweep

    prof, bench = ROOT / "reports" / "profile.json", ROOT / "reports" / "bench.json"
    sweep = ProfileSweep.load(ROOT / "reports" / "profile_sweep.json")
    p = sweep.operating_point
    p = replace(p, name="thr x", seeds=(0, 1),
                summary=replace(p.summary, avg_bits=replace(p.summary.avg_bits, mean=3.77)))
    op = tmp_path / "op.json"
    op.write_text(replace(sweep, operating_point=p).to_json())
    wls, notes = workloads(prof, bench, op)
    ours = next(w for w in wls if w.name == "ours")
    assert ours.bits == ours.p_bits == 3.77 and "operating point `thr x`" in notes[-1]
    without = next(w for w in workloads(prof, bench, None)[0] if w.name == "ours")
    assert without.bits != 3.77 and without.kept == ours.kept and without.fill == ours.fill
    op.write_text(json.dumps({"operating_point": {"name": "thr x"}}))
    with pytest.raises(UserError, match="the operating point .*not 'profile-sweep'"):
        workloads(prof, bench, op)
