"""The core's ECP5 area by part (``dstar measure core-area``, :mod:`app.reports.core_area` types
and renders it): one hierarchical ``synth_ecp5`` of the core per preset, each module's own cells
summed into the parts of :data:`PARTS` by module path (:func:`breakdown`)."""

from __future__ import annotations

import json
import shutil
import time

from dstar_rtl.flows.synth import BUILD_ROOT, resources, run_yosys, synth_script, yosys_version
from dstar_rtl.gen.progress import Step
from dstar_rtl.golden.config import preset
from dstar_rtl.results.core_area import CoreParts
from dstar_rtl.results.quantities import Resources

__all__ = ["PARTS", "TOP", "breakdown", "synthesize_core"]


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


def synthesize_core(name: str, steps: list, variant: str | None = None) -> CoreParts:
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
    return CoreParts(preset=name, variant=variant, config_hash=cfg.hash(),
                     parts={k: Resources.from_flow(v) for k, v in parts.items()},
                     total=Resources.from_flow(resources("ecp5", cells)), seconds=round(secs, 1),
                     tools={"yosys": yosys_version()}, workdir=str(wd))
