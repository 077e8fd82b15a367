"""The design sweep's Markdown table and plot (its figures: :mod:`bench.sweep.figures`)."""

from __future__ import annotations

from dstar_rtl.gen.tables import md_table
from dstar_rtl.results.base import plain
from dstar_rtl.results.design_sweep import DesignSweep

__all__ = ["markdown", "figure"]


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
          "the array model (`bench/sweep/design.py`). DSTAR *core* = MPU + QPU (the QPU's parts "
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
          "`pe_stages` buys, is not modelled). `bench/sweep/throughput.py`.", ""]
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
