"""``dstar measure state-quality`` → ``reports/state_quality.{json,md}``: what the stored Y
(``ystate_frac``, numerics §2.5, issue 47) costs in quality on the integer model the core runs.

Each point is the trained digits DiT on :class:`models.dit_int_model.IntDiT` at the ``fpga``
preset, SAR on with the calibration run's masks, per-layer bases profiled on the float
calibration run plus an offset (the operating point's, ``reports/profile_sweep.json``, and one
finer, and the operating point's again with every layer's reduction in pieces, ``max_reduction``
64: the paper chip's plans run many, and a stored Y is rounded after each), against the float
sample of the same seed: PSNR with its 95 % Student-t interval over
the seeds, the classifier's agreement with the float sample, the average bits. A point passes
the operating-point rule of ``dstar profile --sweep`` (:func:`analysis.profile.meets_rule`:
the interval's lower bound at least 40 dB, every sample agreeing). Runtime: about 10 s a
sample, ``points × seeds`` samples over ``--jobs`` processes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.paths import REPORTS
from dstar_rtl.gen.progress import say
from dstar_rtl.gen.tables import md_table
from dstar_rtl.results.base import plain
from dstar_rtl.results.state_quality import QualityPoint, StateQuality

__all__ = ["FRACS", "PIECES", "points", "measure", "markdown", "StateQuality",
           "StateQualityOptions", "QualityPoint", "MEASUREMENT"]

#: The stored Y's fractions the report measures (``None``: Y kept whole, the reference).
FRACS = (None, 0, 2, 4)


#: The reduction split of the pieces' points: the digits DiT's 128 hidden channels in 2 pieces,
#: its MLP's 256 in 4 (its 64 tokens are the softmax row's bound).
PIECES = dict(max_reduction=64)


def points(op_offset: int) -> list:
    """``[(name, base_offset, ystate_frac, overrides)]``: every fraction of :data:`FRACS` at the
    operating point's base offset and at one finer (``op_offset + 1``: more bits, more
    headroom), then at the operating point with the reductions in pieces (:data:`PIECES`)."""
    out = []
    for off, over in ((op_offset, {}), (op_offset + 1, {}), (op_offset, PIECES)):
        for g in FRACS:
            what = "Y whole" if g is None else f"stored Y, g = {g}"
            where = f", max_reduction {over['max_reduction']}" if over else ""
            out.append((f"base {off:+d}{where}, {what}", off, g, over))
    return out


def _run_one(args):
    from dstar_rtl.analysis.profile import _int_run
    from dstar_rtl.models.digits import load_trained
    from dstar_rtl.models.dit import DiT, ddim_sample

    cfg, masks, steps, seed, bases = args
    spec, params = load_trained()
    xf, _ = ddim_sample(DiT(spec, params=params), steps, seed, seed % spec.classes)
    return _int_run(spec, params, cfg, masks, steps, seed, xf, bases)


def measure(seeds: int, steps: int, jobs: int, op_offset: int, thr) -> dict:
    """Every point of :func:`points` over ``seeds`` seeds: ``{"points": [{name, base_offset,
    ystate_frac, ystate_width, summary, passes}], ...}``."""
    from concurrent.futures import ProcessPoolExecutor

    from dstar_rtl.analysis.calibration import calibrate, layer_bases
    from dstar_rtl.analysis.profile import _sweep_summary, meets_rule
    from dstar_rtl.golden.config import preset
    from dstar_rtl.models.digits import load_trained

    spec, params = load_trained()
    cfg = preset("fpga", thr=tuple(thr))
    cal = calibrate(spec, params, cfg.replace(base_offset=0), steps, 1000)
    todo = [(name, off, g, cfg.replace(ystate_frac=g, **over,
                                        **({"ln_row_max": spec.hidden} if over else {})),
             layer_bases(cal.profiled, off, cfg)) for name, off, g, over in points(op_offset)]
    args = [(c, cal.masks, steps, s, b) for _, _, _, c, b in todo for s in range(seeds)]
    say(f"[state-quality] {len(todo)} points × {seeds} seeds, {steps} steps, {jobs} jobs")
    with ProcessPoolExecutor(jobs) as pool:
        runs = []
        for k, r in enumerate(pool.map(_run_one, args)):
            runs.append(r)
            if (k + 1) % seeds == 0:
                say(f"[state-quality] {todo[k // seeds][0]}: done")
    out = []
    for i, (name, off, g, c, _) in enumerate(todo):
        s = _sweep_summary(runs[i * seeds:(i + 1) * seeds])
        out.append(dict(name=name, base_offset=off, ystate_frac=g, ystate_width=c.ystate_width,
                        max_reduction=c.max_reduction, summary=s, passes=meets_rule(s)))
    return dict(points=out, seeds=seeds, steps=steps, preset="fpga", thr=list(thr),
                acc_bits=cfg.acc_bits)


@dataclass(frozen=True)
class StateQualityOptions:
    """What ``dstar measure state-quality`` runs (checked at construction)."""

    seeds: int = option(10, "samples per point")
    steps: int = option(20, "DDIM steps")
    jobs: int = option(2, "processes")
    operating_point: Path = option(REPORTS / "profile_sweep.json", "the sweep whose thresholds "
                                   "and base offset the points start from")

    def __post_init__(self):
        if self.seeds < 2 or self.steps < 2 or self.jobs < 1:
            raise UserError(f"--seeds and --steps must be >= 2 and --jobs >= 1, not "
                            f"{self.seeds}, {self.steps}, {self.jobs}")
        if not Path(self.operating_point).is_file():
            raise UserError(f"--operating-point {self.operating_point}: file not found (the "
                            f"report of `dstar profile --sweep`)")


def markdown(rec: StateQuality) -> str:
    """``reports/state_quality.md`` from its result."""
    rows = []
    for p in rec.points:
        s = p.summary
        ps = s.psnr_db
        k, n = s.agreement_count
        rows.append([p.name, p.ystate_width, f"{s.avg_bits.mean:.2f}",
                     f"{ps.mean:.2f} [{ps.lo:.2f}, {ps.hi:.2f}]", f"{k}/{n}",
                     "passes" if p.passes else "fails"])
    return "\n".join([
        "# The stored Y against quality (issue 47)", "",
        f"Generated by `{rec.provenance.command}` on {rec.provenance.date} ({rec.seconds:.0f} s). "
        f"The trained digits DiT on the integer model the core runs (`IntDiT`, preset "
        f"`{rec.preset}`, thresholds {tuple(rec.thr)}, SAR on), {rec.steps} DDIM "
        f"steps, seeds 0 .. {rec.seeds - 1}, against the float model. Y whole: "
        f"{rec.acc_bits} bits; stored Y (numerics §2.5): `act_width + 2 + g` bits, rounded "
        "by each channel's shift. Rule: the PSNR interval's lower bound at least 40 dB and "
        "every sample's class agreeing with its float sample's (module docstring of "
        "`app/reports/state_quality.py`).", "",
        md_table(["point", "Y bits", "avg bits", "PSNR vs float dB [95 %]", "agreement",
                  "rule"], rows), ""])


def measure_points(opts: StateQualityOptions, previous=None) -> StateQuality:
    """The points of :func:`points` from the operating point of ``opts``."""
    from dstar_rtl.analysis.profile import load_operating_point

    try:
        op = load_operating_point(opts.operating_point)
        off = int(op["base_offset"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"--operating-point {opts.operating_point}: {exc}") from None
    t0 = time.perf_counter()
    rec = measure(opts.seeds, opts.steps, opts.jobs, off, op["thr"])
    rec["seconds"] = round(time.perf_counter() - t0, 1)
    rec["provenance"] = plain(run_provenance("state-quality"))
    return StateQuality.from_data(dict(kind=StateQuality.KIND, schema=StateQuality.SCHEMA,
                                       **plain(rec)))


MEASUREMENT = Measurement(
    name="state-quality", stem="state_quality",
    summary="What the stored Y costs in quality on the integer model the core runs: PSNR, "
            "agreement and bits of the trained digits DiT at each stored-Y width.",
    options=StateQualityOptions, result=StateQuality, measure=measure_points, render=markdown)
