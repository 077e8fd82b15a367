"""``dstar report``: one JSON per (unit, preset, target) and ``REPORT.md`` from the measured
reports in ``reports/`` (typed results, :mod:`results.base`, are loaded as their types).

Nothing is measured here; every figure comes from a file another command wrote (the command is
named beside each table), so the summary is reproducible from those files alone:

* synthesis and Fmax: ``reports/arrays.json`` (PE, MPU, baseline), ``reports/qpu_area.json``,
  ``reports/vpu.json``, ``reports/core_area.json``, ``reports/sweep.json``;
* the core on a DiT block: ``reports/core.json``; a whole DiT sampled on it:
  ``reports/sample.json`` (``dstar sample``);
* the MPU against the INT8 array on DiT layers: ``reports/bench.json`` (``dstar bench``);
* the trained workload's profile: ``reports/profile.json`` (``dstar profile``);
* the arrays' energy per MAC from gate-level simulation: ``reports/energy.json`` (``dstar
  power``);
* the reference DiT family compiled on the presets: ``reports/reference.json`` (``dstar
  measure reference``);
* the core cycle model against the RTL and the paper-scale projection:
  ``reports/perf_model.json`` (``dstar measure perf``), ``reports/projection.json``
  (``dstar measure projection``);
* verification: ``reports/verification.json`` (``dstar measure verification``,
  :mod:`app.reports.verification`: the runner's verdict of every cocotb run of the last
  regression; a run without a verdict, or whose verdict fails, skips or misses a test, is listed
  as not passing), marked stale when today's RTL sources differ from the recorded ones.
"""

from __future__ import annotations

import time
from pathlib import Path

from dstar_rtl.app.benches.perf_validate import PerfModel
from dstar_rtl.app.benches.sizes import Sizes
from dstar_rtl.app.benches.sizes import plot as sizes_plot
from dstar_rtl.app.benches.sizes import table as sizes_table
from dstar_rtl.app.markdown import render
from dstar_rtl.app.reports import state_levers
from dstar_rtl.app.reports.board import BoardBuild
from dstar_rtl.app.reports.core import Core
from dstar_rtl.app.reports.core_area import CoreArea
from dstar_rtl.app.reports.energy import as_data
from dstar_rtl.app.reports.packing import Packing
from dstar_rtl.app.reports.reference import Reference
from dstar_rtl.app.reports.verification import Verification
from dstar_rtl.app.reports.verification import section as verification_section
from dstar_rtl.app.reports.vpu import Vpu
from dstar_rtl.gen.outputs import json_text, write_together
from dstar_rtl.gen.paths import REPORTS
from dstar_rtl.gen.tables import md_table
from dstar_rtl.golden.config import preset as config_preset
from dstar_rtl.models.published import A100_40GB
from dstar_rtl.results.arrays import Arrays
from dstar_rtl.results.bench import Bench
from dstar_rtl.results.compare import Compare
from dstar_rtl.results.energy import Energy
from dstar_rtl.results.profile import Profile
from dstar_rtl.results.projection import Projection
from dstar_rtl.results.qpu_area import QpuArea
from dstar_rtl.results.sample import Sample
from dstar_rtl.sim.sources import digest, elaboration_sources

__all__ = ["collect_units", "write_report",
           "report_files", "side_folder"]


def _load_result(kind: type, name: str):
    """``reports/NAME.json`` loaded as its type (:mod:`results.base`), ``None`` when absent."""
    p = REPORTS / f"{name}.json"
    return kind.load(p) if p.exists() else None


def _entry(unit, preset, target, res, source, config_hash=None, fmax=None, tools=None,
           flow=None):
    return dict(unit=unit, preset=preset, target=target, config_hash=config_hash,
                resources={k: v for k, v in (res or {}).items()}, fmax_mhz=fmax,
                tools=tools or {}, flow=flow or "flat", source=source)


