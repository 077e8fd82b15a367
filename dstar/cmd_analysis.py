"""Analysis subcommands: ``dstar trace``, ``dstar fmdq``, ``dstar sar``, ``dstar dit`` and
``dstar dit-int``.

- ``trace`` runs the float reference DiT (:mod:`golden.dit`) and writes an activation trace.
- ``fmdq`` replays a trace's linear-layer inputs through the differential FMDQ quantizer and the
  QPU schedule and prints per-layer statistics (bits, precision shares, groups, lane fill, error).
- ``sar`` profiles SAR masks on a trace's attention probabilities and replays cache/reuse steps.
- ``dit`` samples the float and the quantized DiT from one seed and prints their statistics.
- ``dit-int`` samples the float DiT and the DiT with integer blocks (:mod:`golden.dit_int`) from
  one seed, per preset, and prints the error per denoising step; ``--md`` renders a report.

Every output path is checked before any work (:func:`gen.outputs.check_outputs`: not a folder,
not the input trace, not another output of the command; a missing folder is created), and the
outputs of a command (trace, JSON, PNG, Markdown) are written together
(:func:`gen.outputs.write_together`) only after everything succeeded, so a failed command leaves
no output.
"""

from __future__ import annotations

import os

from gen.outputs import check_outputs, json_text, write_together
from golden.config import PRESETS, preset
from golden.dit import DIT_MODELS

from .cli import UserError
from .options import add_config_options, config_from_args, parse_overrides

__all__ = ["register"]

PRECISIONS = (0, 2, 4, 6, 8)


# ------------------------------------------------------------------------------------ helpers
def _nonneg(name, v):
    if v < 0:
        raise UserError(f"{name} must be >= 0, not {v}")
    return v


def _add_model_options(p):
    p.add_argument("--model", default="small", choices=sorted(DIT_MODELS),
                   help="reference DiT size (default: small)")
    p.add_argument("--steps", type=int, default=10, help="DDIM denoising steps (default: 10)")
    p.add_argument("--seed", type=int, default=0,
                   help="sampling seed: noise and label (default: 0)")
    p.add_argument("--weight-seed", type=int, default=0,
                   help="seed of the random DiT weights (default: 0)")
    p.add_argument("--label", type=int, default=None,
                   help="class label (default: drawn from --seed; the null class is CLASSES)")


def _model_args(args):
    _nonneg("--seed", args.seed)
    _nonneg("--weight-seed", args.weight_seed)
    if args.steps < 1:
        raise UserError(f"--steps must be >= 1, not {args.steps}")
    spec = DIT_MODELS[args.model]
    if args.label is not None and not 0 <= args.label <= spec.classes:
        raise UserError(f"--label must be in [0, {spec.classes}] for model {args.model!r} "
                        f"({spec.classes} is the null class), not {args.label}")
    return spec


def _check_widths(args, spec, cfgs):
    """Refuse, before any sampling, a model whose widest linear input exceeds a configuration's
    ``max_reduction`` (the layer would not fit the array)."""
    from golden.dit import init_params, linear_layer_names

    params = init_params(spec, args.weight_seed)
    for cfg in cfgs:
        for layer in linear_layer_names(spec):
            cin = params[f"{layer}.W"].shape[0]
            if cin > cfg.max_reduction:
                raise UserError(f"layer {layer!r} of model {args.model!r} has {cin} input "
                                f"channels; max_reduction of {cfg.name!r} is "
                                f"{cfg.max_reduction} (use --set max_reduction={cin} or a "
                                f"larger preset)")


def _fmt(v, width=8, prec=3):
    if v is None:
        return f"{'-':>{width}}"
    if isinstance(v, float):
        return f"{v:>{width}.{prec}f}"
    return f"{v:>{width}}"


def _table(header, rows):
    name_w = max([len(header[0])] + [len(r[0]) for r in rows])
    print(f"{header[0]:<{name_w}} " + " ".join(f"{h:>8}" for h in header[1:]))
    for r in rows:
        print(f"{r[0]:<{name_w}} " + " ".join(_fmt(v) for v in r[1:]))


def _fmdq_rows(layers: dict, err_key: str):
    rows = []
    for name, d in layers.items():
        rows.append([name, d["avg_bits"], *(d[f"share_b{b}"] if b else d["share_zero"]
                                            for b in PRECISIONS),
                     d["share_e_pos"], d["groups_per_tile"], d["lane_fill"], d["saturated"],
                     d[f"{err_key}_max"]])
    header = ["layer", "bits", "b0", "b2", "b4", "b6", "b8", "e>0", "grp/tile", "lanefill",
              "sat", "err_max"]
    return header, rows


