"""``reports/energy.md`` and ``energy.png`` from ``dstar power``'s record
(:mod:`bench.power`)."""

from __future__ import annotations

from dstar_rtl.app.markdown import render
from dstar_rtl.gen.outputs import png_writer
from dstar_rtl.gen.tables import md_table
from dstar_rtl.models.published import A100_40GB, BIT_FUSION, HBM2, HOROWITZ_45NM, PAPER_CHIP
from dstar_rtl.results.base import plain
from dstar_rtl.results.energy import Energy

__all__ = ["markdown", "plot_png", "PUBLISHED_INT8_MAC"]

#: Published 45 nm energy of an 8-bit MAC, pJ (:mod:`models.published`): Horowitz's 8-bit
#: multiply plus 32-bit add, and Bit Fusion's fixed 8-bit PE.
PUBLISHED_INT8_MAC = {
    "Horowitz ISSCC 2014 (8-bit mult + 32-bit add, 0.9 V)":
        round(HOROWITZ_45NM["mult8_pj"] + HOROWITZ_45NM["add32_pj"], 6),
    "Bit Fusion fixed 8-bit PE (45 nm, 500 MHz)": BIT_FUSION["int8_pe_pj"]}

_NAMES = {"mpu": "DSTAR MPU", "baseline": "INT8 array"}
_GROUPS = ("pes", "array", "front end", "inputs")


def _total(e: dict) -> float:
    return e["internal"] + e["switching"] + e["leakage"]


def _logic(e: dict) -> float:
    """A record's logic energy (fJ): its combinational cells' internal energy and its nets'
    switching (the flip-flops' internal energy, ``sequential``, and leakage left out)."""
    return e.get("internal", 0.0) - e.get("sequential", 0.0) + e.get("switching", 0.0)


def _int8_pe(rep: dict) -> dict | None:
    """The INT8 PE alone at the report's preset: ``pj_per_mac`` and its ``logic`` (pJ/MAC)."""
    r = (rep.get("pes") or {}).get(rep["preset"], {}).get("int8")
    if not r:
        return None
    t, m = r["total"], r["events"]["macs8"]
    return dict(pj_per_mac=r["pj_per_mac"], logic=_logic(t) / 1e3 / m)


def _pe_table(rep: dict) -> str | None:
    """One PE of each kind alone, at each preset measured."""
    pes = rep.get("pes")
    if not pes:
        return None
    names = {"slice": "DSTAR slice PE", "int8": "INT8 PE"}
    rows = []
    for pre, kinds in pes.items():
        for kind, r in kinds.items():
            t, m = r["total"], r["events"]["macs8"]
            rows.append([pre, names[kind], r["cells"], r["area_um2"], r["run_cycles"], m,
                         f"{r['pj_per_mac']:.3f}", f"{t['sequential'] / 1e3 / m:.3f}",
                         f"{_logic(t) / 1e3 / m:.3f}", f"{t['leakage'] / 1e3 / m:.3f}"])
    return md_table(["preset", "PE", "cells", "area µm²", "cycles", "8-bit MACs", "pJ/MAC",
                     "flip-flops", "logic", "leakage"], rows, left=2)