def collect_units() -> list:
    """Every (unit, preset, target) with resources found in ``reports/``."""
    out = []
    arr = _load_result(Arrays, "arrays")
    if arr is not None:
        for unit, targets in arr.synthesis.items():
            for target, r in targets.items():
                pnr = arr.pnr.get(f"{unit}-{target}")
                out.append(_entry(unit, arr.preset, target,
                                  r.resources.as_dict() if r.resources else None,
                                  "reports/arrays.json (dstar measure arrays)",
                                  arr.config_hash, pnr.fmax_mhz if pnr else None, r.tools,
                                  r.flow))
    qpu = _load_result(QpuArea, "qpu_area")
    if qpu is not None:
        for preset, p in qpu.presets.items():
            for target, r in p.qpu.items():
                if r.resources is not None:
                    out.append(_entry("qpu", preset, target, r.resources.as_dict(),
                                      "reports/qpu_area.json (dstar measure qpu-area)",
                                      p.config_hash, None, r.tools, r.flow))
    vpu = _load_result(Vpu, "vpu")
    if vpu is not None and vpu.fpga is not None:
        f = vpu.fpga
        for target, run in (("ecp5", f.ecp5), ("ecp5-nodsp", f.ecp5_nodsp)):
            out.append(_entry("vpu", "fpga", target, run.resources.as_dict(),
                              "reports/vpu.json (dstar measure vpu)", f.config_hash,
                              f.pnr.fmax_mhz if target == "ecp5" else None, run.tools))
    core = _load_result(CoreArea, "core_area")
    if core is not None:
        for preset, r in core.presets.items():
            out.append(_entry("core", preset, "ecp5", r.total.as_dict(),
                              "reports/core_area.json (dstar measure core-area)",
                              r.config_hash, None, r.tools, "abc, module by module"))
    return out


def _is_default(preset: str, config_hash, **overrides) -> bool:
    """Whether ``config_hash`` is today's configuration of ``preset`` (with ``overrides``)."""
    try:
        return config_hash == config_preset(preset, **overrides).hash()
    except (ValueError, TypeError):
        return False


def _config_cell(preset: str, config_hash, **overrides) -> str:
    """``default`` when the row was measured on today's configuration, else its hash marked."""
    if _is_default(preset, config_hash, **overrides):
        return "default"
    return f"`{config_hash}` (**not today's**)" if config_hash else "**unrecorded**"


def _stale_headline() -> list:
    """REPORT.md's first word on staleness: how many experiments of the registry are stale (the
    last section lists them with why), so that no figure below is read as current unless its
    experiment is."""
    from dstar_rtl.app import experiments as ex

    st = ex.stale(ex.read_ledger(REPORTS / ex.LEDGER.name), root=REPORTS.parent)
    if not st:
        return []
    return [f"**{len(st)} of {len(ex.EXPERIMENTS)} experiments are stale** (their code, the "
            "RTL, a tool or an experiment they read changed since they ran; the last section, "
            "*Results and what is stale*, names each and why): a table below from one of them "
            "shows the figures of the code it ran on. `dstar measure --stale` measures them "
            "again.", ""]


def registry_lines(stale: dict | None = None, ledger: dict | None = None) -> list:
    """REPORT.md's last section: every experiment of the registry (:mod:`app.experiments`),
    when ``dstar measure`` last recorded it and, if it is stale, why (``stale``/``ledger``:
    :func:`app.experiments.stale`'s and the ledger, read when not given)."""
    from dstar_rtl.app import experiments as ex

    led = ex.read_ledger(REPORTS / ex.LEDGER.name) if ledger is None else ledger
    st = ex.stale(led, root=REPORTS.parent) if stale is None else stale
    rows = [[n, ", ".join(e.outputs), led.get(n, {}).get("ran", "–"),
             "**stale**: " + "; ".join(st[n]) if n in st else "current"]
            for n, e in ex.EXPERIMENTS.items()]
    return ["## Results and what is stale", "",
            "The experiment registry (`app/experiments.py`): each experiment, its results, "
            "when `dstar measure --all/--stale/--only` last ran it and whether it is stale "
            "(its code, the RTL, a tool or the weights changed, or an experiment it reads ran "
            "after it, or it was never run through the registry). `dstar measure --stale` "
            f"reruns exactly the stale ones: {len(st)} of {len(rows)} now.", "",
            _table(["experiment", "results", "last run", "state"], rows), ""]


def _table(head, rows):
    """Every column left-aligned, floats as Python writes them (the summary's own style)."""
    return md_table(head, rows, left=len(head), digits=None)


