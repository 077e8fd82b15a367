"""The reference DiT family on the core's presets (issue 31): ``dstar measure reference`` writes
``reports/reference.json`` (the typed result :class:`Reference`) and ``reports/reference.md``
through the one measurement runner (:data:`MEASUREMENT`).

For each model of the family (:data:`FAMILY`: DiT-S/2, B/2, L/2, XL/2 in the facebookresearch
layout, 4-channel 32×32 latents, patch 2, 256 tokens, MLP ratio 4, heads of 64 (72 for XL);
random weights, :func:`models.dit.init_params`) and each preset (``fpga``, ``paper``, their
defaults), the integer model (:class:`models.dit_int_model.IntDiT`) is built and compiled onto
one core (:func:`program.model.compile_model`):

- a LayerNorm row longer than the preset's ``ln_row_max`` raises it to the model's hidden size
  (the VPU then takes each row twice; named in the report, as the deepened buffers are);
- **refused**: the one line the integer model or the compiler gives (e.g. a model whose
  activations need more ABUF rows than the ISA addresses);
- otherwise each buffer's rows the whole model needs resident
  (:func:`program.model.resident_depths`) against the preset's; the weights, ``x̂`` and ``Y``
  that do not fit stream through the host port (:data:`program.model.STREAMABLE`; such a
  buffer is deepened only when one layer's window does not fit it), the other buffers are
  deepened where they must be (named in the report), and the compiled program's
  commands per step and host traffic per step (32-bit words in and out, cache and reuse
  steps; the streamed state's share) are counted from its transfers.

With ``--run MODEL@PRESET[,...]`` (default ``DiT-S/2@paper,DiT-B/2@paper``) the first DDIM
step of each of those models, if it compiles, runs on the ISA executor
(:class:`program.executor.CoreExecutor` through the host loop of
:class:`program.sampling.CoreSampler`, which compares every stored tensor with the integer
model's step); the report gives each one's wall time. The steps of a smaller reference-layout model
whose fc2 is longer than ``fpga``'s ``max_reduction`` (:data:`H96`) are timed on the executor
and, unless ``--no-rtl``, on the Verilator ``fpga`` core (:func:`step_times`). Memory: DiT-XL/2 at
``fpga`` (its float and integer weights and 8 million commands per step) peaks at about 18 GB.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from dstar_rtl.app.measurement import Measurement, option
from dstar_rtl.app.results import Provenance, Result, build
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.progress import say

__all__ = ["FAMILY", "PRESETS", "H96", "reference_spec", "compile_row", "run_first_step",
           "step_times", "markdown", "Reference", "ReferenceOptions", "MEASUREMENT"]

#: name → (hidden, depth, heads) of the reference family (``../shared/REFERENCES.md``).
FAMILY = {"DiT-S/2": (384, 12, 6), "DiT-B/2": (768, 12, 12), "DiT-L/2": (1024, 24, 16),
          "DiT-XL/2": (1152, 28, 16)}

#: The presets each model is compiled for.
PRESETS = ("fpga", "paper")


def reference_spec(name: str):
    """The :class:`models.dit.DiTSpec` of family member ``name`` at 256 tokens."""
    from dstar_rtl.models.dit import DiTSpec

    if name not in FAMILY:
        raise ValueError(f"model must be one of {list(FAMILY)}, not {name!r}")
    hidden, depth, heads = FAMILY[name]
    return DiTSpec(image_size=32, patch=2, channels=4, hidden=hidden, depth=depth, heads=heads,
                   mlp_ratio=4.0, classes=1000, freq_dim=256)


def _traffic(prog, cache: bool) -> dict:
    """32-bit host words of one step's transfers: ``in``, ``out`` and the streamed state's."""
    from dstar_rtl.program.isa import host_words_per_row
    from dstar_rtl.program.model import STREAMABLE

    out = dict(words_in=0, words_out=0, streamed_words=0)
    for op, _row, key, _first, rows, buf in prog.transfers(cache):
        words = rows * host_words_per_row(prog.cfg, buf)
        out["words_in" if op == "LOAD" else "words_out"] += words
        if buf in STREAMABLE and key != "counters":
            out["streamed_words"] += words
    return out


def compile_row(name: str, params: dict, preset_name: str) -> tuple:
    """``(record, program or None)`` of family member ``name`` compiled for one core of
    ``preset_name`` (module docstring)."""
    from dstar_rtl.golden.config import preset
    from dstar_rtl.models.dit_int_model import IntDiT
    from dstar_rtl.program.isa import core_for
    from dstar_rtl.program.model import STREAMABLE, compile_model, deepened, resident_depths

    spec, cfg = reference_spec(name), preset(preset_name)
    rec = dict(model=name, preset=preset_name, tokens=spec.tokens, hidden=spec.hidden,
               depth=spec.depth, heads=spec.heads, mlp=spec.mlp_hidden)
    if spec.hidden > cfg.ln_max:        # longer LayerNorm rows: the VPU takes them twice
        cfg = cfg.replace(ln_row_max=spec.hidden)
        rec["raised"] = {"ln_row_max": spec.hidden}
    t0 = time.perf_counter()
    try:
        model = IntDiT(spec, params, cfg)
        need = resident_depths(model)
        least = resident_depths(model, streamed=True)
    except ValueError as why:
        return dict(rec, status="refused", reason=str(why)), None
    have = core_for(cfg).to_dict()
    rec["buffers"] = {k: dict(need=need[k], preset=have[k]) for k in need}
    # Streamable buffers stream what does not fit, down to one layer's window; the others
    # hold all they need.
    cfg, deeper = deepened(cfg, {k: (least if k.removesuffix("_rows").upper() in STREAMABLE
                                     else need)[k] for k in need})
    try:
        if deeper:      # the configuration's depths set the address fields: build it again
            del model
            model = IntDiT(spec, params, cfg)
        prog = compile_model(model, core_for(cfg))
    except ValueError as why:
        return dict(rec, status="refused", reason=str(why)), None
    from dstar_rtl.program.isa import cmd_bits

    rec.update(status="compiled", deepened=deeper, command_bits=cmd_bits(cfg),
               streamed={b: sorted(v) for b, v in prog.streamed.items() if v},
               init_commands=len(prog.init), init_words=len(prog.init_words),
               step_commands=len(prog.step),
               cache_step=_traffic(prog, True), reuse_step=_traffic(prog, False),
               pieces={k: v.pieces for k, v in model.blocks[0].layers.items()},
               seconds=round(time.perf_counter() - t0, 1))
    return rec, prog


def _executor_steps(prog, params, steps: int, label: int) -> float:
    """Init, then ``steps`` DDIM steps (seed 0, ``label``) of ``prog``'s model on the ISA
    executor through the host loop of :class:`program.sampling.CoreSampler`, every stored tensor
    compared with a fresh integer model's step (AssertionError on a difference). Returns the
    seconds of the steps alone."""
    from dstar_rtl.models.dit_int_model import IntDiT
    from dstar_rtl.program.executor import CoreExecutor
    from dstar_rtl.program.sampling import CoreSampler

    ex = CoreExecutor(prog.cfg, prog.core)
    ex.run(prog.init, prog.init_words)
    host = CoreSampler(prog, [IntDiT(prog.model.spec, params, prog.cfg)], steps=steps)
    host.started(ex.run(host.start(0, label), []))
    t0 = time.perf_counter()
    while not host.done:
        cmds, words = host.step_program()
        host.finish_step(ex.run(cmds, words), f"step {host.i} ")
    return time.perf_counter() - t0


def run_first_step(prog, params) -> dict:
    """The first DDIM step of ``prog``'s model (label 0) on the ISA executor, every stored
    tensor checked (:func:`_executor_steps`). Returns ``{"seconds"`` (init included),
    ``"commands"}``."""
    t0 = time.perf_counter()
    _executor_steps(prog, params, 1, 0)
    return dict(seconds=round(time.perf_counter() - t0, 1), commands=len(prog.step))


#: The reference-layout model whose steps are timed on the executor and the `fpga` RTL (issue
#: 31): hidden 96, 6 blocks of 6 heads, MLP 384 (fc2 longer than `fpga`'s max_reduction).
H96 = dict(image_size=16, patch=2, channels=1, hidden=96, depth=6, heads=6, mlp_ratio=4.0,
           classes=10)


def step_times(steps: int = 2, label: int = 3, rtl: bool = True) -> dict:
    """Wall time per DDIM step of the :data:`H96` model (random weights) at the ``fpga`` preset,
    buffers deep enough for the whole model: on the ISA executor (every stored tensor checked
    against the integer model, SAR masks all kept) and, with ``rtl``, on the Verilator core
    (``-O2``, every step checked; the build timed apart), with the core's cycles per step."""
    from dstar_rtl.bench.sample import run_samples
    from dstar_rtl.golden.config import preset
    from dstar_rtl.models.dit import DiTSpec, init_params
    from dstar_rtl.models.dit_int_model import IntDiT
    from dstar_rtl.program.isa import core_for
    from dstar_rtl.program.model import compile_model, deepened, resident_depths

    spec = DiTSpec(**H96)
    params = init_params(spec, 0)
    cfg = preset("fpga")
    cfg, _ = deepened(cfg, resident_depths(IntDiT(spec, params, cfg)))
    prog = compile_model(IntDiT(spec, params, cfg), core_for(cfg))
    seconds = _executor_steps(prog, params, steps, label)
    out = dict(model=spec.to_dict(), preset="fpga", steps=steps,
               pieces={k: v.pieces for k, v in prog.model.blocks[0].layers.items()},
               executor_s_per_step=round(seconds / steps, 1))
    if rtl:
        from dstar_rtl.sim.runner import build
        t0 = time.perf_counter()
        build("core", cfg, "verilator", False, True)
        out["rtl_build_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        rec = run_samples(spec, params, cfg, backend="verilator", steps=steps, labels=[label],
                          guidance=1.0, seed=0)["record"]
        out.update(rtl_s_per_step=round((time.perf_counter() - t0) / steps, 1),
                   rtl_bit_exact=rec["core"]["bit_exact"],
                   rtl_cycles_per_step=rec["core"]["cycles_per_step"]["mean"])
    return out


