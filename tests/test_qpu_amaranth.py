"""The QPU in Amaranth's simulator: stage by stage and whole, against the golden schedule."""

import functools
import gc

import numpy as np
import pytest
from amaranth.hdl import unsigned
from amaranth.lib import data
from amaranth.sim import Simulator

from dstar_rtl.golden.bitonic import apply_network
from dstar_rtl.golden.config import preset
from dstar_rtl.golden.fmdq import dequant, quantize_subchannels
from dstar_rtl.golden.layouts import pack, qpu_config_layout
from dstar_rtl.golden.schedule import COUNTER_MAX, COUNTER_NAMES, execute, value_digits
from dstar_rtl.golden.vectors import (
    drain_words,
    exponent_sweep,
    qpu_workload,
    random_differences,
    random_weights,
)
from dstar_rtl.perf.timing import BINS_FIXED, array_latency, qpu_latency
from dstar_rtl.rtl.chain import QuantizedMatmul
from dstar_rtl.rtl.qpu import QPU
from dstar_rtl.rtl.qpu_front import QuantizeSlice
from dstar_rtl.rtl.sorter import BitonicSorter
from dstar_rtl.sim.amaranth_array import ArrayRun
from dstar_rtl.sim.amaranth_qpu import run_qpu
from dstar_rtl.sim.amaranth_streams import stream_get, stream_put

#: One QPU per configuration (and options): its simulator is made once and reset for each
#: run (sim.amaranth_reuse).
qpu = functools.cache(QPU)


KINDS = ("mixed", "zero", "max", "outlier", "sweep")


@pytest.mark.parametrize("n, per_reg", [(4, 1), (8, 1), (16, 2), (32, 3)])
def test_sorter_applies_the_golden_permutation(n, per_reg):
    dut = BitonicSorter(n, key_width=6, payload_shape=unsigned(8), stages_per_register=per_reg)
    rng = np.random.default_rng(n)
    chunks = [rng.integers(0, 64, size=n) for _ in range(12)]
    chunks += [np.full(n, 33), np.zeros(n, int), np.arange(n)[::-1] % 64, rng.integers(30, 34, n)]
    lay = dut.i.payload.shape()
    words = [lay.const(dict(entries=[dict(key=int(c[k]), payload=k) for k in range(n)],
                                  side=0)).as_value().value for c in chunks]
    got = []

    async def feed(ctx):
        await stream_put(ctx, dut.i, words)

    async def sink(ctx):
        await stream_get(ctx, dut.o, len(words), got, stall=0.4, rng=np.random.default_rng(n),
                         window=2 * dut.latency + 2)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed)
    sim.add_testbench(sink)
    sim.run()
    for c, word in zip(chunks, got):
        keys, idx = apply_network(np.array(c), np.arange(n))
        out = data.Const(lay, word)
        assert [(int(out.entries[k].key), int(out.entries[k].payload)) for k in range(n)] == \
            [(int(a), int(b)) for a, b in zip(keys, idx)]


@pytest.mark.parametrize("preset_name, B, thr, drop, code", [
    ("tiny", 6, (1, 7, 31), True, "slice"), ("tiny", 8, (1, 7, 31), True, "slice"),
    ("tiny", 3, (2, 9, 40), False, "slice"), ("fpga", 0, (1, 7, 31), True, "slice"),
    ("tiny", 8, (1, 7, 31), True, "booth"), ("tiny", 3, (2, 9, 40), False, "booth"),
    ("fpga", 0, (1, 7, 31), True, "booth")])
