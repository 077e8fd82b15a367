"""``dstar profile``: FMDQ bits and SAR savings against sample quality on the trained digits DiT
(the work is in :mod:`analysis.profile`).

Bad input (fewer than two seeds, a threshold outside [0, 1), an interval below 1, missing
weights, an output folder that is a file) is one line and exit status 2 before any sampling; a
missing output folder is created. ``profile.json``, ``profile.md`` and ``profile.png`` appear
together (:func:`gen.outputs.write_together`) or not at all.

``dstar profile --sweep`` runs the FMDQ threshold × static-base sweep instead
(:func:`analysis.profile.run_sweep`) and writes ``profile_sweep.json``/``.md``/``.png`` the same
way. Its options are checked before any work too: a grid point that is not a legal ``thr``, a
repeated value, seeds or steps below their minimum, an agreement outside (0, 1], SAR options
(the sweep is FMDQ alone), and sweep options given without ``--sweep``."""

from __future__ import annotations

import argparse
from pathlib import Path

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.options import add_config_options, checking, config_from_args
from dstar_rtl.gen.outputs import check_output_dir, check_outputs, write_together
from dstar_rtl.results.profile import Profile, ProfileSweep

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
        description="Sample the trained digits DiT (models/data/digits_dit.npz) in float and "
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
    p.add_argument("--sar-interval", type=_ints, default=None, metavar="I1,I2,...",
                   help="SAR cache intervals (default 1,2,4)")
    p.add_argument("--weights", type=Path, default=None,
                   help="trained weights (default models/data/digits_dit.npz)")
    p.add_argument("--out-dir", type=Path, default=Path("reports"),
                   help="directory for profile.json/.md/.png, created if missing (default "
                        "reports)")
    p.add_argument("--quick", action="store_true",
                   help="a tiny sweep for tests: 2 seeds, 4 steps, one SAR point (with --sweep: "
                        "four grid points, 1 step, 1 seed, confirmation 2 seeds at 2 steps)")
    s = p.add_argument_group(
        "threshold and base sweep (--sweep)",
        "Sweep the FMDQ thresholds thr2 x thr4 x thr6 and offsets of the profiled per-layer "
        "static base at --sweep-steps/--sweep-seeds, confirm the candidates with the fewest bits "
        "that meet the rule at --steps/--seeds, and write profile_sweep.json/.md/.png with the "
        "chosen operating point. Negative offsets need '=': --base-offsets=-2,-1,0.")
    s.add_argument("--sweep", action="store_true",
                   help="run the threshold x base sweep instead of the FMDQ/SAR profile")
    s.add_argument("--thr2", type=_ints, default=None, metavar="T1,T2,...",
                   help="thr2 values (default 1,2,3; above 1 clips 2-bit values to +-1)")
    s.add_argument("--thr4", type=_ints, default=None, metavar="T1,T2,...",
                   help="thr4 values (default 7,11; above 7 clips 4-bit values to +-7)")
    s.add_argument("--thr6", type=_ints, default=None, metavar="T1,T2,...",
                   help="thr6 values (default 31,47; above 31 clips 6-bit values to +-31)")
    s.add_argument("--base-offsets", type=_ints, default=None, metavar="O1,O2,...",
                   help="offsets added to the profiled per-layer base (default -3,-2,-1,0)")
    s.add_argument("--sweep-seeds", type=int, default=None,
                   help="seeds per sweep point (default 2; the screen uses means)")
    s.add_argument("--sweep-steps", type=int, default=None,
                   help="DDIM steps of the sweep (default 20)")
    s.add_argument("--max-confirm", type=int, default=None,
                   help="candidates confirmed at most, in order of bits (default 6)")
    s.add_argument("--min-psnr", type=float, default=None,
                   help="PSNR target against float in dB, on the 95%% interval's lower bound "
                        "(default 40)")
    s.add_argument("--min-agreement", type=float, default=None,
                   help="classifier agreement with the float samples (default 0.99)")
    s.add_argument("--jobs", type=int, default=None,
                   help="worker processes (default 2)")
    p.set_defaults(func=run)


_SWEEP_ONLY = dict(thr2="thr2", thr4="thr4", thr6="thr6", base_offsets="base_offsets",
                   sweep_seeds="seeds", sweep_steps="steps", max_confirm="max_confirm",
                   min_psnr="min_psnr_db", min_agreement="min_agreement", jobs="workers")


def _flag(dest):
    return "--" + dest.replace("_", "-")


def run(args):
    from dstar_rtl.analysis.profile import Sweep, run_profile
    from dstar_rtl.app.cli import UserError
    from dstar_rtl.app.reports.profile_report import report_files, report_names
    from dstar_rtl.models.digits import load_trained

    cfg = config_from_args(args)
    with checking():  # a missing weights file names the command that regenerates it
        load_trained(args.weights)
    if args.sweep:
        return run_sweep_command(args, cfg)
    for dest in _SWEEP_ONLY:
        if getattr(args, dest) is not None:
            raise UserError(f"{_flag(dest)} applies only with --sweep")
    if args.sar_interval is None:
        args.sar_interval = (1, 2, 4)
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
    paths = write_together(report_files(_typed(Profile, "profile", rep, cfg), args.out_dir),
                           record_command=False)
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


def run_sweep_command(args, cfg):
    """``dstar profile --sweep``: check everything, sweep, write the three files together."""
    import sys

    from dstar_rtl.analysis.profile import ThresholdSweep, run_sweep
    from dstar_rtl.app.cli import UserError
    from dstar_rtl.app.reports.profile_report import sweep_report_files, sweep_report_names

    for flag in ("sar_thr", "sar_interval"):
        if getattr(args, flag) is not None:
            raise UserError(f"{_flag(flag)} does not apply with --sweep (FMDQ alone, no SAR)")
    check_output_dir(args.out_dir)
    check_outputs(*sweep_report_names(args.out_dir), inputs=[args.weights])
    given = {field: getattr(args, dest) for dest, field in _SWEEP_ONLY.items()
             if getattr(args, dest) is not None}
    if args.quick:
        sweep = ThresholdSweep.quick(**given)
    else:
        sweep = ThresholdSweep(**given, confirm_seeds=args.seeds, confirm_steps=args.steps)
    try:
        sweep.check(cfg)
    except ValueError as exc:
        names = {v: k for k, v in _SWEEP_ONLY.items()}
        names.update(confirm_seeds="seeds", confirm_steps="steps")
        text = str(exc)
        for field, dest in sorted(names.items(), key=lambda kv: -len(kv[0])):
            if text.startswith(field + " "):
                text = _flag(dest) + text[len(field):]
                break
        raise UserError(text) from None
    rep = run_sweep(cfg, sweep, weights=args.weights,
                    log=lambda s: print(s, file=sys.stderr, flush=True))
    rep.pop("kind", None)              # the typed result names its kind itself
    paths = write_together(sweep_report_files(_typed(ProfileSweep, "profile-sweep", rep, cfg),
                                              args.out_dir), record_command=False)
    print(f"wrote {', '.join(map(str, paths))} in {rep['seconds']:.0f} s: {rep['message']}")
    return 0


def _typed(kind, experiment: str, rep: dict, cfg):
    """``rep`` (what :mod:`analysis.profile` measured) as its typed result, with this run's
    provenance."""
    from dstar_rtl.results.base import build, plain

    prov = run_provenance(experiment, {cfg.name: cfg.hash()})
    return build(kind, dict(rep, provenance=plain(prov)), f"the {experiment} result")
