"""Throughput of an array configuration on the trained DiT, from the measured bench.

The model (:func:`cycles`; :func:`speedup` and :func:`throughput` for steady state)
-----------------------------------------------------------------------------------
Both arrays take one beat per cycle in steady state: the MPU one lane group (``lanes`` digit ×
weight products per PE), the INT8 array one dense INT8 activation per row and input channel.
A tile (``T = rows`` tokens) of ``G`` beats then occupies ``max(G, D)`` cycles, ``D`` the tile
period (:func:`tile_period`: latency ``(rows - 1) // weight_hop + (cols - 1) // act_hop +
pe_stages + 4`` plus ``rows`` drain beats, :class:`rtl.array.ArrayUnit`), the same on both
arrays.

- The beats: the bench's layers, steps, operating point and seed (``reports/bench.json``,
  ``dstar bench``), quantized at tile ``n`` (so the FMDQ sub-channels are ``n`` values) and
  scheduled by :func:`golden.schedule.schedule_tile` at every ``lanes`` value
  (:func:`workload_stats`): the groups of every tile for the MPU, ``cin`` beats per tile for
  the INT8 array, once per block of ``cols`` output channels. The lane utilization ``valid
  lanes / (groups × L)`` is the schedule's: an 8-lane PE packs fewer full groups (a group never
  spans two exponents or chunks). At the bench's own configuration the schedule reproduces the
  bench's groups, dense beats and lane utilization exactly.
- Calibration (:func:`calibration`): the measured RTL cycles of the bench (8 × 8, 4 lanes,
  ``pe_stages`` 1, its own ``weight_hop``; every drain beat checked) over this model's at the
  same configuration, one factor per array (near 1: the model leaves out the first tile's fill
  and the last drain; the report records both). Cycles at any other configuration are the model's
  times that factor.
- Throughput: the workload's INT8 MACs (tokens × cin × cout summed over its layer-steps)
  divided by the cycles, in INT8-equivalent MACs per cycle; DSTAR's speed-up is the INT8
  array's cycles over DSTAR's at the same size.
- ``pe_stages``, ``weight_hop`` and ``act_hop`` enter only the tile period (a cycle each way
  per tile);
  the Fmax that ``pe_stages`` buys is not modelled.
- *Steady state* (no tile period, kept beside it in the report): speed-up ``s_bench ×
  [beats(n) / groups(n, L)] / [beats_bench / groups_bench]`` and the INT8 array at the bench's
  efficiency ``e8`` per PE (:func:`speedup`, :func:`throughput`). On this DiT (64 tokens,
  hidden 128) a large array is drain-bound: a tile of 64 tokens carries about 60 groups of
  128 input channels against a tile period near 200 cycles at 64 × 64, for both arrays, so the
  steady state overstates DSTAR's gain there.

:func:`workload_stats` costs one pass of the layers through the integer golden per array size
(tens of seconds); its result is cached under ``build/design_sweep/``.
"""

from __future__ import annotations

import hashlib
import json
import time

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.gen.paths import ROOT
from dstar_rtl.results.base import plain

CACHE = ROOT / "build" / "design_sweep"

__all__ = ["bench_reference", "model", "record", "workload_stats", "speedup", "cycles",
           "calibration", "tile_period", "throughput"]


