"""The design sweep's figures: every configuration's area, throughput and throughput per µm²,
the Pareto front, the crossover size (:mod:`app.sweeps.report` renders them).

- :func:`pareto_front`: the points no other point beats on both axes (smaller or equal area
  *and* larger or equal throughput per µm², one of them strictly).
- :func:`crossover`: the smallest array size from which (at that size and every larger one
  swept) the best DSTAR core's throughput per µm² exceeds the best INT8 core's; without one,
  how far the best size misses (the ratio there).
"""

from __future__ import annotations

import math

__all__ = ["pareto_front", "crossover", "assemble"]


def pareto_front(points) -> list:
    """Indices (ascending) of the non-dominated ``(area, value)`` points: minimal area, maximal
    value. Of identical points only the first is on the front."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1], i))
    front, best = [], -math.inf
    for i in order:
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return sorted(front)


def crossover(sizes, dstar: dict, int8: dict) -> dict:
    """``dstar``/``int8``: ``{size: throughput per µm²}`` (the best of each side). Returns
    ``{size, ratios, ahead, best_size, best_ratio, miss}``: ``size`` the smallest swept size
    from which DSTAR/INT8 > 1 at every larger swept size (None if there is none), ``ahead`` the
    sizes where DSTAR/INT8 > 1, ``miss`` (when there is no crossover) the factor by which DSTAR
    falls short at the largest size (``1 / ratio`` there)."""
    sizes = sorted(n for n in sizes if n in dstar and n in int8)
    ratios = {n: dstar[n] / int8[n] for n in sizes}
    size = None
    for n in reversed(sizes):
        if ratios[n] > 1:
            size = n
        else:
            break
    best = max(sizes, key=lambda n: ratios[n]) if sizes else None
    return dict(size=size, ratios={n: round(r, 4) for n, r in ratios.items()},
                ahead=[n for n in sizes if ratios[n] > 1],
                best_size=best, best_ratio=round(ratios[best], 4) if best else None,
                miss=None if size is not None or not sizes else round(1 / ratios[sizes[-1]], 4))


def assemble(dvars, bvars, sizes, sweep, tput: dict) -> dict:
    """Every (configuration, size) record, the Pareto front, the best per size, the crossover
    and the area model's check. ``tput(kind, n, lanes) -> (speedup, lane_util, MACs/cycle)``."""
    from dstar_rtl.bench.sweep.area import (
        array_area,
        index_runs,
        measured_arrays,
        model_check,
        qpu_area,
    )

    runs = index_runs(sweep)
    meas = measured_arrays(sweep, dvars, bvars)
    recs = []
    for v in dvars + bvars:
        for n in sizes:
            a = array_area(v, n, runs, meas)
            t = tput(v, n)
            q = qpu_area(sweep["qpu"], v, n) if v["kind"] == "dstar" else 0.0
            core = a["area"] + q
            m, ms = t["macs_per_cycle"], t["macs_per_cycle_steady"]
            recs.append(dict(
                {k: v[k] for k in v if k != "key"}, config=v["key"], size=n,
                array_area=a["area"], pe_area=a["pe_area"], rest_area=a["rest_area"],
                area_source=a["source"], qpu_area=q, core_area=round(core, 1),
                speedup=round(t["speedup"], 4), speedup_steady=round(t["speedup_steady"], 4),
                lane_util=round(t["lane_util"], 4), macs_per_cycle=round(m, 3),
                macs_per_cycle_steady=round(ms, 3),
                tput_per_mm2_array=round(m / a["area"] * 1e6, 3),
                tput_per_mm2_core=round(m / core * 1e6, 3),
                tput_per_mm2_core_steady=round(ms / core * 1e6, 3)))
    pts = [(r["core_area"], r["tput_per_mm2_core"]) for r in recs]
    for i in pareto_front(pts):
        recs[i]["pareto"] = True
    best = {}
    for n in sizes:
        for kind in ("dstar", "int8"):
            rs = [r for r in recs if r["size"] == n and r["kind"] == kind]
            if rs:
                b = max(rs, key=lambda r: r["tput_per_mm2_core"])
                ba = max(rs, key=lambda r: r["tput_per_mm2_array"])
                best.setdefault(str(n), {})[kind] = dict(
                    config=b["config"], core_area=b["core_area"], array_area=b["array_area"],
                    qpu_area=b["qpu_area"], macs_per_cycle=b["macs_per_cycle"],
                    tput_per_mm2_core=b["tput_per_mm2_core"],
                    best_array_config=ba["config"],
                    tput_per_mm2_array=ba["tput_per_mm2_array"])
    cross = crossover(sizes, {n: best[str(n)]["dstar"]["tput_per_mm2_core"] for n in sizes
                              if "dstar" in best.get(str(n), {})},
                      {n: best[str(n)]["int8"]["tput_per_mm2_core"] for n in sizes
                       if "int8" in best.get(str(n), {})})
    cross_steady = crossover(
        sizes, {n: max(r["tput_per_mm2_core_steady"] for r in recs
                       if r["size"] == n and r["kind"] == "dstar") for n in sizes},
        {n: max(r["tput_per_mm2_core_steady"] for r in recs
                if r["size"] == n and r["kind"] == "int8") for n in sizes})
    cross_arr = crossover(sizes, {n: best[str(n)]["dstar"]["tput_per_mm2_array"] for n in sizes
                                  if "dstar" in best.get(str(n), {})},
                          {n: best[str(n)]["int8"]["tput_per_mm2_array"] for n in sizes
                           if "int8" in best.get(str(n), {})})
    return dict(records=recs, best=best, crossover=cross, crossover_arrays_only=cross_arr,
                crossover_steady_state=cross_steady,
                model_check=model_check(runs, meas, sweep["measure_sizes"]),
                pe_runs={lab: dict(area=r["area"], ff=r["ff"], delay_ns=r["delay_ns"])
                         for lab, r in sweep["runs"].items() if "parts" not in r},
                array_runs={lab: dict(area=r["area"], parts=r["parts"])
                            for lab, r in sweep["runs"].items() if "parts" in r})
