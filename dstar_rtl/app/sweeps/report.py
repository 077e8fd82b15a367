"""The design sweep's figures and reports: every configuration's area, throughput and throughput
per µm², the Pareto front, the crossover size, the Markdown table and the plot.

- :func:`pareto_front`: the points no other point beats on both axes (smaller or equal area
  *and* larger or equal throughput per µm², one of them strictly).
- :func:`crossover`: the smallest array size from which (at that size and every larger one
  swept) the best DSTAR core's throughput per µm² exceeds the best INT8 core's; without one,
  how far the best size misses (the ratio there).
"""

from __future__ import annotations

import math

from dstar_rtl.app.results import plain
from dstar_rtl.app.sweeps.result import DesignSweep
from dstar_rtl.gen.tables import md_table

__all__ = ["pareto_front", "crossover", "assemble", "markdown", "figure"]


def pareto_front(points) -> list:
    """Indices (ascending) of the non-dominated ``(area, value)`` points: minimal area, maximal
    value. Of identical points only the first is on the front."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1], i))
    front, best = [], -math.inf
    for i in order:
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return sorted(front)


def crossover(sizes, dstar: dict, int8: dict) -> dict:
    """``dstar``/``int8``: ``{size: throughput per µm²}`` (the best of each side). Returns
    ``{size, ratios, ahead, best_size, best_ratio, miss}``: ``size`` the smallest swept size
    from which DSTAR/INT8 > 1 at every larger swept size (None if there is none), ``ahead`` the
    sizes where DSTAR/INT8 > 1, ``miss`` (when there is no crossover) the factor by which DSTAR
    falls short at the largest size (``1 / ratio`` there)."""
    sizes = sorted(n for n in sizes if n in dstar and n in int8)
    ratios = {n: dstar[n] / int8[n] for n in sizes}
    size = None
    for n in reversed(sizes):
        if ratios[n] > 1:
            size = n
        else:
            break
    best = max(sizes, key=lambda n: ratios[n]) if sizes else None
    return dict(size=size, ratios={n: round(r, 4) for n, r in ratios.items()},
                ahead=[n for n in sizes if ratios[n] > 1],
                best_size=best, best_ratio=round(ratios[best], 4) if best else None,
                miss=None if size is not None or not sizes else round(1 / ratios[sizes[-1]], 4))


def assemble(dvars, bvars, sizes, sweep, tput: dict) -> dict:
    """Every (configuration, size) record, the Pareto front, the best per size, the crossover
    and the area model's check. ``tput(kind, n, lanes) -> (speedup, lane_util, MACs/cycle)``."""
    from dstar_rtl.app.sweeps.area import (
        array_area,
        index_runs,
        measured_arrays,
        model_check,
        qpu_area,
    )

    runs = index_runs(sweep)
    meas = measured_arrays(sweep, dvars, bvars)
    recs = []
    for v in dvars + bvars:
        for n in sizes:
            a = array_area(v, n, runs, meas)
            t = tput(v, n)
            q = qpu_area(sweep["qpu"], v, n) if v["kind"] == "dstar" else 0.0
            core = a["area"] + q
            m, ms = t["macs_per_cycle"], t["macs_per_cycle_steady"]
            recs.append(dict(
                {k: v[k] for k in v if k != "key"}, config=v["key"], size=n,
                array_area=a["area"], pe_area=a["pe_area"], rest_area=a["rest_area"],
                area_source=a["source"], qpu_area=q, core_area=round(core, 1),
                speedup=round(t["speedup"], 4), speedup_steady=round(t["speedup_steady"], 4),
                lane_util=round(t["lane_util"], 4), macs_per_cycle=round(m, 3),
                macs_per_cycle_steady=round(ms, 3),
                tput_per_mm2_array=round(m / a["area"] * 1e6, 3),
                tput_per_mm2_core=round(m / core * 1e6, 3),
                tput_per_mm2_core_steady=round(ms / core * 1e6, 3)))
    pts = [(r["core_area"], r["tput_per_mm2_core"]) for r in recs]
    for i in pareto_front(pts):
        recs[i]["pareto"] = True
    best = {}
    for n in sizes:
        for kind in ("dstar", "int8"):
            rs = [r for r in recs if r["size"] == n and r["kind"] == kind]
            if rs:
                b = max(rs, key=lambda r: r["tput_per_mm2_core"])
                ba = max(rs, key=lambda r: r["tput_per_mm2_array"])
                best.setdefault(str(n), {})[kind] = dict(
                    config=b["config"], core_area=b["core_area"], array_area=b["array_area"],
                    qpu_area=b["qpu_area"], macs_per_cycle=b["macs_per_cycle"],
                    tput_per_mm2_core=b["tput_per_mm2_core"],
                    best_array_config=ba["config"],
                    tput_per_mm2_array=ba["tput_per_mm2_array"])
    cross = crossover(sizes, {n: best[str(n)]["dstar"]["tput_per_mm2_core"] for n in sizes
                              if "dstar" in best.get(str(n), {})},
                      {n: best[str(n)]["int8"]["tput_per_mm2_core"] for n in sizes
                       if "int8" in best.get(str(n), {})})
    cross_steady = crossover(
        sizes, {n: max(r["tput_per_mm2_core_steady"] for r in recs
                       if r["size"] == n and r["kind"] == "dstar") for n in sizes},
        {n: max(r["tput_per_mm2_core_steady"] for r in recs
                if r["size"] == n and r["kind"] == "int8") for n in sizes})
    cross_arr = crossover(sizes, {n: best[str(n)]["dstar"]["tput_per_mm2_array"] for n in sizes
                                  if "dstar" in best.get(str(n), {})},
                          {n: best[str(n)]["int8"]["tput_per_mm2_array"] for n in sizes
                           if "int8" in best.get(str(n), {})})
    return dict(records=recs, best=best, crossover=cross, crossover_arrays_only=cross_arr,
                crossover_steady_state=cross_steady,
                model_check=model_check(runs, meas, sweep["measure_sizes"]),
                pe_runs={lab: dict(area=r["area"], ff=r["ff"], delay_ns=r["delay_ns"])
                         for lab, r in sweep["runs"].items() if "parts" not in r},
                array_runs={lab: dict(area=r["area"], parts=r["parts"])
                            for lab, r in sweep["runs"].items() if "parts" in r})