@dataclass(frozen=True)
class BufferNeed:
    """Rows a buffer needs for the whole model resident, and the preset's."""

    need: int
    preset: int


@dataclass(frozen=True)
class Traffic:
    """32-bit host words of one step: in, out, and the streamed state's share."""

    words_in: int
    words_out: int
    streamed_words: int


@dataclass(frozen=True)
class FamilyRow:
    """One family member on one preset: its shape, whether it compiles (else why not), the
    buffers it needs and the ones deepened, its commands, host traffic and fc2 pieces."""

    model: str
    preset: str
    tokens: int
    hidden: int
    depth: int
    heads: int
    mlp: int
    status: str
    raised: dict[str, int] | None = None
    reason: str | None = None
    buffers: dict[str, BufferNeed] | None = None
    deepened: dict[str, int] | None = None
    command_bits: int | None = None
    streamed: dict[str, tuple[str, ...]] | None = None
    init_commands: int | None = None
    init_words: int | None = None
    step_commands: int | None = None
    cache_step: Traffic | None = None
    reuse_step: Traffic | None = None
    pieces: dict[str, int] | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class FirstStep:
    """A member's first DDIM step on the ISA executor: its seconds and commands, or why it did
    not run."""

    model: str
    preset: str
    refused: str | None = None
    seconds: float | None = None
    commands: int | None = None