def _array_tables(rep: dict, t: dict) -> list:
    """The arrays' tables into ``t``; returns the lines on each array's PEs."""
    w, arrays = rep["workload"], rep["arrays"]
    rows = []
    for u, a in arrays.items():
        e = a["energy"]["total"]
        tot = _total(e)
        rows.append([_NAMES.get(u, u), a["cells"], a["area_um2"], a["run_cycles"],
                     f"{tot / 1e3:,.1f}", f"{a['pj_per_mac']:.3f}",
                     *(f"{100 * e[k] / tot:.1f} %" for k in ("internal", "switching",
                                                            "leakage"))])
    t["arrays"] = md_table(["array", "cells", "area µm²", "run cycles", "energy pJ", "pJ/MAC",
                            "internal", "switching", "leakage"], rows)
    t["groups"] = md_table(["array", *_GROUPS], [
        [_NAMES.get(u, u), *(f"{_total(a['by_group'][k]) / 1e3 / w['macs']:.3f}"
                             if k in a["by_group"] else "–" for k in _GROUPS)]
        for u, a in arrays.items()])
    sw = rep.get("precision_sweep")
    if sw:
        i8 = sw["int8"]["8"]
        t["precision"] = md_table(
            ["precision", "DSTAR MPU pJ/MAC", "run cycles", "DSTAR / INT8"],
            [[f"{b} bits", f"{v:.3f}", sw["runs"][f"{b}-bit"]["run_cycles"], f"{v / i8:.2f}"]
             for b, v in sw["dstar"].items()]
            + [["INT8 array, 8 bits", f"{i8:.3f}", sw["runs"]["int8"]["run_cycles"], "1.00"]])
    lines, t["logic"] = [], {}
    for u, a in arrays.items():
        g = a["by_group"].get("pes", {})
        t["logic"][u] = _logic(g) / 1e3 / w["macs"]
        lines.append(f"{_NAMES.get(u, u)} PEs: flip-flops (their internal energy, clock pins "
                     f"included) {g.get('sequential', 0.0) / 1e3 / w['macs']:.3f} pJ/MAC, logic "
                     f"(combinational cells' internal energy and the PEs' net switching) "
                     f"{t['logic'][u]:.3f} pJ/MAC, leakage "
                     f"{g.get('leakage', 0.0) / 1e3 / w['macs']:.3f} pJ/MAC.")
    return lines


def _published_table(rep: dict, i: float, logic: dict, scale: float) -> str:
    """The flow against published 45 nm figures for an 8-bit MAC."""
    pe = _int8_pe(rep)
    rows = []
    for name, e in PUBLISHED_INT8_MAC.items():
        at = e * scale if "0.9 V" in name else e
        rows.append([name, f"{e:.3f}", f"{at:.3f}", f"{i / at:.1f}×",
                     f"{logic.get('baseline', 0.0) / at:.1f}×",
                     *((f"{pe['pj_per_mac'] / at:.1f}×", f"{pe['logic'] / at:.1f}×") if pe
                       else ("–", "–"))])
    return md_table(["source", "pJ/MAC", "at this voltage", "INT8 array / it",
                     "INT8 PEs' logic / it", "INT8 PE alone / it", "its logic / it"], rows)


def _image_tables(im: dict, t: dict):
    """The energy-per-image tables (:mod:`bench.image_energy`) into ``t``."""
    d, i = im["cores"]["dstar"], im["cores"]["int8"]
    rows = [("RTL cycles", d["cycles"], i["cycles"], "{:,}"),
            ("cells µm²", d["area_um2"], i["area_um2"], "{:,.0f}"),
            ("idle logic µJ (clock, leakage)", d["idle_pj"] / 1e6, i["idle_pj"] / 1e6, "{:.2f}"),
            ("data logic µJ (arrays, QPU, VPU)", d["data_pj"] / 1e6, i["data_pj"] / 1e6,
             "{:.2f}"),
            ("SRAM µJ", d["sram_pj"] / 1e6, i["sram_pj"] / 1e6, "{:.2f}"),
            ("**total µJ**", d["total_pj"] / 1e6, i["total_pj"] / 1e6, "{:.2f}")]
    t["image"] = md_table(["", "DSTAR core", "INT8 core", "DSTAR/INT8"],
                          [[name, f.format(a), f.format(b), f"{a / b:.2f}"]
                           for name, a, b, f in rows]
                          + [["PSNR against float, dB (the integer model the core runs)",
                              f"{d['psnr_db']:.2f}", f"{i['psnr_db']:.2f}", ""]])
    keys = sorted(set(d["parts"]) | set(i["parts"]),
                  key=lambda k: -max(d["parts"].get(k, 0), i["parts"].get(k, 0)))
    t["image_parts"] = md_table(["part", "DSTAR core", "INT8 core"],
                                [[k, *(f"{c['parts'][k] / 1e6:.3f}" if k in c["parts"] else "–"
                                       for c in (d, i))] for k in keys])
    t["events"] = md_table(["core", "unit", "event", "events per image", "fJ per event"],
                           [[name, u, f"`{e['event']}`", e["count"],
                             f"{e['fj_per_event']:,.0f}"]
                            for name, c in (("DSTAR", d), ("INT8", i))
                            for u, e in c["events"].items()], left=3)
    t["rams"] = md_table(["core", "RAM", "width × rows", "reads", "writes", "pJ per read"],
                         [[name, r["name"], f"{r['width']} × {r['rows']:,}", r["reads"],
                           r["writes"], f"{r['read_pj']:.1f}"]
                          for name, c in (("DSTAR", d), ("INT8", i))
                          for r in c["sram"]["rams"] if r["reads"] or r["writes"]], left=3)
    lv = im.get("levers")
    if lv:
        after = {s: c["total_pj"] - sum(lv[s].values()) for s, c in im["cores"].items()}
        t["levers"] = md_table(
            ["lever", "DSTAR saves µJ", "INT8 saves µJ"],
            [[name, *(f"{lv[s][k] / 1e6:.2f}" if k in lv[s] else "–" for s in ("dstar", "int8"))]
             for k, name in _LEVER_NAMES.items()]
            + [[f"**all**: DSTAR {after['dstar'] / 1e6:.2f} µJ, INT8 {after['int8'] / 1e6:.2f} "
                f"µJ, DSTAR/INT8 **{after['dstar'] / after['int8']:.2f}**", "", ""]])


