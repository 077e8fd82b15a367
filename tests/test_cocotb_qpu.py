"""cocotb regression of the QPU and of the QPU → MPU chain, in Verilator and Icarus (numerics §5
tiers: tiny on both simulators in ``make test``, where the fpga QPU and chain run in Amaranth's
simulator, tests/test_qpu_amaranth.py; fpga on both and more seeds in ``make regress``)."""

import shutil

import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.sim.runner import run_cocotb, unit_dir

FAST = [("tiny", "verilator"), ("tiny", "icarus"), ("fpga", "verilator")]
SLOW = [("fpga", "icarus")]
UNITS = {"qpu": "dstar_rtl.tb.test_qpu", "qpu_mpu": "dstar_rtl.tb.test_chain"}
# The chain on the fpga preset is a long Verilator build; the Amaranth-simulator chain test
# covers that preset in `make test`, cocotb covers it in `make regress`.
FAST_CASES = [(u, p, s) if p == "tiny" else pytest.param(u, p, s, marks=pytest.mark.slow)
              for u in sorted(UNITS) for p, s in FAST if not (u == "qpu_mpu" and p == "fpga")]
#: Booth digits (issue 15): the QPU's Booth slicer into the MPU's Booth PEs with select products,
#: one short case per simulator (few tiles).
BOOTH = [pytest.param("verilator", "2", marks=pytest.mark.slow), ("icarus", "2")]
#: Open partial groups across chunks (issue 16): the QPU with four slots (a chunk can be stored
#: whole, so the tile's first group comes from a later chunk), one and two windows a cycle: one
#: window on Icarus in ``make test`` (a short build), two windows and the Verilator pair (a
#: Verilator build of its own each) in ``make regress``.
OPEN = [("icarus", 1), pytest.param("icarus", 2, marks=pytest.mark.slow),
        pytest.param("verilator", 1, marks=pytest.mark.slow),
        pytest.param("verilator", 2, marks=pytest.mark.slow)]
#: Exponent bins (issue 28; the presets' four bins run in every default case above): eight bins,
#: Booth digits, the QPU alone on Icarus in ``make test``, into the MPU and on Verilator in
#: ``make regress``.
BINS = [("qpu", "icarus"), pytest.param("qpu_mpu", "icarus", marks=pytest.mark.slow),
        pytest.param("qpu", "verilator", marks=pytest.mark.slow),
        pytest.param("qpu_mpu", "verilator", marks=pytest.mark.slow)]


@pytest.mark.cocotb
@pytest.mark.parametrize("unit, preset_name, simulator", FAST_CASES)
def test_qpu_regression(unit, preset_name, simulator):
    run_cocotb(unit, preset(preset_name), simulator, UNITS[unit], seed=1,
               extra_env={"DSTAR_TILES": "5"})


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator, tiles", BOOTH)
def test_chain_booth(simulator, tiles):
    run_cocotb("qpu_mpu", preset("tiny", digits="booth", digit_product="select"), simulator,
               "dstar_rtl.tb.test_chain", seed=1,
               extra_env={"DSTAR_TILES": tiles}, tag="booth")


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator, windows", OPEN)
def test_qpu_open_groups(simulator, windows):
    run_cocotb("qpu", preset("tiny", packer="sort", open_groups=4, pack_windows=windows),
               simulator, "dstar_rtl.tb.test_qpu",
               seed=4, extra_env={"DSTAR_TILES": "6"}, tag=f"open-w{windows}")


@pytest.mark.cocotb
@pytest.mark.parametrize("unit, simulator", BINS)
def test_qpu_bins(unit, simulator):
    cfg = preset("tiny", packer="bins", open_groups=0, pack_bins=8, digits="booth",
                 digit_product="select")
    run_cocotb(unit, cfg, simulator, UNITS[unit], seed=6, extra_env={"DSTAR_TILES": "6"},
               tag="bins")


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("seed", [2, 3])
@pytest.mark.parametrize("preset_name, simulator", FAST + SLOW)
@pytest.mark.parametrize("unit", sorted(UNITS))
def test_qpu_regression_long(unit, preset_name, simulator, seed):
    run_cocotb(unit, preset(preset_name), simulator, UNITS[unit], seed=seed,
               extra_env={"DSTAR_TILES": "30"}, tag="long")


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
@pytest.mark.parametrize("overrides", [dict(sort_n=16, lanes=2), dict(drop_zero_columns=False),
                                       dict(digits="booth"), dict(digits="booth", lanes=2),
                                       dict(sort_n=4, lanes=1, e_max=6),
                                       dict(open_groups=4, sort_n=16),
                                       dict(open_groups=1, digits="booth", lanes=2),
                                       dict(open_groups=4, sort_n=16, pack_windows=2)])
def test_qpu_configurations(simulator, overrides):
    run_cocotb("qpu", preset("tiny", variant="sort", **overrides), simulator,
               "dstar_rtl.tb.test_qpu",
               seed=5, tag="cfg")


@pytest.mark.cocotb
def test_the_rate_bench_checks_both_output_streams():
    """``dstar measure qpu-rate``'s testbench compares the groups and the reconstructions with
    golden beat for beat: a golden workload passes, one changed reconstruction beat fails."""
    import numpy as np

    from dstar_rtl.bench.qpu import rate_job, run_rate
    from dstar_rtl.golden.vectors import qpu_workload_from_tiles

    cfg = preset("tiny")
    rng = np.random.default_rng(3)
    tiles = [rng.integers(-300, 300, (cfg.tile, 6)) for _ in range(2)]
    job = rate_job(qpu_workload_from_tiles(cfg, tiles))
    assert len(run_rate(cfg, job, "icarus")["group_cycles"]) == job["groups"]
    job["expected_recon"][3] = format(int(job["expected_recon"][3], 16) ^ 1, "x")
    runs = unit_dir("qpu", cfg) / "runs"
    before = set(runs.iterdir())
    with pytest.raises(AssertionError):
        run_rate(cfg, job, "icarus", tag="rate-mutated")
    new = set(runs.iterdir()) - before
    assert len(new) == 1 and "reconstruction beat 3 differs" in (new.pop() / "sim.log").read_text()
    # The deliberate failure leaves no run behind for REPORT.md's verification table.
    for d in set(runs.iterdir()) - before:
        shutil.rmtree(d)