@dataclass(frozen=True)
class StepTimes:
    """Time per DDIM step of the :data:`H96` model on the executor and the Verilator core."""

    model: dict[str, Any]
    preset: str
    steps: int
    pieces: dict[str, int]
    executor_s_per_step: float
    rtl_build_s: float | None = None
    rtl_s_per_step: float | None = None
    rtl_bit_exact: bool | None = None
    rtl_cycles_per_step: float | None = None


@dataclass(frozen=True)
class Reference(Result):
    """``reports/reference.json``: every member on every preset, the first steps run, the step
    times."""

    KIND = "reference"
    rows: tuple[FamilyRow, ...]
    runs: tuple[FirstStep, ...] = ()
    step_times: StepTimes | None = None


def markdown(data: Reference) -> str:
    """``reports/reference.md`` from its result."""
    lines = ["# The reference DiT family on the core's presets", "",
             f"Generated by `{data.provenance.command}` ({data.provenance.date}): each model "
             "of the "
             "facebookresearch DiT family (4-channel 32×32 latents, patch 2, 256 tokens, MLP "
             "ratio 4, heads of 64 (XL: 72), random weights) built as the integer model and "
             "compiled onto one core of each preset at its defaults "
             "(`app/reports/reference.py`), `ln_row_max` raised to the hidden size where the "
             "preset's is shorter (named beside the preset). "
             "Weights, `x̂` and `Y` that do not fit stream through the host port; any other "
             "buffer the model overflows is deepened and named.", "",
             "| model | preset | status | commands per step | host words in / out, cache "
             "step | streamed state words | deepened buffers (rows needed) | pieces (fc2) |",
             "|---|---|---|---:|---:|---:|---|---:|"]
    for r in data.rows:
        raised = "".join(f" ({k} {v:,})" for k, v in (r.raised or {}).items())
        if r.status != "compiled":
            lines.append(f"| {r.model} | {r.preset}{raised} | refused: {r.reason} | – "
                         "| – | – | – | – |")
            continue
        c = r.cache_step
        deep = ", ".join(f"{k.removesuffix('_rows').upper()} {v:,}"
                         for k, v in r.deepened.items()) or "none"
        bits = r.command_bits or 128
        lines.append(f"| {r.model} | {r.preset}{raised} | compiled | "
                     f"{r.step_commands:,}{f' ({bits}-bit)' if bits != 128 else ''} | "
                     f"{c.words_in:,} / {c.words_out:,} | {c.streamed_words:,} | "
                     f"{deep} | {r.pieces.get('fc2', 1)} |")
    for run in data.runs:
        if run.refused is not None:
            lines += ["", f"First DDIM step of {run.model} on the `{run.preset}` ISA "
                      "executor: **not run**, the model does not compile there (above)."]
        else:
            lines += ["", f"First DDIM step of {run.model} on the `{run.preset}` ISA "
                      "executor, every stored tensor equal to the integer model's: "
                      f"{run.commands:,} commands in {run.seconds:.1f} s."]
    from dstar_rtl.golden.config import CORE_BUFFER_ROWS, core_rows_limit

    limits = ", ".join(f"{b.removesuffix('_rows').upper()} {core_rows_limit(b):,}"
                       for b in CORE_BUFFER_ROWS)
    st = data.step_times
    if st:
        m = st.model
        lines += ["", f"Time per DDIM step of a reference-layout DiT at `{st.preset}` (hidden "
                  f"{m['hidden']}, {m['depth']} blocks of {m['heads']} heads, MLP "
                  f"{int(m['hidden'] * m['mlp_ratio'])}: fc2 in {st.pieces['fc2']} pieces; "
                  "random weights, buffers deep enough for the whole model, "
                  f"{st.steps} steps): the ISA executor **{st.executor_s_per_step:.1f} s** "
                  "per step (every stored tensor checked)"
                  + (f"; the Verilator core **{st.rtl_s_per_step:.1f} s** per step "
                     f"({st.rtl_cycles_per_step:,.0f} cycles, bit-exact "
                     f"{'at every step' if st.rtl_bit_exact else 'NOT at every step'}; "
                     f"its `-O2` build {st.rtl_build_s:.0f} s apart)."
                     if st.rtl_s_per_step is not None else ".")]
    lines += ["", "Buffers (rows the whole model needs resident / the preset's; the most rows the "
              f"ISA addresses: {limits}):", "",
              "| model | preset | " + " | ".join(b.upper() for b in _BUFS) + " |",
              "|---|---|" + "---:|" * len(_BUFS)]
    for r in data.rows:
        if r.buffers is not None:
            lines.append(f"| {r.model} | {r.preset} | " + " | ".join(
                f"{r.buffers[f'{b}_rows'].need:,} / {r.buffers[f'{b}_rows'].preset:,}"
                for b in _BUFS) + " |")
    return "\n".join(lines) + "\n"


