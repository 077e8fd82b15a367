"""QPU rate on golden workloads from the reference DiT (``dstar measure qpu-rate``).

For each preset it streams the closed-loop differences of every linear layer of the reference DiT
(steps 1.. of a DDIM run: the steady state; step 0 is the dense first step, reported apart)
through the generated QPU under Verilator, with no input gaps and an always-ready output, and
measures: sub-channels accepted per cycle, groups emitted per cycle, and the cycles an MPU
consuming one group per cycle would wait for the QPU (bubbles in the group stream between its
first and last group). ``--open-groups K ...`` measures each preset with each number of open
partial groups in the packer (``cfg.open_groups``) on the same tiles, side by side, and each
``K > 0`` with each ``--pack-windows`` setting (``cfg.pack_windows``), and the exponent bins
(``cfg.packer = "bins"``) with each ``--pack-bins`` count. Writes ``reports/qpu_rate.json``
(``{"rows": {key: row}, "command"}``) and ``reports/qpu_rate.md``.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from dstar_rtl.app.options import Parser
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import check_output_dir, data_json, json_text, write_together
from dstar_rtl.gen.progress import say
from dstar_rtl.golden.config import MAX_OPEN_GROUPS, PACK_BINS, PRESETS, preset
from dstar_rtl.golden.vectors import qpu_workload_from_tiles
from dstar_rtl.models.difference_tiles import dit_difference_tiles
from dstar_rtl.sim.runner import ROOT, run_cocotb

__all__ = ["measure", "rate_job", "run_rate", "main"]


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


def main(argv=None, prog=None):
    ap = Parser(prog=prog or "dstar measure qpu-rate", description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["tiny", "fpga"], choices=sorted(PRESETS),
                    help="presets to measure (default: tiny fpga)")
    ap.add_argument("--steps", type=int, default=4,
                    help="DDIM steps of the reference DiT run (at least 2; default 4)")
    ap.add_argument("--open-groups", type=int, nargs="+", default=[0, 4], metavar="K",
                    help="open partial groups of the packer to measure (default: 0 4)")
    ap.add_argument("--pack-windows", type=int, nargs="+", default=[1, 2], metavar="W",
                    help="packer windows per cycle to measure with open groups (default: 1 2)")
    ap.add_argument("--pack-bins", type=int, nargs="*", default=[4, 8], metavar="N",
                    help="exponent-bin counts of packer = bins to measure (default: 4 8; none: "
                         "the sorting packer only)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports",
                    help="report directory (default: reports/)")
    args = ap.parse_args(argv)
    check_output_dir(args.out)
    bad = [k for k in args.open_groups if not 0 <= k <= MAX_OPEN_GROUPS]
    if bad:
        raise UserError(f"--open-groups must lie in 0..{MAX_OPEN_GROUPS}, not {bad[0]}")
    bad = [w for w in args.pack_windows if w not in (1, 2)]
    if bad:
        raise UserError(f"--pack-windows must be 1 or 2, not {bad[0]}")
    bad = [n for n in args.pack_bins if n not in PACK_BINS]
    if bad:
        raise UserError(f"--pack-bins must be one of {PACK_BINS}, not {bad[0]}")
    if args.steps < 2:
        raise UserError(f"--steps must be at least 2 (step 0 and a steady-state step), "
                        f"not {args.steps}")
    variants = [(f"sort, open {k}, windows {w}",
                 dict(packer="sort", open_groups=k, pack_windows=w))
                for k in args.open_groups for w in (args.pack_windows if k else [1])]
    variants += [(f"bins {n}", dict(packer="bins", open_groups=0, pack_windows=1, pack_bins=n))
                 for n in args.pack_bins]
    results = {}
    for name in args.presets:
        tiles = dit_difference_tiles(preset(name), steps=args.steps)
        for label, over in variants:
            cfg = preset(name, **over)
            for phase, sel in (("first step", lambda t: t == 0),
                               ("steady state", lambda t: t > 0)):
                chosen = [dx for _, step, _, dx in tiles if sel(step)]
                t0 = time.time()
                say(f"[qpu rate] {name} {label} {phase}: {len(chosen)} tiles ...")
                r = measure(cfg, chosen)
                r["tiles"] = len(chosen)
                results[f"{name}/{label}/{phase}"] = dict(preset=name, packing=label, **over,
                                                          phase=phase, config_hash=cfg.hash(),
                                                          **r)
                say(f"[qpu rate]   {r['groups_per_cycle']:.3f} groups/cycle, "
                    f"{r['mpu_wait_cycles']} MPU wait cycles ({time.time() - t0:.0f} s)")
    rows = ["| preset | packing | phase | tiles | sub-channels | groups | "
            "sub-ch/cycle | groups/cycle | groups/sub-ch | MPU wait cycles | lane fill |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results.values():
        rows.append(f"| {r['preset']} | {r['packing']} | {r['phase']} | "
                    f"{r['tiles']} | "
                    f"{r['subchannels']} | "
                    f"{r['groups']} | {r['subchannels_per_cycle']:.3f} | "
                    f"{r['groups_per_cycle']:.3f} | {r['groups_per_subchannel']:.2f} | "
                    f"{r['mpu_wait_cycles']} | {r['lane_fill']:.1%} |")
    text = ("# QPU rate on the reference DiT's differences\n\n"
            "Generated by `dstar measure qpu-rate` (Verilator, no input gaps, output always "
            "ready). *MPU wait cycles*: cycles between the first and the last group in which no "
            "group was available to an MPU that takes one per cycle. *Packing*: `sort` sorts "
            "chunks of `sort_n` and packs them, holding *open* partial lane groups across the "
            "chunks of a tile (`open_groups`) and packing *windows* per cycle (`pack_windows`: "
            "2 also emits the window after a stored one); `bins N` keeps one open group per "
            "exponent bin, N bins, no sort (`packer = \"bins\"`, `pack_bins`).\n\n"
            + "\n".join(rows) + "\n")
    write_together({args.out / "qpu_rate.json":
                    json_text({"rows": results}),
                    args.out / "qpu_rate.md": text})
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
