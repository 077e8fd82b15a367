"""Issue-15 report: the slice PE's datapath levers (``digit_product``, ``digits``) measured alone.

``dstar measure pe-levers`` writes ``reports/pe_levers.json`` and ``reports/pe_levers.md``:

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
import time
from pathlib import Path

from dstar_rtl.app.options import Parser
from dstar_rtl.flows.pnr import PnrError, place_and_route
from dstar_rtl.flows.synth import BUILD_ROOT, synthesize, yosys_version
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.outputs import check_output_dir, json_text, read_json, write_together
from dstar_rtl.gen.paths import ROOT
from dstar_rtl.gen.progress import say
from dstar_rtl.golden.config import ConfigError, preset

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
                critical_path=p.get("critical_path"))


def measure_pe(freq, seed, reuse, fmax=True):
    out = {}
    units = [("pe", _label(dp, dg), dict(digit_product=dp, digits=dg)) for dp, dg in SETTINGS]
    units += [(unit, label, over) for label, (unit, over) in EXTRA_PE.items()]
    for unit, label, over in units:
        cfg = preset("fpga", **over)
        row = dict(unit=unit, config_hash=cfg.hash(), **over)
        for target, nodsp, vl in VARIANTS:
            r = _synth(unit, cfg, target, nodsp, reuse)
            row[vl] = dict(resources=r["resources"], seconds=r.get("seconds"),
                           flow=r.get("flow"))
            if vl == "generic":
                row[vl]["transistors"] = r.get("transistors")
            if vl == "ecp5":
                netlist = r.get("netlist")
            say(f"  {label} {vl}: {r['resources']}")
        if fmax:
            row.update(_fmax(unit, cfg, netlist, freq, seed, reuse))
            say(f"  {label} Fmax {row.get('fmax_mhz')}")
        out[label] = row
    return out


def measure_mpu_abc(reuse):
    """``multiply/slice`` through the ``abc -lut 4`` flow too: the flow ``select`` takes when
    abc9 asserts, so that the MPU comparison is like for like."""
    cfg = preset("fpga", digit_product="multiply", digits="slice")
    row = dict(unit="mpu", config_hash=cfg.hash(), digit_product="multiply", digits="slice")
    for target, nodsp, vl in VARIANTS[:2]:
        r = _synth("mpu", cfg, target, nodsp, reuse, force_abc=True)
        row[vl] = dict(resources=r["resources"], seconds=r.get("seconds"), flow=r.get("flow"))
        say(f"  mpu multiply/slice (abc) {vl}: {r['resources']}")
    return row


def measure_mpu(settings, reuse, freq=100.0, seed=1, fmax=True):
    """The ``fpga`` MPU for each ``(label, overrides)``; the rows of :data:`MPU_FMAX` are also
    placed and routed (the ECP5 netlist, out of context, PEs kept as modules during synthesis
    and flattened after mapping, as :mod:`flows.synth` does)."""
    out = {}
    for label, over in settings:
        cfg = preset("fpga", **over)
        row = dict(unit="mpu", config_hash=cfg.hash(), **over)
        for target, nodsp, vl in VARIANTS[:2]:
            if over.get("digit_product") == "select" and nodsp:
                continue        # no multiplier: -nodsp maps the same netlist
            r = _synth("mpu", cfg, target, nodsp, reuse)
            row[vl] = dict(resources=r["resources"], seconds=r.get("seconds"),
                           flow=r.get("flow"))
            if vl == "ecp5":
                netlist = r.get("netlist")
            say(f"  mpu {label} {vl}: {r['resources']}")
        if fmax and label in MPU_FMAX:
            row.update(_fmax("mpu", cfg, netlist, freq, seed, reuse))
            say(f"  mpu {label} Fmax {row.get('fmax_mhz')}")
        out[label] = row
    return out


def _lut(r):
    return r["resources"]["lut_total"]


def markdown(data) -> str:
    pe = data["pe"]
    lines = ["# Slice-PE datapath levers (`fpga` preset)", "",
             f"Generated by `dstar measure pe-levers` on {data['date']} (Yosys "
             f"{data['tools']['yosys']}). `digit_product`: `multiply` writes `digit * w` (Yosys "
             "infers `$mul`, a MULT18X18D per lane on ECP5), `select` picks the weight's "
             "multiples with the negations as carry-ins of the adder tree. `digits`: `slice` "
             "(2-bit slices, top one signed) or `booth` (radix-4 Booth, {-2..2}, 3-bit digits). "
             "LUT total = LUT4 + 2 × CCU2C.", "",
             "## One PE", "",
             "| PE | ECP5 LUT total | LUT4 | CCU2C | FF | MULT18X18D | ECP5 -nodsp LUT total | "
             "LUT4 | CCU2C | FF | generic cells | transistors | Fmax MHz |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, row in pe.items():
        e, n, g = row["ecp5"]["resources"], row["ecp5-nodsp"]["resources"], row["generic"]
        lines.append(f"| {label} | {e['lut_total']} | {e['lut4']} | {e['carry']} | {e['ff']} | "
                     f"{e['dsp']} | {n['lut_total']} | {n['lut4']} | {n['carry']} | {n['ff']} | "
                     f"{g['resources']['cells']} | {g.get('transistors')} | "
                     f"{row.get('fmax_mhz', row.get('fmax_error', '–'))} |")
    base = pe["multiply/slice"]
    lines += ["", "Against `multiply/slice` (the PE before issue 15), ECP5 `-nodsp` LUT total and "
              "generic transistors:", ""]
    for label, row in pe.items():
        if label in ("multiply/slice",):
            continue
        dl = _lut(row["ecp5-nodsp"]) - _lut(base["ecp5-nodsp"])
        dt = row["generic"]["transistors"] - base["generic"]["transistors"]
        lines.append(f"- {label}: {dl:+d} LUT "
                     f"({_lut(row['ecp5-nodsp']) / _lut(base['ecp5-nodsp']):.2f}×), "
                     f"{dt:+d} transistors "
                     f"({row['generic']['transistors'] / base['generic']['transistors']:.2f}×)")
    if data.get("mpu"):
        lines += ["", "## MPU", "",
                  "`flow` is the LUT mapper: `flat` is `synth_ecp5`'s abc9; abc9 asserts on the "
                  "select MPUs, which then go through `abc -lut 4` (`abc`), so `multiply/slice` "
                  "is given through that flow too: compare rows of the same flow. A select MPU "
                  "has no multiplier, so `-nodsp` maps the same netlist and is not repeated.", "",
                  "| MPU | variant | LUT total | LUT4 | CCU2C | FF | MULT18X18D | DP16KD | flow | "
                  "Yosys s | Fmax MHz |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
        for label, row in data["mpu"].items():
            for vl in ("ecp5", "ecp5-nodsp"):
                if vl not in row:
                    continue
                r = row[vl]["resources"]
                lines.append(f"| {label} | {vl} | {r['lut_total']} | {r['lut4']} | {r['carry']} | "
                             f"{r['ff']} | {r['dsp']} | {r['bram']} | {row[vl].get('flow')} | "
                             f"{row[vl].get('seconds')} | "
                             f"{row.get('fmax_mhz', '–') if vl == 'ecp5' else '–'} |")
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


def main(argv=None, prog=None):
    ap = Parser(prog=prog or "dstar measure pe-levers", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "reports"),
                    help="report directory (default: reports/)")
    ap.add_argument("--freq", type=float, default=100.0,
                    help="nextpnr constraint, MHz (default 100)")
    ap.add_argument("--seed", type=int, default=1, help="nextpnr seed (default 1)")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse stored synthesis/P&R results of identical runs")
    ap.add_argument("--no-fmax", action="store_true", help="skip place and route (no Fmax)")
    ap.add_argument("--mpu", action="store_true", help="also measure the MPU (step 3)")
    ap.add_argument("--mpu-settings", default="multiply/slice,select/slice,select/booth,"
                    + ",".join(EXTRA_MPU),
                    help="comma-separated MPU rows of --mpu: DIGIT_PRODUCT/DIGITS or an extra "
                         "row's label")
    ap.add_argument("--markdown-only", action="store_true",
                    help="only rewrite pe_levers.md from an existing pe_levers.json")
    args = ap.parse_args(argv)
    out = Path(args.out)
    check_output_dir(out)
    jpath, mpath = out / "pe_levers.json", out / "pe_levers.md"
    if args.markdown_only:
        data = read_json(jpath, "--markdown-only")
        write_together({mpath: markdown(data)})
        return 0
    if not args.freq > 0:
        raise UserError(f"--freq must be positive, not {args.freq:g}")
    settings = mpu_settings(args.mpu_settings) if args.mpu else []
    data = dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                host=dict(cpus=os.cpu_count(), machine=platform.machine()),
                tools=dict(yosys=yosys_version()), preset="fpga",
                pnr=dict(freq_mhz=args.freq, seed=args.seed, device="85k"))
    data["pe"] = measure_pe(args.freq, args.seed, args.reuse, fmax=not args.no_fmax)
    if args.mpu:
        data["mpu"] = measure_mpu(settings, args.reuse, args.freq, args.seed,
                                  fmax=not args.no_fmax)
        data["mpu"]["multiply/slice (abc flow)"] = measure_mpu_abc(args.reuse)
    write_together({jpath: json_text(data), mpath: markdown(data)})
    say(f"wrote {jpath} and {mpath}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
