"""``dstar bench``: the DSTAR MPU and the INT8 baseline array side by side on the same
differential layers of a DiT (:mod:`app.benches.layers`).

``bench [--preset fpga] [--set k=v ...] [--weights trained|random|FILE.npz] [--model M]
[--weight-seed N] [--seed N] [--steps N] [--steps-run 0,6|all] [--block B] [--quick]
[--trace T.npz] [--simulator verilator|icarus] [--liberty FILE] [--fmax] [--no-synth]
[--out DIR]``
records a float DDIM run (or, with ``--trace``, takes any model's layer inputs from a trace and
its weights from ``--weights FILE.npz``: ``<layer>.weight`` (out, in), ``<layer>.bias``; see
:mod:`analysis.layer_inputs`), builds each layer's FMDQ group streams and dense INT8 tiles,
simulates both generated arrays (every drain beat checked against golden), takes the ECP5
resources from ``reports/sweep.json`` or ``flows.synth`` and the arrays' cell areas from
``flows.synth --target asic`` on a standard-cell library (``--fmax``: also both arrays' Fmax),
prints the per-layer table and writes ``DIR/bench.json`` and ``DIR/bench.md`` (default
``reports/``). Progress lines go to stderr.

Bad input (unknown preset, steps out of range, a negative seed or block, a layer wider than
``max_reduction``, a missing weights file, an output folder that is a file) is one line
``dstar: error: ...`` and exit status 2 before any simulation; a missing output folder is
created. A mismatch against golden in simulation or a Yosys failure is one line with the log's
path and exit status 1; nothing is written then. ``bench.json`` and ``bench.md`` appear together
(:func:`gen.outputs.write_together`) or not at all.
"""

from __future__ import annotations

from pathlib import Path

from dstar_rtl.app.cli import UserError, WorkError
from dstar_rtl.app.options import (
    add_config_options,
    check_liberty,
    config_from_args,
    require_extra,
    require_iverilog,
    resolve_liberty,
)
from dstar_rtl.gen.outputs import check_output_dir, check_outputs, write_together
from dstar_rtl.gen.progress import say

__all__ = ["register"]


def register(sub):
    from dstar_rtl.bench.layers import MODELS

    p = sub.add_parser(
        "bench", help="DSTAR MPU against the INT8 baseline array on the layers of a DiT "
                      "(RTL cycles, ECP5 resources)",
        description="Run the same differential layers of a DiT on the generated MPU and INT8 "
                    "baseline arrays in simulation (outputs checked against golden) and print "
                    "cycles, cycle, LUT and throughput-per-LUT ratios and lane utilization per "
                    "layer and in total.")
    add_config_options(p, default_preset="fpga")
    p.add_argument("--weights", default="trained", metavar="trained|random|FILE.npz",
                   help="the trained digits DiT (default), random weights of --model, or a "
                        "weights file in the trained model's format")
    p.add_argument("--model", default="digits", choices=sorted(MODELS),
                   help="model size for --weights random (default digits: the trained model's)")
    p.add_argument("--weight-seed", type=int, default=0, help="seed of --weights random")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the sampling run (start noise and class label; default 0)")
    p.add_argument("--steps", type=int, default=10, help="DDIM steps of the run (default 10)")
    p.add_argument("--steps-run", default="0,6", metavar="S,S,...|all",
                   help="steps whose layers run on the arrays: a list, or all for the whole "
                        "sampling run (default 0,6: the first step, against zero, and a later "
                        "differential cache step)")
    p.add_argument("--operating-point", type=Path, default=None, metavar="SWEEP.json",
                   help="quantize at the operating point a `dstar profile --sweep` chose (its "
                        "report, e.g. reports/profile_sweep.json): its FMDQ thresholds and each "
                        "layer's base")
    p.add_argument("--trace", type=Path, default=None, metavar="T.npz",
                   help="bench any DiT: every '<layer>.x' (steps, tokens, in) of this trace, "
                        "with --weights FILE.npz holding '<layer>.weight' (out, in) and "
                        "'<layer>.bias'")
    p.add_argument("--block", type=int, default=0, help="which DiT block (default 0)")
    p.add_argument("--quick", action="store_true",
                   help="2 token tiles and 2 output blocks per layer (tests)")
    p.add_argument("--simulator", default="verilator", choices=("verilator", "icarus"))
    p.add_argument("--liberty", type=Path, default=None, metavar="FILE",
                   help="standard-cell library (.lib or .lib.gz) for the arrays' cell areas "
                        "and throughput per area (default: the Nangate45 library in "
                        "../shared/pdk when it is there; none: no areas)")
    p.add_argument("--fmax", action="store_true",
                   help="also place and route both arrays (nextpnr-ecp5) for their Fmax and the "
                        "throughput per second at each design's own clock (minutes per array)")
    p.add_argument("--no-synth", dest="synth", action="store_false",
                   help="take resources only from reports/sweep.json (never run Yosys)")
    p.add_argument("--out", type=Path, default=Path("reports"), metavar="DIR",
                   help="folder for bench.json and bench.md, created if missing (default "
                        "reports)")
    p.set_defaults(func=run_bench)