def _bench_section(bench: Bench) -> list:
    """REPORT.md lines for ``reports/bench.json`` (``dstar bench``)."""
    def f(v, pct=False):
        return None if v is None else (f"{100 * v:.1f} %" if pct else f"{v:.2f}")

    src = "; ".join(f"{u}: {e.source}" for u, e in bench.resources.items() if e) or "none"
    rows = [[r.layer, f"{r.step} ({r.step_kind})", r.cycles_dstar, r.cycles_int8,
             f(r.cycles_ratio), f(r.lut_ratio), f(r.tput_per_lut_ratio),
             f(r.lane_util, True)] for r in bench.rows]
    for t in [*bench.totals.by_step.values(), bench.totals.all]:
        rows.append([f"**{t.layer}**", None, t.cycles_dstar, t.cycles_int8,
                     f(t.cycles_ratio), f(t.lut_ratio), f(t.tput_per_lut_ratio),
                     f(t.lane_util, True)])
    a = bench.totals.all
    extra = []
    if a.tput_per_area_ratio is not None:
        lib = bench.areas.library if bench.areas else None
        extra.append(f"Cell area ({lib.name if lib else 'standard cells'}): DSTAR/INT8 "
                     f"{f(a.area_ratio)}, throughput per area "
                     f"**{f(a.tput_per_area_ratio)}×**.")
    if a.tput_per_second_ratio is not None:
        fm = bench.fmax
        extra.append(f"Fmax on ECP5: MPU {fm.mpu.fmax_mhz if fm else None} MHz, INT8 array "
                     f"{fm.baseline.fmax_mhz if fm else None} MHz; throughput per second at "
                     f"each one's own clock **{f(a.tput_per_second_ratio)}×**.")
    extra += _whole_system(bench, _load_result(Packing, "qpu_packing"))
    table = _table(["layer", "step", "DSTAR cycles", "INT8 cycles", "INT8/DSTAR cycles",
                    "DSTAR/INT8 LUTs", "DSTAR/INT8 tput/LUT", "lane util"], rows)
    return render("report_bench", b=bench, sources=src, table=table,
                  extra=extra).split("\n")[:-1]


def _whole_system(bench: Bench, packing: Packing | None) -> list:
    """The bench's per-µm² ratio counted as a whole design needs it: the MPU cannot run without
    the QPU that makes its group stream, and both arrays load their weights. The QPU's cell area
    is ``dstar measure packing``'s at the bench's exact configuration (same hash); absent that,
    the line says the ratio above leaves the QPU out."""
    a, areas = bench.totals.all, bench.areas
    if a.tput_per_area_ratio is None or areas is None:
        return []
    qpu = next((r.asic.area for r in (packing.rows if packing else ())
                if r.config_hash == bench.config_hash and r.asic), None)
    loads = a.weight_load_cycles or 0
    return [render("report_design", qpu=qpu, mpu=areas.mpu.area, int8=areas.baseline.area,
                   ratio=None if qpu is None else (areas.mpu.area + qpu) / areas.baseline.area,
                   a=a, loads=loads, with_loads=(a.cycles_int8 + loads) / (a.cycles_dstar + loads),
                   lanes=bench.config["lanes"], preset=bench.preset,
                   default=bench.config_hash == config_preset(bench.preset).hash())]


def _compare_section(rec: Compare | None) -> list:
    """REPORT.md's headline: ``reports/compare.json`` (``dstar measure compare``), the whole DSTAR
    core against the whole INT8 core (``app/templates/report_compare.md``)."""
    if rec is None:
        return render("report_compare", rec=None).split("\n")[:-1]
    f, p = rec.fpga, rec.paper
    d, i = f.cores["dstar"], f.cores["int8"]
    rows = [["`fpga` (RTL)", f"{f.dstar_cycles_per_image:,.0f} / "
             f"{f.int8_cycles_per_image:,.0f}", f"{f.dstar_um2:,.0f} / {f.int8_um2:,.0f}",
             f"**{f.per_um2:.2f}**", f"{f.per_um2_with_sram:.2f}", f"{f.per_lut:.2f}",
             f"{100 * f.qpu_share:.1f} %"],
            ["`paper` (model)", "not measured in this run", "", "", "", "", ""] if p is None else
            [f"`paper` (model, {p.model})", f"{p.dstar_cycles_per_image:,.0f} / "
             f"{p.int8_cycles_per_image:,.0f}", f"{p.dstar_um2:,.0f} / {p.int8_um2:,.0f}",
             f"**{p.per_um2:.2f}**", f"{p.per_um2_with_sram:.2f}", "–",
             f"{100 * p.qpu_share:.1f} %"]]
    now = digest(elaboration_sources())
    stale = [k for k, side in (("fpga", f), ("paper", p))
             if side is not None and side.rtl_sources != now]
    table = _table(["preset", "cycles per image DSTAR / INT8", "cells µm² DSTAR / INT8",
                    "per µm²", "per µm² with SRAM", "per ECP5 LUT", "QPU / (QPU + MPU)"], rows)
    return render("report_compare", rec=rec, f=f, p=p, d=d, i=i, dq=d.quality, iq=i.quality,
                  stale=stale, table=table,
                  xl_speedups=_xl_speedups() if p is not None and p.memory is None else None
                  ).split("\n")[:-1]


