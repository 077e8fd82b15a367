"""The per-access SRAM energies and the energy-per-image sum, checked by hand (fast tier)."""

import pytest

from dstar_rtl.bench.image_energy import image_energy
from dstar_rtl.perf.sram_energy import (
    access_pj,
    memory_accesses,
    sram_energy,
    sram_read_pj,
    sram_write_pj,
)


@pytest.mark.parametrize("width, kbytes, pj", [(64, 8, 10.0), (64, 32, 20.0), (64, 1024, 100.0)])
def test_horowitz_points_are_met_exactly(width, kbytes, pj):
    rows = kbytes * 1024 * 8 // width
    assert sram_read_pj(width, rows) == pytest.approx(pj)


def test_below_8kb_the_cacti_slope_and_voltage_and_writes():
    # CACTI: a 32-bit read of 1 KB is 1.13 / 6.39 of one of 8 KB.
    assert sram_read_pj(32, 256) / sram_read_pj(32, 2048) == pytest.approx(1.13 / 6.39)
    assert sram_read_pj(64, 1024, voltage=1.8) == pytest.approx(4 * 10.0)
    assert sram_write_pj(64, 1024) == pytest.approx(10.0 * 8.42 / 9.98)
    assert access_pj(64, 1024, 3, 2) == pytest.approx(30.0 + 2 * 10.0 * 8.42 / 9.98)
    sizes = [2 ** k for k in range(6, 24)]
    per_bit = [sram_read_pj(64, s) / 64 for s in sizes]
    assert all(a < b for a, b in zip(per_bit, per_bit[1:]))      # larger costs more per bit


@pytest.mark.parametrize("w, rows", [(0, 10), (8, 0)])
def test_an_empty_sram_is_refused(w, rows):
    with pytest.raises(ValueError, match="width >= 1 and rows >= 1"):
        sram_read_pj(w, rows)


MEMS = [dict(module="core.abuf", name="bank0", width=16, size=1024),
        dict(module="core.abuf", name="bank1", width=16, size=1024),
        dict(module="core", name="ybuf", width=64, size=1024),
        dict(module="core.matrix.mpu", name="weights", width=64, size=1024),
        dict(module="core.matrix.wb", name="storage", width=8, size=4)]
COUNTERS = dict(abuf_reads=10, abuf_writes=4, ybuf_reads=3, ybuf_writes=3, wmem_writes=0,
                groups_replayed=7, qpu_subchannels=5, vpu_beats=20)
READS = dict(wmem_reads=28, gmem_reads=7, rbuf_reads=8, vbuf_reads=24, mask_reads=12)
ALL = {**COUNTERS, **READS}


def test_each_ram_takes_its_own_accesses():
    assert memory_accesses(MEMS[0], ALL) == (10, 4)
    assert memory_accesses(MEMS[2], ALL) == (3, 3)
    assert memory_accesses(MEMS[3], ALL) == (28, 0)
    assert memory_accesses(MEMS[4], ALL) is None
    s = sram_energy(MEMS, ALL, 0.9)
    assert s["not_counted"] == ["wb.storage"]
    assert s["by_buffer"]["abuf"] == pytest.approx(2 * access_pj(16, 1024, 10, 4))
    assert memory_accesses(MEMS[2], {}) == (0, 0)          # a count not given is none
    assert s["total_pj"] == pytest.approx(
        2 * access_pj(16, 1024, 10, 4) + access_pj(64, 1024, 3, 3) + access_pj(64, 1024, 28, 0))


def test_the_image_sums_idle_data_and_sram():
    idle = dict(fj_per_cycle={"array PEs": 2000.0, "VPU": 1000.0}, memories=MEMS)
    units = {"array": dict(fj_per_event=500.0), "qpu": dict(fj_per_event=100.0),
             "vpu": dict(fj_per_event=10.0)}
    e = image_energy(cycles=1000, idle=idle, units=units, counters=COUNTERS, reads=READS,
                     voltage=0.9)
    assert e["idle_pj"] == pytest.approx(3000.0)
    # 7 groups, 5 sub-channels, 20 - 8 VPU beats (the requantizer's 8 are not the VPU's).
    assert e["data_pj"] == pytest.approx(7 * 0.5 + 5 * 0.1 + 12 * 0.01)
    assert e["events"]["vpu"]["count"] == 12
    assert e["total_pj"] == pytest.approx(e["idle_pj"] + e["data_pj"] + e["sram"]["total_pj"])
    assert sum(e["parts"].values()) == pytest.approx(e["total_pj"])


# ----------------------------------------------------------------------------- the paper chip
def _model():
    from dstar_rtl.models.dit_shapes import Attention, DiTModel, Linear
    return DiTModel("toy", 4, (Linear("blk.fc1", 16, 32, 64),
                               Linear("blk.qk", 16, 32, 64, cache_only=True)),
                    (Attention("attn", 16, 16, 2, 8),))


