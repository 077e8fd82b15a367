"""The figure of ``dstar measure qpu-area`` (``reports/qpu_area.png``): each submodule's share of
the hierarchically synthesized QPU (:mod:`flows.qpu_area`). Drawn on a
:class:`matplotlib.figure.Figure` (no pyplot, so no global figure state), freed once saved."""

from __future__ import annotations

from pathlib import Path

from dstar_rtl.flows.qpu_area import MODULE_NAMES, MODULES

__all__ = ["plot", "plottable"]

#: (breakdown run, resource, panel title) of each panel.
METRICS = (("ecp5-nodsp", "lut_total", "ECP5 LUTs (no DSP)"), ("ecp5-nodsp", "ff", "ECP5 FFs"),
           ("generic", "transistors", "generic transistors"))


def _sets(data: dict) -> list:
    return [(p["preset"], p["breakdown"]) for p in list(data.get("presets", {}).values())
            + [data.get("paper", {})] if p.get("breakdown")]


def plottable(data: dict) -> bool:
    """Whether ``data`` holds a breakdown to plot."""
    return bool(_sets(data))


def plot(data: dict, out) -> bool:
    """Bars: each submodule's share of the (hierarchical) QPU in LUTs, FFs and transistors, one
    bar per preset, as PNG to ``out`` (a path or a binary file). Returns False, writing nothing,
    when there is no breakdown to plot."""
    from matplotlib.figure import Figure

    sets = _sets(data)
    if not sets:
        return False
    fig = Figure(figsize=(4.2 * len(METRICS), 3.8))
    try:
        axes = fig.subplots(1, len(METRICS), sharey=True)
        width = 0.8 / len(sets)
        for ax, (label, key, title) in zip(axes, METRICS):
            for i, (pname, bd) in enumerate(sets):
                mods = bd.get(label, {}).get("modules")
                if not mods:
                    continue
                total = sum(mods[m]["resources"].get(key) or 0 for m in mods) or 1
                vals = [100 * (mods.get(m, {}).get("resources", {}).get(key) or 0) / total
                        for m in MODULES]
                ys = [j + (i - (len(sets) - 1) / 2) * width for j in range(len(MODULES))]
                bars = ax.barh(ys, vals, height=width, label=f"{pname} (total {total:,})")
                ax.bar_label(bars, fmt="%.0f%%", fontsize=7, padding=2)
            ax.set_title(title, fontsize=10)
            ax.set_xlabel("% of the QPU")
            ax.set_xlim(0, 100)
            ax.legend(fontsize=7, loc="lower right")
        axes[0].set_yticks(range(len(MODULES)), [MODULE_NAMES[m] for m in MODULES], fontsize=8)
        axes[0].invert_yaxis()
        fig.suptitle("QPU area by submodule (Yosys stat per module)", fontsize=11)
        fig.tight_layout()
        if isinstance(out, (str, Path)):
            Path(out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=120, format="png")
    finally:
        fig.clear()
    return True