def _sample_section(rec: Sample | None) -> list:
    """REPORT.md lines for ``reports/sample.json`` (``dstar sample`` on an RTL backend)."""
    if rec is None or rec.core is None:
        return []
    core, agree = rec.core, rec.classifier_agreement
    psnr = [s.psnr_db for s in rec.samples if s.psnr_db is not None]
    row = [rec.backend, rec.config["name"], len(rec.samples), rec.steps,
           "yes" if core.bit_exact else "no", round(core.cycles_per_step["mean"]),
           round(core.cycles_per_image),
           f"{min(psnr):.1f}-{max(psnr):.1f}" if psnr else None,
           f"{agree.with_float}/{agree.samples}" if agree and agree.with_float is not None
           else None, f"{rec.seconds:.0f}"]
    return render("report_sample", table=_table(
        ["simulator", "datapath", "samples", "steps", "bit-exact", "cycles/step",
         "cycles/image", "PSNR vs float dB", "classifier = float", "seconds"], [row])
    ).split("\n")[:-1]


def _reference_section(rec: Reference | None) -> list:
    """REPORT.md lines for ``reports/reference.json`` (``dstar measure reference``)."""
    if rec is None or not rec.rows:
        return []
    rows = [[r.model, r.preset,
             f"compiled, {r.step_commands:,} commands per step"
             + (f" ({r.command_bits}-bit)" if (r.command_bits or 128) != 128 else "")
             if r.status == "compiled" else f"refused: {r.reason}"] for r in rec.rows]
    return render("report_reference", table=_table(["model", "preset", "status"], rows),
                  runs=[run for run in rec.runs if run.seconds is not None],
                  st=rec.step_times).split("\n")[:-1]


def _energy_section(rec) -> list:
    """REPORT.md lines for ``reports/energy.json`` (``dstar power``; the energy per image and the
    paper chip's when measured), ``app/templates/report_energy.md``."""
    if not rec or "arrays" not in rec:
        return []
    names = {"mpu": "DSTAR MPU", "baseline": "INT8 array"}
    rows = []
    for u, a in rec["arrays"].items():
        t = a["energy"]["total"]
        rows.append([names.get(u, u), f"{a['cells']:,}", f"{a['area_um2']:,.0f}",
                     f"{a['run_cycles']:,}",
                     f"{(t['internal'] + t['switching'] + t['leakage']) / 1e3:,.1f}",
                     f"{a['pj_per_mac']:.3f}", "yes" if a["checked"] else "no"])
    from dstar_rtl.golden.config import ConfigError, preset
    try:
        today = preset(rec.get("preset", "")).hash()
    except (ConfigError, ValueError, KeyError):
        today = None
    sweep = rec.get("precision_sweep")
    precision = ", ".join(f"{b} bits {v / sweep['int8']['8']:.2f}"
                          for b, v in sweep["dstar"].items()) if sweep else None
    im, pc = rec.get("image"), rec.get("paper_chip")
    paper = None if not (im and pc) else _table(
        ["model", "statistics", "DSTAR", "INT8 chip", "A100", "DSTAR/INT8", "A100/DSTAR",
         "floor (same levers)"],
        [[r["model"], r["workload"], f"{r['dstar']['energy_j']:.3g}",
          f"{r['int8']['energy_j']:.3g}", f"{r['a100']['energy_j']:.3g}",
          f"{r['dstar_over_int8']:.2f}", f"{r['a100_over_dstar']:.2f}",
          f"{r['floors']['symmetric']:.2f}" if r.get("floors") else "–"] for r in pc["models"]])
    text = render("report_energy", rec=rec, today=today,
                  stale=rec.get("config_hash") != today, precision=precision,
                  table=_table(["array", "cells", "area µm²", "cycles", "energy pJ", "pJ/MAC",
                                "checked against golden"], rows),
                  im=im, d=im["cores"]["dstar"] if im else None,
                  i=im["cores"]["int8"] if im else None, floors=(im or {}).get("floors"),
                  paper_table=paper, a100_w=A100_40GB["board_w"])
    return text.split("\n")[:-1]


