"""The bench of ``dstar bench``: the same differential layers of a DiT on the DSTAR MPU and on
the INT8 baseline array, cycles from RTL simulation, resources from the ECP5 flow.

Steps (:func:`run`; the application types its result, :mod:`app.benches.layers`):

1. **Weights** (:func:`load_weights`): the trained digits DiT (:func:`models.digits.load_trained`),
   random weights of a named model (:func:`models.dit.init_params`) or an ``.npz`` file written
   like the trained one.
2. **Trace**: one float DDIM sampling run (:class:`models.dit.TracingDiT`,
   :func:`models.dit.ddim_sample`) records each accelerator linear layer's real input per step.
3. **Layers** (:func:`prepare`): for one block, every linear layer type (``x_embed``, the fused
   ``qkv`` as its two differential layers ``qkv[qk]`` and ``qkv[v]`` (numerics §2.5), ``proj``,
   ``fc1``, ``fc2``, ``final.linear``) runs as a :class:`golden.differential.DiffLinear` (closed
   loop, weights from :func:`golden.differential.quantize_weights`) from step 0 to the last
   measured step, so its state is the one DSTAR has; ``qkv[qk]`` steps only on SAR cache steps
   (``t % sar_interval == 0``) and is absent from a reuse step. At every measured step the layer's
   token tiles give the MPU's group stream (the one the QPU emits, :func:`golden.schedule.
   schedule_matrix`) and the expected drain per block of ``cols`` output channels
   (:func:`golden.schedule.execute`, cross-checked here against the layer's own product). The
   baseline gets the same layer at the same step as dense INT8 tiles: the step's float input
   quantized per tensor (symmetric, ``max|x| / 127``), one beat per input channel and tile,
   expected ``A @ W`` in integers.
4. **RTL**: ``tb/test_bench_layers.py`` streams both workloads through the generated Verilog of
   the two arrays (Verilator by default, one simulation after the other), checks every drain beat
   bit-exactly and measures the cycles of each block (first beat offered to last drain beat).
5. **Resources** (:mod:`bench.resources`): a stored measurement of the same configuration
   (``stored``: the application reads ``reports/sweep.json``), else :func:`flows.synth.
   synthesize` (a stored identical run or a new one); with a standard-cell library the cell
   area of both arrays (each at its best), with ``fmax`` both arrays placed and routed on the
   ECP5.

Ratios (per layer and in total, same work on both arrays): ``cycles_ratio = INT8 cycles /
DSTAR cycles`` (DSTAR's speed-up), ``lut_ratio = DSTAR LUTs / INT8 LUTs`` (``lut_total``: LUT4
plus two per carry cell), ``tput_per_lut_ratio = cycles_ratio / lut_ratio`` (throughput per LUT of
DSTAR over that of the INT8 array), ``tput_per_area_ratio = cycles_ratio / area_ratio`` (per
µm² with Nangate45), ``tput_per_second_ratio = cycles_ratio · fmax_ratio`` (each array at its own
Fmax). Lane utilisation is valid lanes / (groups · lanes) of the streamed groups. With a
saturating accumulator (``overflow_detect``) ``acc_overflows`` counts the accumulators whose
sticky flag the golden schedule sets: 0 means every result is exact.
"""

from __future__ import annotations

import hashlib
import json
import platform
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dstar_rtl.analysis.layer_inputs import (
    block_layers,
    check_widths,
    file_layers,
    load_layer_weights,
)
from dstar_rtl.gen.outputs import data_json
from dstar_rtl.golden.config import Config

__all__ = ["MODELS", "LAYER_KINDS", "BenchLayer", "load_weights", "trace_inputs",
           "check_layers", "load_inputs", "prepare", "workload_doc", "write_workload", "run_array",
           "run", "summarize", "packer_words"]


def _models():
    from dstar_rtl.models.digits import DIGITS_SPEC
    from dstar_rtl.models.dit import DIT_MODELS
    return {"digits": DIGITS_SPEC, **DIT_MODELS}


