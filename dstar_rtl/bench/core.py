"""Cycles of the core on a DiT block (``tb/test_core_perf.py`` under Verilator) and the same
block's matrix work on the INT8 baseline array (``dstar measure core``: :mod:`app.reports.core`
types and renders them; :func:`analyse` adds the lane use, the bytes moved and the INT8 array
beside it).

:func:`measure` runs the generated core for a preset on its test block (``tb.core_tb.SPECS``)
over four steps (cache, reuse, cache, reuse), section by section, and returns the perf record
(cycles, counter deltas per section, simulation speed). :func:`baseline_side_by_side` puts every
matrix section next to the dense INT8 baseline array: the core's measured M-engine busy cycles (RTL)
against the baseline array's cycle law (``rtl.array``, shared by both arrays and verified in their
tests: a stream of tiles of ``G_k`` beats takes ``Σ max(G_k, L + rows) + L + rows`` cycles,
``L = rows + cols + pe_stages + 2``) with one beat per input channel of every tile, the
same tiles the core ran (no FMDQ, no SAR savings on the baseline's side beyond skipping dropped
blocks). :func:`measure_baseline` runs the generated baseline array on those tiles under
Verilator; its cycles replace the law in the ratio when given.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.golden.config import Config
from dstar_rtl.perf.timing import array_tile_period
from dstar_rtl.sim.runner import run_cocotb

__all__ = ["measure", "measure_baseline", "baseline_side_by_side", "MATRIX_SECTIONS", "analyse"]

#: Sections whose matrix work is compared; attention products live in attn.cache (Q·Kᵀ) and
#: attn.pv (P·V).
MATRIX_SECTIONS = ("qk", "v", "attn.cache", "attn.pv", "proj", "fc1", "fc2")


def measure(cfg: Config, steps: int = 4, optimize: bool = True,
            simulator: str = "verilator", model_speed: bool = True) -> dict:
    """Run ``tb.test_core_perf`` for ``cfg`` on ``simulator`` (default Verilator); returns its
    JSON record (``model_speed``: also the simulator-speed run after the checked steps)."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "perf.json"
        run_cocotb("core", cfg, simulator, "dstar_rtl.tb.test_core_perf", seed=1, optimize=optimize,
                   extra_env={"DSTAR_PERF_JSON": str(out), "DSTAR_STEPS": str(steps),
                              "DSTAR_MODEL_SPEED": str(int(model_speed))},
                   tag="perf")
        return json.loads(out.read_text())


def _tiles(spec: dict, mask_kept: int, T: int) -> dict:
    """Per matrix section the list of (tiles, input channels) the block issues on a cache
    step: one tile per token tile and output block (Q·Kᵀ: per kept block; P·V: per query tile and
    column block of V)."""
    N, D, H, d, M = (spec[k] for k in ("tokens", "hidden", "heads", "head_dim", "mlp"))
    nt = N // T
    return {"qk": [(nt * 2 * D // T, D)], "v": [(nt * D // T, D)],
            "attn.cache": [(mask_kept, d)], "attn.pv": [(H * nt * d // T, N)],
            "proj": [(nt * D // T, D)], "fc1": [(nt * M // T, D)], "fc2": [(nt * D // T, M)]}


def measure_baseline(cfg: Config, perf: dict, simulator: str = "verilator") -> dict:
    """Run the generated INT8 baseline array (on ``simulator``, default Verilator) on every
    matrix section's tiles (``tb/test_baseline_block.py``); returns ``{section: cycles}``."""
    T = cfg.tile
    shapes = [[name, sum(n for n, _ in sh), sh[0][1]]
              for name, sh in _tiles(perf["spec"], perf["mask_kept"], T).items()]
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "baseline.json"
        run_cocotb("baseline", cfg, simulator, "dstar_rtl.tb.test_baseline_block", seed=1,
                   extra_env={"DSTAR_BASELINE_SHAPES": data_json(shapes),
                              "DSTAR_BASELINE_JSON": str(out)}, tag="block")
        return json.loads(out.read_text())


def baseline_side_by_side(cfg: Config, perf: dict, step: int, measured: dict | None = None
                          ) -> list:
    """One row per matrix section of step ``step`` (on a reuse step the cache-only sections do
    no matrix work and are left out): DSTAR groups replayed, lane utilisation, the baseline's
    dense beats and array cycles, the core's M busy cycles, and the ratio baseline / core."""
    T = cfg.tile
    period = array_tile_period(cfg)
    step = perf["steps"][step]
    shapes = _tiles(perf["spec"], perf["mask_kept"], T)
    rows = []
    for sec in step["sections"]:
        name, c = sec["name"], sec["counters"]
        if name not in MATRIX_SECTIONS or not c.get("groups_replayed"):
            continue
        groups = c.get("groups_replayed", 0)
        ntiles = sum(n for n, _ in shapes[name])
        base = sum(n * max(cin, period) for n, cin in shapes[name]) + period
        dense = sum(n * cin for n, cin in shapes[name])
        lanes = c.get("lanes_valid", 0)
        busy = c.get("busy_M", 0)
        rows.append(dict(section=name, tiles=ntiles, groups=groups, dense_beats=dense,
                         lane_util=lanes / (groups * cfg.lanes) if groups else None,
                         baseline_array_cycles=base,
                         baseline_rtl_cycles=(measured or {}).get(name), core_m_busy=busy,
                         section_cycles=sec["cycles"],
                         ratio=((measured or {}).get(name) or base) / busy if busy else None))
    return rows


def _util(sections, names):
    g = sum(s["counters"].get("groups_replayed", 0) for s in sections if s["name"] in names)
    v = sum(s["counters"].get("lanes_valid", 0) for s in sections if s["name"] in names)
    return v, g


def analyse(cfg, perf: dict, measured: dict | None = None) -> dict:
    from dstar_rtl.bench.core import baseline_side_by_side

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
