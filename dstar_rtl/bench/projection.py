"""The paper-scale projection of ``dstar measure projection`` (:mod:`app.reports.projection`
types and renders it): every model of :data:`models.dit_shapes.MODELS` under each workload on the
default ``paper`` configuration, every byte charged, with its energy per image when ``dstar
power``'s and ``dstar measure compare``'s results are there, and the levers on FMDQ's state
(:mod:`perf.state_levers`)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from dstar_rtl.bench.projection_inputs import OPERATING_POINT, load_calibration, workloads
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.progress import say
from dstar_rtl.golden.config import ConfigError, preset
from dstar_rtl.models.dit_shapes import MODELS
from dstar_rtl.perf import state_levers
from dstar_rtl.perf.chip_energy import fpga_side, row_energy
from dstar_rtl.perf.chip_model import Chip, int8_timing, paper_timing, project_model
from dstar_rtl.results.base import plain

__all__ = ["LEVER_MODEL", "run"]


#: The model the levers' table details (the paper's headline model).
LEVER_MODEL = "DiT-XL/2 512"


def _energy_context(energy: Path, compare: Path) -> tuple:
    """``((area_model, fpga, fpga_cfg, voltage), note)`` for
    :func:`perf.chip_energy.row_energy` from ``dstar power``'s and ``dstar measure
    compare``'s reports, or ``(None, why)`` when either is missing."""
    if not (energy.is_file() and compare.is_file()):
        return None, (f"energy per image: not computed ({energy} or {compare} missing: run "
                      f"`dstar power` and `dstar measure compare`)")
    from dstar_rtl.results.compare import Compare
    from dstar_rtl.results.energy import Energy

    rep = plain(Energy.load(energy), present=True)
    cmp = Compare.load(compare)
    try:
        side = fpga_side(rep)
        area = plain(cmp.paper.area_model)
        fcfg = preset(rep["preset"])
    except (KeyError, TypeError, AttributeError, ConfigError) as exc:
        raise UserError(f"{energy} or {compare} is not a report of `dstar power` / `dstar "
                        f"measure compare` ({type(exc).__name__}: {exc})") from None
    return (area, side["sides"], fcfg, side["voltage"]), (
        f"energy per image: the `fpga` cores' gate-level energies of {energy} carried to the "
        f"`paper` core (`perf/chip_energy.py`), the part areas of {compare}")


def run(perf_model: Path, profile: Path, bench: Path, energy: Path | None = None,
        compare: Path | None = None, levers: bool = True,
        operating_point: Path | None = OPERATING_POINT) -> dict:
    """The projection's record: every model under each workload on the default ``paper``
    configuration, with its energy per image when ``energy`` and ``compare`` are there, and
    (``levers``) the levers on the state (:mod:`perf.state_levers`); our workload's
    bits from ``operating_point`` (:func:`bench.projection_inputs.workloads`)."""
    calibrated = load_calibration(perf_model)
    cfg = preset("paper")

    def timing(c):
        t, _ = paper_timing(calibrated, c)
        # The INT8 array has the same tile flow and drain; its GEMM is one beat per channel.
        return t, int8_timing(t, c, preset("paper", datapath="int8"))

    t, notes = paper_timing(calibrated, cfg)
    t_base = timing(cfg)[1]
    chip = Chip()
    ectx, enote = (None, "energy per image: not asked") if energy is None else \
        _energy_context(energy, compare)
    rows = []
    wls, wl_notes = workloads(profile, bench, operating_point)
    for wl in wls:
        for model in MODELS.values():
            r = project_model(model, chip, t, t_base, cfg, wl)
            r.update(workload=asdict(wl), config={}, memory=asdict(chip.memory))
            if ectx is not None:
                r["energy"] = {k: v for k, v in row_energy(r, *ectx).items()
                               if k not in ("model", "workload", "steps")}
                for side in ("dstar", "int8"):
                    r["energy"][side].pop("events")
            rows.append(r)
            say(f"[project] {wl.name:>26} | {model.name:<18} | DSTAR "
                f"{r['dstar']['per_image_s']:8.3f} s/image | INT8 "
                f"{r['int8']['per_image_s']:8.3f} s | {r['speedup']:.2f}× | state "
                f"{r['dstar']['state_bytes'] / 1e9:6.2f} GB")
    lever = state_levers.lever_rows(MODELS.values(), wls, chip, timing, ectx, say) \
        if levers else []
    return dict(chip=asdict(chip), config_hash=cfg.hash(), timing=t.to_dict(),
                timing_notes=notes, workload_notes=wl_notes, energy_note=enote, rows=rows,
                levers=lever, lever_model=LEVER_MODEL)
