"""Area breakdown of the core: ECP5 synthesis with every module mapped on its own (LUTs by
``abc -lut 4``: abc9 asserts on the core in Yosys 0.70, see flows/synth.py), then the
cells of each part of the core (PE array, MPU front end and weight memory, QPU with its sorter,
VPU, activation and other buffers, the four engines, the dispatcher) summed over its module
subtree.

``dstar measure core-area [--presets tiny fpga]`` writes ``reports/core_area.json`` (the typed
result :class:`CoreArea`), ``reports/core_area.md`` and ``reports/core_area.png`` (stacked LUT
and flip-flop bars per part) through the one measurement runner (:data:`MEASUREMENT`).
"""

from __future__ import annotations

from dataclasses import dataclass

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.measurement import Measurement, check_among, option
from dstar_rtl.bench.core_area import synthesize_core
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import png_writer
from dstar_rtl.gen.tables import md_table
from dstar_rtl.golden.config import PRESETS, VARIANTS
from dstar_rtl.results.core_area import CoreArea
from dstar_rtl.results.quantities import Resources, StepTime


@dataclass(frozen=True)
class CoreAreaOptions:
    """What ``dstar measure core-area`` synthesizes (checked at construction)."""

    presets: tuple[str, ...] = option(("tiny", "fpga"), "presets to synthesize",
                                      choices=sorted(PRESETS))
    variant: str | None = option(None, "a variant of the presets (golden.config.VARIANTS) "
                                       "instead of their default configuration",
                                 choices=sorted(VARIANTS))

    def __post_init__(self):
        check_among("--presets", self.presets, PRESETS)
        if self.variant is not None and self.variant not in VARIANTS:
            raise UserError(f"--variant must be one of {sorted(VARIANTS)}, not "
                            f"{self.variant!r}")


def _n(v) -> int:
    return v or 0


def render(res: CoreArea) -> str:
    """``reports/core_area.md`` from its result."""
    md = ["# Area of the core by part (ECP5)", "",
          "`synth_ecp5` with every module mapped on its own (`app/reports/core_area.py`), cells "
          "summed over each part's module subtree. LUT4 counts logic LUTs (carries and LUT RAM "
          "apart); the sum of the parts equals the flattened netlist's total up to the "
          "cross-module optimisation flattening adds afterwards.", ""]
    for name, r in res.presets.items():
        rows = sorted(r.parts.items(), key=lambda kv: -_n(kv[1].lut4))
        tot = r.total
        var = f", variant `{r.variant}`" if r.variant else ""
        md += [f"## `{name}` preset{var} (config `{r.config_hash}`)", "",
               md_table(["part", "LUT4", "share", "FF", "carry", "DSP", "BRAM", "LUT RAM"],
                        [[p, _n(v.lut4), f"{100 * _n(v.lut4) / max(1, tot.lut4 or 1):.1f} %",
                          _n(v.ff), _n(v.carry), _n(v.dsp), _n(v.bram), _n(v.lutram)]
                         for p, v in rows] +
                        [["**total (flattened)**", _n(tot.lut4), "", _n(tot.ff), _n(tot.carry),
                          _n(tot.dsp), _n(tot.bram), _n(tot.lutram)]]), "",
               f"Yosys {r.tools['yosys']}, {r.seconds:.0f} s.", ""]
    md += ["![area by part](core_area.png)", "", f"Generated {res.provenance.date}.", ""]
    return "\n".join(md)


def plot(res: CoreArea):
    """Stacked LUT and flip-flop bars per part (a matplotlib figure)."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    names = list(res.presets)
    parts = sorted({p for n in names for p in res.presets[n].parts},
                   key=lambda p: -max(_n(getattr(res.presets[n].parts.get(p, Resources()),
                                                 "lut4")) for n in names))
    colors = {p: colormaps["tab20"](i % 20) for i, p in enumerate(parts)}
    fig = Figure(figsize=(11, 4.5))
    axes = fig.subplots(1, 2)
    for ax, key, label in ((axes[0], "lut4", "LUT4"), (axes[1], "ff", "flip-flops")):
        bottom = [0] * len(names)
        for p in parts:
            vals = [_n(getattr(res.presets[n].parts.get(p, Resources()), key)) for n in names]
            ax.bar(names, vals, bottom=bottom, label=p, color=colors[p])
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_title(f"core {label} by part (ECP5)")
        ax.set_ylabel(label)
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def measure(opts: CoreAreaOptions, previous=None) -> CoreArea:
    """Every preset of ``opts`` synthesized module by module (progress on stderr)."""
    steps: list = []
    presets = {name: synthesize_core(name, steps, opts.variant) for name in opts.presets}
    return CoreArea(run_provenance("core-area", {n: r.config_hash for n, r in presets.items()}),
                    presets=presets, steps=tuple(StepTime(**s) for s in steps))


MEASUREMENT = Measurement(
    name="core-area", stem="core_area",
    summary="The core's ECP5 area by part: every module mapped on its own, cells summed over "
            "each part's module subtree.", options=CoreAreaOptions, result=CoreArea,
    measure=measure, render=render,
    figures=lambda res: {"core_area.png": png_writer(plot(res), dpi=110)})