_BUFS = ("abuf", "xbuf", "ybuf", "wmem", "gmem", "rbuf", "vbuf", "mask")


def _parse_runs(text: str) -> list:
    """``--run``'s ``MODEL@PRESET`` items (``none``: no item)."""
    out = []
    for item in ([] if text == "none" else text.split(",")):
        name, _, pre = item.partition("@")
        if name not in FAMILY or pre not in PRESETS:
            raise UserError(f"--run must be MODEL@PRESET[,...] with MODEL one of {list(FAMILY)} "
                            f"and PRESET one of {list(PRESETS)}, not {item!r}")
        out.append((name, pre))
    return out


@dataclass(frozen=True)
class ReferenceOptions:
    """What ``dstar measure reference`` compiles and runs (checked at construction)."""

    models: str = option(",".join(FAMILY), "comma-separated family members (default all: "
                                           f"{','.join(FAMILY)})")
    run: str = option("DiT-S/2@paper,DiT-B/2@paper", "MODEL@PRESET[,...] whose first step runs "
                      "on the ISA executor ('none' for none)")
    no_rtl: bool = option(False, "time the hidden-96 model's steps on the executor only, not "
                                 "on the Verilator core")

    def __post_init__(self):
        models = [m for m in self.models.split(",") if m]
        bad = [m for m in models if m not in FAMILY]
        if bad or not models:
            raise UserError(f"--models: {bad or 'none given'}; family members are "
                            f"{list(FAMILY)}")
        _parse_runs(self.run)


