"""ECP5 resources of the two arrays for the bench (:mod:`bench.layers`): the MPU and the INT8
baseline of one configuration (the baseline with the INT8 core's own choices,
:func:`unit_config`), from the same flow as ``dstar synth`` / ``dstar measure sizes``
(``synth_ecp5``, DSP blocks allowed, one fresh Yosys process per unit).

Where each figure comes from, in order of preference:

1. ``stored(unit, cfg)``: a measurement made before (``dstar bench`` looks in
   ``reports/sweep.json`` for a point of the same unit and ``config_hash``, so ``tiny``);
2. :func:`flows.synth.synthesize` with ``reuse=True``: the stored result of an earlier run on
   byte-identical RTLIL (``build/fpga/<unit>-<preset>-<hash>/ecp5/result.json``), else a new
   Yosys run (about 1.5 minutes per array at 8 × 8).

``synth=False`` skips step 2 (the unit's entry is then ``None``). Every entry names its
``source``. With synthesis on, each entry also holds ``fabric``: the resources of the same unit
synthesized with ``-nodsp`` (every multiplier in LUTs), so that a DSP block counts at the LUTs
it replaces.

:func:`array_areas` gives the cell area of both arrays for a standard-cell library (the flow of
``dstar synth --target asic``: ``synth``, ``dfflibmap``, ``abc -liberty``, ``stat -liberty``,
the weight buffers left out as macros), each at its best: the MPU as generated, the INT8 array
the smaller of its runs with and without Yosys ``synth -booth``. Stored runs of byte-identical
RTLIL, script, Yosys and library are reused.

:func:`array_fmax` places and routes both arrays' ECP5 netlists (nextpnr-ecp5, out of context,
LFE5U-85F, the constraint, seed and work folder of ``reports/pe_levers.md``, so either reuses
the other's stored run on an identical netlist) for the throughput per second at each design's
own Fmax. Do not run both at once: a run empties its work folder first.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dstar_rtl.flows.liberty import NANGATE
from dstar_rtl.golden.config import INT8_CHOSEN, Config

__all__ = ["UNITS", "NANGATE", "unit_config", "array_resources", "array_areas", "array_fmax"]

UNITS = ("mpu", "baseline")


def unit_config(unit: str, cfg: Config) -> Config:
    """The configuration ``unit`` is built at for the bench of ``cfg``: the MPU at ``cfg``, the
    INT8 array with the INT8 core's own choices (:data:`golden.config.INT8_CHOSEN`, no PE
    stage), as the whole-core comparison's INT8 core has them."""
    return replace(cfg, **INT8_CHOSEN) if unit == "baseline" else cfg


def array_resources(cfg: Config, synth: bool = True, progress=None, stored=None) -> dict:
    """``{unit: entry or None}`` for the MPU and the baseline of ``cfg`` (see the module text).

    An entry is ``{resources, tools, config_hash, flow, seconds, source}``; ``source`` is
    ``"reports/sweep.json"``, ``"dstar_rtl.flows.synth (stored run reused)"`` or
    ``"dstar_rtl.flows.synth (Yosys
    ran)"``. Raises :class:`flows.synth.SynthError` when Yosys fails.
    """
    out, top = {}, cfg
    for unit in UNITS:
        cfg = unit_config(unit, top)
        entry = stored(unit, cfg) if stored else None
        if entry is None and synth:
            from dstar_rtl.flows.synth import synthesize

            if progress:
                progress(f"resources: synthesize {unit} ({cfg.name}, {cfg.hash()}) for ECP5")
            r = synthesize(unit, cfg, "ecp5", reuse=True)
            entry = dict(resources=r["resources"], tools=r["tools"],
                         config_hash=r.get("config_hash", cfg.hash()), flow=r.get("flow", "flat"),
                         seconds=r.get("seconds"),
                         source="dstar_rtl.flows.synth (stored run reused)" if r.get("reused")
                         else "dstar_rtl.flows.synth (Yosys ran)")
        if entry is not None and synth:
            from dstar_rtl.flows.synth import synthesize

            if progress:
                progress(f"resources: synthesize {unit} ({cfg.name}) for ECP5 without DSP blocks")
            entry = dict(entry, fabric=synthesize(unit, cfg, "ecp5", nodsp=True,
                                                  reuse=True)["resources"])
        out[unit] = entry
    return out


def array_areas(cfg: Config, liberty, progress=None) -> dict:
    """``{unit: {area, combinational, sequential, ff, booth, config_hash, source}}`` in the
    library's unit (µm² for Nangate45) for the MPU and the baseline of ``cfg``, and
    ``library: {name, file, sha256}``. Raises :class:`flows.synth.SynthError` when Yosys fails."""
    from dstar_rtl.flows.synth import synthesize

    out, top = {}, cfg
    for unit, booths in (("mpu", (False,)), ("baseline", (False, True))):
        cfg = unit_config(unit, top)
        runs = []
        for booth in booths:
            if progress:
                progress(f"area: synthesize {unit} ({cfg.name}, {cfg.hash()}) on "
                         f"{Path(liberty).name}" + (" with -booth" if booth else ""))
            runs.append(synthesize(unit, cfg, "asic", liberty=liberty, booth=booth, reuse=True))
        r = min(runs, key=lambda x: x["resources"]["area"])
        res = r["resources"]
        out[unit] = dict(area=res["area"], combinational=res.get("combinational_area"),
                         sequential=res.get("sequential_area"), ff=res.get("ff"),
                         booth=bool(r.get("booth")), config_hash=r.get("config_hash", cfg.hash()),
                         source="dstar_rtl.flows.synth (stored run reused)" if r.get("reused")
                         else "dstar_rtl.flows.synth (Yosys ran)")
        lib = r.get("liberty") or {}
        out["library"] = {k: lib.get(k) for k in ("name", "file", "sha256")}
    return out


def array_fmax(cfg: Config, freq_mhz: float = 100.0, seed: int = 1, progress=None) -> dict:
    """``{unit: {fmax_mhz, constraint_mhz, critical_path, seconds, source}}`` for the MPU and the
    baseline of ``cfg`` (the ECP5 netlist with DSP blocks allowed, as :func:`array_resources`
    synthesizes it). Raises :class:`flows.pnr.PnrError` or :class:`flows.synth.SynthError`."""
    from dstar_rtl.flows.pnr import place_and_route
    from dstar_rtl.flows.synth import BUILD_ROOT, synthesize

    out, top = {}, cfg
    for unit in UNITS:
        cfg = unit_config(unit, top)
        r = synthesize(unit, cfg, "ecp5", reuse=True)
        if progress:
            progress(f"fmax: place and route {unit} ({cfg.name}, {cfg.hash()}) on ECP5-85F")
        wd = BUILD_ROOT / f"{unit}-{cfg.name}-{cfg.hash()}" / "pnr-ecp5"
        p = place_and_route(r["netlist"], workdir=wd, freq_mhz=freq_mhz, seed=seed, reuse=True)
        out[unit] = dict(fmax_mhz=p["fmax_mhz"], constraint_mhz=p.get("constraint_mhz"),
                         critical_path=p.get("critical_path"), seconds=p.get("seconds"),
                         source="dstar_rtl.flows.pnr (stored run reused)" if p.get("reused")
                         else "dstar_rtl.flows.pnr (nextpnr ran)")
    return out
