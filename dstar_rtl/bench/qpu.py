"""The QPU's rate on the generated RTL (``tb/test_qpu_rate.py`` under a simulator): closed-loop
difference tiles streamed with no input gaps and an always-ready output, every group and
reconstruction beat checked against golden; sub-channels and groups per cycle, the cycles an MPU
taking a group per cycle would wait (``dstar measure qpu-rate``, :mod:`app.benches.qpu`)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.golden.vectors import qpu_workload_from_tiles
from dstar_rtl.sim.runner import run_cocotb

__all__ = ["measure", "rate_job", "run_rate"]


def rate_job(wl) -> dict:
    """The rate testbench's input (:mod:`tb.test_qpu_rate`) for a golden workload: the
    sub-channel words and every group and reconstruction beat the QPU must produce."""
    return dict(words=[format(w, "x") for w in wl.words], groups=len(wl.groups),
                recon=len(wl.recon), expected_groups=[format(w, "x") for w in wl.groups],
                expected_recon=[format(w, "x") for w in wl.recon])


def run_rate(cfg, job: dict, simulator="verilator", tag: str = "rate") -> dict:
    """Run the rate testbench on ``job`` (:func:`rate_job`); returns its cycle stamps. Raises
    AssertionError when an output stream differs from the job's. ``tag`` names the run's
    folder."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp, "in.json")
        res = Path(tmp, "out.json")
        spec.write_text(data_json(job))
        run_cocotb("qpu", cfg, simulator, "dstar_rtl.tb.test_qpu_rate", seed=1, tag=tag,
                   extra_env={"DSTAR_RATE_IN": str(spec), "DSTAR_RATE_OUT": str(res)})
        return json.loads(res.read_text())


def measure(cfg, tiles, simulator="verilator") -> dict:
    """The QPU's rate on the difference ``tiles`` (the groups and reconstructions checked
    against golden beat for beat)."""
    wl = qpu_workload_from_tiles(cfg, tiles)
    r = run_rate(cfg, rate_job(wl), simulator)
    ins, outs = r["in_cycles"], r["group_cycles"]
    span_in = ins[-1] - ins[0] + 1
    span_out = outs[-1] - outs[0] + 1
    return dict(subchannels=len(ins), groups=len(outs),
                subchannels_per_cycle=len(ins) / span_in,
                groups_per_cycle=len(outs) / span_out,
                groups_per_subchannel=len(outs) / len(ins),
                mpu_wait_cycles=span_out - len(outs),
                first_group_latency=outs[0] - ins[0],
                lane_fill=1 - wl.counters["padded_lanes"] / (cfg.lanes * wl.counters["groups"]),
                sim_cycles_per_second=r["total_cycles"] / r["wall_seconds"])
