"""The design sweep's area model: array and core area of every configuration at every size from
the synthesized PEs and arrays (:mod:`bench.sweep.design` states the model).
"""

from __future__ import annotations

from dstar_rtl.bench.sweep.design import _array_overrides, config_for, hop_value

__all__ = ["pe_areas", "array_area", "model_check", "qpu_area", "QPU_PARTS"]

#: report_asic's QPU part → the estimate model's part (flows.estimate_parts.qpu_parts).
QPU_PARTS = {"front": "QPU front: max, bins, quantize/slice",
             "chunker": "QPU chunk assembler", "sorter": "QPU bitonic sorter",
             "packer": "QPU packer"}
_QPU_REST = "QPU digit store, counters, FIFO"
#: The same with the exponent bins (``packer == "bins"``).
_QPU_BINS, _QPU_BINS_REST = "QPU exponent bins", "QPU counters, FIFO"


def _sig(unit, ov, booth, parts):
    return (unit, tuple(sorted(ov.items())), booth, parts)


def index_runs(sweep: dict) -> dict:
    """``{signature: result}`` of a :func:`bench.sweep.design.run_sweep` result."""
    return {_sig(u, ov, b, p): sweep["runs"][lab] for lab, u, ov, b, p in sweep["plan"]}


def pe_areas(v: dict, runs: dict) -> dict:
    """``{(register_w, register_a): area}``: the flattened PE areas of variant ``v`` that were
    synthesized (``(True, True)`` always; the wire kinds where a hop is swept)."""
    from dstar_rtl.bench.sweep.design import _pe_overrides

    unit = "baseline_pe" if v["kind"] == "int8" else "pe"
    out = {}
    for rw in (True, False):
        for ra in (True, False):
            r = runs.get(_sig(unit, _pe_overrides(v, rw, ra), v.get("booth", False), False))
            if r is not None:
                out[rw, ra] = r["area"]
    if (True, True) not in out:
        raise KeyError(f"no synthesized PE for {v['key']}")
    return out


def pe_sum(v: dict, n: int, runs: dict) -> float:
    """Σ flattened PE area of an ``n × n`` array of variant ``v``: rows registering ``w_out``
    (every ``weight_hop``-th) or passing it on as a wire, by columns registering ``a_out``
    (every ``act_hop``-th) or not."""
    areas = pe_areas(v, runs)
    reg_rows = n // hop_value(v.get("weight_hop", 1), n)
    reg_cols = n // hop_value(v.get("act_hop", 1), n)
    total = 0.0
    for rw, nr in ((True, reg_rows), (False, n - reg_rows)):
        for ra, nc in ((True, reg_cols), (False, n - reg_cols)):
            if nr and nc:
                if (rw, ra) not in areas:
                    raise KeyError(f"PE of {v['key']} with register_w={rw}, register_a={ra} "
                                   "was not synthesized")
                total += nr * nc * areas[rw, ra]
    return total


def _front(v: dict, n: int) -> int:
    from dstar_rtl.flows.estimate import front_registers
    return front_registers(config_for(v, n, v["kind"] == "int8"), v["kind"] == "int8")


def measured_arrays(sweep: dict, dvars, bvars) -> dict:
    """``{(variant key, n): array result}`` of the arrays synthesized by part."""
    from dstar_rtl.bench.sweep.design import _measured_variants

    runs = index_runs(sweep)
    out = {}
    for v in _measured_variants(dvars, bvars):
        for n in sweep["measure_sizes"]:
            ov = _array_overrides(config_for(v, n, v["kind"] == "int8"))
            unit = "baseline" if v["kind"] == "int8" else "mpu"
            r = runs.get(_sig(unit, ov, v.get("booth", False), True))
            if r is not None:
                out[v["key"], n] = dict(r, variant=v)
    return out


