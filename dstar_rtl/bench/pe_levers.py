"""The slice PE's and the MPU's datapath levers synthesized alone (``dstar measure pe-levers``,
:mod:`app.reports.pe_levers` renders them): each setting of ``digit_product`` × ``digits`` and the
further rows on ECP5 (with and without DSP blocks) and generic gates, and the Fmax of the rows
placed and routed."""

from __future__ import annotations

from dstar_rtl.flows.pnr import PnrError, place_and_route
from dstar_rtl.flows.synth import BUILD_ROOT, synthesize
from dstar_rtl.gen.progress import say
from dstar_rtl.golden.config import preset
from dstar_rtl.results.pe_levers import LeverRow
from dstar_rtl.results.quantities import CriticalPath, FlowRun

__all__ = ["SETTINGS", "EXTRA_PE", "EXTRA_MPU", "MPU_FMAX", "VARIANTS", "measure_pe",
           "measure_mpu_abc", "measure_mpu"]


SETTINGS = (("multiply", "slice"), ("select", "slice"), ("multiply", "booth"), ("select", "booth"))
#: Further PE and MPU rows: label → (unit, ``Config`` overrides of the ``fpga`` preset).
#: ``bcast``: the weights broadcast down each column (``weight_hop = rows``), for both arrays.
EXTRA_PE = {"select/booth/bcast": ("pe", dict(digit_product="select", digits="booth",
                                              weight_hop=8)),
            "select/booth/bcast/stages2": ("pe", dict(digit_product="select", digits="booth",
                                                      weight_hop=8, pe_stages=2)),
            "select/booth/xbcast": ("pe", dict(digit_product="select", digits="booth",
                                               weight_hop=8, act_hop=8)),
            "int8": ("baseline_pe", {}),
            "int8/bcast": ("baseline_pe", dict(weight_hop=8)),
            "int8/xbcast": ("baseline_pe", dict(weight_hop=8, act_hop=8))}
EXTRA_MPU = {"select/booth/bcast": dict(digit_product="select", digits="booth", weight_hop=8),
             "select/booth/xbcast": dict(digit_product="select", digits="booth", weight_hop=8,
                                         act_hop=8),
             "select/booth/xbcast/stages2": dict(digit_product="select", digits="booth",
                                                 weight_hop=8, act_hop=8, pe_stages=2),
             "select/booth/hop4/stages2": dict(digit_product="select", digits="booth",
                                               weight_hop=4, act_hop=4, pe_stages=2)}
#: MPU rows placed and routed for their Fmax (``--mpu``).
MPU_FMAX = ("select/booth", "select/booth/bcast", "select/booth/xbcast",
            "select/booth/xbcast/stages2", "select/booth/hop4/stages2")
VARIANTS = (("ecp5", False, "ecp5"), ("ecp5", True, "ecp5-nodsp"), ("generic", False, "generic"))


def _row(label: str, unit: str, cfg, over: dict, runs: dict, fmax: dict) -> LeverRow:
    return LeverRow(label=label, unit=unit, config_hash=cfg.hash(), **over,
                    **{vl.replace("-", "_"): FlowRun.from_flow(r) for vl, r in runs.items()},
                    **fmax)


def _synth(unit, cfg, target, nodsp, reuse, force_abc=False):
    """One run through :func:`flows.synth.synthesize` (its abc9 fallback included);
    ``force_abc``: map with ``abc -lut 4`` from the start, the flow the fallback takes."""
    return synthesize(unit, cfg, target, nodsp=nodsp, reuse=reuse, abc9=not force_abc)


def _label(dp, digits):
    return f"{dp}/{digits}"


def _fmax(unit, cfg, netlist, freq, seed, reuse) -> dict:
    """nextpnr's Fmax of ``unit``'s ECP5 ``netlist`` (out of context; a stored run on the same
    netlist and arguments is reused): ``{fmax_mhz, pnr_seconds, critical_path}`` or
    ``{fmax_error}``."""
    wd = BUILD_ROOT / f"{unit}-{cfg.name}-{cfg.hash()}" / "pnr-ecp5"
    try:
        p = place_and_route(netlist, workdir=wd, freq_mhz=freq, seed=seed, reuse=reuse)
    except PnrError as exc:
        return dict(fmax_error=str(exc))
    return dict(fmax_mhz=p["fmax_mhz"], pnr_seconds=p.get("seconds"),
                critical_path=CriticalPath.from_flow(p.get("critical_path")))


def measure_pe(freq, seed, reuse, fmax=True) -> tuple:
    out = []
    units = [("pe", _label(dp, dg), dict(digit_product=dp, digits=dg)) for dp, dg in SETTINGS]
    units += [(unit, label, over) for label, (unit, over) in EXTRA_PE.items()]
    for unit, label, over in units:
        cfg = preset("fpga", **over)
        runs, fm = {}, {}
        for target, nodsp, vl in VARIANTS:
            r = runs[vl] = _synth(unit, cfg, target, nodsp, reuse)
            say(f"  {label} {vl}: {r['resources']}")
        if fmax:
            fm = _fmax(unit, cfg, runs["ecp5"].get("netlist"), freq, seed, reuse)
            say(f"  {label} Fmax {fm.get('fmax_mhz')}")
        out.append(_row(label, unit, cfg, over, runs, fm))
    return tuple(out)


def measure_mpu_abc(reuse) -> LeverRow:
    """``multiply/slice`` through the ``abc -lut 4`` flow too: the flow ``select`` takes when
    abc9 asserts, so that the MPU comparison is like for like."""
    over = dict(digit_product="multiply", digits="slice")
    cfg = preset("fpga", **over)
    runs = {}
    for target, nodsp, vl in VARIANTS[:2]:
        r = runs[vl] = _synth("mpu", cfg, target, nodsp, reuse, force_abc=True)
        say(f"  mpu multiply/slice (abc) {vl}: {r['resources']}")
    return _row("multiply/slice (abc flow)", "mpu", cfg, over, runs, {})


def measure_mpu(settings, reuse, freq=100.0, seed=1, fmax=True) -> tuple:
    """The ``fpga`` MPU for each ``(label, overrides)``; the rows of :data:`MPU_FMAX` are also
    placed and routed (the ECP5 netlist, out of context, PEs kept as modules during synthesis
    and flattened after mapping, as :mod:`flows.synth` does)."""
    out = []
    for label, over in settings:
        cfg = preset("fpga", **over)
        runs, fm = {}, {}
        for target, nodsp, vl in VARIANTS[:2]:
            if over.get("digit_product") == "select" and nodsp:
                continue        # no multiplier: -nodsp maps the same netlist
            r = runs[vl] = _synth("mpu", cfg, target, nodsp, reuse)
            say(f"  mpu {label} {vl}: {r['resources']}")
        if fmax and label in MPU_FMAX:
            fm = _fmax("mpu", cfg, runs["ecp5"].get("netlist"), freq, seed, reuse)
            say(f"  mpu {label} Fmax {fm.get('fmax_mhz')}")
        out.append(_row(label, "mpu", cfg, over, runs, fm))
    return tuple(out)