def _f(v, nd=0):
    return "–" if v is None else f"{v:,.{nd}f}"




def _by_size(by: dict, n: int):
    """``by[n]`` whether ``by`` was made here (int keys) or read back from JSON (text keys)."""
    return by[n] if n in by else by[str(n)]


def _markdown(rep: dict) -> str:
    lib, th = rep["liberty"], rep["throughput"]
    md = ["# Design-space sweep (`dstar sweep`)", "",
          f"Library **{lib['name']}** (`{lib['file']}`, sha256 `{lib['sha256']}`), Yosys "
          f"{rep['yosys']}; base preset `{rep['base_preset']}` with `rows = cols = n`. "
          f"{len(rep['dstar_variants'])} DSTAR and {len(rep['int8_variants'])} INT8 variants × "
          f"sizes {', '.join(map(str, rep['sizes']))}. Areas in µm² without the weight memory "
          "(a macro); single PEs synthesized for every variant, arrays by part at "
          f"{', '.join(f'{n}×{n}' for n in rep['measure_sizes'])} for a subset, the rest from "
          "the array model (`app/sweeps/design.py`). DSTAR *core* = MPU + QPU (the QPU's parts "
          f"from the measured `tiny` QPU ({rep.get('qpu', {}).get('source', 'measured')}), "
          "scaled per part by the estimate model); INT8 core = "
          "its array (the buffers, VPU and control are the same in both and left out).", "",
          "Configuration names: `L<lanes> s<pe_stages> <digit product>/<digits>` (`int8 "
          "s<pe_stages>`, `-booth`: Yosys `synth -booth`), `acc26`: the 26-bit saturating "
          "accumulator, `hop<k>`: `weight_hop` k (the column operand registered every k rows; "
          "`hoprows`: broadcast down the column), `ahop<k>`: `act_hop` k (the row operand "
          "registered every k columns; `ahopcols`: broadcast along the row); no suffix: "
          "forwarded at every PE.", "",
          f"Throughput in INT8-equivalent MACs per cycle on the trained DiT (`{th['source']}`: "
          f"{th['reference']['rows']}×{th['reference']['rows']}, {th['reference']['lanes']} "
          f"lanes, speed-up {th['reference']['speedup']:.3f} at equal PE count, lane "
          f"utilization {100 * th['reference']['lane_util']:.1f} %, "
          f"{th['reference']['mean_bits']:.2f} bits; INT8 efficiency "
          f"{th['reference']['e8']:.3f} MACs per PE-cycle). Cycles at every size and lanes: "
          "the golden schedule's groups per tile on the same quantized differences (tile = "
          "array rows), each tile occupying max(beats, tile period) cycles on either array "
          "(tile period = latency + drain, `rtl/array.py`), calibrated on the bench's measured "
          "cycles (factors " + (", ".join(f"{k} {v:.3f}" for k, v in th["calibration"].items())
                               if th.get("calibration") else "–") + "); *steady state* "
          "ignores the tile period (speed-up = the bench's, scaled by dense beats / groups). "
          "`pe_stages`, `weight_hop` and `act_hop` change only the tile period per cycle "
          "(Fmax, which "
          "`pe_stages` buys, is not modelled). `app/sweeps/throughput.py`.", ""]
    c = rep["crossover"]
    if c["size"] is not None:
        md += [f"**Crossover size: {c['size']}×{c['size']}** — from there on the best DSTAR "
               "core (MPU + QPU) has more throughput per µm² than the best INT8 array "
               f"(DSTAR/INT8 {_by_size(c['ratios'], c['size']):.2f}× there).", ""]
    else:
        top = max(rep["sizes"])
        md += [f"**No crossover in {min(rep['sizes'])}..{top}**: the best DSTAR core (MPU + QPU) "
               + (f"is ahead of the best INT8 array per µm² only at "
                  f"{', '.join(f'{n}×{n}' for n in c['ahead'])} (best {c['best_ratio']:.2f}× at "
                  f"{c['best_size']}×{c['best_size']}), " if c["ahead"] else
                  f"reaches at best {c['best_ratio']:.2f}× at {c['best_size']}×{c['best_size']}, ")
               + f"and misses by {c['miss']:.2f}× at {top}×{top}. DSTAR/INT8 per size: "
               + ", ".join(f"{n}: {r:.2f}×" for n, r in c["ratios"].items())
               + ". Small arrays carry the QPU (its sorter at `sort_n` 32); large ones are "
                 "drain-bound on this 64-token DiT (a tile's groups fall below the tile "
                 "period on both arrays, so DSTAR's fewer beats stop paying).", ""]
    ca, cs = rep["crossover_arrays_only"], rep["crossover_steady_state"]
    md += ["Steady state (no tile period): " + (
        f"DSTAR ahead from {cs['size']}×{cs['size']}" if cs["size"] is not None else
        f"no crossover (best {cs['best_ratio']:.2f}× at {cs['best_size']}×{cs['best_size']})")
        + "; DSTAR/INT8 per size " + ", ".join(f"{n}: {r:.2f}×" for n, r in cs["ratios"].items())
        + ".", ""]
    md += ["Arrays alone (MPU without the QPU): " + (
        f"DSTAR ahead from {ca['size']}×{ca['size']}" if ca["size"] is not None else
        "no crossover") + "; DSTAR/INT8 per size "
        + ", ".join(f"{n}: {r:.2f}×" for n, r in ca["ratios"].items()) + ".",
        "", "## Best configuration per size", "",
        md_table(["size", "DSTAR best (core)", "core µm²", "of which QPU", "MACs/cycle",
                "per mm² (core)", "DSTAR best array per mm²", "INT8 best", "INT8 µm²",
                "INT8 per mm²", "DSTAR/INT8 (core)"],
               [[f"{n}×{n}", f"`{b['dstar']['config']}`", _f(b["dstar"]["core_area"]),
                 _f(b["dstar"]["qpu_area"]), _f(b["dstar"]["macs_per_cycle"], 1),
                 _f(b["dstar"]["tput_per_mm2_core"], 1),
                 f"{_f(b['dstar']['tput_per_mm2_array'], 1)} (`{b['dstar']['best_array_config']}`)",
                 f"`{b['int8']['config']}`", _f(b["int8"]["core_area"]),
                 _f(b["int8"]["tput_per_mm2_core"], 1),
                 f"{b['dstar']['tput_per_mm2_core'] / b['int8']['tput_per_mm2_core']:.2f}×"]
                for n, b in ((int(k), v) for k, v in rep["best"].items())
                if "dstar" in b and "int8" in b]), ""]
    n0 = 8 if 8 in rep["sizes"] else rep["sizes"][0]
    rs = sorted((r for r in rep["records"] if r["size"] == n0),
                key=lambda r: -r["tput_per_mm2_core"])
    md += [f"## Every configuration at {n0}×{n0}", "",
           "Sorted by throughput per mm² of the core; *source*: synthesis or the array model "
           "(scaled from which measured array). ★: on the Pareto front (all sizes).", "",
           md_table(["configuration", "array µm²", "QPU µm²", "speed-up", "steady", "lane util",
                   "MACs/cycle", "per mm² (core)", "source"],
                  [[f"`{r['config']}`" + (" ★" if r.get("pareto") else ""),
                    _f(r["array_area"]), _f(r["qpu_area"]), f"{r['speedup']:.3f}",
                    f"{r['speedup_steady']:.3f}",
                    f"{100 * r['lane_util']:.1f} %", _f(r["macs_per_cycle"], 1),
                    _f(r["tput_per_mm2_core"], 1), r["area_source"]] for r in rs]), ""]
    chk = rep["model_check"]
    if chk:
        worst = max(abs(c["error"]) for c in chk)
        md += ["## The array model against synthesis", "",
               f"Each measured array above the smallest size predicted from the smaller "
               f"measured sizes only: worst error {100 * worst:.1f} %.", "",
               md_table(["array", "size", "measured µm²", "predicted µm²", "error", "from"],
                      [[f"`{c['key']}`", f"{c['size']}×{c['size']}", _f(c["measured"]),
                        _f(c["predicted"]), f"{100 * c['error']:+.1f} %", c["source"]]
                       for c in chk]), ""]
    md += [f"Generated {rep['generated']}; `{rep['command']}`; {rep['seconds']:.0f} s.", ""]
    return "\n".join(md)