def _xl_speedups() -> str:
    """DiT-XL/2 512's speed-ups of ``reports/projection.json`` (each workload), in words."""
    proj = _load_result(Projection, "projection")
    got = [f"{r.speedup:.2f}× ({r.workload.name} statistics)"
           for r in (proj.rows if proj else ()) if r.model == "DiT-XL/2 512"]
    return " and ".join(got) or "(not projected)"


def _state_headline(proj: Projection | None) -> list:
    """REPORT.md's opening at paper scale (``reports/projection.json``, issue 47): per model
    FMDQ's state, where it lives, the HBM it takes and the speed-up and energy ratio over the
    INT8 chip with every byte charged, and the models DSTAR wins on."""
    rows = proj.rows if proj else ()
    if not rows:
        return []
    from dstar_rtl.models.dit_shapes import MODELS
    names = list(dict.fromkeys(r.model for r in rows))
    wls = list(dict.fromkeys(r.workload.name for r in rows))
    cap = rows[0].memory.hbm_capacity_bytes

    def get(n, w):
        return next(r for r in rows if r.model == n and r.workload.name == w)

    def wins(r):
        return r.speedup > 1 and (r.energy.dstar_over_int8 if r.energy else 2) < 1

    def hidden(n):
        return max(x.cin for x in MODELS[n].linears if x.name.endswith(("fc1", "qk")))
    table = []
    for n in names:
        r0 = get(n, wls[0])
        cells = [f"{get(n, w).speedup:.2f}×" + (
            f" ({get(n, w).energy.dstar_over_int8:.2f})" if get(n, w).energy else "")
            for w in wls]
        table.append([n, hidden(n), f"{r0.dstar.state_bytes / 1e9:.2f}",
                      f"{r0.dstar.hbm_used_bytes / 1e9:.1f}"
                      + ("" if r0.dstar.fits_hbm else " (**does not fit**)"), *cells])
    last = wls[-1]
    table = _table(["model", "hidden", "state GB", "HBM used GB",
                    *[f"{w} statistics" for w in wls]], table)
    return render("report_state", sram=rows[0].on_chip_sram_bytes, cap=cap, table=table,
                  last=last, won=[n for n in names if wins(get(n, last))],
                  lost=[n for n in names if not wins(get(n, last))]).split("\n")[:-1]


