"""The stored Y's cost in quality on the integer DiT (``dstar measure state-quality``,
:mod:`app.reports.state_quality` types and renders it): every stored-Y fraction at the operating
point's base offset, one finer, and with the reductions in pieces, each sampled over seeds on the
trained digits DiT and summarized as the profile sweep summarizes its points."""

from __future__ import annotations

from dstar_rtl.gen.progress import say

__all__ = ["FRACS", "PIECES", "CHUNKS", "points", "measure"]


#: The stored Y's fractions the report measures (``None``: Y kept whole, the reference).
FRACS = (None, 0, 2, 4)


#: The reduction split of the pieces' points: the digits DiT's 128 hidden channels in 2 pieces,
#: its MLP's 256 in 4 (its 64 tokens are the softmax row's bound).
PIECES = dict(max_reduction=64)

#: The MLP in chunks as a core with a DRAM port runs it (numerics §2.5, "MLP chunks"): fc2's
#: 256 channels in 2 pieces, each rounding the stored Y.
CHUNKS = dict(mlp_chunks=2)


def points(op_offset: int) -> list:
    """``[(name, base_offset, ystate_frac, overrides)]``: every fraction of :data:`FRACS` at the
    operating point's base offset and at one finer (``op_offset + 1``: more bits, more
    headroom), then at the operating point with the reductions in pieces (:data:`PIECES`), and
    the chosen fraction and one two bits finer with the MLP in chunks (:data:`CHUNKS`)."""
    from dstar_rtl.golden.config import YSTATE_FRAC_CHOSEN

    out = []
    for off, over in ((op_offset, {}), (op_offset + 1, {}), (op_offset, PIECES)):
        for g in FRACS:
            what = "Y whole" if g is None else f"stored Y, g = {g}"
            where = f", max_reduction {over['max_reduction']}" if over else ""
            out.append((f"base {off:+d}{where}, {what}", off, g, over))
    for g in (YSTATE_FRAC_CHOSEN, YSTATE_FRAC_CHOSEN + 2):    # chunks round once more a step
        out.append((f"base {op_offset:+d}, mlp_chunks {CHUNKS['mlp_chunks']}, stored Y, "
                    f"g = {g}", op_offset, g, CHUNKS))
    return out


def _run_one(args):
    from dstar_rtl.analysis.profile import _int_run
    from dstar_rtl.models.digits import load_trained
    from dstar_rtl.models.dit import DiT, ddim_sample

    cfg, masks, steps, seed, bases = args
    spec, params = load_trained()
    xf, _ = ddim_sample(DiT(spec, params=params), steps, seed, seed % spec.classes)
    return _int_run(spec, params, cfg, masks, steps, seed, xf, bases)


def measure(seeds: int, steps: int, jobs: int, op_offset: int, thr) -> dict:
    """Every point of :func:`points` over ``seeds`` seeds: ``{"points": [{name, base_offset,
    ystate_frac, ystate_width, summary, passes}], ...}``."""
    from concurrent.futures import ProcessPoolExecutor

    from dstar_rtl.analysis.calibration import calibrate, layer_bases
    from dstar_rtl.analysis.profile import _sweep_summary, meets_rule
    from dstar_rtl.golden.config import preset
    from dstar_rtl.models.digits import load_trained

    spec, params = load_trained()
    cfg = preset("fpga", thr=tuple(thr))
    cal = calibrate(spec, params, cfg.replace(base_offset=0), steps, 1000)
    todo = [(name, off, g, cfg.replace(ystate_frac=g, **over,
                                        **({"ln_row_max": spec.hidden}
                                           if "max_reduction" in over else {})),
             layer_bases(cal.profiled, off, cfg)) for name, off, g, over in points(op_offset)]
    args = [(c, cal.masks, steps, s, b) for _, _, _, c, b in todo for s in range(seeds)]
    say(f"[state-quality] {len(todo)} points × {seeds} seeds, {steps} steps, {jobs} jobs")
    with ProcessPoolExecutor(jobs) as pool:
        runs = []
        for k, r in enumerate(pool.map(_run_one, args)):
            runs.append(r)
            if (k + 1) % seeds == 0:
                say(f"[state-quality] {todo[k // seeds][0]}: done")
    out = []
    for i, (name, off, g, c, _) in enumerate(todo):
        s = _sweep_summary(runs[i * seeds:(i + 1) * seeds])
        out.append(dict(name=name, base_offset=off, ystate_frac=g, ystate_width=c.ystate_width,
                        max_reduction=c.max_reduction, summary=s, passes=meets_rule(s)))
    return dict(points=out, seeds=seeds, steps=steps, preset="fpga", thr=list(thr),
                acc_bits=cfg.acc_bits)
