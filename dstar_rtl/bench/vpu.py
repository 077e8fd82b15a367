"""VPU cycles per row on the generated RTL under Verilator (``tb/test_vpu_cycles.py``), the VPU's
ECP5 resources and Fmax (:func:`fpga_figures`) and its error bounds against float
(:func:`accuracy`), for ``dstar measure vpu`` (:mod:`app.reports.vpu` types and renders them).

For every operation and three row lengths (``vpu_lanes``, half of ``max_reduction`` and
``max_reduction``, each rounded to a whole beat count) three rows run back to back with no input
gaps and an always-ready output; every output is checked against golden. Per case: *latency*
(the first row's command transfer to its last output beat, inclusive) and *interval* (cycles
between the last output beats of consecutive rows: a row's cost in steady state).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.gen.progress import Step
from dstar_rtl.golden.config import preset
from dstar_rtl.golden.layouts import VPU_OPS
from dstar_rtl.results.quantities import PnrRun, SynthRun
from dstar_rtl.results.vpu import FunctionError, VpuFpga
from dstar_rtl.sim.runner import run_cocotb

__all__ = ["measure", "lengths", "fpga_figures", "accuracy"]

ROWS = 3


def lengths(cfg) -> list:
    L, n = cfg.vpu_lanes, cfg.max_reduction
    return sorted({L if L <= n else n, max(1, n // 2), n})


def measure(cfg, simulator: str = "verilator") -> dict:
    lens = lengths(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "cycles.json")
        run_cocotb("vpu", cfg, simulator, "dstar_rtl.tb.test_vpu_cycles", seed=1, tag="cycles",
                   extra_env={"DSTAR_VPU_BENCH": data_json(dict(lengths=lens, rows=ROWS)),
                              "DSTAR_RATE_OUT": str(out)})
        r = json.loads(out.read_text())
    table = {}
    for case in r["results"]:
        last, cmd = case["last_out_cycles"], case["cmd_cycles"]
        table.setdefault(case["op"], {})[str(case["n"])] = dict(
            latency=last[0] - cmd[0] + 1,
            interval=(last[-1] - last[0]) / (len(last) - 1))
    return dict(preset=cfg.name, config_hash=cfg.hash(), vpu_lanes=cfg.vpu_lanes,
                max_reduction=cfg.max_reduction, lengths=lens, rows=ROWS, ops=list(VPU_OPS),
                simulator=simulator, table=table,
                sim_cycles_per_second=round(r["sim_cycles"] / r["wall_seconds"]))


def fpga_figures(steps: list, reuse: bool) -> VpuFpga:
    from dstar_rtl.flows.pnr import place_and_route
    from dstar_rtl.flows.synth import synthesize

    cfg = preset("fpga")
    runs = {}
    for nodsp in (False, True):
        label = "ecp5-nodsp" if nodsp else "ecp5"
        with Step(steps, f"synth vpu fpga {label}"):
            r = synthesize("vpu", cfg, "ecp5", nodsp=nodsp, reuse=reuse)
        runs[label] = SynthRun.from_flow(r)
        if not nodsp:
            with Step(steps, "nextpnr vpu fpga ecp5 (85F, 100 MHz target)"):
                p = place_and_route(r["netlist"], workdir=Path(r["workdir"]) / "pnr",
                                    freq_mhz=100, reuse=reuse)
            pnr = PnrRun.from_flow(p)
    return VpuFpga(cfg.hash(), runs["ecp5"], runs["ecp5-nodsp"], pnr)


def accuracy(names) -> dict[str, dict[str, FunctionError]]:
    from dstar_rtl.analysis import vpu_accuracy as va

    out = {}
    for name in names:
        cfg = preset(name)
        m, b = va.measure(cfg), va.bounds(cfg)
        out[name] = {k: FunctionError(max_abs=m[k]["max_abs"], mean_abs=m[k]["mean_abs"],
                                      max_bound=b[k]["max_abs"], mean_bound=b[k]["mean_abs"],
                                      worst=m[k]["worst"]) for k in va.METRICS}
    return out
