"""The DSTAR and INT8 PEs in standard cells, lever by lever (``dstar measure pe-area``,
:mod:`app.reports.pe_area` types and renders it): each lever alone from its PE's default,
synthesized on a Liberty library, with the values per cycle a PE takes on a workload and the
area per value against the INT8 PE's."""

from __future__ import annotations

from dstar_rtl.flows.synth import synthesize
from dstar_rtl.gen.progress import say
from dstar_rtl.golden.config import preset

__all__ = ["DSTAR_LEVERS", "INT8_LEVERS", "levers", "measure"]


#: DSTAR PE levers, each alone from the preset's default: label → Config overrides (a callable
#: of the default configuration where the value depends on it).
DSTAR_LEVERS = {
    "default": {},
    "accumulator 4 bits narrower, saturating": lambda c: dict(acc_width=c.acc_bits - 4,
                                                              overflow_detect=True),
    "accumulator as wide as INT8's, saturating": lambda c: dict(
        acc_width=c.baseline_acc_width, overflow_detect=True),
    "pe_stages 0": dict(pe_stages=0),
    "pe_stages 2": dict(pe_stages=2),
    "lanes 2": dict(lanes=2),
    "lanes 8": dict(lanes=8),
    "slice digits": dict(digits="slice"),
    "multiplied products": dict(digit_product="multiply"),
    "operands registered at every PE": dict(weight_hop=1, act_hop=1),
}
#: INT8 PE levers, each alone from the INT8 core's default (``datapath="int8"``: the preset
#: with :data:`golden.config.INT8_CHOSEN`, no PE pipeline stage).
INT8_LEVERS = {
    "default": {},
    "pe_stages 1": dict(pe_stages=1),
    "pe_stages 2": dict(pe_stages=2),
    "operands registered at every PE": dict(weight_hop=1, act_hop=1),
}


def levers(name: str) -> list:
    """``[(pe kind, label, overrides)]`` of a preset: DSTAR's levers then INT8's."""
    base = preset(name)
    rows = [("dstar", label, over(base) if callable(over) else over)
            for label, over in DSTAR_LEVERS.items()]
    return rows + [("int8", label, dict(datapath="int8", **over))
                   for label, over in INT8_LEVERS.items()]


def measure(name: str, liberty: str, reuse: bool, wl: dict) -> dict:
    """Synthesize every lever of a preset; ``{workload, rows: {kind/label: row}}``."""
    from dstar_rtl.flows.core_parts import ASIC_OPTIONS

    opts = {k: v for k, v in ASIC_OPTIONS.items() if k != "parts"}
    rows = {}
    for kind, label, over in levers(name):
        cfg = preset(name, **over)
        unit = "pe" if kind == "dstar" else "baseline_pe"
        say(f"pe-area {name}: {kind} {label} ...")
        r = synthesize(unit, cfg, "asic", liberty=liberty, reuse=reuse, **opts)
        res = r["resources"]
        rate = (cfg.lanes * wl["fill"] / (wl["bits"] / 2)) if kind == "dstar" else 1.0
        rows[f"{kind}/{label}"] = dict(
            kind=kind, lever=label, overrides=over, config_hash=cfg.hash(),
            area_um2=round(res["area"], 1), comb_um2=round(res["combinational_area"], 1),
            seq_um2=round(res["sequential_area"], 1), ff=res["ff"],
            acc_bits=cfg.baseline_acc_width if kind == "int8" else cfg.acc_bits,
            critical_ns=(r.get("timing") or {}).get("delay"),
            values_per_cycle=round(rate, 4), um2_per_value=round(res["area"] / rate, 1),
            seconds=r.get("seconds"))
    ref = rows["int8/default"]["um2_per_value"]
    base = rows["dstar/default"]["area_um2"]
    for row in rows.values():
        row["per_um2_vs_int8"] = round(ref / row["um2_per_value"], 3)
        if row["kind"] == "dstar":
            row["area_vs_default"] = round(row["area_um2"] / base - 1, 4)
    return dict(workload=wl, rows=rows)