def _closest(v: dict, n: int, meas: dict, below_only=False):
    """The measured array the model scales for ``v`` at ``n`` (module docstring of
    bench.sweep.design)."""
    same = ("lanes", "digit_product", "digits", "acc", "weight_hop") if v["kind"] == "dstar" \
        else ("booth", "weight_hop")

    def hops(m, keys=("weight_hop", "act_hop")):
        return all(str(m["variant"].get(k, 1)) == str(v.get(k, 1)) for k in keys)

    tiers = [lambda m: m["variant"]["key"] == v["key"],
             lambda m: all(m["variant"].get(k) == v.get(k) for k in same) and hops(m),
             lambda m: all(m["variant"].get(k) == v.get(k) for k in same),
             lambda m: m["variant"].get("lanes") == v.get("lanes") and hops(m),
             lambda m: m["variant"].get("lanes") == v.get("lanes")
             and m["variant"].get("weight_hop") == v.get("weight_hop"),
             lambda m: m["variant"].get("lanes") == v.get("lanes"),
             lambda m: True]
    for tier in tiers:
        cands = [(k[1], m) for k, m in meas.items()
                 if m["variant"]["kind"] == v["kind"] and tier(m)
                 and (not below_only or k[1] < n)]
        if cands:
            below = [c for c in cands if c[0] <= n]
            return max(below, key=lambda c: c[0]) if below else min(cands, key=lambda c: c[0])
    return None


def array_area(v: dict, n: int, runs: dict, meas: dict, below_only=False) -> dict:
    """``{area, pe_area, rest_area, source}`` of variant ``v``'s ``n × n`` array: measured
    where synthesized, else the model (``below_only``: scale from a smaller measured size only,
    for the model's check)."""
    if not below_only and (v["key"], n) in meas:
        m = meas[v["key"], n]
        return dict(area=m["area"], pe_area=m["pe_area"], rest_area=m["rest_area"],
                    source="synthesis")
    got = _closest(v, n, meas, below_only)
    if got is None:
        raise ValueError(f"no measured array to scale for {v['key']} at {n}x{n}")
    mn, m = got
    mv = m["variant"]
    k = m["pe_area"] / pe_sum(mv, mn, runs)
    pe = k * pe_sum(v, n, runs)
    rest = m["rest_area"] * _front(v, n) / _front(mv, mn)
    return dict(area=round(pe + rest, 1), pe_area=round(pe, 1), rest_area=round(rest, 1),
                source=f"model from {mv['key']} {mn}x{mn}")


def model_check(runs: dict, meas: dict, sizes) -> list:
    """Every measured array at a size above the smallest, predicted from the smaller measured
    sizes only: ``[{key, size, measured, predicted, error, from}]``."""
    out = []
    for (key, n), m in sorted(meas.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if n == min(sizes):
            continue
        p = array_area(m["variant"], n, runs, meas, below_only=True)
        out.append(dict(key=key, kind=m["variant"]["kind"], size=n, measured=m["area"],
                        predicted=p["area"], error=round(p["area"] / m["area"] - 1, 4),
                        source=p["source"]))
    return out


def qpu_area(qpu: dict, v: dict, n: int) -> float:
    """The QPU of variant ``v``'s ``n × n`` core: each measured part (``qpu["parts"]``, of the
    ``qpu["preset"]`` QPU) scaled by the estimate model's transistors of that part."""
    from dstar_rtl.flows.estimate import estimate
    from dstar_rtl.golden.config import preset

    def by_name(cfg):
        return {p["name"]: p["transistors"] for p in estimate("qpu", cfg)["parts"]}

    base_cfg = preset(qpu.get("preset", "tiny"))
    base, tgt = by_name(base_cfg), by_name(config_for(v, n))
    bins = base_cfg.packer == "bins"     # the packer module is then the exponent bins
    total = 0.0
    for part, area in qpu["parts"].items():
        if bins:
            name = {"front": QPU_PARTS["front"], "packer": _QPU_BINS}.get(part, _QPU_BINS_REST)
        else:
            name = QPU_PARTS.get(part, _QPU_REST)
        total += area * tgt[name] / base[name]
    return round(total, 1)
