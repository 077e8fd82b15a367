"""ASIC cell area of the units on a standard-cell library (Nangate45 by default).

``python -m fpga.report_asic [--liberty FILE] [--jobs 2] [--reuse]`` synthesizes, one fresh
Yosys process per configuration (``fpga.synth.synthesize(..., "asic")``: ``synth``,
``dfflibmap``, ``abc -liberty``, ``stat -liberty``), in parallel over ``--jobs`` processes:

- ``pe`` and ``baseline_pe`` (``tiny``, ``fpga``), flattened, with and without ``synth -booth``;
- ``mpu`` and ``baseline`` (``tiny``, ``fpga``) with their hierarchy kept (area of the PEs, the
  array's skew and drain chain, the front end), the weight memory left out as a macro (its bits
  listed apart); the baseline also with ``-booth``;
- ``qpu`` and ``vpu`` (``tiny``) by part, RAMs left out as macros, ROM tables as logic.

It writes ``reports/asic_area.json`` and ``reports/asic_area.md``. The INT8 baseline is taken at
its best (the smaller area of the runs with and without ``-booth``) for the DSTAR/INT8 ratios.
Without ``--liberty`` it uses ``../shared/pdk/nangate45/nangate45_typ.lib.gz`` beside the
project, and stops with a one-line message when that file is absent. The library is never
copied into the repository: the report records its file name and sha256.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports"
NANGATE = ROOT.parent / "shared" / "pdk" / "nangate45" / "nangate45_typ.lib.gz"

#: (unit, preset, booth, parts) of every run.
RUNS = ([(u, p, b, False) for u in ("pe", "baseline_pe") for p in ("tiny", "fpga")
         for b in (False, True)]
        + [("mpu", p, False, True) for p in ("tiny", "fpga")]
        + [("baseline", p, b, True) for p in ("tiny", "fpga") for b in (False, True)]
        + [("qpu", "tiny", False, True), ("vpu", "tiny", False, True)])

_T0 = time.perf_counter()


def _say(msg):
    print(f"[{time.perf_counter() - _T0:7.1f} s] {msg}", file=sys.stderr, flush=True)


def _key(unit, name, booth):
    return f"{unit}-{name}" + ("-booth" if booth else "")


def _one(unit, name, booth, parts, liberty, reuse):
    from golden.config import preset

    from .synth import synthesize

    r = synthesize(unit, preset(name), "asic", liberty=liberty, booth=booth, parts=parts,
                   reuse=reuse)
    r.pop("script", None)
    return r


def _part_of(unit: str, module: str, top: str) -> str:
    """The part a module belongs to: PEs together, every other module by its path."""
    path = module[len(top) + 1:] if module.startswith(top + ".") else ""
    if ".pe_" in "." + path or path.startswith("pe_"):
        return "PEs"
    if not path:
        return {"mpu": "front end (weight buffer control, tile flow)",
                "baseline": "front end (weight buffer control, tile flow)",
                "qpu": "top (glue, stream control)",
                "vpu": "top (control, row buffer ports)"}.get(unit, "top")
    if path == "array":
        return "array (skew, drain chain)"
    return path


def parts_of(res: dict) -> dict:
    """``{part: {area, combinational, sequential, ff, modules}}`` from a ``parts`` result."""
    out = {}
    for mod, m in res.get("modules", {}).items():
        p = out.setdefault(_part_of(res["unit"], mod, res["top"]),
                           dict(area=0.0, combinational=0.0, sequential=0.0, ff=0, modules=0))
        for k in ("area", "combinational", "sequential"):
            p[k] = round(p[k] + m[k], 3)
        p["ff"] += m["ff"]
        p["modules"] += 1
    return out


def _summary(r: dict) -> dict:
    x = r["resources"]
    return dict(area=x["area"], combinational=x["combinational_area"],
                sequential=x["sequential_area"], ff=x["ff"], cells=x["cells"],
                ram_bits=x["ram_bits"], rom_bits=x["rom_bits"],
                delay_ns=r["timing"]["delay"], levels=r["timing"]["levels"],
                seconds=r["seconds"], booth=r["booth"], config_hash=r["config_hash"])


def collect(results: dict) -> dict:
    """The report's figures from ``{key: synthesize result}``."""
    units = {}
    for key, r in results.items():
        s = _summary(r)
        if r.get("parts"):
            s["parts"] = parts_of(r)
        s["memories"] = [m for m in r["memories"]["list"] if not m["rom"]]
        units[key] = s
    best, ratios = {}, {}
    for unit in ("baseline_pe", "baseline", "pe"):
        for name in ("tiny", "fpga"):
            cands = [k for k in (_key(unit, name, False), _key(unit, name, True)) if k in units]
            if cands:
                k = min(cands, key=lambda c: units[c]["area"])
                best[f"{unit}-{name}"] = dict(key=k, area=units[k]["area"],
                                             booth=units[k]["booth"])
    for name in ("tiny", "fpga"):
        for dstar, int8, label in (("pe", "baseline_pe", "PE"), ("mpu", "baseline", "array")):
            d = (best.get(f"{dstar}-{name}") or {}).get("area") or \
                (units.get(_key(dstar, name, False)) or {}).get("area")
            i = (best.get(f"{int8}-{name}") or {}).get("area")
            if d and i:
                ratios[f"{label}-{name}"] = dict(dstar=d, int8_best=i, ratio=round(d / i, 3))
    return dict(units=units, best=best, ratios=ratios)


