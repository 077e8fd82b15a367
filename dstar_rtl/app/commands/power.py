"""``dstar power``: energy per MAC of the DSTAR MPU and of the INT8 array from gate-level
simulation of their standard-cell netlists (:mod:`bench.power`).

``power [--preset fpga] [--set k=v ...] [--weights trained|random] [--model M]
[--weight-seed N] [--steps-run 1] [--layers fc1,fc2,...] [--full] [--liberty FILE]
[--clock-ns 1.0] [--no-sweep] [--no-image] [--projection FILE] [--compare FILE] [--out DIR]``
synthesizes both arrays to the library's cells (or reuses a stored identical run), simulates
each netlist on Verilator with ``dstar bench``'s layers (every drain beat checked against
golden, every net's transitions counted), and writes ``DIR/energy.json``, ``DIR/energy.md`` and
``DIR/energy.png`` (default ``reports/``): pJ per MAC of each array by part (PEs, the rest of the
array, the front end, the input nets) and internal, switching and leakage energy, and pJ per
MAC of the MPU on tiles at 2, 4, 6 and 8 bits against the INT8 array on 8-bit tiles, and of one
slice PE and one INT8 PE alone at ``tiny`` and the preset (dense random operands); unless
``--no-image``, the energy per image of the whole DSTAR and INT8 ``fpga`` cores (the QPU and VPU
at gate level too, one digits-DiT image on each core's RTL) and of the paper chip on
``--projection``'s models (the idle energy carried by ``--compare``'s part-area model).
Progress lines go to stderr.

Bad input (unknown preset or layer kind, steps out of range, a negative seed, a clock that is
not positive, a layer wider than ``max_reduction``, no library, an output folder that is a file;
with the energy per image: a preset other than the default ``fpga``, an unreadable projection or
comparison record)
is one line ``dstar: error: ...`` and exit status 2 before any work. A mismatch against golden in
the gate-level simulation or a Yosys failure is one line and exit status 1; nothing is written
then. The three files appear together (:func:`gen.outputs.write_together`) or not at all.
"""

from __future__ import annotations

import time
from pathlib import Path

from dstar_rtl.app.cli import UserError, WorkError
from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.options import (
    add_config_options,
    check_liberty,
    config_from_args,
    require_extra,
    resolve_liberty,
)
from dstar_rtl.gen.outputs import check_output_dir, check_outputs, write_together
from dstar_rtl.gen.progress import say
from dstar_rtl.results.base import build, plain
from dstar_rtl.results.energy import Energy

__all__ = ["register"]

OUTPUTS = ("energy.json", "energy.md", "energy.png")


def register(sub):
    from dstar_rtl.bench.layers import LAYER_KINDS, MODELS

    p = sub.add_parser(
        "power", help="energy per MAC of the DSTAR MPU and the INT8 array from gate-level "
                      "simulation of their standard-cell netlists",
        description="Synthesize both arrays to a standard-cell library, simulate the netlists "
                    "on the layers of a DiT (outputs checked against golden) counting every "
                    "net's transitions, and report the energy per MAC by part.")
    add_config_options(p, default_preset="fpga")
    p.add_argument("--weights", default="trained", choices=("trained", "random"),
                   help="the trained digits DiT (default) or random weights of --model")
    p.add_argument("--model", default="digits", choices=sorted(MODELS),
                   help="model size for --weights random (default digits)")
    p.add_argument("--weight-seed", type=int, default=0, help="seed of --weights random")
    p.add_argument("--steps-run", default="1", metavar="S,S,...",
                   help="steps of the DDIM run (10 steps) whose layers are simulated (default 1: "
                        "a differential step)")
    p.add_argument("--layers", default=None, metavar="K,K,...",
                   help=f"only these layer kinds ({', '.join(LAYER_KINDS)}; default all)")
    p.add_argument("--full", action="store_true",
                   help="every token tile and output block of each layer (default: dstar "
                        "bench's --quick cut, 2 token tiles and 2 output blocks)")
    p.add_argument("--liberty", type=Path, default=None, metavar="FILE",
                   help="standard-cell library (.lib or .lib.gz; default: the Nangate45 "
                        "library in ../shared/pdk when it is there)")
    p.add_argument("--clock-ns", type=float, default=1.0,
                   help="clock period the leakage is charged over (default 1.0: 1 GHz, the "
                        "paper's)")
    p.add_argument("--no-sweep", dest="sweep", action="store_false",
                   help="skip the precision sweep (the MPU on tiles at 2, 4, 6 and 8 bits, the "
                        "INT8 array on 8-bit tiles) and the PEs alone (at tiny and the preset)")
    p.add_argument("--no-image", dest="image", action="store_false",
                   help="skip the energy per image (the QPU and VPU at gate level, one image of "
                        "the digits DiT on each whole fpga core, the projected paper chip)")
    p.add_argument("--projection", type=Path, default=Path("reports/projection.json"),
                   metavar="FILE", help="the projection whose models the paper chip's energy "
                                        "is projected on (default reports/projection.json)")
    p.add_argument("--compare", type=Path, default=Path("reports/compare.json"), metavar="FILE",
                   help="the whole-core comparison whose part-area model carries the idle "
                        "energy to the paper core (default reports/compare.json)")
    p.add_argument("--paper-chip", action="store_true",
                   help="only project the paper chip again: read the fpga figures of the "
                        "energy.json already in --out, take the current --projection and "
                        "--compare, rewrite energy.json, .md and .png (no synthesis, no "
                        "simulation, seconds)")
    p.add_argument("--out", type=Path, default=Path("reports"), metavar="DIR",
                   help="folder for energy.json, .md and .png, created if missing (default "
                        "reports)")
    p.set_defaults(func=run_power)