def _cache_key(ref: dict, base: dict, sizes, lanes) -> str:
    blob = data_json(["v2", ref["config_hash"], ref["operating_point"], ref["steps_run"],
                       ref["seed"], ref["steps"], ref["block"], base, sorted(sizes), sorted(lanes)],
                      sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def workload_stats(ref: dict, base: dict, sizes, lanes, progress=None) -> dict:
    """``{n: {"dense_beats": int, L: {"groups", "lanes_valid", "lane_util"}}}``: the bench's
    layers quantized at tile ``n`` (``base``: the bench configuration's parameters, ``rows =
    cols = n``) and scheduled at every ``L`` of ``lanes``. Cached under ``build/design_sweep``
    (keyed by the bench's configuration, operating point, steps and the sizes and lanes)."""
    say = progress or (lambda msg: None)
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"workload-{_cache_key(ref, base, sizes, lanes)}.json"
    if path.is_file():
        say(f"workload statistics: stored ({path.name})")
        return _ints(json.loads(path.read_text()))
    from dstar_rtl.bench.layers import layer_configs, load_inputs
    from dstar_rtl.golden.config import Config
    from dstar_rtl.golden.differential import DiffLinear, quantize_weights
    from dstar_rtl.golden.fmdq import to_fixed
    from dstar_rtl.golden.sar import is_cache_step
    from dstar_rtl.golden.schedule import schedule_tile

    t0 = time.perf_counter()
    cfg0 = Config(**{k: (tuple(v) if k == "thr" else v) for k, v in base.items()
                     if k in Config.fields() and k not in ("weight_hop", "act_hop")})
    layers, trace, _ = load_inputs(cfg0, weights=ref["weights"] or "trained",
                                   seed=ref["seed"] or 0, steps=ref["steps"] or 20,
                                   block=ref["block"] or 0)
    steps_run = set(ref["steps_run"])
    out = {}
    for n in sizes:
        # The hops do not change the quantization; 1 is valid at every size.
        cfg = cfg0.replace(rows=n, cols=n, **{h: 1 for h in ("weight_hop", "act_hop")
                                              if h in Config.fields()})
        lcfgs = layer_configs(cfg, layers, ref["operating_point"])
        beats, per_l = 0, {L: dict(groups=0, lanes_valid=0, tiles={}) for L in lanes}
        int8_tiles = {}
        for ls in layers:
            cin, cout = ls.W.shape
            Wq, s_w = quantize_weights(ls.W, cfg.weight_width)
            lcfg = lcfgs[ls.name]
            layer = DiffLinear(Wq, s_w, lcfg, bias=ls.bias, name=ls.name, schedule=False)
            X = trace[ls.x_key]
            blocks = -(-cout // n)
            for t in range(max(steps_run) + 1):
                if ls.cache_only and not is_cache_step(t, cfg.sar_interval):
                    continue
                xi, _ = to_fixed(X[t], lcfg.act_width, lcfg.act_frac)
                r = layer.step(xi)
                if t not in steps_run:
                    continue
                qz = r.qz
                ntiles = len(qz.b) // cin
                beats += ntiles * cin * blocks
                int8_tiles[cin] = int8_tiles.get(cin, 0) + ntiles * blocks
                for L in lanes:
                    lc = lcfg.replace(lanes=L)
                    g = v = 0
                    hist = per_l[L]["tiles"]
                    for k in range(ntiles):
                        sl = slice(k * cin, (k + 1) * cin)
                        ts = schedule_tile(qz.q[sl], qz.b[sl], qz.e[sl], lc)
                        g += len(ts.groups)
                        v += int(sum(int(gr.valid.sum()) for gr in ts.groups))
                        hist[len(ts.groups)] = hist.get(len(ts.groups), 0) + blocks
                    per_l[L]["groups"] += g * blocks
                    per_l[L]["lanes_valid"] += v * blocks
        for L, d in per_l.items():
            d["lane_util"] = d["lanes_valid"] / (d["groups"] * L) if d["groups"] else 0.0
        out[n] = {"dense_beats": beats, "int8_tiles": int8_tiles, **per_l}
        say(f"workload statistics at {n}x{n}: " + ", ".join(
            f"{L} lanes {100 * d['lane_util']:.1f} % util" for L, d in per_l.items())
            + f" ({time.perf_counter() - t0:.0f} s)")
    path.write_text(data_json({str(n): {str(k): v for k, v in d.items()}
                                for n, d in out.items()}, indent=1) + "\n")
    return out


def _ints(obj):
    """JSON's string keys back to integers where they are digits (sizes, lanes, groups)."""
    if isinstance(obj, dict):
        return {(int(k) if isinstance(k, str) and k.isdigit() else k): _ints(v)
                for k, v in obj.items()}
    return obj


def tile_period(n: int, pe_stages: int, hop: int = 1, act_hop: int = 1) -> int:
    """Fewest cycles between the last beats of two tiles of an ``n × n`` array
    (:attr:`rtl.array.ArrayUnit.tile_period`: latency ``(n - 1) // weight_hop + (n - 1) //
    act_hop + S + 4`` plus ``n`` drain beats); the same for the MPU and the INT8 array."""
    return (n - 1) // hop + (n - 1) // act_hop + pe_stages + 4 + n


def _tile_cycles(hist: dict, period: int) -> int:
    return sum(c * max(g, period) for g, c in hist.items())


def cycles(ref: dict, stats: dict, n: int, lanes: int | None, pe_stages: int,
           hop: int = 1, act_hop: int = 1) -> float:
    """Cycles of the whole workload on an ``n × n`` array (``lanes`` None: the INT8 array): a
    tile of ``G`` beats occupies ``max(G, D)`` cycles (``D``: :func:`tile_period`), times the
    factor that makes the model give the bench's measured cycles at the bench's own
    configuration (:func:`calibration`)."""
    d = tile_period(n, pe_stages, hop, act_hop)
    hist = stats[n]["int8_tiles"] if lanes is None else stats[n][lanes]["tiles"]
    return _tile_cycles(hist, d) * calibration(ref, stats)["int8" if lanes is None else "dstar"]


def calibration(ref: dict, stats: dict) -> dict:
    """Measured bench cycles over the tile model's at the bench's size, lanes and
    ``pe_stages`` and hops, per array: what the model leaves out (the first tile's
    fill, the last drain, the front end's cycles). Near 1."""
    n, L, S = ref["rows"], ref["lanes"], ref.get("pe_stages", 1)
    d = tile_period(n, S, ref.get("weight_hop", 1), ref.get("act_hop", 1))
    return dict(dstar=ref["cycles_dstar"] / _tile_cycles(stats[n][L]["tiles"], d),
                int8=ref["cycles_int8"] / _tile_cycles(stats[n]["int8_tiles"], d))


def speedup(ref: dict, stats: dict | None, n: int, lanes: int) -> float:
    """DSTAR's speed-up over the INT8 array at equal PE count (module docstring); ``stats``
    None or without ``n``: the bench's own figure (valid at its size and lanes only)."""
    if stats is None or n not in stats or lanes not in stats[n]:
        if (n, lanes) != (ref["rows"], ref["lanes"]) and stats is not None:
            raise ValueError(f"no workload statistics for {n}x{n} with {lanes} lanes")
        return ref["speedup"]
    bench_ratio = ref["dense_beats"] / ref["groups"]
    return ref["speedup"] * (stats[n]["dense_beats"] / stats[n][lanes]["groups"]) / bench_ratio


def throughput(ref: dict, n: int, s: float = 1.0) -> float:
    """INT8-equivalent MACs per cycle of an ``n × n`` array with speed-up ``s`` over INT8."""
    return n * n * ref["e8"] * s


def lane_util(ref: dict, stats: dict | None, n: int, lanes: int) -> float:
    if stats is None or n not in stats or lanes not in stats[n]:
        return ref["lane_util"]
    return stats[n][lanes]["lane_util"]


def check_consistency(ref: dict, stats: dict) -> dict | None:
    """The schedule's figures at the bench's own size and lanes against the bench's measured
    ones (same layers, steps and quantization: they must agree)."""
    n, L = ref["rows"], ref["lanes"]
    if n not in stats or L not in stats[n]:
        return None
    d = stats[n]
    return dict(groups=d[L]["groups"], groups_bench=ref["groups"],
                dense_beats=d["dense_beats"], dense_beats_bench=ref["dense_beats"],
                lane_util=d[L]["lane_util"], lane_util_bench=ref["lane_util"])


def bench_reference(bench) -> dict:
    """The reference figures of a ``dstar bench`` result (:class:`results.bench.
    Bench`): ``{rows, lanes, preset, cycles_dstar, cycles_int8, speedup, groups, lanes_valid,
    dense_beats, lane_util, mean_bits, macs, e8, steps_run, operating_point}``."""
    tot, cfg, wl = bench.totals.all, bench.config, bench.workload
    rows = cfg["rows"]
    macs = sum(r.tokens * r.cin * r.cout for r in bench.rows)
    return dict(preset=bench.preset, rows=rows, cols=cfg["cols"], lanes=cfg["lanes"],
                config_hash=bench.config_hash,
                cycles_dstar=tot.cycles_dstar, cycles_int8=tot.cycles_int8,
                speedup=tot.cycles_int8 / tot.cycles_dstar,
                groups=tot.groups, lanes_valid=tot.lanes_valid,
                dense_beats=tot.dense_beats, lane_util=tot.lane_util,
                mean_bits=tot.mean_act_bits, macs=macs,
                e8=macs / (tot.cycles_int8 * rows * cfg["cols"]),
                pe_stages=cfg.get("pe_stages", 1), weight_hop=cfg.get("weight_hop", 1),
                act_hop=cfg.get("act_hop", 1), steps_run=list(wl.steps_run),
                operating_point=plain(wl.operating_point), seed=wl.seed, steps=wl.steps,
                block=wl.block, weights=wl.weights)


def model(ref: dict, stats: dict | None):
    """``tput(variant, n)``: both throughput models of a variant at size ``n``, with the tile
    turnaround (the report's figures; the bench's speed-up at every size without ``stats``) and
    steady state."""
    from dstar_rtl.bench.sweep.design import hop_value

    def tput(v, n):
        dstar = v["kind"] == "dstar"
        L = v.get("lanes") if dstar else None
        s_st = speedup(ref, stats, n, L) if dstar else 1.0
        steady = throughput(ref, n, s_st)
        if stats is None:
            main, s = steady, s_st
        else:
            hop = hop_value(v.get("weight_hop", 1), n)
            ahop = hop_value(v.get("act_hop", 1), n)
            c = cycles(ref, stats, n, L, v["pe_stages"], hop, ahop)
            main = ref["macs"] / c
            s = cycles(ref, stats, n, None, v["pe_stages"], hop, ahop) / c if dstar else 1.0
        return dict(speedup=s, speedup_steady=s_st, macs_per_cycle=main,
                    macs_per_cycle_steady=steady,
                    lane_util=lane_util(ref, stats, n, L) if dstar else 1.0)

    return tput


def record(ref: dict, stats: dict | None, check, source: str, mode: str) -> dict:
    """The design sweep's ``throughput`` record: the bench it comes from (``source``), the
    ``mode``, the reference figures, both models in words, the calibration, the schedule's check
    and the workload statistics per size."""
    return dict(
        source=source, mode=mode,
        reference={k: v for k, v in ref.items() if k != "operating_point"},
        operating_point=ref.get("operating_point"),
        model=("cycles = Σ over tiles max(beats, tile period), calibrated on the bench's cycles"
               if stats else "the bench's speed-up at every size"),
        steady_model=("speed-up = bench speed-up × (dense beats / groups) / (the bench's dense "
                      "beats / groups)" if stats else "the bench's speed-up"),
        calibration=calibration(ref, stats) if stats else None, schedule_check=check,
        workload={str(n): dict(dense_beats=d["dense_beats"],
                               **{str(L): {k: x for k, x in d[L].items() if k != "tiles"}
                                  for L in d if isinstance(L, int)})
                  for n, d in (stats or {}).items()})