def _model_sections(profile, perf, proj) -> list:
    """REPORT.md lines for the profile, the cycle model's validation and the projection
    (``app/templates/report_models.md``; the projection's levers from
    :func:`perf.state_levers.targets`)."""
    def ci(s, fmt="{:.2f}"):
        return f"{fmt.format(s.mean)} [{fmt.format(s.lo)}, {fmt.format(s.hi)}]"
    ctx = dict(profile=profile, perf=perf, proj=proj)
    if profile:
        ctx["profile_table"] = _table(
            ["point", "avg bits", "attention work removed", "PSNR vs float dB",
             "quantized accuracy"],
            [[r.name, ci(r.summary.avg_bits), ci(r.summary.attention_work_removed),
              ci(r.summary.psnr_db, fmt="{:.1f}"), ci(r.summary.quant_correct)]
             for r in profile.runs])
    if perf:
        rows = []
        for r in perf.presets:
            s, b = r.summary, r.block_summary
            rows.append([r.preset, r.shapes, f"{100 * s['compute'].max:.2f} %",
                         f"{100 * s['step'].max:.2f} %", f"{100 * s['step'].mean:.2f} %",
                         f"{100 * b['step'].max:.2f} %" if b.get("step") else None])
        ctx["perf_table"] = _table(["preset", "layer shapes", "max error (compute)",
                                    "max error (step)", "mean error (step)",
                                    "DiT block max error (step)"], rows)
    if proj:
        ctx.update(c=proj.chip, mem=proj.chip.memory, proj_table=_table(
            ["workload", "model", "steps", "DSTAR s/image", "INT8 s/image", "speed-up",
             "A100 bound s/image", "A100 bound / DSTAR", "state GB", "energy DSTAR/INT8",
             "P cache", "lives in"],
            [[r.workload.name, r.model, r.steps, f"{r.dstar.per_image_s:.3f}",
              f"{r.int8.per_image_s:.3f}", f"{r.speedup:.2f}×", f"{r.gpu.per_image_s:.3f}",
              f"{r.a100_over_dstar:.2f}×", f"{r.dstar.state_bytes / 1e9:.2f}",
              f"{r.energy.dstar_over_int8:.2f}" if r.energy else "–",
              f"{r.pcache_bytes / 2**20:.1f} MiB", r.pcache_location] for r in proj.rows]))
    md = render("report_models", **ctx).split("\n")[:-1] if (profile or perf or proj) else []
    if proj:
        md += state_levers.targets(proj.levers, proj.lever_model)
    return md


def side_folder(out) -> Path:
    """The folder beside REPORT.md ``out`` that holds ``units/*.json`` and ``sweep.png``."""
    return Path(out).resolve().parent / "reports"


def write_report(out: Path) -> dict:
    """Write ``out`` (REPORT.md) and, beside it, ``reports/units/*.json`` and
    ``reports/sweep.png`` (so REPORT.md's relative links hold wherever it is written), all
    together (:func:`gen.outputs.write_together`); returns a summary dict."""
    files, summary = report_files(out)
    write_together(files)
    return summary


