"""``dstar measure bench`` (also ``dstar bench``): the DSTAR MPU and the INT8 baseline array side
by side on the same differential layers of a DiT, on the one measurement runner: the bench of
:mod:`bench.layers` typed as :class:`~results.bench.Bench` (``reports/bench.json``), its text
and its Markdown.

A float DDIM run is recorded (or, with ``--trace``, any model's layer inputs are taken from a
trace and its weights from ``--weights FILE.npz``: ``<layer>.weight`` (out, in),
``<layer>.bias``; :mod:`analysis.layer_inputs`); each layer's FMDQ group streams and dense INT8
tiles go through both generated arrays (every drain beat checked against golden); the ECP5
resources come from ``reports/sweep.json`` or ``flows.synth``, the arrays' cell areas from the
standard-cell flow on a Liberty library (``--fmax``: also both arrays' Fmax). Bad input is one
line and exit status 2 before any simulation; a mismatch against golden or a tool failure is
one line and exit status 1, and nothing is written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.markdown import render
from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.bench import layers as bench_layers
from dstar_rtl.bench.layers import packer_words
from dstar_rtl.golden.config import Config
from dstar_rtl.results.base import build, plain
from dstar_rtl.results.bench import Bench

__all__ = ["bench", "from_sweep", "table_rows", "text", "markdown", "parse_steps", "BenchOptions",
           "MEASUREMENT"]


def from_sweep(unit: str, cfg: Config, path=None) -> dict | None:
    """The point of ``reports/sweep.json`` (or ``path``) of ``unit`` at ``cfg.rows`` with
    ``cfg``'s hash, as :func:`bench.resources.array_resources` takes it, else ``None``."""
    from pathlib import Path

    from dstar_rtl.app.benches.sizes import Sizes
    from dstar_rtl.gen.paths import REPORTS

    path = Path(path) if path is not None else REPORTS / "sweep.json"
    if not path.is_file():
        return None
    for p in Sizes.load(path).points:
        if p.unit == unit and p.size == cfg.rows and p.config_hash == cfg.hash():
            return dict(resources=p.resources.as_dict(), tools=p.tools,
                        config_hash=p.config_hash, flow=p.flow, seconds=p.seconds,
                        source="reports/sweep.json")
    return None


def bench(cfg: Config, **kw) -> Bench:
    """The whole bench (:func:`bench.layers.run`, its keywords), resources measured before
    read from ``reports/sweep.json``; returns its typed result (``reports/bench.json``)."""
    rep = bench_layers.run(cfg, stored=from_sweep, **kw)
    prov = run_provenance("bench", {cfg.name: cfg.hash()})
    return build(Bench, dict(rep, provenance=plain(prov)), "the bench's result")


# --------------------------------------------------------------------------------- printing
def _f(v, fmt="{:.2f}", suffix=""):
    return "–" if v is None else fmt.format(v) + suffix


def _pct(v):
    return _f(None if v is None else 100 * v, "{:.1f}", " %")


def table_rows(rep: Bench) -> list:
    """``[header, row, ...]`` of the per-layer table and its totals (strings)."""
    head = ["layer", "step", "tokens×in→out", "blocks", "DSTAR cycles", "INT8 cycles",
            "INT8/DSTAR cycles", "DSTAR/INT8 LUTs", "DSTAR/INT8 tput/LUT", "lane util",
            "mean bits"]
    out = [head]
    for r in rep.rows:
        out.append([r.layer, f"{r.step} ({r.step_kind})", f"{r.tokens}×{r.cin}→{r.cout}",
                    str(r.blocks), f"{r.cycles_dstar:,}", f"{r.cycles_int8:,}",
                    _f(r.cycles_ratio), _f(r.lut_ratio), _f(r.tput_per_lut_ratio),
                    _pct(r.lane_util), _f(r.mean_act_bits, "{:.2f}")])
    for t in [*rep.totals.by_step.values(), rep.totals.all]:
        out.append([f"**{t.layer}**", "", "", str(t.blocks), f"{t.cycles_dstar:,}",
                    f"{t.cycles_int8:,}", _f(t.cycles_ratio), _f(t.lut_ratio),
                    _f(t.tput_per_lut_ratio), _pct(t.lane_util), _f(t.mean_act_bits, "{:.2f}")])
    return out