#: Model sizes for ``--weights random`` (``digits`` is the trained model's size).
MODELS = _models()
#: The linear layer types of one block (plus the embedding and the final layer).
LAYER_KINDS = ("x_embed", "qkv", "proj", "fc1", "fc2", "final.linear")
#: ``--quick``: token tiles and output-channel blocks kept per layer.
QUICK_TILES = 2
QUICK_BLOCKS = 2


@dataclass
class BenchLayer:
    """One differential layer at one step, ready for both arrays."""

    name: str              # e.g. "blocks.0.attn.qkv[v]"
    kind: str              # one of LAYER_KINDS
    step: int
    cache_step: bool
    tokens: int            # tokens streamed (after --quick)
    cin: int
    cout: int              # output channels streamed (after --quick)
    mpu_stream: list       # packed group beats of all tiles
    groups: int            # groups per replay
    lanes_valid: int       # valid lanes per replay
    groups_per_tile: list
    base_stream: list      # packed dense INT8 beats of all tiles
    blocks: list = field(default_factory=list)   # [(W block, mpu expected, baseline expected)]
    subchannels: dict = field(default_factory=dict)   # precision histogram of the step
    acc_overflows: int = 0  # accumulators whose sticky overflow flag is set (golden, all blocks)
    groups_packed: dict = field(default_factory=dict)  # per replay, under golden.schedule.PACKINGS

    @property
    def id(self) -> str:
        return f"{self.name}@{self.step}"


# --------------------------------------------------------------------------------- workload
def load_weights(weights: str = "trained", model: str = "digits", weight_seed: int = 0):
    """``(spec, params, info)``: ``weights`` is ``"trained"`` (the trained digits DiT),
    ``"random"`` (:func:`models.dit.init_params` of ``MODELS[model]`` from ``weight_seed``) or the
    path of an ``.npz`` file in the trained model's format. ``info`` describes the source and
    carries a SHA-256 of the parameters."""
    if weights == "random":
        from dstar_rtl.models.dit import init_params
        if model not in MODELS:
            raise ValueError(f"model must be one of {sorted(MODELS)}, not {model!r}")
        spec = MODELS[model]
        params = init_params(spec, weight_seed)
        info = dict(weights="random", model=model, weight_seed=weight_seed)
    else:
        from dstar_rtl.models.digits import load_trained
        path = None if weights == "trained" else Path(weights)
        if path is not None and not path.is_file():
            raise FileNotFoundError(f"weights file {path} not found (--weights takes trained, "
                                    f"random or an .npz file)")
        spec, params = load_trained(path)
        info = dict(weights="trained" if path is None else str(path), model="digits-trained")
    info["params_sha256"] = _params_sha(params)
    return spec, params, info


def trace_inputs(spec, params, steps: int, seed: int, label: int | None = None):
    """Float DDIM run: ``({"<layer>.x": (steps, tokens, in)}, label)``."""
    from dstar_rtl.models.dit import TracingDiT, ddim_sample

    m = TracingDiT(spec, params=params)
    _, label = ddim_sample(m, steps, seed, label)
    return m.trace(), label


def check_layers(cfg: Config, spec, params, block: int = 0):
    """Refuse (ValueError) a block number outside the model or a layer wider than
    ``max_reduction``, before anything runs."""
    check_widths(cfg, block_layers(spec, params, block))


def _int8_tensor(x, width: int):
    """Symmetric per-tensor INT quantization of a float matrix (the baseline's activations)."""
    qmax = (1 << (width - 1)) - 1
    amax = float(np.abs(x).max())
    if amax == 0:
        return np.zeros(x.shape, np.int64)
    r = np.asarray(x, np.float64) * (qmax / amax)
    return np.clip(np.sign(r) * np.floor(np.abs(r) + 0.5), -qmax, qmax).astype(np.int64)