# ------------------------------------------------------------------------------------- plots
def _plot_bits(result: dict, title: str):
    from matplotlib.figure import Figure

    layers = result["layers"]
    names = list(layers) + ["all"]
    shares = [[d["share_zero"]] + [d[f"share_b{b}"] for b in PRECISIONS[1:]]
              for d in layers.values()]
    hist = result["summary"]["hist"]
    tot = max(sum(hist.values()), 1)
    shares.append([hist[f"b{b}"] / tot for b in PRECISIONS])
    fig = Figure(figsize=(8, 1.2 + 0.35 * len(names)))
    ax = fig.add_subplot()
    left = [0.0] * len(names)
    colors = ("#dddddd", "#1b9e77", "#7570b3", "#e7298a", "#d95f02")
    for i, b in enumerate(PRECISIONS):
        vals = [s[i] for s in shares]
        ax.barh(names, vals, left=left, color=colors[i], label=f"{b} bit")
        left = [l + v for l, v in zip(left, vals)]
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of sub-channels")
    ax.set_title(title)
    ax.legend(ncol=5, fontsize="small", loc="lower center", bbox_to_anchor=(0.5, 1.05))
    fig.tight_layout()
    return fig


def _plot_masks(result: dict):
    from matplotlib.figure import Figure

    layers = result["layers"]
    heads = max(d["heads"] for d in layers.values())
    fig = Figure(figsize=(1.8 * heads + 1, 1.9 * len(layers) + 0.5))
    for r, (name, d) in enumerate(layers.items()):
        for h, m in enumerate(d["mask"]):
            ax = fig.add_subplot(len(layers), heads, r * heads + h + 1)
            ax.imshow(m, cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{name} h{h}" if h == 0 else f"h{h}", fontsize="small")
    fig.suptitle(f"SAR block masks (kept = black), block {result['block']}, thr {result['thr']:g}, "
                 f"kept {result['summary']['kept_fraction']:.2f}", fontsize="small")
    fig.tight_layout()
    return fig


def _png(fig):
    """A :func:`gen.outputs.write_together` writer of ``fig`` as PNG (``None``: no figure)."""
    return None if fig is None else (lambda f: fig.savefig(f, format="png", dpi=100))


# ---------------------------------------------------------------------------------- commands
def cmd_trace(args):
    from golden.dit import record_trace
    from golden.trace import save_trace, validate_trace

    cfg = config_from_args(args)
    spec = _model_args(args)
    check_outputs(args.output)
    _check_widths(args, spec, [cfg])
    trace = record_trace(spec, args.steps, args.seed, args.label, args.weight_seed)
    arrays = validate_trace(trace, f"trace {args.output}")
    write_together({args.output: lambda f: save_trace(f, arrays)})
    nx = sum(1 for n in trace if n.endswith(".x"))
    na = sum(1 for n in trace if n.endswith(".attn"))
    print(f"wrote {args.output}: {args.steps} steps, {nx} linear layers, {na} attention layers "
          f"(model {args.model}, seed {args.seed})")


def cmd_fmdq(args):
    from golden.trace import analyze_fmdq, load_trace

    cfg = config_from_args(args)
    if args.base_log2 is not None and args.profile_base:
        raise UserError("give either --base-log2 or --profile-base, not both")
    check_outputs(args.json, args.plot, inputs=[args.trace])
    trace = load_trace(args.trace)
    res = analyze_fmdq(trace, cfg, base_log2=args.base_log2, profile_base=args.profile_base)
    res.update(trace=os.fspath(args.trace), config=cfg.to_dict())
    header, rows = _fmdq_rows(res["layers"], "recon_err")
    header.insert(1, "B")
    for r, d in zip(rows, res["layers"].values()):
        r.insert(1, d["base_log2"])
    fig = _plot_bits(res, f"FMDQ precision per layer ({cfg.name}, avg "
                          f"{res['summary']['avg_bits']:.2f} bits)") if args.plot else None
    write_together({args.json: json_text(res) if args.json else None, args.plot: _png(fig)})
    _table(header, rows)
    s = res["summary"]
    print(f"all: {s['avg_bits']:.3f} average bits, lane fill {s['lane_fill']:.3f}, "
          f"e>0 share {s['share_e_pos']:.3f}, {s['saturated']} saturated sub-channels, "
          f"max |x - x̂| {s['recon_err_max']:.4g} ({'closed' if cfg.closed_loop else 'open'} loop)")


def cmd_sar(args):
    from golden.trace import analyze_sar, load_trace

    cfg = config_from_args(args)
    check_outputs(args.json, args.plot, inputs=[args.trace])
    trace = load_trace(args.trace)
    res = analyze_sar(trace, cfg, thr=args.thr, interval=args.interval, block=args.block)
    res.update(trace=os.fspath(args.trace), config=cfg.to_dict())
    fig = _plot_masks(res) if args.plot else None
    write_together({args.json: json_text(res) if args.json else None, args.plot: _png(fig)})
    rows = [[n, d["kept_fraction"], d["work_removed"], d["pcache_bytes"],
             d["mean_bytes_written_per_step"], d["mean_bytes_read_per_step"], d["err_max"],
             d["err_rms"]] for n, d in res["layers"].items()]
    _table(["layer", "kept", "removed", "P$bytes", "wr/step", "rd/step", "err_max", "err_rms"],
           rows)
    s = res["summary"]
    print(f"all: block {res['block']}, thr {res['thr']:g}, interval {res['interval']}: kept "
          f"{s['kept_fraction']:.3f}, attention work removed {s['work_removed']:.3f}, P cache "
          f"{s['pcache_bytes']} bytes")


def cmd_dit(args):
    from golden.dit import compare

    cfg = config_from_args(args)
    spec = _model_args(args)
    check_outputs(args.json)
    _check_widths(args, spec, [cfg])
    _xf, _xq, st = compare(spec, cfg, args.steps, args.seed, label=args.label,
                           weight_seed=args.weight_seed, sar=not args.no_sar)
    write_together({args.json: json_text(st) if args.json else None})
    header, rows = _fmdq_rows(st["linear"], "out_err")
    header.insert(1, "steps")
    for r, d in zip(rows, st["linear"].values()):
        r.insert(1, d["steps"])
    _table(header, rows)
    if st["attention"]:
        print()
        _table(["attention", "kept", "removed", "P$bytes", "wr/step", "rd/step"],
               [[n, d["kept_fraction"], d["work_removed"], d["pcache_bytes"],
                 d["mean_bytes_written_per_step"], d["mean_bytes_read_per_step"]]
                for n, d in st["attention"].items()])
    s, o = st["summary"], st["output"]
    psnr = "inf" if o["psnr_db"] is None else f"{o['psnr_db']:.2f}"
    print(f"\nall: {s['avg_bits']:.3f} average bits, lane fill {s['lane_fill']:.3f}, attention "
          f"work removed {s['attention_work_removed']:.3f}; sample vs float: max abs error "
          f"{o['max_abs_err']:.4g}, PSNR {psnr} dB (model {args.model}, {args.steps} steps, "
          f"seed {args.seed}, {cfg.name})")


def _dit_int_runs(args):
    """``[(key, cfg, sar)]`` of a ``dit-int`` invocation: each preset, SAR on and/or off."""
    names = args.preset or ["tiny"]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UserError(f"--preset {dup[0]} given twice")
    overrides = parse_overrides(args.overrides)
    modes = {"on": (True,), "off": (False,), "both": (True, False)}[args.sar]
    runs = [(n if sar else f"{n} no-SAR", preset(n, **overrides), sar)
            for n in names for sar in modes]
    for key, cfg, _ in runs:
        B = args.base_log2
        if B is not None and not 0 <= B <= cfg.B_max:
            raise UserError(f"--base-log2: base_log2 must be in [0, {cfg.B_max}] for {key}, "
                            f"not {B}")
    return runs


def _dit_int_command(args) -> str:
    """The command line that reproduces ``args`` (for the report header)."""
    parts = ["dstar dit-int", f"--model {args.model}", f"--steps {args.steps}",
             f"--seed {args.seed}"]
    if args.weight_seed:
        parts.append(f"--weight-seed {args.weight_seed}")
    if args.label is not None:
        parts.append(f"--label {args.label}")
    parts += [f"--preset {n}" for n in (args.preset or ["tiny"])]
    parts += [f"--set {o}" for o in args.overrides]
    if args.sar != "on":
        parts.append(f"--sar {args.sar}")
    if args.base_log2 is not None:
        parts.append(f"--base-log2 {args.base_log2}")
    parts += [f"--{k} {v}" for k, v in (("json", args.json), ("md", args.md)) if v]
    return " ".join(parts)


def _db(v):
    """A PSNR for a table: None (identical tensors) shows as ``inf``."""
    return "inf" if v is None else v


def _dit_int_rows(st: dict):
    depth = st["model"]["depth"]
    header = ["step", "kind", "t", "eps dB", "eps max", "smp dB", "smp max"]
    for b in range(depth):
        header += [f"b{b} dB", f"b{b} max", f"b{b} loc"]
    header += ["sat", "P$bytes"]
    rows = []
    for p in st["per_step"]:
        r = [str(p["step"]), p["kind"], p["t"], _db(p["eps"]["psnr_db"]), p["eps"]["max_abs_err"],
             _db(p["sample"]["psnr_db"]), p["sample"]["max_abs_err"]]
        for b in p["blocks"]:
            r += [_db(b["psnr_db"]), b["max_abs_err"], _db(b["local"]["psnr_db"])]
        r += [sum(b["saturated"] for b in p["blocks"]),
              sum(b["pcache_bytes"] for b in p["blocks"])]
        rows.append(r)
    return header, rows


def _md_num(v, prec=2):
    if v is None:
        return "inf"
    return f"{v:.{prec}f}" if isinstance(v, float) else str(v)


def dit_int_markdown(res: dict) -> str:
    """The ``dit-int`` report as Markdown (one table per run)."""
    out = ["# Integer DiT-block golden against the float reference DiT", "",
           f"Generated by `{res['command']}`.", "",
           "The float reference DiT (`golden.dit`, DDIM) is sampled twice from the same seed: "
           "once in float, once with every block replaced by the integer block golden "
           "(`golden.dit_int.IntDiTBlock`: differential FMDQ linear layers, integer VPU functions, "
           "SAR attention with the integer P cache; block input and adaLN vectors converted to "
           "the act format). Per denoising step: error of the model output `eps`, of the sample "
           "after the step, and of each block's output in the sampling run (*dB*, *max*) and "
           "against the float block on the same input (*loc*: the block's own error). PSNR uses "
           "the peak-to-peak of the float tensor; *inf* means identical. *sat*: values that "
           "saturated in the blocks this step (a softmax output clamped at 127, a probability "
           ">= 127.5/128, counts as one); *P$bytes*: P-cache bytes of all blocks. "
           "Choices: docs/architecture.md, \"Integer DiT-block golden\".", ""]
    for key, st in res["runs"].items():
        s = st["summary"]
        mode = f"SAR interval {st['interval']}" if st["sar"] else "no SAR"
        out += [f"## {key}: model {res['model']}, {st['steps']} steps, seed {st['seed']}, "
                f"label {st['label']}, {mode}", ""]
        header, rows = _dit_int_rows(st)
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * len(header))
        for r in rows:
            out.append("| " + " | ".join(_md_num(v) if not isinstance(v, float) or "max" not in h
                                         else _md_num(v, 4) for h, v in zip(header, r)) + " |")
        out += ["", f"Final sample: PSNR {_md_num(s['sample']['psnr_db'])} dB, max abs error "
                f"{s['sample']['max_abs_err']:.4f}. Over all steps: lowest eps PSNR "
                f"{_md_num(s['eps_psnr_db_min'])} dB, lowest block-local PSNR "
                f"{_md_num(s['block_local_psnr_db_min'])} dB, largest block-local max abs error "
                f"{s['block_local_max_abs_err_max']:.4f}. Kept blocks per attention: "
                + ", ".join(f"{k:.3f}" for k in st["kept_fraction"])
                + f"; {s['saturated']} saturations ("
                + (", ".join(f"{k} {v}" for k, v in s["saturation"].items()) or "none")
                + f"); base B = {st['base_log2']}.", ""]
    return "\n".join(out)


