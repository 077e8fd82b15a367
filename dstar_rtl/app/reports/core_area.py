"""Area breakdown of the core: ECP5 synthesis with every module mapped on its own (LUTs by
``abc -lut 4``: abc9 asserts on the core in Yosys 0.70, see flows/synth.py), then the
cells of each part of the core (PE array, MPU front end and weight memory, QPU with its sorter,
VPU, activation and other buffers, the four engines, the dispatcher) summed over its module
subtree.

``dstar measure core-area [--presets tiny fpga]`` writes ``reports/core_area.json``,
``reports/core_area.md`` and ``reports/core_area.png`` (stacked LUT and flip-flop bars per
part).
"""

from __future__ import annotations

import json
import shutil
import sys
import time

from dstar_rtl.app.options import Parser
from dstar_rtl.flows.synth import BUILD_ROOT, resources, run_yosys, synth_script, yosys_version
from dstar_rtl.gen.outputs import check_output_dir, json_text, save_png, write_together
from dstar_rtl.gen.paths import ROOT
from dstar_rtl.gen.progress import Step, say
from dstar_rtl.gen.tables import md_table
from dstar_rtl.golden.config import PRESETS, VARIANTS, preset

OUT = ROOT / "reports"

#: Parts of the core, by module path prefix under the top (longest prefix wins).
PARTS = [
    ("PE array", "matrix.mpu.array"),
    ("MPU front end + WMEM", "matrix.mpu"),
    ("M engine (replay, drain)", "matrix"),
    ("M requantizer", "matrix.requant"),
    ("QPU (max, bins, slice, chunker)", "quant.qpu"),
    ("QPU sorter", "quant.qpu.sorter"),
    ("QPU packer", "quant.qpu.packer"),
    ("Q engine (diff pair, x̂ update)", "quant"),
    ("VPU", "vpu"),
    ("V engine", "vector"),
    ("H engine", "host"),
    ("dispatcher", "dispatch"),
    ("ABUF (skewed)", "abuf"),
]
#: What stays in the top module: the plain buffers are memories of the top (Amaranth elaborates
#: them into it), beside the counters, SREG and the shared-port multiplexers.
TOP = "top: XBUF/YBUF/RBUF/VBUF/MASK/GMEM, counters, SREG, port muxes"


def _part(path: str) -> str:
    best, n = TOP, -1
    for name, prefix in PARTS:
        if (path == prefix or path.startswith(prefix + ".")) and len(prefix) > n:
            best, n = name, len(prefix)
    return best


def breakdown(stats: dict, top: str) -> dict:
    """``{part: {cell type: count}}`` from Yosys's per-module ``stat -json`` (each module's own
    cells; submodule instances are cells named after the module)."""
    mods = {k.lstrip("\\"): v for k, v in stats["modules"].items()}
    parts: dict = {}

    def walk(mod, path):
        for cell, n in mods[mod].get("num_cells_by_type", {}).items():
            sub = cell.lstrip("\\")
            if sub in mods:
                for _ in range(n):
                    walk(sub, sub[len(top) + 1:])
            elif cell != "$scopeinfo":
                d = parts.setdefault(_part(path), {})
                d[cell] = d.get(cell, 0) + n

    walk(top, "")
    return parts


def synthesize_core(name: str, steps: list, variant: str | None = None) -> dict:
    from dstar_rtl.gen.generate import to_rtlil
    from dstar_rtl.gen.units import top_name

    cfg = preset(name, variant)
    top = top_name("core")
    wd = BUILD_ROOT / f"core-{cfg.name}-{cfg.hash()}" / "ecp5-modules"
    shutil.rmtree(wd, ignore_errors=True)
    wd.mkdir(parents=True)
    with Step(steps, f"elaborate core {name}"):
        (wd / "design.il").write_text(to_rtlil("core", cfg))
    script = synth_script(top, "ecp5", abc9=False, hierarchical=True, module_stats=True)
    with Step(steps, f"synth_ecp5 core {name} (module by module)"):
        t0 = time.perf_counter()
        run_yosys(script, wd, None)
        secs = time.perf_counter() - t0
    stats = json.loads((wd / "stat_modules.json").read_text())
    parts = {p: resources("ecp5", cells) for p, cells in breakdown(stats, top).items()}
    total = json.loads((wd / "stat.json").read_text())
    cells = {k: v for k, v in total["design"]["num_cells_by_type"].items() if k != "$scopeinfo"}
    return dict(preset=name, variant=variant, config_hash=cfg.hash(), parts=parts,
                total=resources("ecp5", cells), seconds=round(secs, 1),
                tools={"yosys": yosys_version()}, workdir=str(wd))