def layer_configs(cfg: Config, layers: list, operating_point: dict | None) -> dict:
    """``{layer name: Config}`` the layers quantize with: ``cfg`` itself, or at an operating
    point of ``dstar profile --sweep`` (:func:`analysis.profile.load_operating_point`) its FMDQ
    thresholds and each layer's static base (keyed by the layer's trace name). These are the
    QPU's run-time settings: the arrays are built from ``cfg`` either way. Raises ValueError for
    a layer the operating point has no base for, or a base the configuration refuses."""
    from dstar_rtl.golden.config import ConfigError

    if operating_point is None:
        return {ls.name: cfg for ls in layers}
    out = {}
    for ls in layers:
        key = ls.x_key[:-len(".x")]
        base = operating_point["base_log2"].get(key)
        if base is None:
            raise ValueError(f"the operating point has no base for layer {key!r}")
        try:
            out[ls.name] = cfg.replace(thr=tuple(operating_point["thr"]), base_log2=int(base))
        except ConfigError as exc:
            raise ValueError(f"operating point at layer {key!r}: {exc}") from None
    return out


def prepare(cfg: Config, layers: list, trace: dict, steps_run, quick: bool = False,
            operating_point: dict | None = None) -> list:
    """The :class:`BenchLayer` list: every :class:`~analysis.layer_inputs.LinearSpec` of ``layers``
    at every step of ``steps_run`` (a ``cache_only`` layer on SAR cache steps only), each
    quantized with its :func:`layer_configs` entry. Raises ValueError for a layer wider than
    ``max_reduction``, a step the trace does not hold or an unusable operating point."""
    from dstar_rtl.golden.differential import DiffLinear, quantize_weights
    from dstar_rtl.golden.fmdq import to_fixed
    from dstar_rtl.golden.layouts import baseline_group_layout, pack
    from dstar_rtl.golden.sar import is_cache_step
    from dstar_rtl.golden.schedule import PACKINGS, execute, packing_groups
    from dstar_rtl.golden.vectors import drain_words

    check_widths(cfg, layers)
    lcfgs = layer_configs(cfg, layers, operating_point)
    nsteps = len(next(iter(trace.values())))
    steps_run = sorted(set(steps_run))
    if not steps_run or steps_run[0] < 0 or steps_run[-1] >= nsteps:
        raise ValueError(f"steps to run must lie in [0, {nsteps - 1}], not {steps_run}")
    T, cols = cfg.tile, cfg.cols
    blay = baseline_group_layout(cfg)
    out = []
    for ls in layers:
        name, kind = ls.name, ls.kind
        cin, cout = ls.W.shape
        Wq, s_w = quantize_weights(ls.W, cfg.weight_width)
        lcfg = lcfgs[name]
        layer = DiffLinear(Wq, s_w, lcfg, bias=ls.bias, name=name)
        X = trace[ls.x_key]
        for t in range(steps_run[-1] + 1):
            cache = is_cache_step(t, cfg.sar_interval)
            if ls.cache_only and not cache:
                continue
            xi, _ = to_fixed(X[t], lcfg.act_width, lcfg.act_frac)
            r = layer.step(xi)
            if t not in steps_run:
                continue
            ntiles = len(r.tiles)
            keep_t = min(ntiles, QUICK_TILES) if quick else ntiles
            nblocks = -(-cout // cols)
            keep_b = min(nblocks, QUICK_BLOCKS) if quick else nblocks
            tiles = r.tiles[:keep_t]
            groups = [g for ts in tiles for g in ts.groups]
            # Baseline: the same step's float input as dense INT8 tiles.
            A = _int8_tensor(X[t], cfg.weight_width)
            Ap = np.zeros((ntiles * T, cin), np.int64)
            Ap[:len(A)] = A
            base_stream = []
            for k in range(keep_t):
                for c in range(cin):
                    base_stream.append(pack(blay, dict(act=Ap[k * T:(k + 1) * T, c], channel=c,
                                                       first=int(c == 0),
                                                       last=int(c == cin - 1))))
            bl = BenchLayer(name=name, kind=kind, step=t, cache_step=cache,
                            tokens=keep_t * T, cin=cin, cout=min(cout, keep_b * cols),
                            mpu_stream=[g.word(cfg) for g in groups], groups=len(groups),
                            lanes_valid=int(sum(int(g.valid.sum()) for g in groups)),
                            groups_per_tile=[len(ts.groups) for ts in tiles],
                            base_stream=base_stream)
            for bits in (2, 4, 6, 8):
                bl.subchannels[f"b{bits}"] = sum(ts.counters[f"subchannels_b{bits}"]
                                                 for ts in tiles)
            bl.subchannels["zero"] = sum(ts.counters["subchannels_zero"] for ts in tiles)
            bl.groups_packed = {p: sum(packing_groups(ts.chunk_runs, cfg.lanes, p)
                                       for ts in tiles) for p in PACKINGS}
            for j in range(keep_b):
                Wb = Wq[:, j * cols:(j + 1) * cols]
                accs, flags = execute(groups, Wb, lcfg)
                bl.acc_overflows += int(sum(int(f.sum()) for f in flags))
                got = np.concatenate(accs)[:, :Wb.shape[1]]
                want = r.acc[:keep_t * T, j * cols:(j + 1) * cols] if keep_t * T <= len(r.acc) \
                    else None
                if want is not None and not np.array_equal(got[:len(want)], want):
                    raise AssertionError(f"{name}@{t}: the group stream's executor disagrees with "
                                         f"the layer's product in block {j}")
                Wpad = np.pad(Wb, ((0, 0), (0, cols - Wb.shape[1])))
                base_accs = [Ap[k * T:(k + 1) * T] @ Wpad for k in range(keep_t)]
                bl.blocks.append((Wb, drain_words(cfg, accs, flags),
                                  drain_words(cfg, base_accs, baseline=True)))
            out.append(bl)
    order = {s: i for i, s in enumerate(steps_run)}
    out.sort(key=lambda b: order[b.step])
    return out


def workload_doc(layers: list, unit: str) -> dict:
    """The workload ``tb/test_bench_layers.py`` reads for ``unit`` (``"mpu"``/``"baseline"``)."""
    mpu = unit == "mpu"
    return dict(unit=unit, layers=[dict(
        id=bl.id, stream=bl.mpu_stream if mpu else bl.base_stream,
        blocks=[dict(W=np.asarray(W).tolist(), expected=exp_m if mpu else exp_b)
                for W, exp_m, exp_b in bl.blocks]) for bl in layers])


def write_workload(layers: list, unit: str, path: Path):
    """:func:`workload_doc` as the JSON file ``DSTAR_BENCH_WORKLOAD`` names."""
    Path(path).write_text(data_json(workload_doc(layers, unit)))


def run_array(unit: str, cfg: Config, layers: list, simulator: str = "verilator",
              seed: int = 1) -> dict:
    """Stream the layers through the generated ``unit`` under cocotb; returns the testbench's
    result (per layer: stream cycles of every block, weight-load cycles). Raises AssertionError
    (with the simulation log's path) when a drain beat differs from golden."""
    from dstar_rtl.sim.runner import run_cocotb

    with tempfile.TemporaryDirectory(prefix="dstar-bench-") as d:
        wl, res = Path(d) / "workload.json", Path(d) / "result.json"
        write_workload(layers, unit, wl)
        t0 = time.perf_counter()
        run_cocotb(unit, cfg, simulator, "dstar_rtl.tb.test_bench_layers", seed=seed, tag="bench",
                   extra_env={"DSTAR_BENCH_WORKLOAD": str(wl), "DSTAR_BENCH_RESULT": str(res)})
        out = json.loads(res.read_text())
        out["run_s"] = time.perf_counter() - t0   # build (if any) + simulation + checks
        return out


# ---------------------------------------------------------------------------------- summary
def _ratio(a, b):
    return a / b if a is not None and b else None


def _row(label, kind, step, cache, tokens, cin, cout, blocks, groups, lanes_valid, dense,
         cd, ci, lut_ratio, lanes, subch, load, fabric_ratio=None, area_ratio=None,
         acc_overflows=0, fmax_ratio=None, packed=None):
    cr = _ratio(ci, cd)
    nsub = sum(subch.values())
    bits = sum(int(k[1:]) * v for k, v in subch.items() if k != "zero")
    return dict(layer=label, kind=kind, step=step, step_kind=cache, tokens=tokens, cin=cin,
                cout=cout, blocks=blocks, groups=groups, lanes_valid=lanes_valid,
                dense_beats=dense, cycles_dstar=cd, cycles_int8=ci, cycles_ratio=cr,
                lut_ratio=lut_ratio, tput_per_lut_ratio=_ratio(cr, lut_ratio),
                lut_ratio_fabric=fabric_ratio, tput_per_lut_fabric_ratio=_ratio(cr, fabric_ratio),
                area_ratio=area_ratio, tput_per_area_ratio=_ratio(cr, area_ratio),
                fmax_ratio=fmax_ratio,
                tput_per_second_ratio=None if fmax_ratio is None or cr is None
                else cr * fmax_ratio,
                lane_util=_ratio(lanes_valid, groups * lanes),
                groups_packed=dict(packed or {}),
                lane_util_packed={p: _ratio(lanes_valid, g * lanes)
                                  for p, g in (packed or {}).items()},
                mean_act_bits=_ratio(bits, nsub), subchannels=dict(subch),
                acc_overflows=acc_overflows,
                weight_load_cycles=load)


def summarize(cfg: Config, layers: list, mpu: dict, base: dict, resources: dict,
              areas: dict | None = None, fmax: dict | None = None) -> dict:
    """Per-layer rows, per-step and overall totals (see the module text for the ratios).
    ``areas``: :func:`bench.resources.array_areas`, ``fmax``:
    :func:`bench.resources.array_fmax` (either may be ``None``)."""
    area_ratio = (_ratio(areas["mpu"]["area"], areas["baseline"]["area"]) if areas else None)
    fmax_ratio = (_ratio(fmax["mpu"]["fmax_mhz"], fmax["baseline"]["fmax_mhz"])
                  if fmax else None)
    luts = {u: (e or {}).get("resources", {}).get("lut_total") for u, e in resources.items()}
    lut_ratio = _ratio(luts.get("mpu"), luts.get("baseline"))
    fab = {u: ((e or {}).get("fabric") or {}).get("lut_total") for u, e in resources.items()}
    fabric_ratio = _ratio(fab.get("mpu"), fab.get("baseline"))
    m = {r["id"]: r for r in mpu["layers"]}
    b = {r["id"]: r for r in base["layers"]}
    rows = []
    for bl in layers:
        nb = len(bl.blocks)
        mr, br = m[bl.id], b[bl.id]
        rows.append(_row(bl.name, bl.kind, bl.step, "cache" if bl.cache_step else "reuse",
                         bl.tokens, bl.cin, bl.cout, nb, nb * bl.groups, nb * bl.lanes_valid,
                         nb * len(bl.base_stream), sum(mr["cycles"]), sum(br["cycles"]),
                         lut_ratio, cfg.lanes, bl.subchannels, mr["load_cycles"],
                         fabric_ratio, area_ratio, bl.acc_overflows, fmax_ratio,
                         {p: nb * g for p, g in bl.groups_packed.items()}))

    def total(label, rs):
        sub = {}
        for r in rs:
            for k, v in r["subchannels"].items():
                sub[k] = sub.get(k, 0) + v
        s = lambda k: sum(r[k] for r in rs)  # noqa: E731
        t = _row(label, None, None, None, None, None, None, s("blocks"), s("groups"),
                 s("lanes_valid"), s("dense_beats"), s("cycles_dstar"), s("cycles_int8"),
                 lut_ratio, cfg.lanes, sub, s("weight_load_cycles"), fabric_ratio, area_ratio,
                 s("acc_overflows"), fmax_ratio,
                 {p: sum(r["groups_packed"].get(p, 0) for r in rs)
                  for p in (rs[0]["groups_packed"] if rs else {})})
        for k in ("kind", "step", "step_kind", "tokens", "cin", "cout"):
            t.pop(k)
        return t

    steps = sorted({r["step"] for r in rows})
    return dict(rows=rows,
                totals=dict(all=total("total", rows),
                            by_step={str(s): total(f"step {s}", [r for r in rows
                                                                 if r["step"] == s])
                                     for s in steps}))


def _tools(sim: dict) -> dict:
    import amaranth
    import cocotb

    out = dict(python=platform.python_version(), numpy=np.__version__,
               amaranth=amaranth.__version__, cocotb=cocotb.__version__,
               simulator=sim.get("simulator"), simulator_version=sim.get("simulator_version"))
    return out


def _params_sha(arrays: dict) -> str:
    h = hashlib.sha256()
    for k in sorted(arrays):
        h.update(k.encode())
        h.update(np.ascontiguousarray(arrays[k], dtype=np.float64).tobytes())
    return h.hexdigest()[:16]


def load_inputs(cfg: Config, *, weights: str = "trained", model: str = "digits",
                weight_seed: int = 0, seed: int = 0, steps: int = 10, block: int = 0,
                trace_file=None, progress=None):
    """``(layers, trace, workload)``: the :class:`~analysis.layer_inputs.LinearSpec` list, the trace
    holding their inputs, and the report's description of both. With ``trace_file`` the layers
    are every ``<layer>.x`` of that trace with their weights from the ``weights`` file
    (:func:`analysis.layer_inputs.file_layers`); otherwise one block of the bundled DiT, traced by a
    float DDIM run of ``steps`` steps from ``seed``. Raises ValueError on inconsistent input."""
    say = progress or (lambda msg: None)
    if trace_file is not None:
        from dstar_rtl.analysis.trace import load_trace

        trace = load_trace(trace_file)
        arrays = load_layer_weights(weights)
        layers = file_layers(trace, arrays, f"weights {weights}")
        check_widths(cfg, layers)
        nsteps = len(trace[layers[0].x_key])
        tokens = trace[layers[0].x_key].shape[1]
        say(f"trace {trace_file}: {len(layers)} linear layers, {nsteps} steps, {tokens} tokens; "
            f"weights {weights}")
        return layers, trace, dict(source="trace", trace=str(trace_file), weights=str(weights),
                                   model="file", params_sha256=_params_sha(arrays),
                                   tokens=tokens, steps=nsteps, seed=None, label=None,
                                   block=None)
    spec, params, winfo = load_weights(weights, model, weight_seed)
    layers = block_layers(spec, params, block)
    check_widths(cfg, layers)
    say(f"weights: {winfo['weights']} ({winfo['model']}, {spec.tokens} tokens, hidden "
        f"{spec.hidden}, depth {spec.depth})")
    trace, label = trace_inputs(spec, params, steps, seed)
    say(f"trace: float DDIM, {steps} steps, seed {seed}, label {label}")
    return layers, trace, dict(winfo, source="model", spec=spec.to_dict(), tokens=spec.tokens,
                               seed=seed, label=label, steps=steps, block=block)


def run(cfg: Config, *, weights: str = "trained", model: str = "digits", weight_seed: int = 0,
          seed: int = 0, steps: int = 10, steps_run=(0, 6), block: int = 0, quick: bool = False,
          simulator: str = "verilator", synth: bool = True, trace_file=None,
          operating_point: dict | None = None, liberty=None, fmax: bool = False,
          progress=None, stored=None) -> dict:
    """The whole bench as plain data (the application types it: ``reports/bench.json``).
    ``steps_run`` may be ``"all"``: every step of the trace. ``operating_point``: FMDQ
    thresholds and per-layer bases to quantize with (:func:`layer_configs`). ``liberty``: a
    standard-cell library for the arrays' cell areas (with ``synth``; none: no areas).
    ``fmax``: place and route both arrays for their Fmax (with ``synth``). ``stored``:
    ``(unit, cfg) -> entry or None``, an array's resources measured before (:func:`bench.
    resources.array_resources`)."""
    from dstar_rtl.bench.resources import (
        array_areas,
        array_fmax,
        array_resources,
        unit_config,
    )

    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    layers_in, trace, workload = load_inputs(cfg, weights=weights, model=model,
                                             weight_seed=weight_seed, seed=seed, steps=steps,
                                             block=block, trace_file=trace_file, progress=say)
    if steps_run == "all":
        steps_run = list(range(workload["steps"]))
    layers = prepare(cfg, layers_in, trace, steps_run, quick, operating_point)
    say(f"layers: {len(layers)} (layer, step) pairs, "
        f"{sum(len(b.blocks) for b in layers)} blocks of {cfg.cols} output channels")
    res = array_resources(cfg, synth=synth, progress=say, stored=stored)
    for u, e in res.items():
        say(f"resources {u}: " + (f"{e['resources']['lut_total']} LUTs from {e['source']}"
                                   if e else "none (no sweep point, synthesis off)"))
    areas = array_areas(cfg, liberty, progress=say) if synth and liberty else None
    if areas:
        say(f"areas: MPU {areas['mpu']['area']:,.0f}, baseline {areas['baseline']['area']:,.0f} "
            f"({areas['library']['name']})")
    fmaxes = array_fmax(cfg, progress=say) if synth and fmax else None
    if fmaxes:
        say(f"fmax: MPU {fmaxes['mpu']['fmax_mhz']} MHz, baseline "
            f"{fmaxes['baseline']['fmax_mhz']} MHz")
    sims = {}
    for unit in ("mpu", "baseline"):
        say(f"simulate {unit} ({simulator}, preset {cfg.name})")
        sims[unit] = run_array(unit, unit_config(unit, cfg), layers, simulator)
        say(f"simulate {unit}: {sims[unit]['cycles']} cycles, "
            f"{sims[unit]['drain_beats_checked']} drain beats checked, "
            f"{sims[unit]['run_s']:.1f} s")
    summ = summarize(cfg, layers, sims["mpu"], sims["baseline"], res, areas, fmaxes)
    tools = _tools(sims["mpu"])
    tools["yosys"] = next((e["tools"].get("yosys") for e in res.values() if e), None)
    rep = dict(
        preset=cfg.name, config=cfg.to_dict(), config_hash=cfg.hash(),
        workload=dict(workload, steps_run=sorted(set(steps_run)), quick=quick,
                      operating_point=None if operating_point is None else dict(
                          name=operating_point.get("name"), thr=list(operating_point["thr"]),
                          base_log2={ls.x_key[:-2]: operating_point["base_log2"][ls.x_key[:-2]]
                                     for ls in layers_in}),
                      sar_interval=cfg.sar_interval,
                      layers=sorted({bl.name for bl in layers},
                                    key=[bl.name for bl in layers].index)),
        simulator=simulator, tools=tools,
        resources={u: (dict(e) if e else None) for u, e in res.items()},
        areas=areas, fmax=fmaxes,
        simulation={u: dict(cycles=s["cycles"], drain_beats_checked=s["drain_beats_checked"],
                            checked=s["checked"], sim_wall_s=round(s["wall_s"], 2),
                            run_s=round(s["run_s"], 2)) for u, s in sims.items()},
        rows=summ["rows"], totals=summ["totals"],
        runtime_s=round(time.perf_counter() - t0, 1))
    return rep


def packer_words(config: dict) -> str:
    """How a configuration's QPU packs its groups (``config`` as a dict): the exponent bins or
    the sorting packer."""
    if config.get("packer") == "bins":
        return f"exponent bins, `pack_bins = {config.get('pack_bins')}`"
    return f"sorting packer, `open_groups = {config.get('open_groups', 0)}`"