def _f(v, nd=0):
    return "–" if v is None else f"{v:,.{nd}f}"


def _table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1))
           + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def render(rep: dict) -> str:
    lib = rep["liberty"]
    u = rep["units"]
    md = ["# ASIC cell area (standard cells)", "",
          f"Library **{lib['name']}** (`{lib['file']}`, sha256 `{lib['sha256']}`), "
          f"Yosys {rep['yosys']}; `python -m fpga.report_asic` (`fpga/synth.py`, target "
          "`asic`): `synth` (flattened for single PEs, hierarchy kept for the units broken "
          "down by part), `dfflibmap -liberty`, `abc -liberty`, `stat -liberty`; one fresh "
          "Yosys process per configuration. Areas in µm² (the library's unit); *sequential* "
          "is the area of the library's `ff`/`latch` cells, *combinational* the rest; they sum "
          "to the total. RAMs (memories with a write port: the arrays' weight buffers, the "
          "VPU's and QPU's buffers) are **left out as macros**: their bits are listed, their "
          "area is in no total; ROM tables are synthesized as logic.", "",
          "*Delay* is the critical path of the mapped netlist in ns, computed by "
          "`fpga/liberty.py` from the library's NLDM tables (clock-to-Q, cell delays at the "
          "actual fan-out load, setup): no wire load, ideal clock and inputs, the netlist as "
          "ABC maps it for area (no buffer trees, so high-fan-out enables and broadcasts weigh "
          "in the arrays; a placed, buffered design is faster). It is not ABC's own `stime` "
          "figure: the WebAssembly Yosys loses ABC's standard output, and Yosys `sta` has only "
          "unit delays. For the single PEs it is a logic-depth figure worth comparing; for the "
          "units by part the path is a few cells driving one net with hundreds of loads, far "
          "outside the library's tables (extrapolated), so it says *that net needs a buffer "
          "tree*, not what clock the unit reaches.", "",
          "## Single PEs (flattened)", ""]
    rows = []
    for unit, label in (("pe", "SlicePE (DSTAR)"), ("baseline_pe", "Int8PE (baseline)")):
        for name in ("tiny", "fpga"):
            for booth in (False, True):
                k = _key(unit, name, booth)
                if k not in u:
                    continue
                s = u[k]
                bst = rep["best"].get(f"{unit}-{name}", {}).get("key") == k
                rows.append([f"{label} `{name}`" + (" `-booth`" if booth else "")
                             + (" **best**" if bst else ""), _f(s["area"], 1),
                             _f(s["combinational"], 1), _f(s["sequential"], 1), _f(s["ff"]),
                             _f(s["cells"]), f"{s['delay_ns']:.2f}", s["levels"]])
    md += [_table(["unit", "area µm²", "comb.", "seq.", "FF", "cells", "delay ns (unbuffered)",
                   "levels"],
                  rows), ""]
    md += ["## Arrays and units by part (hierarchy kept)", ""]
    for k, s in u.items():
        if "parts" not in s:
            continue
        mem = ", ".join(f"`{m['name']}` {m['size']}×{m['width']} = {m['bits']:,} bits"
                        for m in s["memories"]) or "none"
        md += [f"### `{k}`", "",
               _table(["part", "modules", "area µm²", "share", "comb.", "seq.", "FF"],
                      [[p, v["modules"], _f(v["area"], 1),
                        f"{100 * v['area'] / s['area']:.1f} %", _f(v["combinational"], 1),
                        _f(v["sequential"], 1), _f(v["ff"])]
                       for p, v in sorted(s["parts"].items(), key=lambda kv: -kv[1]["area"])]
                      + [["**total**", "", f"**{_f(s['area'], 1)}**", "",
                          _f(s["combinational"], 1), _f(s["sequential"], 1), _f(s["ff"])]]),
               "", f"RAMs left out as macros: {mem}. ROM bits as logic: {s['rom_bits']:,}. "
               f"Critical path (unbuffered, see above) {s['delay_ns']:.2f} ns over "
               f"{s['levels']} cells; "
               f"Yosys {s['seconds']:,.0f} s.", ""]
    md += ["## DSTAR / INT8 area ratios", "",
           "The INT8 side at its best (the smaller of the runs with and without `-booth`); the "
           "arrays without their weight memories.", "",
           _table(["", "DSTAR µm²", "INT8 best µm²", "DSTAR / INT8"],
                  [[k, _f(v["dstar"], 1), _f(v["int8_best"], 1), f"{v['ratio']:.3f}"]
                   for k, v in rep["ratios"].items()]), ""]
    if rep.get("failed"):
        md += ["## Runs that failed", ""] + [f"- `{k}`: {v}" for k, v in rep["failed"].items()]
        md += [""]
    wt = rep.get("worktree") or {}
    md += [f"Generated {rep['generated']} from commit `{(wt.get('commit') or '?')[:12]}`"
           + (f" with uncommitted changes to {', '.join(f'`{m}`' for m in wt['modified'])}"
              if wt.get("modified") else "") + " (config hashes in the JSON).", ""]
    return "\n".join(md)


