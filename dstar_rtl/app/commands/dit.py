"""``dstar dit``: sample the float and the DSTAR-quantized reference DiT (FMDQ linear layers,
SAR attention; :func:`models.dit.compare`) from one seed and print per-layer statistics and the
sample's error against float. ``--json`` is written only after the sampling succeeded
(:mod:`app.reports.analysis_io`)."""

from __future__ import annotations

from dstar_rtl.app.options import add_config_options, config_from_args
from dstar_rtl.app.reports.analysis_io import (
    add_model_options,
    check_widths,
    fmdq_rows,
    model_args,
    print_table,
)
from dstar_rtl.gen.outputs import check_outputs, json_text, write_together

__all__ = ["register"]


def cmd_dit(args):
    from dstar_rtl.models.dit import compare

    cfg = config_from_args(args)
    spec = model_args(args)
    check_outputs(args.json)
    check_widths(args, spec, [cfg])
    _xf, _xq, st = compare(spec, cfg, args.steps, args.seed, label=args.label,
                           weight_seed=args.weight_seed, sar=not args.no_sar)
    write_together({args.json: json_text(st) if args.json else None})
    header, rows = fmdq_rows(st["linear"], "out_err")
    header.insert(1, "steps")
    for r, d in zip(rows, st["linear"].values()):
        r.insert(1, d["steps"])
    print_table(header, rows)
    if st["attention"]:
        print()
        print_table(["attention", "kept", "removed", "P$bytes", "wr/step", "rd/step"],
                    [[n, d["kept_fraction"], d["work_removed"], d["pcache_bytes"],
                      d["mean_bytes_written_per_step"], d["mean_bytes_read_per_step"]]
                     for n, d in st["attention"].items()])
    s, o = st["summary"], st["output"]
    psnr = "inf" if o["psnr_db"] is None else f"{o['psnr_db']:.2f}"
    print(f"\nall: {s['avg_bits']:.3f} average bits, lane fill {s['lane_fill']:.3f}, attention "
          f"work removed {s['attention_work_removed']:.3f}; sample vs float: max abs error "
          f"{o['max_abs_err']:.4g}, PSNR {psnr} dB (model {args.model}, {args.steps} steps, "
          f"seed {args.seed}, {cfg.name})")


def register(subparsers):
    p = subparsers.add_parser("dit", help="float vs quantized DiT sampling statistics",
                              description="Sample the float and the DSTAR-quantized reference "
                              "DiT (FMDQ linear layers, SAR attention) from one seed.")
    add_config_options(p)
    add_model_options(p)
    p.add_argument("--no-sar", action="store_true", help="dense float attention, QK every step")
    p.add_argument("--json", metavar="OUT", help="write the statistics as JSON")
    p.set_defaults(func=cmd_dit)