def _check(args, cfg):
    """Every check of the command's input that needs no simulation: one line, exit status 2.
    With ``--trace`` the trace and the weights are read and checked against each other here."""
    from dstar_rtl.analysis.layer_inputs import block_layers, check_widths
    from dstar_rtl.app.benches.layers import parse_steps
    from dstar_rtl.bench.layers import load_inputs, load_weights

    try:
        steps_run = parse_steps(args.steps_run)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if not 1 <= args.steps <= 1000:
        raise UserError(f"--steps must be in [1, 1000], not {args.steps}")
    for opt, v in (("--seed", args.seed), ("--weight-seed", args.weight_seed),
                   ("--block", args.block)):
        if v < 0:
            raise UserError(f"{opt} must be >= 0, not {v}")
    inputs = [] if args.weights in ("trained", "random") else [args.weights]
    nsteps = args.steps
    if args.trace is not None:
        if not inputs:
            raise UserError("--trace needs --weights FILE.npz with '<layer>.weight' and "
                            "'<layer>.bias' arrays")
        inputs.append(args.trace)
        try:
            layers, _, wl = load_inputs(cfg, weights=args.weights, trace_file=args.trace)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        nsteps = wl["steps"]
    else:
        if inputs and not Path(args.weights).is_file():
            raise UserError(f"weights file {args.weights} not found (--weights takes trained, "
                            f"random or an .npz file)")
        try:
            spec, params, _ = load_weights(args.weights, args.model, args.weight_seed)
            layers = block_layers(spec, params, args.block)
            check_widths(cfg, layers)
        except (ValueError, KeyError) as exc:
            raise UserError(str(exc).strip("'\"")) from None
    op = None
    if args.operating_point is not None:
        from dstar_rtl.analysis.profile import load_operating_point
        from dstar_rtl.bench.layers import layer_configs

        inputs.append(args.operating_point)
        try:
            op = load_operating_point(args.operating_point)
            layer_configs(cfg, layers, op)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            why = f"no field {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc)
            raise UserError(f"--operating-point {args.operating_point}: {why}") from None
    if steps_run != "all":
        bad = [s for s in steps_run if not 0 <= s < nsteps]
        if bad:
            raise UserError(f"--steps-run: step {bad[0]} is outside [0, {nsteps - 1}]")
    args.liberty_given = args.liberty is not None
    if args.liberty is not None or args.synth:
        args.liberty = resolve_liberty(args.liberty, needed=False)
    if args.liberty_given:
        check_liberty(args.liberty)
        inputs.append(args.liberty)
    check_output_dir(args.out)
    check_outputs(args.out / "bench.json", args.out / "bench.md", inputs=inputs)
    require_extra("sim", "dstar bench")
    if args.fmax and args.synth:
        require_extra("fpga", "dstar bench --fmax")
    if args.simulator == "icarus":
        require_iverilog("dstar bench --simulator icarus")
    return steps_run, op


def run_bench(args):
    from dstar_rtl.app.benches.layers import bench, markdown, text
    from dstar_rtl.flows.pnr import PnrError
    from dstar_rtl.flows.synth import SynthError

    cfg = config_from_args(args)
    steps_run, op = _check(args, cfg)

    try:
        rep = bench(cfg, weights=args.weights, model=args.model, weight_seed=args.weight_seed,
                    seed=args.seed, steps=args.steps, steps_run=steps_run, block=args.block,
                    quick=args.quick, simulator=args.simulator, synth=args.synth,
                    trace_file=args.trace, operating_point=op,
                    liberty=args.liberty if args.synth else None, fmax=args.fmax,
                    progress=say)
    except (AssertionError, SynthError, PnrError) as exc:
        raise WorkError(str(exc) or type(exc).__name__) from None
    json_out, md_out = args.out / "bench.json", args.out / "bench.md"
    files = {json_out: rep.to_json(), md_out: markdown(rep)}
    print(text(rep))
    write_together(files, record_command=False)     # the command is in the provenance
    print(f"wrote {json_out} and {md_out}")
    return 0