def cmd_dit_int(args):
    from golden.dit_int_compare import compare_int

    spec = _model_args(args)
    check_outputs(args.json, args.md)
    runs = _dit_int_runs(args)
    _check_widths(args, spec, [cfg for _, cfg, _ in runs])
    res = dict(command=_dit_int_command(args), model=args.model, runs={})
    for key, cfg, sar in runs:
        _xf, _xi, st, _m = compare_int(spec, cfg, args.steps, args.seed, label=args.label,
                                       weight_seed=args.weight_seed, sar=sar,
                                       base_log2=args.base_log2)
        res["runs"][key] = st
    write_together({args.json: json_text(res) if args.json else None,
                    args.md: dit_int_markdown(res) + "\n" if args.md else None})
    for i, (key, st) in enumerate(res["runs"].items()):
        if i:
            print()
        print(f"{key}: model {args.model}, {args.steps} steps, seed {args.seed}, "
              + (f"SAR interval {st['interval']}" if st["sar"] else "no SAR"))
        _table(*_dit_int_rows(st))
        s = st["summary"]
        psnr = "inf" if s["sample"]["psnr_db"] is None else f"{s['sample']['psnr_db']:.2f}"
        print(f"final sample vs float: max abs error {s['sample']['max_abs_err']:.4g}, PSNR "
              f"{psnr} dB; {s['saturated']} saturations")