def measure(opts: ReferenceOptions, previous=None) -> Reference:
    """Every member of ``opts`` compiled on every preset, the first steps of ``--run``, the
    hidden-96 model's step times (progress on stderr)."""
    from dstar_rtl.models.dit import init_params

    runs = _parse_runs(opts.run)
    rows, run_recs = [], []
    for name in (m for m in opts.models.split(",") if m):
        spec = reference_spec(name)
        say(f"reference: {name}: random weights ({spec.depth} blocks, hidden {spec.hidden})")
        params = init_params(spec, 0)
        for pre in PRESETS:
            rec, program = compile_row(name, params, pre)
            say(f"reference: {name} on {pre}: {rec['status']}"
                + (f" ({rec['reason']})" if rec["status"] == "refused" else
                   f", {rec['step_commands']:,} commands per step"))
            rows.append(rec)
            if (name, pre) in runs:
                if program is None:
                    run_recs.append(dict(model=name, preset=pre, refused=rec["reason"]))
                    continue
                run_recs.append(dict(model=name, preset=pre, **run_first_step(program, params)))
                say(f"reference: {name} on {pre}: first step on the executor equals the integer "
                    f"model ({run_recs[-1]['seconds']:.0f} s)")
            del program         # before the next compile: one program in memory at a time
        del params
    say("reference: the hidden-96 model's steps on the executor"
        + ("" if opts.no_rtl else " and the Verilator fpga core"))
    times = step_times(rtl=not opts.no_rtl)
    return Reference(Provenance.of_run("reference"),
                     rows=build(tuple[FamilyRow, ...], rows, "reference rows"),
                     runs=build(tuple[FirstStep, ...], run_recs, "reference runs"),
                     step_times=build(StepTimes, times, "reference step times"))


MEASUREMENT = Measurement(
    name="reference", stem="reference",
    summary="The reference DiT family (S/2 to XL/2) compiled onto one core of the fpga and paper "
            "presets: buffers, commands and host traffic per step, first steps on the ISA "
            "executor, and time per step on the executor and the Verilator core.",
    options=ReferenceOptions, result=Reference, measure=measure, render=markdown)
