"""``dstar trace``: run the float reference DiT (:mod:`models.dit`) and write an activation trace
(linear-layer inputs, attention probabilities and values per step) that ``dstar fmdq`` and
``dstar sar`` replay. The trace is written only after it was recorded and validated
(:mod:`app.reports.analysis_io`)."""

from __future__ import annotations

from dstar_rtl.app.options import add_config_options, config_from_args
from dstar_rtl.app.reports.analysis_io import add_model_options, check_widths, model_args
from dstar_rtl.gen.outputs import check_outputs, write_together

__all__ = ["register"]


def cmd_trace(args):
    from dstar_rtl.analysis.trace import save_trace, validate_trace
    from dstar_rtl.models.dit import record_trace

    cfg = config_from_args(args)
    spec = model_args(args)
    check_outputs(args.output)
    check_widths(args, spec, [cfg])
    trace = record_trace(spec, args.steps, args.seed, args.label, args.weight_seed)
    arrays = validate_trace(trace, f"trace {args.output}")
    write_together({args.output: lambda f: save_trace(f, arrays)})
    nx = sum(1 for n in trace if n.endswith(".x"))
    na = sum(1 for n in trace if n.endswith(".attn"))
    print(f"wrote {args.output}: {args.steps} steps, {nx} linear layers, {na} attention layers "
          f"(model {args.model}, seed {args.seed})")


def register(subparsers):
    p = subparsers.add_parser("trace", help="run the float reference DiT and write a trace",
                              description="Run the float reference DiT (DDIM) and write an "
                              "activation trace .npz (linear inputs, attention P and V per step). "
                              "--preset/--set check that every layer fits max_reduction.")
    add_config_options(p)
    add_model_options(p)
    p.add_argument("-o", "--output", required=True, metavar="TRACE.npz", help="trace file to write")
    p.set_defaults(func=cmd_trace)