# ---------------------------------------------------------------------------------- register
def register(subparsers):
    p = subparsers.add_parser("trace", help="run the float reference DiT and write a trace",
                              description="Run the float reference DiT (DDIM) and write an "
                              "activation trace .npz (linear inputs, attention P and V per step). "
                              "--preset/--set check that every layer fits max_reduction.")
    add_config_options(p)
    _add_model_options(p)
    p.add_argument("-o", "--output", required=True, metavar="TRACE.npz", help="trace file to write")
    p.set_defaults(func=cmd_trace)

    p = subparsers.add_parser("fmdq", help="FMDQ statistics of a trace's linear layers",
                              description="Replay every <layer>.x of a trace through closed-loop "
                              "(or open-loop, --set closed_loop=False) differential FMDQ.")
    p.add_argument("trace", metavar="TRACE.npz")
    add_config_options(p)
    p.add_argument("--base-log2", type=int, default=None, metavar="B",
                   help="static base B of every layer (default: the config's base_log2)")
    p.add_argument("--profile-base", action="store_true",
                   help="per layer, the largest B for which at most 1%% of the differential "
                   "sub-channels need e > 0 (exclusive with --base-log2)")
    p.add_argument("--json", metavar="OUT", help="write the statistics as JSON")
    p.add_argument("--plot", metavar="PNG", help="write a bit-width histogram")
    p.set_defaults(func=cmd_fmdq)

    p = subparsers.add_parser("sar", help="SAR masks and reuse statistics of a trace",
                              description="Profile SAR block masks on a trace's attention "
                              "probabilities and replay cache/reuse steps.")
    p.add_argument("trace", metavar="TRACE.npz")
    add_config_options(p)
    p.add_argument("--thr", type=float, default=None, metavar="T",
                   help="block-keep threshold (default: the config's sar_thr)")
    p.add_argument("--interval", type=int, default=None, metavar="N",
                   help="cache-step interval (default: the config's sar_interval)")
    p.add_argument("--block", type=int, default=None, metavar="B",
                   help="block size Bs (default: the config's tile T; replaces T)")
    p.add_argument("--json", metavar="OUT", help="write the statistics and masks as JSON")
    p.add_argument("--plot", metavar="PNG", help="write the masks as an image")
    p.set_defaults(func=cmd_sar)

    p = subparsers.add_parser("dit", help="float vs quantized DiT sampling statistics",
                              description="Sample the float and the DSTAR-quantized reference "
                              "DiT (FMDQ linear layers, SAR attention) from one seed.")
    add_config_options(p)
    _add_model_options(p)
    p.add_argument("--no-sar", action="store_true", help="dense float attention, QK every step")
    p.add_argument("--json", metavar="OUT", help="write the statistics as JSON")
    p.set_defaults(func=cmd_dit)

    p = subparsers.add_parser("dit-int", help="float DiT vs integer DiT blocks, per step",
                              description="Sample the float reference DiT and the same DiT with "
                              "integer blocks (golden.dit_int) from one seed; print per "
                              "denoising step the PSNR and max abs error of the output, the "
                              "sample and every block.")
    p.add_argument("--preset", action="append", choices=sorted(PRESETS),
                   help="configuration preset; repeat to compare several (default: tiny)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                   help="override one configuration parameter of every preset (repeatable)")
    _add_model_options(p)
    p.add_argument("--sar", choices=("on", "off", "both"), default="on",
                   help="SAR attention (masks from seed + 1), dense every step, or both runs "
                   "(default: on)")
    p.add_argument("--base-log2", type=int, default=None, metavar="B",
                   help="static base B of every block (default: the config's base_log2)")
    p.add_argument("--json", metavar="OUT", help="write every run's statistics as JSON")
    p.add_argument("--md", metavar="OUT", help="write a Markdown report")
    p.set_defaults(func=cmd_dit_int)
