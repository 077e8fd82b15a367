"""Issue-15 report: the slice PE's datapath levers (``digit_product``, ``digits``) measured alone.

``dstar measure pe-levers`` writes ``reports/pe_levers.json`` (the typed result :class:`PeLevers`)
and ``reports/pe_levers.md`` through the one measurement runner (:data:`MEASUREMENT`):

1. one PE (unit ``pe``) of the ``fpga`` preset for each lever setting, ``digit_product`` in
   {multiply, select} × ``digits`` in {slice, booth}, and the INT8 PE (``baseline_pe``), with
   Yosys for ECP5 with DSP blocks allowed (``synth_ecp5``), without (``-nodsp``) and for generic
   gates (``synth; stat -tech cmos``), one fresh Yosys process per run (:mod:`flows.synth`);
2. nextpnr-ecp5 Fmax of each of those PEs (the netlist with DSP blocks allowed), out of context,
   on the LFE5U-85F at ``--freq`` with a fixed seed (:mod:`flows.pnr`);
3. with ``--mpu``: the MPU of the ``fpga`` preset for the settings in ``--mpu-settings`` with
   DSP blocks allowed (the check that ``select`` maps no MULT18X18D) and ``-nodsp``, and the
   nextpnr Fmax of the MPUs in :data:`MPU_FMAX` (same device, frequency and seed as the PEs).

Beyond the four digit settings, :data:`EXTRA_PE` and :data:`EXTRA_MPU` add the weights broadcast
down each column (``weight_hop = rows``, ``bcast``), also the row operands along each row
(``act_hop = cols``, ``xbcast``), the INT8 PE with the same, and ``pe_stages = 2``.

The INT8 PE's multiplier is left to the tools (a MULT18X18D, or Yosys's own fabric multiplier
with ``-nodsp``): that is the best mapping Yosys has for an 8 × 8 product. Yosys 0.70's abc9
sometimes asserts in ``abc_ops_reintegrate`` on the MPU; the run is then repeated with
``abc -lut 4`` (the fallback :func:`flows.synth.synthesize_rtlil` takes for its other known
assertion) and marked ``flow: abc``.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.flows.pnr import PnrError, place_and_route
from dstar_rtl.flows.synth import BUILD_ROOT, synthesize, yosys_version
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.progress import say
from dstar_rtl.golden.config import ConfigError, preset
from dstar_rtl.results.pe_levers import LeverRow, PeLevers, PnrSettings
from dstar_rtl.results.quantities import CriticalPath, FlowRun

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


def _lut(r: FlowRun) -> int:
    return r.resources.lut_total


def _fmax_cell(row: LeverRow):
    return row.fmax_mhz if row.fmax_mhz is not None else (row.fmax_error or "–")


def markdown(data: PeLevers) -> str:
    """``reports/pe_levers.md`` from its result."""
    pe = {r.label: r for r in data.pe}
    lines = ["# Slice-PE datapath levers (`fpga` preset)", "",
             f"Generated by `dstar measure pe-levers` on {data.provenance.date} (Yosys "
             f"{data.tools['yosys']}). `digit_product`: `multiply` writes `digit * w` (Yosys "
             "infers `$mul`, a MULT18X18D per lane on ECP5), `select` picks the weight's "
             "multiples with the negations as carry-ins of the adder tree. `digits`: `slice` "
             "(2-bit slices, top one signed) or `booth` (radix-4 Booth, {-2..2}, 3-bit digits). "
             "LUT total = LUT4 + 2 × CCU2C.", "",
             "## One PE", "",
             "| PE | ECP5 LUT total | LUT4 | CCU2C | FF | MULT18X18D | ECP5 -nodsp LUT total | "
             "LUT4 | CCU2C | FF | generic cells | transistors | Fmax MHz |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, row in pe.items():
        e, n, g = row.ecp5.resources, row.ecp5_nodsp.resources, row.generic.resources
        lines.append(f"| {label} | {e.lut_total} | {e.lut4} | {e.carry} | {e.ff} | "
                     f"{e.dsp} | {n.lut_total} | {n.lut4} | {n.carry} | {n.ff} | "
                     f"{g.cells} | {g.transistors} | {_fmax_cell(row)} |")
    base = pe["multiply/slice"]
    lines += ["", "Against `multiply/slice` (the PE before issue 15), ECP5 `-nodsp` LUT total and "
              "generic transistors:", ""]
    for label, row in pe.items():
        if label in ("multiply/slice",):
            continue
        dl = _lut(row.ecp5_nodsp) - _lut(base.ecp5_nodsp)
        tr, tb = row.generic.resources.transistors, base.generic.resources.transistors
        lines.append(f"- {label}: {dl:+d} LUT "
                     f"({_lut(row.ecp5_nodsp) / _lut(base.ecp5_nodsp):.2f}×), "
                     f"{tr - tb:+d} transistors ({tr / tb:.2f}×)")
    if data.mpu:
        lines += ["", "## MPU", "",
                  "`flow` is the LUT mapper: `flat` is `synth_ecp5`'s abc9; abc9 asserts on the "
                  "select MPUs, which then go through `abc -lut 4` (`abc`), so `multiply/slice` "
                  "is given through that flow too: compare rows of the same flow. A select MPU "
                  "has no multiplier, so `-nodsp` maps the same netlist and is not repeated.", "",
                  "| MPU | variant | LUT total | LUT4 | CCU2C | FF | MULT18X18D | DP16KD | flow | "
                  "Yosys s | Fmax MHz |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
        for row in data.mpu:
            for vl, run in (("ecp5", row.ecp5), ("ecp5-nodsp", row.ecp5_nodsp)):
                if run is None:
                    continue
                r = run.resources
                fm = row.fmax_mhz if row.fmax_mhz is not None else "–"
                lines.append(f"| {row.label} | {vl} | {r.lut_total} | {r.lut4} | {r.carry} | "
                             f"{r.ff} | {r.dsp} | {r.bram} | {run.flow} | {run.seconds} | "
                             f"{fm if vl == 'ecp5' else '–'} |")
    lines.append("")
    return "\n".join(lines)


def mpu_settings(text: str) -> list:
    """``[(label, Config overrides)]`` of ``--mpu-settings`` (comma-separated labels: those of
    :data:`EXTRA_MPU` or ``DIGIT_PRODUCT/DIGITS``); :class:`UserError` for a bad label."""
    settings = []
    for label in (x for x in text.split(",") if x):
        if label in EXTRA_MPU:
            settings.append((label, EXTRA_MPU[label]))
            continue
        parts = label.split("/")
        if len(parts) != 2:
            raise UserError(f"--mpu-settings: {label!r} is neither DIGIT_PRODUCT/DIGITS nor one "
                            f"of {sorted(EXTRA_MPU)}")
        over = dict(digit_product=parts[0], digits=parts[1])
        try:
            preset("fpga", **over)
        except ConfigError as exc:
            raise UserError(f"--mpu-settings {label}: {exc}") from None
        settings.append((label, over))
    return settings


@dataclass(frozen=True)
class PeLeversOptions:
    """What ``dstar measure pe-levers`` measures (checked at construction)."""

    freq: float = option(100.0, "nextpnr constraint, MHz")
    seed: int = option(1, "nextpnr seed")
    reuse: bool = option(False, "reuse stored synthesis/P&R results of identical runs")
    no_fmax: bool = option(False, "skip place and route (no Fmax)")
    mpu: bool = option(False, "also measure the MPU (step 3)")
    mpu_settings: str = option("multiply/slice,select/slice,select/booth," + ",".join(EXTRA_MPU),
                               "comma-separated MPU rows of --mpu: DIGIT_PRODUCT/DIGITS or an "
                               "extra row's label")

    def __post_init__(self):
        if not self.freq > 0:
            raise UserError(f"--freq must be positive, not {self.freq:g}")
        mpu_settings(self.mpu_settings)


def measure(opts: PeLeversOptions, previous=None) -> PeLevers:
    """Every PE setting and, with ``--mpu``, every MPU row (progress on stderr)."""
    pe = measure_pe(opts.freq, opts.seed, opts.reuse, fmax=not opts.no_fmax)
    mpu = ()
    if opts.mpu:
        mpu = measure_mpu(mpu_settings(opts.mpu_settings), opts.reuse, opts.freq, opts.seed,
                          fmax=not opts.no_fmax) + (measure_mpu_abc(opts.reuse),)
    return PeLevers(run_provenance("pe-levers", {r.label: r.config_hash for r in pe + mpu}),
                    host=dict(cpus=os.cpu_count(), machine=platform.machine()),
                    tools=dict(yosys=yosys_version()), preset="fpga",
                    pnr=PnrSettings(freq_mhz=opts.freq, seed=opts.seed, device="85k"),
                    pe=pe, mpu=mpu)


MEASUREMENT = Measurement(
    name="pe-levers", stem="pe_levers",
    summary="The slice PE's datapath levers (digit_product, digits, operand hops, stages) "
            "measured alone: ECP5 and generic synthesis and Fmax of one PE, and with --mpu of "
            "the MPU.", options=PeLeversOptions, result=PeLevers, measure=measure,
    render=markdown)
