"""``dstar sar``: profile SAR block masks on a trace's attention probabilities and replay the
cache/reuse steps (:func:`analysis.trace.analyze_sar`); prints per attention layer the kept
blocks, the work removed, P-cache bytes and error. ``--json`` and ``--plot`` (the masks) are
written together (:mod:`app.reports.analysis_io`)."""

from __future__ import annotations

import os

from dstar_rtl.app.options import add_config_options, checking, config_from_args
from dstar_rtl.app.reports.analysis_io import print_table
from dstar_rtl.gen.outputs import check_outputs, json_text, png_writer, write_together

__all__ = ["register"]


def _plot_masks(result: dict):
    """One image per attention layer and head: the kept blocks in black."""
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


def cmd_sar(args):
    from dstar_rtl.analysis.trace import analyze_sar, check_sar, load_trace

    cfg = config_from_args(args)
    check_outputs(args.json, args.plot, inputs=[args.trace])
    with checking():
        trace, _ = check_sar(load_trace(args.trace), cfg, args.thr, args.interval, args.block)
    res = analyze_sar(trace, cfg, thr=args.thr, interval=args.interval, block=args.block)
    res.update(trace=os.fspath(args.trace), config=cfg.to_dict())
    fig = _plot_masks(res) if args.plot else None
    write_together({args.json: json_text(res) if args.json else None,
                    args.plot: png_writer(fig)})
    rows = [[n, d["kept_fraction"], d["work_removed"], d["pcache_bytes"],
             d["mean_bytes_written_per_step"], d["mean_bytes_read_per_step"], d["err_max"],
             d["err_rms"]] for n, d in res["layers"].items()]
    print_table(["layer", "kept", "removed", "P$bytes", "wr/step", "rd/step", "err_max",
                 "err_rms"], rows)
    s = res["summary"]
    print(f"all: block {res['block']}, thr {res['thr']:g}, interval {res['interval']}: kept "
          f"{s['kept_fraction']:.3f}, attention work removed {s['work_removed']:.3f}, P cache "
          f"{s['pcache_bytes']} bytes")


def register(subparsers):
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