def _check(args, cfg):
    """Every check that needs no synthesis or simulation: one line, exit status 2."""
    from dstar_rtl.analysis.layer_inputs import block_layers, check_widths
    from dstar_rtl.app.benches.layers import parse_steps
    from dstar_rtl.bench.layers import LAYER_KINDS, load_weights
    from dstar_rtl.bench.power import TRACE_STEPS

    check_output_dir(args.out)
    try:
        steps = parse_steps(args.steps_run)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if steps == "all" or any(not 0 <= s < TRACE_STEPS for s in steps):
        raise UserError(f"--steps-run: steps must lie in [0, {TRACE_STEPS - 1}], not "
                        f"{args.steps_run}")
    if args.weight_seed < 0:
        raise UserError(f"--weight-seed must be >= 0, not {args.weight_seed}")
    if not args.clock_ns > 0:
        raise UserError(f"--clock-ns must be positive, not {args.clock_ns}")
    kinds = None
    if args.layers is not None:
        kinds = [k for k in args.layers.split(",") if k]
        bad = [k for k in kinds if k not in LAYER_KINDS]
        if bad or not kinds:
            raise UserError(f"--layers: {bad[0] if bad else 'none'} is not a layer kind "
                            f"({', '.join(LAYER_KINDS)})")
    try:
        spec, params, _ = load_weights(args.weights, args.model, args.weight_seed)
        layers = block_layers(spec, params, 0)
        check_widths(cfg, layers)
    except (ValueError, KeyError) as exc:
        raise UserError(str(exc).strip("'\"")) from None
    image_inputs = []
    if args.image:
        if cfg.name != "fpga" or args.overrides:
            raise UserError("the energy per image runs the whole-core comparison's fpga cores: "
                            "use the default fpga preset without --set, or --no-image")
        from dstar_rtl.results.compare import Compare
        from dstar_rtl.results.projection import Projection

        try:
            Projection.load(args.projection)
        except UserError as exc:
            raise UserError(f"--projection {args.projection}: {exc}") from None
        if Compare.load(args.compare).paper is None:
            raise UserError(f"--compare {args.compare}: no 'paper' entry (dstar measure "
                            f"compare --presets paper)")
        image_inputs = [args.projection, args.compare]
    args.liberty_given = args.liberty is not None
    args.liberty = resolve_liberty(args.liberty)
    check_liberty(args.liberty)
    check_outputs(*(args.out / n for n in OUTPUTS), inputs=[args.liberty, *image_inputs])
    require_extra("sim", "dstar power")
    return steps, kinds


def run_power(args):
    from dstar_rtl.app.reports.energy import markdown, plot_png
    from dstar_rtl.app.reports.energy_image import paper_chip_entries
    from dstar_rtl.bench.image_energy import per_image
    from dstar_rtl.bench.power import power
    from dstar_rtl.bench.sample import RTLMismatch
    from dstar_rtl.flows.synth import SynthError
    from dstar_rtl.gen.yosys import YosysError

    if args.paper_chip:
        return _paper_chip_again(args)
    cfg = config_from_args(args)
    steps, kinds = _check(args, cfg)
    t0 = time.perf_counter()
    try:
        rep = power(cfg, args.liberty, weights=args.weights, model=args.model, steps=steps,
                    quick=not args.full, layers=kinds, clock_ns=args.clock_ns,
                    sweep=args.sweep, progress=say)
        if args.image:
            rep.update(per_image(cfg, args.liberty, rep["arrays"], clock_ns=args.clock_ns,
                                 progress=say))
            rep.update(paper_chip_entries(dict(rep, preset=cfg.name), args.projection,
                                          args.compare))
            say(f"paper chip: {len(rep['paper_chip']['models'])} projected models")
            rep["runtime_s"] = round(time.perf_counter() - t0, 1)
    except (AssertionError, RTLMismatch, SynthError, YosysError) as exc:
        raise WorkError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    rep.pop("generated", None)
    prov = run_provenance("power", {cfg.name: cfg.hash()})
    result = build(Energy, dict(rep, provenance=plain(prov)), "the energy result")
    files = {args.out / "energy.json": result.to_json(), args.out / "energy.md": markdown(result),
             args.out / "energy.png": plot_png(result)}
    print(markdown(result).split("\n\n")[0])
    write_together(files, record_command=False)


def _paper_chip_again(args):
    """``dstar power --paper-chip``: the paper chip's entries of ``energy.json`` from its
    measured fpga figures and the current projection and comparison."""

    from dstar_rtl.app.reports.energy import markdown, plot_png
    from dstar_rtl.app.reports.energy_image import paper_chip_entries

    path = args.out / "energy.json"
    for flag, f in (("--out", path), ("--projection", args.projection),
                    ("--compare", args.compare)):
        if not f.is_file():
            raise UserError(f"{flag}: {f} not found (--paper-chip reuses a dstar power report "
                            "and needs the projection and the comparison)")
    old = Energy.load(path)
    if old.image is None:
        raise UserError(f"{path} is a dstar power report without the energy per image (run "
                        f"dstar power without --no-image)")
    check_outputs(*(args.out / n for n in OUTPUTS), inputs=[args.projection, args.compare])
    rep = plain(old, present=True)
    rep.update(paper_chip_entries(rep, args.projection, args.compare))
    rep["paper_chip"]["command"] = (f"dstar power --paper-chip --projection {args.projection} "
                                    f"--compare {args.compare} --out {args.out}")
    rep["provenance"] = plain(old.provenance)
    result = build(Energy, rep, "the energy result")
    write_together({path: result.to_json(), args.out / "energy.md": markdown(result),
                    args.out / "energy.png": plot_png(result)}, record_command=False)
    say(f"wrote {path}, .md and .png: the paper chip of {len(result.paper_chip.models)} "
        "projected models")
    return 0