def _res_line(unit, e) -> str:
    if not e:
        return f"{unit}: no resources (no matching sweep point and synthesis off)"
    r, fab = e.resources, e.fabric
    return (f"{unit}: {r.lut_total:,} LUTs (LUT4 {r.lut4:,} + 2 × {r.carry:,} carry), "
            f"{r.ff:,} FF, {r.dsp} DSP, {r.bram} BRAM, from {e.source}"
            + (f"; without DSP blocks {fab.lut_total:,} LUTs" if fab else ""))


def _steps_words(wl) -> str:
    if list(wl.steps_run) == list(range(wl.steps)):
        return f"all {wl.steps}"
    return ", ".join(map(str, wl.steps_run))


def _workload_words(wl) -> str:
    if wl.source == "trace":
        return f"trace {wl.trace}, weights {wl.weights}, {wl.steps} steps"
    return (f"weights {wl.weights} ({wl.model}), seed {wl.seed}, {wl.steps} DDIM "
            f"steps, block {wl.block}")


def _workload_md(wl) -> str:
    if wl.source == "trace":
        return (f"the linear layers of trace `{wl.trace}` ({wl.tokens} tokens, "
                f"{wl.steps} steps) with weights `{wl.weights}` (parameters "
                f"`{wl.params_sha256}`), each a closed-loop differential FMDQ layer stepping "
                f"every step")
    return (f"weights `{wl.weights}` ({wl.model}, {wl.tokens} tokens, parameters "
            f"`{wl.params_sha256}`), float DDIM run of {wl.steps} steps from seed "
            f"{wl.seed} (label {wl.label}); the layers of block {wl.block} plus "
            f"`x_embed` and `final.linear`, as closed-loop differential FMDQ layers (SAR "
            f"interval {wl.sar_interval}: `qkv[qk]` runs on cache steps only)")


def text(rep: Bench) -> str:
    """The plain-text summary ``dstar bench`` prints."""
    rows = table_rows(rep)
    rows = [[c.replace("**", "") for c in r] for r in rows]
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    wl = rep.workload
    lines = [f"dstar bench: preset {rep.preset} (config {rep.config_hash}), "
             f"{rep.simulator}, {_workload_words(wl)}, measured steps "
             f"{_steps_words(wl)}{', quick' if wl.quick else ''}"]
    for k, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i])
                               for i, c in enumerate(r)))
        if k == 0:
            lines.append("  ".join("-" * x for x in w))
    for u in ("mpu", "baseline"):
        lines.append("resources " + _res_line(u, rep.resources.get(u)))
    a = rep.totals.all
    lines.append(f"total: DSTAR {a.cycles_dstar:,} cycles, INT8 {a.cycles_int8:,} cycles; "
                 f"INT8/DSTAR cycles {_f(a.cycles_ratio)}, DSTAR/INT8 LUTs "
                 f"{_f(a.lut_ratio)}, DSTAR/INT8 throughput per LUT "
                 f"{_f(a.tput_per_lut_ratio)} (fabric only, DSP blocks at the LUTs they "
                 f"replace: LUTs {_f(a.lut_ratio_fabric)}, throughput per LUT "
                 f"{_f(a.tput_per_lut_fabric_ratio)}), DSTAR/INT8 area "
                 f"{_f(a.area_ratio)}, throughput per area "
                 f"{_f(a.tput_per_area_ratio)}, throughput per second at each "
                 f"design's Fmax {_f(a.tput_per_second_ratio)}, lane utilization "
                 f"{_pct(a.lane_util)}; every drain beat checked against golden")
    return "\n".join(lines)


def _area_md(areas, total) -> str:
    if not areas:
        return ("Cell area: not measured (no standard-cell library: `--liberty FILE`, or "
                "synthesis off).")
    lib, m, b = areas.library, areas.mpu, areas.baseline
    return (f"Cell area ({lib.name}, `{lib.file}`, sha256 `{(lib.sha256 or '')[:16]}…`;"
            f" the flow of `dstar synth --target asic`, weight buffers left out as macros): MPU "
            f"{m.area:,.1f} ({m.ff:,} FF), INT8 array {b.area:,.1f} ({b.ff:,} FF"
            f"{', Yosys -booth, its best' if b.booth else ', its best without -booth'}); "
            f"DSTAR/INT8 area {_f(total.area_ratio)}, so DSTAR's throughput per unit "
            f"area is **{_f(total.tput_per_area_ratio)}×** the INT8 array's over the "
            f"whole run.")