def test_front_end_matches_fmdq(preset_name, B, thr, drop, code):
    cfg = preset(preset_name, drop_zero_columns=drop, digits=code)
    dut = QuantizeSlice(cfg)
    rng = np.random.default_rng(B)
    u = np.concatenate([random_differences(rng, cfg, cfg.tile, 30, k).T
                        for k in ("mixed", "zero", "max", "outlier")])
    u = np.concatenate([u, exponent_sweep(cfg, rng)[0].T])
    ref = quantize_subchannels(u, cfg.replace(thr=thr), base_log2=B)
    digits, recon = value_digits(ref.q, ref.b, code), dequant(ref)
    got = []

    async def feed(ctx):
        ctx.set(dut.config.base_log2, B)
        for i, t in enumerate(thr):
            ctx.set(dut.config.thr[i], t)
        words = [pack([("u", cfg.dx_width, (cfg.rows,), True), ("last", 1, (), False)],
                      dict(u=row, last=0)) for row in u]
        await stream_put(ctx, dut.i, words)

    async def sink(ctx):
        out = []
        await stream_get(ctx, dut.o, len(u), out, stall=0.3, rng=np.random.default_rng(0),
                         window=2 * qpu_latency(cfg))   # the QPU's latency bounds its front end's
        got.extend(out)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed)
    sim.add_testbench(sink)
    sim.run()
    lay = dut.o.payload.shape()
    for s, word in enumerate(got):
        v = data.Const(lay, word)
        b = int(ref.b[s])
        kept = sum(1 << k for k in range(b // 2) if not drop or digits[s, k].any())
        assert (int(v.b), int(v.e), int(v.saturated), int(v.kept)) == \
            (b, int(ref.e[s]), int(ref.saturated[s]), kept), f"sub-channel {s}"
        assert [int(v.recon[t]) for t in range(cfg.tile)] == list(recon[s])
        for k in range(4 if code == "booth" else b // 2):   # Booth: 0 above b/2 by itself
            assert [int(v.digits[k][t]) for t in range(cfg.tile)] == \
                list(digits[s, k] & ((1 << cfg.digit_width) - 1))


#: The two packings with the sorting packer's four open groups (the default before issue 28).
SORT = dict(packer="sort", open_groups=4)
BINS = dict(packer="bins", open_groups=0)

#: Configurations of the tiny QPU; a configuration without ``packer`` sorts (:data:`SORT`).
QPU_CONFIGS = {
    "tiny": (dict(), 6, (1, 7, 31)),
    "finest-base": (dict(), 8, (1, 7, 31)),
    "no-drop-clip": (dict(drop_zero_columns=False), 5, (2, 9, 40)),
    "lanes2": (dict(lanes=2, sort_n=4), 6, (1, 7, 31)),
    "lanes1": (dict(lanes=1, sort_n=4), 6, (1, 7, 31)),
    "sort16-clip": (dict(sort_n=16), 6, (3, 15, 63)),
    "emax5": (dict(e_max=5), 8, (1, 7, 31)),
    "booth": (dict(digits="booth"), 6, (1, 7, 31)),
    "booth-no-drop-clip": (dict(digits="booth", drop_zero_columns=False), 5, (2, 9, 40)),
    "booth-lanes2": (dict(digits="booth", lanes=2, sort_n=4), 8, (1, 7, 31)),
    "open1": (dict(open_groups=1), 6, (1, 7, 31)),
    "open2": (dict(open_groups=2), 6, (1, 7, 31)),
    "open4": (dict(open_groups=4), 6, (1, 7, 31)),
    "open4-sort16": (dict(open_groups=4, sort_n=16), 7, (1, 7, 31)),
    "open2-lanes2": (dict(open_groups=2, lanes=2, sort_n=4), 6, (1, 7, 31)),
    "booth-open3": (dict(digits="booth", open_groups=3), 6, (1, 7, 31)),
    "open2-w2": (dict(open_groups=2, pack_windows=2), 6, (1, 7, 31)),
    "open4-w2": (dict(open_groups=4, pack_windows=2), 6, (1, 7, 31)),
    "open4-sort16-w2": (dict(open_groups=4, sort_n=16, pack_windows=2), 7, (1, 7, 31)),
    "open1-lanes2-w2": (dict(open_groups=1, lanes=2, sort_n=4, pack_windows=2), 6, (1, 7, 31)),
    "booth-open3-w2": (dict(digits="booth", open_groups=3, pack_windows=2), 6, (1, 7, 31)),
    "bins": (dict(packer="bins", open_groups=0), 6, (1, 7, 31)),
    "bins-booth-clip": (dict(packer="bins", open_groups=0, digits="booth"), 5, (2, 9, 40)),
    "bins8-lanes2": (dict(packer="bins", open_groups=0, pack_bins=8, lanes=2), 6, (1, 7, 31)),
    "bins16-no-drop": (dict(packer="bins", open_groups=0, pack_bins=16,
                            drop_zero_columns=False), 8, (1, 7, 31)),
    "bins-lanes8-emax5": (dict(packer="bins", open_groups=0, lanes=8, e_max=5), 8, (1, 7, 31)),
}


# open4-sort16-w2 (the longest, 6 s) in make regress; open4-sort16 and open4-w2 in make test.
@pytest.mark.parametrize("name", [n if n != "open4-sort16-w2" else
                                  pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(QPU_CONFIGS)])
def test_qpu_matches_golden_schedule(name):
    overrides, B, thr = QPU_CONFIGS[name]
    cfg = preset("tiny", **(overrides if "packer" in overrides else {**SORT, **overrides}))
    wl = qpu_workload(cfg, np.random.default_rng(len(name)), tiles=6, kinds=KINDS,
                      base_log2=B, thr=thr)
    run = run_qpu(qpu(cfg), wl, base_log2=B, thr=thr, gap=0.2, stall=0.3, seed=3)
    assert run.groups == wl.groups
    assert run.recon == wl.recon
    assert run.counters == wl.counters
    assert run.config_error == 0


@pytest.mark.parametrize("code, packing", [("slice", SORT), ("booth", SORT), ("booth", BINS)])
def test_qpu_fpga_preset(code, packing):
    cfg = preset("fpga", digits=code, **packing)
    wl = qpu_workload(cfg, np.random.default_rng(5), tiles=3, kinds=KINDS)
    run = run_qpu(qpu(cfg), wl, stall=0.2, seed=1)
    assert (run.groups, run.recon, run.counters) == (wl.groups, wl.recon, wl.counters)


@pytest.mark.parametrize("B, thr", [(9, (1, 7, 31)), (6, (7, 7, 31)), (6, (1, 7, 127))])
def test_illegal_configuration_is_refused_and_flagged(B, thr):
    cfg = preset("tiny")
    word = pack(qpu_config_layout(cfg), dict(base_log2=B, thr=list(thr)))
    wl = qpu_workload(cfg, np.random.default_rng(0), tiles=2)  # defaults stay in force
    run = run_qpu(qpu(cfg), wl, config_words=[word])
    assert run.config_error == 1
    assert run.groups == wl.groups and run.recon == wl.recon


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_qpu_refuses_tiny_sort_width():
    with pytest.raises(ValueError, match="sort_n must be >= 4 for the QPU"):
        QPU(preset("tiny", sort_n=2, lanes=2, **SORT))
    gc.collect()      # the refused QPU warns UnusedElaboratable now, under this test's filter


@pytest.mark.parametrize("preset_name, code", [("tiny", "slice"), ("fpga", "slice"),
                                               ("tiny", "booth")])
def test_chain_qpu_into_mpu(preset_name, code):
    """Differences in, accumulators out: equal to Σ q·2**e·W for every tile."""
    cfg = preset(preset_name, digits=code,
                 digit_product="select" if code == "booth" else "multiply")
    rng = np.random.default_rng(8)
    C = 3 * cfg.sort_n // 2 + 1
    wl = qpu_workload(cfg, rng, tiles=4, channels=C, kinds=KINDS)
    W = random_weights(cfg, rng, C)
    accs, flags = execute(wl.group_objs, W, cfg)
    expected = drain_words(cfg, accs, flags)
    dut = QuantizedMatmul(cfg)
    out = ArrayRun([], [], [], -1)

    async def feed(ctx):
        from dstar_rtl.golden.layouts import weight_load_layout
        for c, row in enumerate(W):
            ctx.set(dut.wload.payload.as_value(),
                    pack(weight_load_layout(cfg), dict(w=row, channel=c)))
            ctx.set(dut.wload.valid, 1)
            await ctx.tick()
        ctx.set(dut.wload.valid, 0)
        await stream_put(ctx, dut.subch, wl.words, gap=0.1, rng=rng)

    async def drain(ctx):
        await stream_get(ctx, dut.drain, len(expected), out.beats, stall=0.2, rng=rng,
                         window=2 * (qpu_latency(cfg) + array_latency(cfg)))

    async def recon(ctx):
        ctx.set(dut.recon.ready, 1)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in (feed, drain, recon):
        sim.add_testbench(tb)
    sim.run()
    assert out.beats == expected


def test_counters_saturate_at_32_bits():
    """The QPU's 32-bit counters (rtl/qpu.py as built, full width) saturate at 2**32 - 1
    instead of wrapping. Each is deposited near the top before a stream in which every counter
    counts (several step by more than one in a cycle): most start half their golden count below
    the top and must end at 2**32 - 1, ``subchannels`` starts exactly its count below (ends at
    the top, no early clamp), ``groups`` one more (ends one below the top)."""
    cfg = preset("tiny")
    wl = qpu_workload(cfg, np.random.default_rng(0), tiles=4, kinds=KINDS, thr=(3, 15, 63))
    n = wl.counters
    assert all(n.values()), f"every counter must count in the workload: {n}"
    start = {k: COUNTER_MAX - v // 2 for k, v in n.items()}
    start["subchannels"] = COUNTER_MAX - n["subchannels"]
    start["groups"] = COUNTER_MAX - n["groups"] - 1
    run = run_qpu(qpu(cfg), wl, thr=(3, 15, 63), counters_init=start, stall=0.2, seed=4)
    assert run.groups == wl.groups and run.recon == wl.recon
    expected = {k: min(COUNTER_MAX, start[k] + v) for k, v in n.items()}
    assert run.counters == expected
    assert sum(v == COUNTER_MAX for v in expected.values()) == len(COUNTER_NAMES) - 1


@pytest.mark.parametrize("name", sorted(n for n in QPU_CONFIGS if n.startswith("bins")))
def test_bins_take_the_cycles_the_model_counts(name):
    """With no input gaps and the outputs always ready, a tile's last group leaves the QPU
    :func:`golden.schedule.bin_cycles` + :data:`perf.timing.BINS_FIXED` cycles after its
    first sub-channel entered (what the core's cycle model charges a QUANT): on tiles of every
    kind, one per run."""
    overrides, B, thr = QPU_CONFIGS[name]
    cfg = preset("tiny", **overrides)
    for seed in range(4):
        wl = qpu_workload(cfg, np.random.default_rng(seed), tiles=1,
                          kinds=KINDS[seed % len(KINDS):], base_log2=B, thr=thr)
        run = run_qpu(qpu(cfg), wl, base_log2=B, thr=thr)
        assert run.groups == wl.groups
        ts = wl.tiles[0][1]
        assert run.group_cycles[-1] - run.in_cycles[0] == ts.packer_cycles + BINS_FIXED
