"""The reference DiT family compiled onto one core of each preset (``dstar measure reference``:
:mod:`app.reports.reference` types and renders it).

For each model of the family (:data:`FAMILY`: DiT-S/2, B/2, L/2, XL/2 in the facebookresearch
layout, 4-channel 32×32 latents, patch 2, 256 tokens, MLP ratio 4, heads of 64 (72 for XL);
random weights, :func:`models.dit.init_params`) and each preset (``fpga``, ``paper``, their
defaults), :func:`compile_row` builds the integer model (:class:`models.dit_int_model.IntDiT`)
and compiles it onto one core (:func:`program.model.compile_model`): a LayerNorm row longer
than the preset's ``ln_row_max`` raises it to the model's hidden size; a model the integer model
or the compiler refuses gives its one line; otherwise each buffer's rows the whole model needs
resident against the preset's (the weights, ``x̂`` and ``Y`` that do not fit stream through the
host port, :data:`program.model.STREAMABLE`; other buffers deepened where they must be), and
the program's commands and host traffic per step (32-bit words, cache and reuse steps).
:func:`run_first_step` runs a compiled program's first DDIM step on the ISA executor, every
stored tensor compared with the integer model's; :func:`step_times` times the steps of the
hidden-96 model (:data:`H96`) on the executor and the Verilator ``fpga`` core.
"""

from __future__ import annotations

import time

__all__ = ["FAMILY", "PRESETS", "reference_spec", "compile_row", "run_first_step", "H96",
           "step_times"]


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