def _fmax_md(fmax, total) -> str:
    if not fmax:
        return "Fmax: not measured (`--fmax` places and routes both arrays)."
    m, b = fmax.mpu, fmax.baseline
    return (f"Fmax on ECP5 (nextpnr-ecp5, LFE5U-85F, out of context, constraint "
            f"{m.constraint_mhz:g} MHz): MPU {m.fmax_mhz} MHz, INT8 array "
            f"{b.fmax_mhz} MHz; at each design's own clock DSTAR's throughput per second is "
            f"**{_f(total.tput_per_second_ratio)}×** the INT8 array's (speed-up × Fmax "
            f"ratio {_f(total.fmax_ratio)}).")


#: Parameters of the arrays' and the packer's datapath that the bench's text names when set.
LEVERS = ("digit_product", "digits", "weight_hop", "act_hop", "pe_stages", "acc_width",
          "overflow_detect", "open_groups", "packer", "pack_bins")


def _levers_md(config: dict) -> str:
    """The datapath levers of ``config`` that differ from their defaults, as ``name=value``."""
    fields = Config.fields()
    set_ = [f"`{k}={config[k]}`" for k in LEVERS
            if k in config and config[k] != fields[k].default]
    return ", ".join(set_) if set_ else "every lever at its default"




def markdown(rep: Bench) -> str:
    """``reports/bench.md`` (``app/templates/bench.md``) from its result."""
    rows = table_rows(rep)
    table = "\n".join(["| " + " | ".join(rows[0]) + " |",
                       "|" + "|".join("---" for _ in rows[0]) + "|",
                       *("| " + " | ".join(r) + " |" for r in rows[1:])])
    a = rep.totals.all
    return render("bench", r=rep, tools=rep.tools, a=a, lp=a.lane_util_packed, table=table,
                  workload=_workload_md(rep.workload), steps=_steps_words(rep.workload),
                  levers=_levers_md(rep.config), packer=packer_words(rep.config),
                  resources=[_res_line(u, rep.resources.get(u)) for u in ("mpu", "baseline")],
                  area=_area_md(rep.areas, a), fmax=_fmax_md(rep.fmax, a))


def parse_steps(text: str):
    """``"0,6"`` → ``[0, 6]``; ``"all"`` → ``"all"`` (every step). ValueError with a readable
    message otherwise."""
    if str(text).strip() == "all":
        return "all"
    try:
        steps = [int(s) for s in str(text).split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--steps-run takes comma-separated step numbers or 'all', "
                         f"not {text!r}") from None
    if not steps:
        raise ValueError(f"--steps-run takes comma-separated step numbers or 'all', "
                         f"not {text!r}")
    return steps