#: The levers not built that the energy per image prices (``image_energy.levers``).
_LEVER_NAMES = {
    "clock_gating": "clock gating: each engine's parts clocked only while it is busy",
    "gmem_split": "GMEM split: the group slots in their own small SRAM, the P cache apart",
    "weight_buffer": "weight buffer: one GEMM's weight rows beside the MPU, WMEM read once per "
                     "row and GEMM"}


def _extrapolated(rep: dict) -> str:
    """What extrapolating the power tables would add to the QPU's and the VPU's runs."""
    parts = []
    for u, name in (("qpu", "QPU"), ("vpu", "VPU")):
        ub = rep.get("units", {}).get(u, {}).get("unbounded")
        if ub:
            share = ub["extrapolated_share"]
            parts.append(f"{100 * share / (1 - share):.0f} % to the {name}'s run")
    return " and ".join(parts) or "more"


def _paper_tables(pc: dict, t: dict):
    """The projected paper chip's energy per image (:mod:`perf.chip_energy`) into ``t``."""
    rows = []
    for r in pc["models"]:
        d, i, a = r["dstar"], r["int8"], r["a100"]
        fl = r.get("floors") or {}
        rows.append([r["model"], r["workload"], f"{d['energy_j']:.3g}", f"{d['watts']:.0f}",
                     f"{i['energy_j']:.3g}", f"{i['watts']:.0f}", f"{a['energy_j']:.3g}",
                     f"{r['dstar_over_int8']:.2f}", f"{r['a100_over_dstar']:.2f}",
                     *(f"{fl[k]:.2f}" if k in fl else "–" for k in ("one_sided", "symmetric"))])
    t["paper"] = md_table(["model", "statistics", "DSTAR J", "W", "INT8 J", "W", "A100 J",
                           "DSTAR/INT8", "A100/DSTAR", "floor one-sided", "floor symmetric"],
                          rows, left=2)
    d, i = pc["models"][0]["dstar"]["parts"], pc["models"][0]["int8"]["parts"]
    t["paper_parts"] = md_table(["part", "DSTAR chip", "INT8 chip"], [
        [k, *(f"{x[k] * 1e-12:.3g}" if k in x else "–" for x in (d, i))]
        for k in sorted(set(d) | set(i), key=lambda k: -max(d.get(k, 0), i.get(k, 0)))])