def _worktree() -> dict:
    """The commit and the uncommitted changes to the sources elaboration reads."""
    import subprocess

    def git(*a):
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True,
                                  timeout=30).stdout.rstrip("\n")
        except (OSError, subprocess.SubprocessError):
            return ""
    return dict(commit=git("rev-parse", "HEAD").strip(),
                modified=[ln[3:] for ln in git("status", "--porcelain", "--", "rtl", "golden",
                                                 "gen").splitlines()])


def main(argv=None) -> int:
    from gen.outputs import check_outputs, json_text, write_together

    from .synth import SynthError, copy_liberty, yosys_version

    ap = argparse.ArgumentParser(prog="python -m fpga.report_asic",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--liberty", type=Path, default=None,
                    help=f"the library (default: {NANGATE})")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--reuse", action="store_true",
                    help="take stored results of identical runs")
    ap.add_argument("--only", nargs="+", metavar="UNIT", help="only these units")
    args = ap.parse_args(argv)
    liberty = args.liberty or NANGATE
    if not liberty.is_file():
        print(f"report_asic: error: liberty file not found: {liberty} (pass --liberty FILE; "
              "the project ships no library)", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print("report_asic: error: --jobs must be at least 1", file=sys.stderr)
        return 2
    js, md = OUT / "asic_area.json", OUT / "asic_area.md"
    check_outputs(js, md, inputs=[liberty])
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        info = copy_liberty(liberty, Path(tmp) / "cells.lib")
    runs = [r for r in RUNS if not args.only or r[0] in args.only]
    results, failed = {}, {}
    _say(f"{len(runs)} configurations on {info['name']} ({liberty.name}), {args.jobs} jobs")
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futs = {}
        for unit, name, booth, parts in runs:
            k = _key(unit, name, booth)
            _say(f"queued {k}")
            futs[pool.submit(_one, unit, name, booth, parts, str(liberty), args.reuse)] = k
        for f in as_completed(futs):
            k = futs[f]
            try:
                results[k] = f.result()
                r = results[k]["resources"]
                _say(f"end   {k}: {r['area']:,.1f} µm² ({results[k]['seconds']:.0f} s"
                     f"{', reused' if results[k].get('reused') else ''})")
            except (SynthError, OSError, ValueError) as exc:
                failed[k] = str(exc)
                _say(f"end   {k}: failed: {exc}")
    order = [_key(u, p, b) for u, p, b, _ in runs]
    results = {k: results[k] for k in order if k in results}
    rep = dict(liberty=info, yosys=yosys_version(), **collect(results), failed=failed,
               generated=time.strftime("%Y-%m-%d %H:%M"), worktree=_worktree())
    write_together({js: json_text(rep), md: render(rep)})
    _say(f"wrote {md} and {js.name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