@dataclass(frozen=True)
class BenchOptions:
    """What ``dstar measure bench`` runs (checked at construction, before any simulation)."""

    weights: str = option("trained", "the trained digits DiT, random weights of --model, or a "
                          "weights file in the trained model's format",
                          metavar="trained|random|FILE.npz")
    model: str = option("digits", "model size for --weights random (digits: the trained "
                        "model's)", choices=sorted(bench_layers.MODELS))
    weight_seed: int = option(0, "seed of --weights random")
    seed: int = option(0, "seed of the sampling run (start noise and class label)")
    steps: int = option(10, "DDIM steps of the run")
    steps_run: str = option("0,6", "steps whose layers run on the arrays: a list, or all for the "
                            "whole sampling run (0,6: the first step, against zero, and a later "
                            "differential cache step)", metavar="S,S,...|all")
    operating_point: Path | None = option(None, "quantize at the operating point a `dstar "
                                          "profile --sweep` chose (its result): its FMDQ "
                                          "thresholds and each layer's base",
                                          metavar="SWEEP.json")
    trace: Path | None = option(None, "bench any DiT: every '<layer>.x' (steps, tokens, in) of "
                                "this trace, with --weights FILE.npz holding '<layer>.weight' "
                                "(out, in) and '<layer>.bias'", metavar="T.npz")
    block: int = option(0, "which DiT block")
    quick: bool = option(False, "2 token tiles and 2 output blocks per layer (tests)")
    simulator: Literal["verilator", "icarus"] = option("verilator", "simulator of the arrays")
    liberty: Path | None = option(None, "standard-cell library (.lib or .lib.gz) for the arrays' "
                                  "cell areas (default: the Nangate45 library in ../shared/pdk "
                                  "when it is there; none: no areas)")
    fmax: bool = option(False, "also place and route both arrays (nextpnr-ecp5) for their Fmax "
                        "(minutes per array)")
    no_synth: bool = option(False, "take resources only from reports/sweep.json (never run "
                            "Yosys)")
    config: Config | None = None

    def __post_init__(self):
        from dstar_rtl.app.options import (
            check_liberty,
            require_extra,
            require_iverilog,
            resolve_liberty,
        )
        self.inputs()
        if self.liberty is not None:
            check_liberty(resolve_liberty(self.liberty, needed=False))
        require_extra("sim", "dstar bench")
        if self.fmax and not self.no_synth:
            require_extra("fpga", "dstar bench --fmax")
        if self.simulator == "icarus":
            require_iverilog("dstar bench --simulator icarus")

    def inputs(self) -> tuple:
        """``(steps_run, operating point or None)`` of these options, every input read and
        checked against the configuration (a :class:`UserError` naming the option)."""
        from dstar_rtl.analysis.layer_inputs import block_layers, check_widths
        from dstar_rtl.gen.errors import UserError

        cfg = self.config
        try:
            steps_run = parse_steps(self.steps_run)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        if not 1 <= self.steps <= 1000:
            raise UserError(f"--steps must be in [1, 1000], not {self.steps}")
        for opt, v in (("--seed", self.seed), ("--weight-seed", self.weight_seed),
                       ("--block", self.block)):
            if v < 0:
                raise UserError(f"{opt} must be >= 0, not {v}")
        own = self.weights not in ("trained", "random")
        nsteps = self.steps
        if self.trace is not None:
            if not own:
                raise UserError("--trace needs --weights FILE.npz with '<layer>.weight' and "
                                "'<layer>.bias' arrays")
            try:
                layers, _, wl = bench_layers.load_inputs(cfg, weights=self.weights,
                                                         trace_file=self.trace)
            except ValueError as exc:
                raise UserError(str(exc)) from None
            nsteps = wl["steps"]
        else:
            if own and not Path(self.weights).is_file():
                raise UserError(f"weights file {self.weights} not found (--weights takes "
                                f"trained, random or an .npz file)")
            try:
                spec, params, _ = bench_layers.load_weights(self.weights, self.model,
                                                            self.weight_seed)
                layers = block_layers(spec, params, self.block)
                check_widths(cfg, layers)
            except (ValueError, KeyError) as exc:
                raise UserError(str(exc).strip("'\"")) from None
        op = None
        if self.operating_point is not None:
            from dstar_rtl.analysis.profile import load_operating_point

            try:
                op = load_operating_point(self.operating_point)
                bench_layers.layer_configs(cfg, layers, op)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                why = f"no field {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc)
                raise UserError(f"--operating-point {self.operating_point}: {why}") from None
        if steps_run != "all":
            bad = [s for s in steps_run if not 0 <= s < nsteps]
            if bad:
                raise UserError(f"--steps-run: step {bad[0]} is outside [0, {nsteps - 1}]")
        return steps_run, op


def measure_bench(opts: BenchOptions, previous=None) -> Bench:
    """The bench of ``opts`` (progress on stderr); a mismatch against golden or a tool failure
    is a :class:`WorkError`."""
    from dstar_rtl.app.options import resolve_liberty
    from dstar_rtl.flows.pnr import PnrError
    from dstar_rtl.flows.synth import SynthError
    from dstar_rtl.gen.errors import WorkError
    from dstar_rtl.gen.progress import say

    steps_run, op = opts.inputs()
    synth = not opts.no_synth
    liberty = (resolve_liberty(opts.liberty, needed=False)
               if opts.liberty is not None or synth else None)
    try:
        return bench(opts.config, weights=opts.weights, model=opts.model,
                     weight_seed=opts.weight_seed, seed=opts.seed, steps=opts.steps,
                     steps_run=steps_run, block=opts.block, quick=opts.quick,
                     simulator=opts.simulator, synth=synth, trace_file=opts.trace,
                     operating_point=op, liberty=liberty if synth else None, fmax=opts.fmax,
                     progress=say)
    except (AssertionError, SynthError, PnrError) as exc:
        raise WorkError(str(exc) or type(exc).__name__) from None


# The renderers are looked up when called, so that a test may replace them.
MEASUREMENT = Measurement(
    name="bench", stem="bench", preset="fpga",
    summary="The DSTAR MPU against the INT8 baseline array on the same differential layers of a "
            "DiT: RTL cycles (every drain beat checked against golden), ECP5 resources, cell "
            "areas and Fmax, and their ratios per layer and in total.",
    options=BenchOptions, result=Bench, measure=lambda o, p: measure_bench(o, p),
    render=lambda r: markdown(r), echo=lambda r: text(r))