def _markdown(rep: dict) -> str:
    """``reports/energy.md`` (``app/templates/energy.md``) from the result as plain data."""
    from dstar_rtl.golden.config import preset
    from dstar_rtl.perf.chip_memory import PAPER_MEMORY

    w, arrays = rep["workload"], rep["arrays"]
    V = next(iter(arrays.values()))["energy"]["voltage"]
    i = rep["pj_per_mac"]["int8"]["trained_tiles"]
    t = dict(pes=_pe_table(rep), levers=None)
    pe_lines = _array_tables(rep, t)
    scale = (V / 0.9) ** 2
    t["published"] = _published_table(rep, i, t["logic"], scale)
    im, pc = rep.get("image"), rep.get("paper_chip")
    if im:
        _image_tables(im, t)
    if pc:
        _paper_tables(pc, t)
    return render(
        "energy", rep=rep, w=w, t=t, V=V, i=i, d=rep["pj_per_mac"]["dstar"]["trained_tiles"],
        lib=next(iter(arrays.values())).get("library") or {}, sw=rep.get("precision_sweep"),
        layers=", ".join(f"{x['id']} ({x['tokens']}×{x['cin']}→{x['cout']})"
                         for x in w["layers"]),
        pe_lines=pe_lines, scale=scale, im=im, extrapolated=_extrapolated(rep), pc=pc,
        paper=preset("paper"), freq_ghz=PAPER_CHIP["freq_hz"] / 1e9,
        a100_w=A100_40GB["board_w"], bank_kb=PAPER_MEMORY.bank_bytes // 1024,
        core_kb=PAPER_MEMORY.core_buffer_bytes // 1024, hbm_pj=HBM2["pj_per_bit"])[:-1]


def _plot_png(rep: dict):
    """A :func:`gen.outputs.write_together` writer of the energy per MAC by part, both arrays."""
    from matplotlib.figure import Figure

    w = rep["workload"]
    im = rep.get("image")
    fig = Figure(figsize=(12.5 if im else 6, 3.8))
    axes = fig.subplots(1, 2 if im else 1)
    ax = axes[0] if im else axes
    names = [_NAMES.get(u, u) for u in rep["arrays"]]
    bottom = [0.0] * len(names)
    for k in _GROUPS:
        vals = [_total(a["by_group"].get(k, dict(internal=0, switching=0, leakage=0)))
                / 1e3 / w["macs"] for a in rep["arrays"].values()]
        ax.bar(names, vals, bottom=bottom, label=k)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("pJ per MAC")
    ax.set_title(f"Gate-level energy per MAC, preset {rep['preset']}")
    ax.legend(fontsize=8)
    if im:
        ax = axes[1]
        cores = im["cores"]
        labels = ["DSTAR core", "INT8 core"]
        bottom = [0.0, 0.0]
        for key, name in (("idle_pj", "idle logic (clock, leakage)"),
                          ("data_pj", "data logic (arrays, QPU, VPU)")):
            vals = [cores[c][key] / 1e6 for c in ("dstar", "int8")]
            ax.bar(labels, vals, bottom=bottom, label=name)
            bottom = [b + v for b, v in zip(bottom, vals)]
        rams = sorted({k for c in cores.values() for k in c["parts"] if k.startswith("sram: ")},
                      key=lambda k: -cores["dstar"]["parts"].get(k, 0.0))
        for k in rams:
            vals = [cores[c]["parts"].get(k, 0.0) / 1e6 for c in ("dstar", "int8")]
            ax.bar(labels, vals, bottom=bottom, label=k.replace("sram: ", "SRAM "))
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_ylabel("µJ per image")
        ax.set_title("One digits-DiT image on the whole fpga core")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return png_writer(fig, 120)


def as_data(result: Energy) -> dict:
    """The result as the renderers read it: plain data without the figures that are not
    there, with the command and date of its run."""
    return dict(plain(result, present=True), generated=result.provenance.date,
                **({"command": result.provenance.command} if result.provenance.command
                   else {}))


def markdown(result: Energy) -> str:
    """``reports/energy.md`` from its result."""
    return _markdown(as_data(result))


def plot_png(result: Energy):
    """A :func:`gen.outputs.write_together` writer of the energy per MAC by part, both arrays
    (and the energy per image of both cores, when measured)."""
    return _plot_png(as_data(result))