def _wl(**k):
    from dstar_rtl.perf.chip_model import Workload
    return Workload(**dict(dict(name="t", bits=4.0, p_bits=4.0, fill=1.0, kept=1.0,
                                interval=2), **k))


def test_a_reuse_step_counts_what_the_core_counts():
    from dstar_rtl.golden.config import preset
    from dstar_rtl.perf.chip_energy import step_events
    cfg = preset("tiny")                 # T = 4, lanes 4
    T, L = cfg.tile, cfg.lanes
    ev = step_events(_model(), cfg, _wl(), "dstar", cache=False, cores=2)
    # fc1 alone (qk is cache-only): 4 token tiles, 16 column blocks, 32 channels at 4 bits
    # = 64 slice columns = 16 groups a token tile; attention: P·V only.
    g_p = (4 * T * 4 // 2) // L                      # kept 4 key blocks at 4 bits
    units, d_blocks = 2 * 4, 2
    assert ev["qpu_subchannels"] == 4 * 32
    assert ev["groups_replayed"] == 4 * 16 * 16 + units * d_blocks * g_p
    assert ev["wmem_reads"] == L * ev["groups_replayed"]
    assert ev["ybuf_reads"] == ev["ybuf_writes"] == 4 * 16 * T
    assert ev["xbuf_reads"] == 4 * 32
    assert ev["rbuf_reads"] == (4 * 16 + units * d_blocks) * T
    # The INT8 core: one group per channel, no state, every weight row read once.
    i8 = step_events(_model(), cfg, _wl(), "int8", cache=False, cores=2)
    assert i8["groups_replayed"] == 4 * 16 * 32 + units * d_blocks * 4 * T
    assert i8["wmem_reads"] == i8["groups_replayed"]
    assert "ybuf_reads" not in i8 and i8["abuf_reads"] > 2 * 4 * 32


def test_an_image_is_its_cache_and_reuse_steps_and_the_chip_sums_its_parts():
    from dstar_rtl.golden.config import preset
    from dstar_rtl.perf.chip_energy import (
        chip_energy,
        core_memories,
        idle_per_cycle,
        image_events,
        step_events,
    )
    cfg, m = preset("tiny"), _model()
    c, r = (step_events(m, cfg, _wl(), "dstar", k, 2) for k in (True, False))
    im = image_events(m, cfg, _wl(), "dstar", 2)
    assert im["groups_replayed"] == 2 * c["groups_replayed"] + 2 * r["groups_replayed"]
    assert c["qpu_subchannels"] > r["qpu_subchannels"]
    assert idle_per_cycle({"a": 10.0, "b": 30.0}, {"a": 1.0, "b": 3.0},
                          {"a": 2.0, "c": 4.0}) == pytest.approx(20.0 + 4 * 10.0)
    # The clock net has no area: it grows with the whole core (4 µm² against 6).
    assert idle_per_cycle({"a": 10.0, "b": 30.0, "clock": 8.0}, {"a": 1.0, "b": 3.0},
                          {"a": 2.0, "b": 4.0}) == pytest.approx(20.0 + 40.0 + 8.0 * 6 / 4)
    e = chip_energy(im, cores=2, cycles=100, idle_fj_per_cycle=1000.0,
                    fj_per_event=dict(array=2000.0, qpu=100.0, vpu=50.0),
                    memories=core_memories(cfg, 8192), voltage=0.9,
                    hbm_bytes=dict(weights=10, state=5), bank_bytes=8192)
    assert e["parts"]["idle"] == pytest.approx(200.0)
    assert e["parts"]["data: array"] == pytest.approx(im["groups_replayed"] * 2.0)
    assert e["parts"]["hbm: weights"] == pytest.approx(80 * 3.97)
    assert e["parts"]["hbm: state"] == pytest.approx(40 * 3.97)
    # The state's 40 bits staged through an 8 KB bank (the weights' writes WMEM counts).
    from dstar_rtl.perf.sram_energy import sram_read_pj, sram_write_pj
    bit = (sram_read_pj(64, 1024, 0.9) + sram_write_pj(64, 1024, 0.9)) / 128
    assert e["parts"]["sram: HBM staging"] == pytest.approx(40 * bit)
    assert e["total_pj"] == pytest.approx(sum(e["parts"].values()))
    # Every buffer is an 8 KB bank of its own row width, whatever the core's depths.
    for mem in core_memories(cfg, 8192):
        assert mem["width"] * mem["size"] <= 8192 * 8


def test_the_executor_events_must_equal_the_cores_counters():
    from dstar_rtl.bench.image_events import check_against_rtl
    ev = dict(per_step=[dict(step=0, counters=dict(groups_replayed=5, commands=3))])
    assert check_against_rtl(ev, [dict(core_counters=dict(groups_replayed=5, commands=3,
                                                           cycles=9))]) == 2
    with pytest.raises(AssertionError, match="step 0: counter commands is 4 on the core, 3"):
        check_against_rtl(ev, [dict(core_counters=dict(groups_replayed=5, commands=4))])
    with pytest.raises(AssertionError, match="2 RTL steps against 1 executor steps"):
        check_against_rtl(ev, [{}, {}])


def test_levers_by_hand():
    from dstar_rtl.bench.image_energy import levers
    from dstar_rtl.golden.config import preset
    cfg = preset("tiny")
    core = dict(voltage=0.9, cycles=100, busy=dict(busy_M=60, busy_Q=10, busy_V=0, busy_H=5),
                idle_fj_per_cycle={"array PEs": 1000.0, "VPU": 500.0, "dispatcher": 300.0},
                leakage_fj_per_cycle={"array PEs": 100.0, "VPU": 50.0},
                counters=dict(pcache_groups_read=2, gmem_writes=10, pcache_groups_written=1),
                reads=dict(gmem_reads=12),
                sram=dict(rams=[dict(name="gmem", width=64, rows=8192, reads=12, writes=10,
                                     read_pj=40.0, write_pj=30.0)]))
    lv = levers(core, cfg)
    # PEs gated 40 cycles of (1000 - 100) fJ, the VPU 100 of 450; the dispatcher never.
    assert lv["clock_gating"] == pytest.approx((40 * 900 + 100 * 450) / 1e3)
    slots = 2 * 4 * cfg.max_reduction
    assert lv["gmem_split"] == pytest.approx(
        10 * (40.0 - sram_read_pj(64, slots)) + 9 * (30.0 - sram_write_pj(64, slots)))
    assert "weight_buffer" not in lv           # no WMEM in this record


def test_floors_by_hand():
    """The bounds drop idle energy and the group memory and charge DSTAR's weights at the INT8
    side's cost; the one-sided bound keeps the INT8 side whole."""
    from dstar_rtl.bench.image_energy import floors
    dstar = {"idle: VPU": 50.0, "data: array": 10.0, "sram: weights": 40.0, "sram: gmem": 30.0,
             "sram: ybuf": 5.0}
    int8 = {"idle": 70.0, "data: array": 20.0, "sram: weights": 25.0, "sram: gmem": 15.0}
    fl = floors(dstar, int8, sum(int8.values()))
    assert fl["dstar_floor_pj"] == pytest.approx(10 + 25 + 5)
    assert fl["one_sided"] == pytest.approx(40 / 130)
    assert fl["symmetric"] == pytest.approx(40 / 45)


def test_the_paper_chips_events_follow_the_executor():
    """The projection's work rules against the executor's counts of a tiny DiT's cache and reuse
    steps: the quantized sub-channels, XBUF and RBUF accesses exactly; the VPU's beats (and the
    VBUF and MASK reads that go with them) within 25 % below (the embedding's and the final
    layer's element-wise rows are not modelled; a few blocks of 28 at paper scale)."""
    from dstar_rtl.bench.image_events import image_events
    from dstar_rtl.golden.config import preset
    from dstar_rtl.models.dit import DIT_MODELS, init_params
    from dstar_rtl.models.dit_shapes import Attention, DiTModel, Linear, _block
    from dstar_rtl.perf.chip_energy import step_events

    spec, cfg = DIT_MODELS["tiny"], preset("tiny")
    ev = image_events(spec, init_params(spec, 0), cfg, steps=2, label=1, seed=0)
    N, D, pin = (spec.image_size // spec.patch) ** 2, spec.hidden, spec.patch ** 2 * spec.channels
    model = DiTModel("tiny", 2, tuple([Linear("x_embed", N, pin, D)]
                                      + _block("blk", N, D, spec.heads,
                                               int(spec.mlp_ratio * D), spec.depth)
                                      + [Linear("final", N, D, pin)]),
                     (Attention("attn", N, N, spec.heads, D // spec.heads, spec.depth),))
    assert [s["cache_step"] for s in ev["per_step"]] == [True, False]
    for s in ev["per_step"]:
        got = {**s["counters"], **s["reads"]}
        got["vpu_beats"] -= got["rbuf_reads"]       # the requantizer's beats are not the VPU's
        e = step_events(model, cfg, _wl(kept=1.0), "dstar", s["cache_step"], cores=1)
        for k in ("qpu_subchannels", "xbuf_reads", "rbuf_reads"):
            assert e[k] == got[k], k
        for k in ("vpu_beats", "vbuf_reads", "mask_reads"):
            assert 0.75 * got[k] <= e[k] <= got[k], (k, e[k], got[k])