def report_files(out: Path) -> tuple:
    """``({path: content}, summary)``: REPORT.md ``out`` and the files beside it, unwritten."""
    files = {}
    units = collect_units()
    ver_rec = _load_result(Verification, "verification")
    ver = ver_rec.rows if ver_rec else ()
    side = side_folder(out)
    udir = side / "units"
    for u in units:
        vs = [dict(simulator=v.simulator, run=v.run, config_hash=v.config_hash,
                   tests=v.tests, passed=v.passed, failed=v.failed,
                   passing=v.passing, why=v.why, date=v.date)
              for v in ver if v.unit == u["unit"] and v.preset == u["preset"]]
        files[udir / f"{u['unit']}-{u['preset']}-{u['target']}.json"] = (
            json_text(dict(u, verification=vs)))

    md = ["# DSTAR RTL: report", "",
          f"Regenerated by `dstar report` on {time.strftime('%Y-%m-%d')} from the measured files "
          "in `reports/` (the regression's verdicts too: `reports/verification.json`, recorded "
          "by `dstar measure verification`); each table names the command "
          "that measures its figures, each report's JSON records it (`\"command\"`), and "
          "`make reports` runs every one of them (hours; `make bench`, `make profile` and "
          "`make board` run a part). One JSON per unit, preset and target is in "
          "`reports/units/`.", ""]
    md += _stale_headline()
    md += _state_headline(_load_result(Projection, "projection"))
    md += _compare_section(_load_result(Compare, "compare"))
    shown = [u for u in units if u["target"] != "generic"]
    old = [u for u in shown if not _is_default(u["preset"], u["config_hash"])]
    md += ["## Resources and Fmax (ECP5-85F, Yosys + nextpnr)", "",
           *([f"**Stale**: {len(old)} of {len(shown)} rows were measured on a configuration "
              "other than today's default of their preset (column *configuration*: its hash); "
              "the command in *from* remeasures them.", ""] if old else []),
           _table(["unit", "preset", "target", "configuration", "LUT4", "carry", "LUT RAM",
                   "FF", "DSP", "BRAM", "Fmax MHz", "flow", "from"],
                  [[u["unit"], u["preset"], u["target"], _config_cell(u["preset"],
                                                                      u["config_hash"]),
                    u["resources"].get("lut4"),
                    u["resources"].get("carry"), u["resources"].get("lutram"),
                    u["resources"].get("ff"), u["resources"].get("dsp"),
                    u["resources"].get("bram"),
                    None if u["fmax_mhz"] is None else f"{u['fmax_mhz']:.1f}", u["flow"],
                    u["source"].split(" ")[0]] for u in shown]), ""]
    area = _load_result(CoreArea, "core_area")
    if area is not None:
        md += ["## The core by part", "", "`dstar measure core-area` (details: "
               "`reports/core_area.md`).", ""]
        for name, r in area.presets.items():
            tot = max(1, r.total.lut4 or 1)
            rows = sorted(r.parts.items(), key=lambda kv: -(kv[1].lut4 or 0))
            when = ("" if r.config_hash == config_preset(name).hash() else
                    f" (config `{r.config_hash}`, not today's default: measured before a "
                    f"default switch)")
            md += [f"`{name}`{when}:", "",
                   _table(["part", "LUT4", "share", "FF", "DSP", "BRAM"],
                          [[p, v.lut4, f"{100 * (v.lut4 or 0) / tot:.1f} %", v.ff, v.dsp, v.bram]
                           for p, v in rows]), ""]
        if (side / "core_area.png").exists():
            md += ["![core area by part](reports/core_area.png)", ""]
    sweep = _load_result(Sizes, "sweep")
    if sweep is not None:
        md += ["## Resources against array size", "", "`dstar measure sizes` (ECP5, DSP "
               "blocks, the `tiny` preset with `rows = cols = vpu_lanes = n`; measured "
               f"{sweep.provenance.date}; details: `reports/sweep.md`).", "",
               *sizes_table(sweep)]
        files[side / "sweep.png"] = sizes_plot(sweep)
        md += ["![resources against array size](reports/sweep.png)", ""]
    boards = sorted(REPORTS.glob("board-*.json"))
    if boards:
        rows = []
        for f in boards:
            b = BoardBuild.load(f)
            r = b.resources
            rows.append([b.board, b.preset, r.lut4, r.ff, r.dsp, r.bram, f"{b.fmax_mhz}",
                         f"{b.constraint_mhz:g}", "met" if b.timing_pass else "NOT met", b.baud,
                         f"{b.seconds:.0f}"])
        md += ["## Board builds", "", "`make board`, i.e. `dstar build --board ulx3s --preset "
               "tiny` (the core behind the UART host link; bitstream in `build/board/`).", "",
               _table(["board", "preset", "LUT4", "FF", "DSP", "BRAM", "Fmax MHz",
                       "target MHz", "timing", "baud", "seconds"], rows), ""]
    core = _load_result(Core, "core")
    if core is not None:
        md += ["## The core on a DiT block", "", "`dstar measure core` (details: "
               "`reports/core.md`).", ""]
        for preset, r in core.presets.items():
            rows = []
            for sb in r.baseline:
                tm = sum(b.core_m_busy for b in sb.rows)
                tb = sum(b.baseline for b in sb.rows)
                rows.append([sb.step, sb.kind, r.perf.steps[sb.step].cycles, tm, tb,
                             f"{tb / tm:.2f}×" if tm else None])
            md += [f"`{preset}`:", "",
                   _table(["step", "kind", "cycles", "DSTAR M busy", "INT8 baseline array",
                           "baseline / DSTAR"], rows), ""]
            md += ["Lane utilisation (last cache step): " + ", ".join(
                f"{k} {100 * v.util:.1f} %" for k, v in r.lanes.items() if v.util) + ".", ""]
    md += _sample_section(_load_result(Sample, "sample"))
    md += _reference_section(_load_result(Reference, "reference"))
    bench = _load_result(Bench, "bench")
    if bench is not None:
        md += _bench_section(bench)
    energy = _load_result(Energy, "energy")
    md += _energy_section(as_data(energy) if energy is not None else None)
    md += _model_sections(_load_result(Profile, "profile"), _load_result(PerfModel, "perf_model"),
                          _load_result(Projection, "projection"))
    md += verification_section(ver_rec)
    md += registry_lines()
    files[Path(out)] = "\n".join(md)
    return files, dict(units=len(units), verification=len(ver),
                       verification_passing=sum(v.passing for v in ver), out=str(out))
