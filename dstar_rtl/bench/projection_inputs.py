"""The inputs of the paper-scale projection (:mod:`perf.chip_model`) that come from this
project's measurements: the calibrated core timings of ``dstar measure perf`` and the workload
statistics of ``dstar profile`` and ``dstar bench``, read and checked (one-line errors)."""

from __future__ import annotations

from pathlib import Path

from dstar_rtl.gen.errors import UserError
from dstar_rtl.golden.config import ConfigError, preset
from dstar_rtl.perf.chip_model import Workload, paper_timing

__all__ = ["workloads", "load_calibration", "OPERATING_POINT"]


#: The operating point a user's configuration runs at (``dstar profile --sweep``).
OPERATING_POINT = Path("reports/profile_sweep.json")


def workloads(profile: Path, bench: Path, operating_point: Path | None = OPERATING_POINT) -> tuple:
    """``(workloads, notes)``: the paper's statistics and, when ``dstar profile`` and
    ``dstar bench`` have run, ours: the trained digits DiT's average bits at the operating point
    (``operating_point``, the sweep that chose the thresholds and base a user gets; the
    profile's SAR point's bits when there is none), the kept attention blocks of the profile's
    SAR point closest to the paper's setting (interval 2), the lane fill of the bench."""
    wls = [Workload("paper", bits=4.3, p_bits=4.3, fill=0.88, kept=0.63)]
    notes = ["paper: 4.3 average bits (also used for P), lane fill 0.88 (its FFN utilisation), "
             "37 % of attention work removed taken as 63 % of blocks kept"]
    if not (profile.exists() and bench.exists()):
        notes.append("ours: not available (run `dstar profile` and `dstar bench`)")
        return wls, notes
    from dstar_rtl.results.bench import Bench
    from dstar_rtl.results.profile import Profile, ProfileSweep

    def load(kind, path, what):
        try:
            return kind.load(path)
        except UserError as exc:
            raise UserError(f"{what}: {exc}") from None
    prof = load(Profile, profile, "--profile (the report of `dstar profile`)")
    b = load(Bench, bench, "--bench (the report of `dstar bench`)")
    op = None
    if operating_point is not None and Path(operating_point).exists():
        sweep = load(ProfileSweep, operating_point,
                     "the operating point (`dstar profile --sweep`)")
        if sweep.operating_point is None:
            raise UserError(f"{operating_point}: the sweep found no operating point "
                            f"({sweep.message})")
        p = sweep.operating_point
        op = (p.name, p.summary.avg_bits.mean, len(p.seeds))
    return _our_workload(prof, b, wls, notes, op)


def _our_workload(prof, b, wls: list, notes: list, op: tuple | None) -> tuple:
    """:func:`workloads` from the reports' contents (``op``: the operating point's name,
    average bits and seeds, or None)."""
    from dstar_rtl.bench.layers import packer_words
    sar = [r for r in prof.runs if r.sar and r.sar_interval == 2]
    if not sar:
        notes.append("ours: the profile has no SAR point at interval 2")
        return wls, notes
    pick = max(sar, key=lambda r: r.summary.attention_work_removed.mean
               if (r.summary.psnr_db.mean or 0) >= 35 else -1)
    later = [v for k, v in b.totals.by_step.items() if k != "0"]
    if not later:
        notes.append("ours: the bench measured no step after the first")
        return wls, notes
    fill = (sum(v.lanes_valid for v in later)
            / (sum(v.groups for v in later) * b.config["lanes"]))
    bits = pick.summary.avg_bits.mean if op is None else op[1]
    kept = pick.summary.attention_kept_fraction.mean
    step0 = b.totals.by_step.get("0")
    first = step0.mean_act_bits if step0 is not None else None
    wls.append(Workload("ours", bits=round(bits, 2), p_bits=round(bits, 2),
                        fill=round(fill, 3), kept=round(kept, 3),
                        dense_bits=None if first is None else round(first, 2)))
    src = (f"{bits:.2f} average bits at the profile point" if op is None else
           f"{bits:.2f} average bits at the operating point `{op[0]}` (`dstar profile "
           f"--sweep`, {op[2]} seeds: the thresholds and base a user's configuration runs)")
    notes.append(f"ours: trained digits DiT, {src}; {kept:.2f} of attention blocks kept at the "
                 f"profile's SAR point `{pick.name}` (the most attention work removed at PSNR "
                 f">= 35 dB); P bits taken equal to the activations'; lane fill {fill:.3f} from "
                 f"`dstar bench` "
                 f"on the steps after the first ({packer_words(b.config)}); an input "
                 f"quantized whole (the first step's, against a zero state) at "
                 + (f"{first:.2f} bits" if first is not None else "bits not in the bench"))
    return wls, notes


def load_calibration(perf_model: Path) -> dict:
    """The calibrated timings ``{preset: Timing dict}`` of ``dstar measure perf``'s result
    (:class:`results.perf_model.PerfModel`, loaded as its type); :class:`UserError`
    (one line) when the file is missing or is not one."""
    from dstar_rtl.results.perf_model import PerfModel

    if not perf_model.is_file():
        raise UserError(f"{perf_model} not found; run `dstar measure perf` first")
    try:
        calibrated = {r.preset: r.timing.to_dict() for r in PerfModel.load(perf_model).presets}
        if not calibrated:
            raise ValueError("no preset in it")
        paper_timing(calibrated, preset("paper"))
    except (UserError, ValueError, KeyError, TypeError, ConfigError) as exc:
        raise UserError(f"{perf_model} is not a calibration of `dstar measure perf` "
                        f"({exc})") from None
    return calibrated
