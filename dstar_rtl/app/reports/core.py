"""Core report: cycles per step and per layer of the ``fpga`` core on a DiT block, the counter
breakdown per engine, lane utilisation of the FFN and attention products, the block's matrix
work beside the INT8 baseline array, and the Verilator simulation speed.

``dstar measure core`` writes ``reports/core.json`` and ``reports/core.md``. Everything
is measured on the generated core (``tb/test_core_perf.py``, outputs checked against golden);
``--presets`` picks the presets (default ``fpga``).
"""

from __future__ import annotations

import platform
import sys
import time

from dstar_rtl.app.options import Parser
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import check_output_dir, json_text, write_together
from dstar_rtl.gen.paths import ROOT
from dstar_rtl.gen.progress import Step, say
from dstar_rtl.gen.tables import md_table
from dstar_rtl.golden.config import PRESETS, preset

OUT = ROOT / "reports"
ENGINES = ("H", "Q", "M", "V")


def _pct(x):
    return "–" if x is None else f"{100 * x:.1f} %"


def _util(sections, names):
    g = sum(s["counters"].get("groups_replayed", 0) for s in sections if s["name"] in names)
    v = sum(s["counters"].get("lanes_valid", 0) for s in sections if s["name"] in names)
    return v, g


def render(res: dict) -> str:
    md = ["# The DSTAR core on a DiT block", "",
          "Measured on the generated core under Verilator (`tb/test_core_perf.py`), every output "
          "and state checked bit for bit against the integer DiT-block golden. A step runs section "
          "by section (one program section per layer or VPU operation, `program.compiler`); "
          "*cycles* run from the section's first command to `done`, host streams never stall. "
          "`load` moves the step's input over the 32-bit host port and `store` returns every "
          "output and state for verification (a deployment stores only the block output).", ""]
    for name, r in res["presets"].items():
        perf = r["perf"]
        sp = perf["spec"]
        lanes = r["lanes"]
        md += [f"## `{name}` preset", "",
               f"Block: N = {sp['tokens']} tokens, D = {sp['hidden']}, {sp['heads']} heads of "
               f"d = {sp['head_dim']}, MLP {sp['mlp']}; SAR interval {perf['interval']}, "
               f"{perf['mask_kept']} of {perf['mask_blocks']} attention blocks kept. Core buffers: "
               + ", ".join(f"{k} {v}" for k, v in perf["core"].items()) + ".", ""]
        secs = [s["name"] for s in perf["steps"][0]["sections"]]
        head = ["section"] + [f"step {s['step']} ({'cache' if s['cache'] else 'reuse'})"
                              for s in perf["steps"]]
        rows = [[n] + [next(x["cycles"] for x in s["sections"] if x["name"] == n)
                       for s in perf["steps"]] for n in secs]
        rows.append(["**step**"] + [s["cycles"] for s in perf["steps"]])
        md += ["### Cycles per step and per section", "", md_table(head, rows), ""]
        md += ["### Engine busy cycles per section (last cache step)", "",
               "Busy: the engine holds a command; Q and M overlap inside a linear layer "
               "(the QPU quantizes tile τ+1 while the MPU replays tile τ).", ""]
        cache = [s for s in perf["steps"] if s["cache"]][-1]
        rows = []
        for s in cache["sections"]:
            c = s["counters"]
            rows.append([s["name"], s["cycles"]] + [c.get(f"busy_{e}", 0) for e in ENGINES] +
                        [c.get("groups_replayed", 0), c.get("vpu_rows", 0),
                         c.get("abuf_reads", 0) + c.get("abuf_writes", 0)])
        md += [md_table(["section", "cycles"] + [f"busy {e}" for e in ENGINES] +
                      ["groups", "VPU rows", "ABUF rows"], rows), ""]
        md += ["### Bytes moved per buffer (one step)", "",
               "Logical row accesses × row bytes (`program.isa.row_width`); GMEM rows are "
               "lane groups; the P cache is the GMEM groups of `P` written on a cache step and "
               "replayed on every step.", "",
               md_table(["buffer"] + [f"step {b['step']} ({b['kind']})" for b in r["bytes"]],
                      [[k] + [f"{b['bytes'][k]:,}" for b in r["bytes"]]
                       for k in r["bytes"][0]["bytes"]]), ""]
        md += ["### Lane utilisation (valid lanes / issued lane slots, last cache step)", "",
               md_table(["layers", "valid lanes", "lane slots", "utilisation", "paper"],
                      [[k, v["valid"], v["slots"], _pct(v["util"]), v["paper"]]
                       for k, v in lanes.items()]), ""]
        md += ["### Matrix work beside the INT8 baseline array", "",
               "DSTAR: the core's M-engine busy cycles (RTL, includes the drain through the VPU). "
               "Baseline: the generated INT8 baseline array (RTL, Verilator) streaming the same "
               "tiles densely, one beat per input channel, results checked "
               "(`tb/test_baseline_block.py`); *law* is its tile-flow formula for the same "
               "stream. The baseline array runs on a cache step's tile counts (on a reuse step "
               "it would skip Q·Kᵀ too). Step 0 quantizes the whole input; later steps only "
               "its change (differential layers).", ""]
        for sb in r["baseline"]:
            def base(b):
                return b.get("baseline_rtl_cycles") or b["baseline_array_cycles"]
            rows = [[b["section"], b["tiles"], b["groups"], b["dense_beats"],
                     _pct(b["lane_util"]), b["core_m_busy"], base(b), b["baseline_array_cycles"],
                     "–" if b["ratio"] is None else f"{b['ratio']:.2f}×"] for b in sb["rows"]]
            tot_m = sum(b["core_m_busy"] for b in sb["rows"])
            tot_b = sum(base(b) for b in sb["rows"])
            rows.append(["**total**", "", "", "", "", tot_m, tot_b, "",
                         f"{tot_b / tot_m:.2f}×" if tot_m else "–"])
            md += [f"Step {sb['step']} ({sb['kind']}):", "",
                   md_table(["section", "tiles", "DSTAR groups", "baseline beats", "lane util",
                           "DSTAR M busy", "baseline cycles", "law", "baseline / DSTAR"],
                          rows), ""]
        sim = perf["sim"]
        mod = sim.get("model") or {}
        md += ["### Simulation speed", "",
               f"Verilator (`-O2`), one step's compute sections as one program (no host words): "
               f"{mod.get('cycles', 0):,} cycles in {mod.get('wall_s', 0):.2f} s = "
               f"**{mod.get('cycles_per_s', 0):,.0f} cycles/s**. Section by section, with the "
               f"cocotb drivers: {sim['cycles']:,} cycles in "
               f"{sim['wall_s']:.1f} s = **{sim['cycles_per_s']:,.0f} cycles/s** over whole steps; "
               f"{sim['compute_cycles']:,} cycles in {sim['compute_wall_s']:.1f} s = "
               f"**{sim['compute_cycles_per_s']:,.0f} cycles/s** over the compute sections (the "
               "`load` and `store` sections move one host word per cycle through Python, which "
               "sets their pace).", ""]
    md += [f"Generated {res['generated']}; steps: " +
           ", ".join(f"{s['step']} {s['seconds']:.0f} s" for s in res["steps"]), ""]
    return "\n".join(md)