def _figure(rep: dict):
    """The Pareto plot: throughput per mm² of the core against core area, every configuration
    at every size, the front marked (a ``matplotlib.figure.Figure``, no pyplot state)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.5, 5.5), dpi=110)
    ax = fig.add_subplot(1, 1, 1)
    recs = rep["records"]
    sizes = rep["sizes"]
    cmap = {n: c for n, c in zip(sizes, ("#1b9e77", "#d95f02", "#7570b3", "#e7298a",
                                         "#66a61e", "#e6ab02"))}
    for kind, mk, lab in (("dstar", "o", "DSTAR (MPU + QPU)"), ("int8", "s", "INT8 array")):
        for n in sizes:
            rs = [r for r in recs if r["kind"] == kind and r["size"] == n]
            if rs:
                ax.scatter([r["core_area"] for r in rs], [r["tput_per_mm2_core"] for r in rs],
                           marker=mk, s=14 if kind == "dstar" else 30,
                           facecolors=cmap.get(n, "gray") if kind == "dstar" else "none",
                           edgecolors=cmap.get(n, "gray"), alpha=0.6 if kind == "dstar" else 1,
                           label=f"{lab} {n}×{n}")
    front = sorted((r for r in recs if r.get("pareto")), key=lambda r: r["core_area"])
    ax.plot([r["core_area"] for r in front], [r["tput_per_mm2_core"] for r in front], "k-",
            lw=1.2, label="Pareto front")
    for r in front:
        ax.annotate(r["config"].replace(" ", "\n", 1) if r["kind"] == "dstar" else "INT8",
                    (r["core_area"], r["tput_per_mm2_core"]), fontsize=5.5,
                    xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("core area, µm² (Nangate45; weight memory excluded)")
    ax.set_ylabel("INT8-equivalent MACs per cycle per mm²")
    c = rep["crossover"]
    ax.set_title("DSTAR vs INT8 on the trained DiT: " + (
        f"crossover at {c['size']}×{c['size']}" if c["size"] is not None else
        f"no crossover (best {c['best_ratio']:.2f}× at {c['best_size']}×{c['best_size']})"),
        fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, ncol=2, loc="best")
    fig.tight_layout()
    return fig


def _data(result: DesignSweep) -> dict:
    """The result as the renderers read it: plain data with its run's date and command."""
    return dict(plain(result), generated=result.provenance.date,
                command=result.provenance.command)


def markdown(result: DesignSweep) -> str:
    """``design_sweep.md`` from its result."""
    return _markdown(_data(result))


def figure(result: DesignSweep):
    """``design_sweep.png``'s figure."""
    return _figure(_data(result))
