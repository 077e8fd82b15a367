"""``dstar profile``: FMDQ bits and SAR savings against sample quality on the trained digits DiT
(the work is in :mod:`golden.profile`).

Bad input (fewer than two seeds, a threshold outside [0, 1), an interval below 1, missing
weights, an output folder that is a file) is one line and exit status 2 before any sampling; a
missing output folder is created. ``profile.json``, ``profile.md`` and ``profile.png`` appear
together (:func:`gen.outputs.write_together`) or not at all."""

from __future__ import annotations

import argparse
from pathlib import Path

from .options import add_config_options, config_from_args
from .outputs import check_output_dir, check_outputs, write_together

__all__ = ["register"]


def _list_of(kind, what):
    """An argparse type: comma-separated values of ``kind``, refused with a readable line."""
    def parse(text: str) -> tuple:
        try:
            return tuple(kind(v) for v in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(f"takes comma-separated {what}, not {text!r}") \
                from None
    return parse


_floats = _list_of(float, "numbers")
_ints = _list_of(int, "integers")


def register(sub):
    p = sub.add_parser(
        "profile", help="FMDQ bits, SAR work removed and sample quality on the trained DiT",
        description="Sample the trained digits DiT (golden/data/digits_dit.npz) in float and "
                    "quantized from the same seeds, for FMDQ alone and for SAR over thresholds × "
                    "cache intervals; report average bits and precision mix per layer type, SAR "
                    "kept fraction and attention work removed, PSNR against float and classifier "
                    "accuracy, each with a 95%% Student-t confidence interval over seeds. Writes "
                    "profile.json, profile.md and profile.png.")
    add_config_options(p, default_preset="fpga")
    p.add_argument("--seeds", type=int, default=5, help="seeds per sweep point (default 5)")
    p.add_argument("--steps", type=int, default=20, help="DDIM steps (default 20)")
    p.add_argument("--sar-thr", type=_floats, default=None, metavar="T1,T2,...",
                   help="SAR thresholds (default: the preset's sar_thr and 0.02, 0.05, 0.1; "
                        "uniform attention has block importance tile/tokens = 0.125 here)")
    p.add_argument("--sar-interval", type=_ints, default=(1, 2, 4), metavar="I1,I2,...",
                   help="SAR cache intervals (default 1,2,4)")
    p.add_argument("--weights", type=Path, default=None,
                   help="trained weights (default golden/data/digits_dit.npz)")
    p.add_argument("--out-dir", type=Path, default=Path("reports"),
                   help="directory for profile.json/.md/.png, created if missing (default "
                        "reports)")
    p.add_argument("--quick", action="store_true",
                   help="a tiny sweep for tests: 2 seeds, 4 steps, one SAR point")
    p.set_defaults(func=run)


def run(args):
    from golden.profile import Sweep, report_files, report_names, run_profile

    from .cli import UserError

    cfg = config_from_args(args)
    check_output_dir(args.out_dir)
    check_outputs(*report_names(args.out_dir), inputs=[args.weights])
    if args.quick:
        sweep = Sweep.quick()
    else:
        if args.seeds < 2:
            raise UserError(f"--seeds must be >= 2 for a confidence interval, not {args.seeds}")
        if args.steps < 1:
            raise UserError(f"--steps must be >= 1, not {args.steps}")
        thr = args.sar_thr or tuple(sorted({cfg.sar_thr, 0.02, 0.05, 0.1}))
        for t in thr:
            if not 0 <= t < 1:
                raise UserError(f"--sar-thr values must be in [0, 1), not {t:g}")
        for i in args.sar_interval:
            if i < 1:
                raise UserError(f"--sar-interval values must be >= 1, not {i}")
        sweep = Sweep(sar_thr=tuple(thr), sar_interval=tuple(args.sar_interval), seeds=args.seeds,
                      steps=args.steps)
    rep = run_profile(cfg, sweep, weights=args.weights, log=lambda s: print(s, flush=True))
    paths = write_together(report_files(rep, args.out_dir))
    best = max((r for r in rep["runs"] if r["sar"]),
               key=lambda r: r["summary"]["attention_work_removed"]["mean"], default=None)
    fq = rep["runs"][0]["summary"]
    msg = (f"wrote {', '.join(map(str, paths))} in {rep['seconds']:.0f} s: FMDQ alone "
           f"{fq['avg_bits']['mean']:.2f} bits, PSNR {fq['psnr_db']['mean']:.1f} dB")
    if best is not None:
        b = best["summary"]
        msg += (f"; most SAR work removed {b['attention_work_removed']['mean']:.2f} "
                f"({best['name']}) at PSNR {b['psnr_db']['mean']:.1f} dB")
    print(msg)
    return 0
