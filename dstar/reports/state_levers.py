"""The levers on FMDQ's differential state, measured on the paper's chip with every byte charged
(issue 47; ``dstar measure projection`` writes them into ``reports/projection.*``).

Each lever alone and the combination, on every model of the projection, against the same INT8
chip (which keeps no state, so no lever touches it):

- **stored Y** (``ystate_frac``, numerics §2.5; the presets' default since issue 47, at
  :data:`golden.config.YSTATE_FRAC_CHOSEN`): ``Y`` kept between steps rounded by each output
  channel's shift in ``act_width + 2 + g`` bits instead of ``acc_bits`` (38 at ``paper``); the
  RTL follows it bit for bit (:class:`rtl.requant.Requant`); its quality on the integer model
  is measured by ``dstar measure state-quality`` (:mod:`dstar.reports.state_quality`), which
  chose the default; "Y whole" is the configuration before it;
- **stateless layers**: a layer may run without state, its input quantized whole at the first
  step's bits (``Workload.dense_bits``, measured by ``dstar bench`` on step 0) with nothing
  kept, where the projection finds that faster; known for our statistics only;
- **buffers**: the per-core buffer beside the paper's 80 KB, for what more SRAM would buy
  (outside the paper's budget: context, not a lever the chip may take).
"""

from __future__ import annotations

from dataclasses import asdict, replace

__all__ = ["LEVERS", "BUFFERS_KB", "lever_rows", "markdown"]

#: name → (``paper`` configuration overrides, :func:`project_model` options): the state before
#: issue 47, each lever alone, the default, and the default with stateless layers.
LEVERS = {
    "Y whole": (dict(ystate_frac=None), {}),
    "Y whole + stateless layers": (dict(ystate_frac=None), dict(stateless=True)),
    "stored Y (the default)": ({}, {}),
    "stored Y + stateless layers": ({}, dict(stateless=True)),
}

#: Per-core buffers (KB) of the budget table; the first is the paper's.
BUFFERS_KB = (80, 160, 320)


def lever_rows(models, wls, chip, timing, energy=None, progress=None) -> list:
    """One row per lever, per-core buffer (the paper's for every lever; the others with the
    combination), model and workload: :func:`dstar.reports.project.project_model`'s figures
    that matter here and, with ``energy`` (``(area_model, fpga, fpga_cfg, voltage)`` of
    :func:`dstar.reports.energy_paper.row_energy`), the energy per image. ``timing(cfg)`` gives
    ``(t_dstar, t_int8)``."""
    from dstar.reports.energy_paper import row_energy
    from dstar.reports.project import project_model
    from golden.config import preset

    runs = [(name, BUFFERS_KB[0]) for name in LEVERS]
    runs += [(list(LEVERS)[-1], kb) for kb in BUFFERS_KB[1:]]
    rows = []
    for name, kb in runs:
        over, opts = LEVERS[name]
        cfg = preset("paper", **over)
        t, tb = timing(cfg)
        c = replace(chip, memory=replace(chip.memory, core_buffer_bytes=kb * 1024))
        for wl in wls:
            if opts.get("stateless") and wl.dense_bits is None:
                continue
            for model in models:
                r = project_model(model, c, t, tb, cfg, wl, **opts)
                row = dict(lever=name, buffer_kb=kb, model=model.name, workload=wl.name,
                           config=over, memory=asdict(c.memory), speedup=r["speedup"],
                           dstar_s=r["dstar"]["per_image_s"], int8_s=r["int8"]["per_image_s"],
                           dstar_compute_s=r["dstar"]["compute_per_image_s"],
                           int8_compute_s=r["int8"]["compute_per_image_s"],
                           state_bytes=r["dstar"]["state_bytes"],
                           hbm_bytes_per_cache_step={s: sum(r[s]["cache"]["hbm_bytes"].values())
                                                     for s in ("dstar", "int8")},
                           stateless=sorted(k for k, v in r["dstar"]["layer_modes"].items()
                                            if v == "stateless"),
                           fits_hbm=r["dstar"]["fits_hbm"])
                if energy is not None:
                    e = row_energy(dict(r, workload=asdict(wl), config=over,
                                        memory=asdict(c.memory)), *energy)
                    row.update(dstar_j=e["dstar"]["energy_j"], int8_j=e["int8"]["energy_j"],
                               energy_ratio=e["dstar_over_int8"])
                rows.append(row)
                if progress:
                    progress(f"[levers] {name:>28} | {kb:>4} KB | {wl.name:>5} | "
                             f"{model.name:<18} | {row['speedup']:.2f}×")
    return rows


def markdown(rows: list, model: str) -> list:
    """The levers' section of ``reports/projection.md``: ``model`` lever by lever, then every
    model's speed-up under each lever at the paper's buffers."""
    if not rows:
        return []
    has_e = "energy_ratio" in rows[0]
    lines = ["## Levers on the state (issue 47)", "",
             "Each lever alone and together (module docstring of "
             "`dstar/reports/state_levers.py`), every byte charged as above, against the same "
             f"INT8 chip. {model}:", "",
             "| lever | buffer per core | statistics | DSTAR s/image | INT8 s/image | speed-up "
             "| compute alone DSTAR / INT8 s | state GB | HBM GB per cache step DSTAR / INT8 "
             + ("| energy DSTAR/INT8 " if has_e else "") + "| stateless layers |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if has_e else "") + "---|"]
    for r in rows:
        if r["model"] != model:
            continue
        h = r["hbm_bytes_per_cache_step"]
        lines.append(
            f"| {r['lever']} | {r['buffer_kb']} KB | {r['workload']} | {r['dstar_s']:.3f} "
            f"| {r['int8_s']:.3f} | {r['speedup']:.2f}× "
            f"| {r['dstar_compute_s']:.3f} / {r['int8_compute_s']:.3f} "
            f"| {r['state_bytes'] / 1e9:.2f} "
            f"| {h['dstar'] / 1e9:.2f} / {h['int8'] / 1e9:.2f} "
            + (f"| {r['energy_ratio']:.2f} " if has_e else "")
            + f"| {', '.join(r['stateless']) or '–'} |")
    lines += ["", "*Compute alone*: the same chip with no memory traffic at all (every layer its "
              "compute cycles, the plan's pieces kept): what the arrays, quantizers and VPUs "
              "take, so the speed-up DSTAR's arithmetic gives before any byte moves; the gap "
              "between it and the speed-up charged is what HBM costs (module docstring of "
              "`dstar/reports/project.py`)."]
    names = list(dict.fromkeys(r["model"] for r in rows))
    levers = list(dict.fromkeys(r["lever"] for r in rows if r["buffer_kb"] == rows[0]["buffer_kb"]))
    for wl in dict.fromkeys(r["workload"] for r in rows):
        lines += ["", f"Speed-up over the INT8 chip at the paper's buffers, {wl} statistics"
                  + (" (energy DSTAR/INT8 in brackets)" if has_e else "") + ":", "",
                  "| model | " + " | ".join(levers) + " |",
                  "|---|" + "---:|" * len(levers)]
        for n in names:
            cells = []
            for lv in levers:
                r = next((x for x in rows if x["model"] == n and x["lever"] == lv
                          and x["workload"] == wl and x["buffer_kb"] == rows[0]["buffer_kb"]),
                         None)
                cells.append("–" if r is None else f"{r['speedup']:.2f}×"
                             + (f" ({r['energy_ratio']:.2f})" if has_e else ""))
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines + [""]
