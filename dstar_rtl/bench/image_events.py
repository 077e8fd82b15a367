"""Events of one sampled image on a whole core, from the ISA executor: what the energy model
(:mod:`bench.image_energy`) multiplies by energies per event.

:func:`image_events` runs the core's program for one DDIM trajectory (the same compiled model,
calibration, label and seed as ``dstar sample`` on the RTL) on :class:`program.executor.
CoreExecutor`, every step's stored tensors checked against the integer golden by
:class:`program.sampling.CoreSampler` as on the RTL. It returns the step-by-step increments of
the event counters (:data:`program.isa.COUNTERS`, which the executor reproduces exactly: the
core's own counters of the same image must equal them, :func:`check_against_rtl`) and of the
memory reads the counters leave out (:data:`program.executor.READS`). The model's one-time init
(weights, RBUF rows, masks) is not part of an image.

Cost: the executor's time per step (about 1-3 s for the digits DiT at ``fpga``).
"""

from __future__ import annotations

from dstar_rtl.golden.config import Config

__all__ = ["image_events", "check_against_rtl", "EVENT_COUNTERS"]


def _event_counters():
    from dstar_rtl.program.isa import COUNTERS, CYCLE_COUNTERS
    return tuple(c for c in COUNTERS if c not in CYCLE_COUNTERS)


#: The counters that count events (the cycle counters are 0 on the executor).
EVENT_COUNTERS = _event_counters()


def image_events(spec, params, cfg: Config, *, steps: int, label: int, seed: int) -> dict:
    """``{"counters": {name: n}, "reads": {name: n}, "per_step": [...], "steps"}`` of one image
    (module docstring); the calibration is :func:`analysis.calibration.calibrate`'s at ``seed``
    as ``dstar sample`` draws it."""
    from dstar_rtl.analysis.calibration import CALIBRATION_SEED_OFFSET, calibrate
    from dstar_rtl.models.dit_int_model import IntDiT
    from dstar_rtl.program.executor import READS, CoreExecutor
    from dstar_rtl.program.isa import core_for
    from dstar_rtl.program.model import compile_model
    from dstar_rtl.program.sampling import CoreSampler

    cal = calibrate(spec, params, cfg, steps, seed + CALIBRATION_SEED_OFFSET)

    def model():
        return IntDiT(spec, params, cfg, cal.masks, base_log2=cal.bases)

    prog = compile_model(model(), core_for(cfg))
    host = CoreSampler(prog, [model()], steps)
    ex = CoreExecutor(cfg, core_for(cfg))
    ex.run(prog.init, prog.init_words)
    host.started(ex.run(host.start(seed, label), []))
    per_step = []
    while not host.done:
        before = dict(ex.reads)
        cmds, words = host.step_program()
        rec = host.finish_step(ex.run(cmds, words), f"step {host.i} ")
        per_step.append(dict(step=rec["step"], cache_step=rec["cache_step"],
                             counters={k: rec["counters"][k] for k in EVENT_COUNTERS},
                             reads={k: ex.reads[k] - before[k] for k in READS}))
    tot = {k: sum(s["counters"][k] for s in per_step) for k in EVENT_COUNTERS}
    reads = {k: sum(s["reads"][k] for s in per_step) for k in READS}
    return dict(counters=tot, reads=reads, per_step=per_step, steps=steps, label=label,
                seed=seed)


def check_against_rtl(events: dict, rtl_steps: list) -> int:
    """Compare the executor's per-step event counters with the core's (``rtl_steps``: the RTL
    sample's ``per_step`` records, ``core_counters`` each); AssertionError naming the first
    difference. Returns the number of values compared."""
    if len(rtl_steps) != len(events["per_step"]):
        raise AssertionError(f"{len(rtl_steps)} RTL steps against "
                             f"{len(events['per_step'])} executor steps")
    n = 0
    for ex, rt in zip(events["per_step"], rtl_steps):
        for k, v in ex["counters"].items():
            got = rt["core_counters"][k]
            if got != v:
                raise AssertionError(f"step {ex['step']}: counter {k} is {got} on the core, "
                                     f"{v} on the executor")
            n += 1
    return n