def render(res: dict) -> str:
    md = ["# Area of the core by part (ECP5)", "",
          "`synth_ecp5` with every module mapped on its own (`fpga/core_area.py`), cells summed "
          "over each part's module subtree. LUT4 counts logic LUTs (carries and LUT RAM apart); "
          "the sum of the parts equals the flattened netlist's total up to the cross-module "
          "optimisation flattening adds afterwards.", ""]
    for name, r in res["presets"].items():
        rows = sorted(r["parts"].items(), key=lambda kv: -kv[1].get("lut4", 0))
        tot = r["total"]
        var = f", variant `{r['variant']}`" if r.get("variant") else ""
        md += [f"## `{name}` preset{var} (config `{r['config_hash']}`)", "",
               md_table(["part", "LUT4", "share", "FF", "carry", "DSP", "BRAM", "LUT RAM"],
                      [[p, v.get("lut4", 0),
                        f"{100 * v.get('lut4', 0) / max(1, tot.get('lut4', 1)):.1f} %",
                        v.get("ff", 0), v.get("carry", 0), v.get("dsp", 0), v.get("bram", 0),
                        v.get("lutram", 0)] for p, v in rows] +
                      [["**total (flattened)**", tot.get("lut4", 0), "", tot.get("ff", 0),
                        tot.get("carry", 0), tot.get("dsp", 0), tot.get("bram", 0),
                        tot.get("lutram", 0)]]), "",
               f"Yosys {r['tools']['yosys']}, {r['seconds']:.0f} s.", ""]
    md += ["![area by part](core_area.png)", "", f"Generated {res['generated']}.", ""]
    return "\n".join(md)


def plot(res: dict, path):
    """Stacked LUT and flip-flop bars per part, as a PNG to ``path`` (a file name or a binary
    file object)."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    names = list(res["presets"])
    parts = sorted({p for n in names for p in res["presets"][n]["parts"]},
                   key=lambda p: -max(res["presets"][n]["parts"].get(p, {}).get("lut4", 0)
                                      for n in names))
    colors = {p: colormaps["tab20"](i % 20) for i, p in enumerate(parts)}
    fig = Figure(figsize=(11, 4.5))
    axes = fig.subplots(1, 2)
    for ax, key, label in ((axes[0], "lut4", "LUT4"), (axes[1], "ff", "flip-flops")):
        bottom = [0] * len(names)
        for p in parts:
            vals = [res["presets"][n]["parts"].get(p, {}).get(key, 0) for n in names]
            ax.bar(names, vals, bottom=bottom, label=p, color=colors[p])
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_title(f"core {label} by part (ECP5)")
        ax.set_ylabel(label)
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    save_png(fig, path, dpi=110)


def main(argv=None, prog=None) -> int:
    ap = Parser(prog=prog or "dstar measure core-area", description=__doc__.split("\n")[0])
    ap.add_argument("--presets", nargs="+", default=["tiny", "fpga"], choices=sorted(PRESETS),
                    help="presets to synthesize (default: tiny fpga)")
    ap.add_argument("--variant", choices=sorted(VARIANTS), default=None,
                    help="a variant of the presets (golden.config.VARIANTS) instead of their "
                         "default configuration")
    args = ap.parse_args(argv)
    check_output_dir(OUT)
    steps, res = [], {"presets": {}}
    for name in args.presets:
        res["presets"][name] = synthesize_core(name, steps, args.variant)
    res["steps"] = steps
    res["generated"] = time.strftime("%Y-%m-%d")
    write_together({OUT / "core_area.json": json_text(res),
                    OUT / "core_area.md": render(res),
                    OUT / "core_area.png": lambda f: plot(res, f)})
    say(f"wrote {OUT / 'core_area.md'}, .json, .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
