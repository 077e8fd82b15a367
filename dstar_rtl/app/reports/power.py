"""``dstar measure power`` (also ``dstar power``): energy per MAC of the DSTAR MPU and of the
INT8 array from gate-level simulation of their standard-cell netlists (:mod:`bench.power`), and
the energy per image of the whole ``fpga`` cores and of the projected paper chip
(:mod:`bench.image_energy`, :mod:`app.reports.energy_image`), on the one measurement runner.

Both arrays are synthesized to the library's cells (or a stored identical run reused), each
netlist simulated on Verilator with ``dstar bench``'s layers (every drain beat checked against
golden, every net's transitions counted); ``energy.json``, ``energy.md`` and ``energy.png`` are
written into ``--out`` together. ``--paper-chip`` only projects the paper chip again from the
``energy.json`` already there and the current ``--projection`` and ``--compare`` (seconds).

Bad input is one line and exit status 2 before any work; a mismatch against golden in the
gate-level simulation or a Yosys failure is one line and exit status 1, nothing written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.app.reports.energy import markdown, plot_png
from dstar_rtl.bench.layers import LAYER_KINDS, MODELS
from dstar_rtl.gen.errors import UserError, WorkError
from dstar_rtl.gen.paths import REPORTS
from dstar_rtl.gen.progress import say
from dstar_rtl.golden.config import Config
from dstar_rtl.results.base import build, plain
from dstar_rtl.results.energy import Energy

__all__ = ["PowerOptions", "MEASUREMENT"]


@dataclass(frozen=True)
class PowerOptions:
    """What ``dstar measure power`` simulates (checked at construction, before any work)."""

    weights: Literal["trained", "random"] = option("trained", "the trained digits DiT or random "
                                                   "weights of --model")
    model: str = option("digits", "model size for --weights random", choices=sorted(MODELS))
    weight_seed: int = option(0, "seed of --weights random")
    steps_run: str = option("1", "steps of the DDIM run (10 steps) whose layers are simulated "
                            "(1: a differential step)", metavar="S,S,...")
    layers: str | None = option(None, f"only these layer kinds ({', '.join(LAYER_KINDS)}; "
                                "default all)", metavar="K,K,...")
    full: bool = option(False, "every token tile and output block of each layer (default: "
                        "dstar bench's --quick cut, 2 token tiles and 2 output blocks)")
    liberty: Path | None = option(None, "standard-cell library (.lib or .lib.gz; default: the "
                                  "Nangate45 library in ../shared/pdk when it is there)")
    clock_ns: float = option(1.0, "clock period the leakage is charged over (1.0: 1 GHz, the "
                             "paper's)")
    no_sweep: bool = option(False, "skip the precision sweep (the MPU on tiles at 2, 4, 6 and "
                            "8 bits) and the PEs alone")
    no_image: bool = option(False, "skip the energy per image (the QPU and VPU at gate level, "
                            "one image of the digits DiT on each whole fpga core, the projected "
                            "paper chip)")
    projection: Path = option(REPORTS / "projection.json", "the projection whose models the "
                              "paper chip's energy is projected on")
    compare: Path = option(REPORTS / "compare.json", "the whole-core comparison whose "
                           "part-area model carries the idle energy to the paper core")
    paper_chip: bool = option(False, "only project the paper chip again from the energy.json "
                              "already in --out and the current --projection and --compare "
                              "(no synthesis, no simulation, seconds)")
    config: Config | None = None

    def __post_init__(self):
        from dstar_rtl.app.options import check_liberty, require_extra, resolve_liberty

        if self.paper_chip:
            for flag, f in (("--projection", self.projection), ("--compare", self.compare)):
                if not f.is_file():
                    raise UserError(f"{flag}: {f} not found (--paper-chip reuses a dstar power "
                                    "report and needs the projection and the comparison)")
            return
        self.work()
        if not self.no_image:
            self._image_inputs()
        check_liberty(resolve_liberty(self.liberty))
        require_extra("sim", "dstar power")

    def work(self) -> tuple:
        """``(steps, layer kinds or None)``, the model checked against the configuration."""
        from dstar_rtl.analysis.layer_inputs import block_layers, check_widths
        from dstar_rtl.app.benches.layers import parse_steps
        from dstar_rtl.bench.layers import load_weights
        from dstar_rtl.bench.power import TRACE_STEPS

        try:
            steps = parse_steps(self.steps_run)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        if steps == "all" or any(not 0 <= s < TRACE_STEPS for s in steps):
            raise UserError(f"--steps-run: steps must lie in [0, {TRACE_STEPS - 1}], not "
                            f"{self.steps_run}")
        if self.weight_seed < 0:
            raise UserError(f"--weight-seed must be >= 0, not {self.weight_seed}")
        if not self.clock_ns > 0:
            raise UserError(f"--clock-ns must be positive, not {self.clock_ns}")
        kinds = None
        if self.layers is not None:
            kinds = [k for k in self.layers.split(",") if k]
            bad = [k for k in kinds if k not in LAYER_KINDS]
            if bad or not kinds:
                raise UserError(f"--layers: {bad[0] if bad else 'none'} is not a layer kind "
                                f"({', '.join(LAYER_KINDS)})")
        try:
            spec, params, _ = load_weights(self.weights, self.model, self.weight_seed)
            check_widths(self.config, block_layers(spec, params, 0))
        except (ValueError, KeyError) as exc:
            raise UserError(str(exc).strip("'\"")) from None
        return steps, kinds

    def _image_inputs(self):
        from dstar_rtl.golden.config import preset
        from dstar_rtl.results.compare import Compare
        from dstar_rtl.results.projection import Projection

        if self.config.hash() != preset("fpga").hash():
            raise UserError("the energy per image runs the whole-core comparison's fpga cores: "
                            "use the default fpga preset without --set, or --no-image")
        try:
            Projection.load(self.projection)
        except UserError as exc:
            raise UserError(f"--projection {self.projection}: {exc}") from None
        if Compare.load(self.compare).paper is None:
            raise UserError(f"--compare {self.compare}: no 'paper' entry (dstar measure "
                            f"compare --presets paper)")


def _paper_chip_again(opts: PowerOptions, previous) -> Energy:
    """The stored result's paper chip projected again on the current projection and
    comparison (its measured ``fpga`` figures and provenance kept)."""
    from dstar_rtl.app.reports.energy_image import paper_chip_entries

    old = previous()
    if old is None or old.image is None:
        raise UserError("--paper-chip reuses a dstar power result with the energy per image in "
                        "--out (run dstar power without --no-image first)")
    rep = plain(old, present=True)
    rep.update(paper_chip_entries(rep, opts.projection, opts.compare))
    rep["paper_chip"]["command"] = (f"dstar power --paper-chip --projection {opts.projection} "
                                    f"--compare {opts.compare}")
    rep["provenance"] = plain(old.provenance)
    return build(Energy, rep, "the energy result")


def measure(opts: PowerOptions, previous=None) -> Energy:
    """The arrays' energies, the energy per image and the paper chip (progress on stderr)."""
    from dstar_rtl.app.options import resolve_liberty
    from dstar_rtl.app.reports.energy_image import paper_chip_entries
    from dstar_rtl.bench.image_energy import per_image
    from dstar_rtl.bench.power import power
    from dstar_rtl.bench.sample import RTLMismatch
    from dstar_rtl.flows.synth import SynthError
    from dstar_rtl.gen.yosys import YosysError

    if opts.paper_chip:
        return _paper_chip_again(opts, previous)
    cfg, liberty = opts.config, resolve_liberty(opts.liberty)
    steps, kinds = opts.work()
    t0 = time.perf_counter()
    try:
        rep = power(cfg, liberty, weights=opts.weights, model=opts.model, steps=steps,
                    quick=not opts.full, layers=kinds, clock_ns=opts.clock_ns,
                    sweep=not opts.no_sweep, progress=say)
        if not opts.no_image:
            rep.update(per_image(cfg, liberty, rep["arrays"], clock_ns=opts.clock_ns,
                                 progress=say))
            rep.update(paper_chip_entries(dict(rep, preset=cfg.name), opts.projection,
                                          opts.compare))
            say(f"paper chip: {len(rep['paper_chip']['models'])} projected models")
            rep["runtime_s"] = round(time.perf_counter() - t0, 1)
    except (AssertionError, RTLMismatch, SynthError, YosysError) as exc:
        raise WorkError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    rep.pop("generated", None)
    prov = run_provenance("power", {cfg.name: cfg.hash()})
    return build(Energy, dict(rep, provenance=plain(prov)), "the energy result")


MEASUREMENT = Measurement(
    name="power", stem="energy", preset="fpga",
    summary="Energy per MAC of the DSTAR MPU and the INT8 array from gate-level simulation of "
            "their standard-cell netlists, the energy per image of the whole fpga cores and of "
            "the projected paper chip (about 80 minutes).",
    options=PowerOptions, result=Energy, measure=lambda o, p: measure(o, p),
    render=markdown, figures=lambda r: {"energy.png": plot_png(r)},
    echo=lambda r: markdown(r).split("\n\n")[0])
