"""``dstar fmdq``: replay a trace's linear-layer inputs through the differential FMDQ quantizer
and the QPU schedule (:func:`analysis.trace.analyze_fmdq`) and print per-layer statistics: bits,
precision shares, groups, lane fill, saturations and reconstruction error. ``--json`` and
``--plot`` (a bit-width histogram) are written together (:mod:`app.reports.analysis_io`)."""

from __future__ import annotations

import os

from dstar_rtl.app.options import add_config_options, checking, config_from_args
from dstar_rtl.app.reports.analysis_io import PRECISIONS, fmdq_rows, print_table
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import check_outputs, json_text, png_writer, write_together

__all__ = ["register"]


def _plot_bits(result: dict, title: str):
    """Stacked bars: each layer's (and all layers') share of sub-channels per precision."""
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


def cmd_fmdq(args):
    from dstar_rtl.analysis.trace import analyze_fmdq, check_fmdq, load_trace

    cfg = config_from_args(args)
    if args.base_log2 is not None and args.profile_base:
        raise UserError("give either --base-log2 or --profile-base, not both")
    check_outputs(args.json, args.plot, inputs=[args.trace])
    with checking():
        trace = check_fmdq(load_trace(args.trace), cfg, args.base_log2, args.profile_base)
    res = analyze_fmdq(trace, cfg, base_log2=args.base_log2, profile_base=args.profile_base)
    res.update(trace=os.fspath(args.trace), config=cfg.to_dict())
    header, rows = fmdq_rows(res["layers"], "recon_err")
    header.insert(1, "B")
    for r, d in zip(rows, res["layers"].values()):
        r.insert(1, d["base_log2"])
    fig = _plot_bits(res, f"FMDQ precision per layer ({cfg.name}, avg "
                          f"{res['summary']['avg_bits']:.2f} bits)") if args.plot else None
    write_together({args.json: json_text(res) if args.json else None,
                    args.plot: png_writer(fig)})
    print_table(header, rows)
    s = res["summary"]
    print(f"all: {s['avg_bits']:.3f} average bits, lane fill {s['lane_fill']:.3f}, "
          f"e>0 share {s['share_e_pos']:.3f}, {s['saturated']} saturated sub-channels, "
          f"max |x - x̂| {s['recon_err_max']:.4g} ({'closed' if cfg.closed_loop else 'open'} loop)")


def register(subparsers):
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