def analyse(cfg, perf: dict, measured: dict | None = None) -> dict:
    from dstar_rtl.app.benches.core import baseline_side_by_side

    cache = [s for s in perf["steps"] if s["cache"]][-1]["sections"]   # a later cache step
    lanes = {}
    for label, names, paper in (("FFN (fc1, fc2)", ("fc1", "fc2"), "> 88 %"),
                                ("attention (Q·Kᵀ, P·V)", ("attn.cache", "attn.pv"), "> 75 %"),
                                ("all linear layers", ("qk", "v", "proj", "fc1", "fc2"), "")):
        v, g = _util(cache, names)
        lanes[label] = dict(valid=v, slots=g * cfg.lanes,
                            util=v / (g * cfg.lanes) if g else None, paper=paper)
    from dstar_rtl.golden.layouts import group_layout, layout_width
    from dstar_rtl.program import isa

    rb = {b: -(-isa.row_width(cfg, b) // 8) for b in isa.BUFFERS}
    gb = -(-layout_width(group_layout(cfg)) // 8)
    moved = []
    for i, st in enumerate(perf["steps"]):
        tot = {}
        for sec in st["sections"]:
            for k, v in sec["counters"].items():
                tot[k] = tot.get(k, 0) + v
        moved.append(dict(step=i, kind="cache" if st["cache"] else "reuse", bytes={
            "ABUF": (tot.get("abuf_reads", 0) + tot.get("abuf_writes", 0)) * rb["ABUF"],
            "XBUF": (tot.get("xbuf_reads", 0) + tot.get("xbuf_writes", 0)) * rb["XBUF"],
            "YBUF": (tot.get("ybuf_reads", 0) + tot.get("ybuf_writes", 0)) * rb["YBUF"],
            "WMEM written": tot.get("wmem_writes", 0) * rb["WMEM"],
            "GMEM written": tot.get("gmem_writes", 0) * gb,
            "GMEM replayed": tot.get("groups_replayed", 0) * gb,
            "P cache written": tot.get("pcache_groups_written", 0) * gb,
            "P cache read": tot.get("pcache_groups_read", 0) * gb,
            "host in": tot.get("host_words_in", 0) * 4,
            "host out": tot.get("host_words_out", 0) * 4}))
    sides = [dict(step=i, kind="cache" if s["cache"] else "reuse",
                  rows=baseline_side_by_side(cfg, perf, i, measured))
             for i, s in enumerate(perf["steps"])]
    return dict(perf=perf, lanes=lanes, baseline=sides, bytes=moved)


def main(argv=None, prog=None) -> int:
    ap = Parser(prog=prog or "dstar measure core", description=__doc__.split("\n")[0])
    ap.add_argument("--presets", nargs="+", default=["fpga"], choices=sorted(PRESETS),
                    help="presets to measure (default: fpga)")
    ap.add_argument("--steps", type=int, default=4,
                    help="DiT-block steps to run (default 4)")
    args = ap.parse_args(argv)
    check_output_dir(OUT)
    if args.steps < 1:
        raise UserError(f"--steps must be at least 1, not {args.steps}")
    from dstar_rtl.app.benches.core import measure, measure_baseline

    steps, res = [], {"presets": {}}
    for name in args.presets:
        cfg = preset(name)
        with Step(steps, f"core block cycles, {name} (Verilator -O2)"):
            perf = measure(cfg, steps=args.steps)
        with Step(steps, f"INT8 baseline array on the block's tiles, {name} (Verilator)"):
            measured = measure_baseline(cfg, perf)
        res["presets"][name] = analyse(cfg, perf, measured)
    res["steps"] = steps
    res["host"] = dict(python=platform.python_version(), machine=platform.machine())
    res["generated"] = time.strftime("%Y-%m-%d")
    path = OUT / "core.json"
    write_together({path: json_text(res),
                    OUT / "core.md": render(res)})
    say(f"wrote {path} and {OUT / 'core.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
