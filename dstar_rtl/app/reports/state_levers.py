"""The levers on FMDQ's differential state as the projection's report states them (the levers and
their rows: :mod:`perf.state_levers`)."""

from __future__ import annotations

from dstar_rtl.gen.tables import md_table
from dstar_rtl.perf.state_levers import (
    BUFFERS_KB,
    COMBINED,
    LEVERS,
    lever_rows,
    targets,
)

__all__ = ["LEVERS", "COMBINED", "lever_rows", "targets", "markdown", "BUFFERS_KB"]

def markdown(rows, model: str) -> list:
    """The levers' section of ``reports/projection.md``: ``model`` lever by lever, then every
    model's speed-up under each lever at the paper's buffers."""
    if not rows:
        return []
    has_e = rows[0].energy_ratio is not None
    lines = ["## Levers on the state (issue 47)", "",
             "Each lever alone and together (module docstring of "
             "`perf/state_levers.py`), every byte charged as above, against the same "
             f"INT8 chip. {model}:", ""]
    table = []
    for r in rows:
        if r.model != model:
            continue
        h = r.hbm_bytes_per_cache_step
        table.append([r.lever, f"{r.buffer_kb} KB", r.workload, f"{r.dstar_s:.3f}",
                      f"{r.int8_s:.3f}", f"{r.speedup:.2f}×",
                      f"{r.dstar_compute_s:.3f} / {r.int8_compute_s:.3f}",
                      f"{r.state_bytes / 1e9:.2f}",
                      f"{h['dstar'] / 1e9:.2f} / {h['int8'] / 1e9:.2f}",
                      *([f"{r.energy_ratio:.2f}"] if has_e else []),
                      ", ".join(r.stateless) or "–"])
    lines.append(md_table(["lever", "buffer per core", "statistics", "DSTAR s/image",
                           "INT8 s/image", "speed-up", "compute alone DSTAR / INT8 s",
                           "state GB", "HBM GB per cache step DSTAR / INT8",
                           *(["energy DSTAR/INT8"] if has_e else []), "stateless layers"],
                          table, align="lrlrrrrrr" + ("r" if has_e else "") + "l"))
    lines += ["", *targets(rows, model),
              "*Compute alone*: the same chip with no memory traffic at all (every layer its "
              "compute cycles, the plan's pieces kept): what the arrays, quantizers and VPUs "
              "take, so the speed-up DSTAR's arithmetic gives before any byte moves; the gap "
              "between it and the speed-up charged is what HBM costs (module docstring of "
              "`perf/chip_model.py`)."]
    kb0 = rows[0].buffer_kb
    names = list(dict.fromkeys(r.model for r in rows))
    levers = list(dict.fromkeys(r.lever for r in rows if r.buffer_kb == kb0))
    for wl in dict.fromkeys(r.workload for r in rows):
        lines += ["", f"Speed-up over the INT8 chip at the paper's buffers, {wl} statistics"
                  + (" (energy DSTAR/INT8 in brackets)" if has_e else "") + ":", ""]
        table = []
        for n in names:
            cells = []
            for lv in levers:
                r = next((x for x in rows if x.model == n and x.lever == lv
                          and x.workload == wl and x.buffer_kb == kb0), None)
                cells.append("–" if r is None else f"{r.speedup:.2f}×"
                             + (f" ({r.energy_ratio:.2f})" if has_e else ""))
            table.append([n, *cells])
        lines.append(md_table(["model", *levers], table))
    return lines + [""]
