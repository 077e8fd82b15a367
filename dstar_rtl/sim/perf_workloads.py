"""Layer workloads for the performance model's calibration and validation: differential layers
of given shapes (random INT8 weights, a drifting input, as a denoising loop produces) as core
programs (:class:`program.layer.LayerProgram`), in two forms:

* **isolated**: a ``STORE CNT`` after every command of a step; H and V run alone, so the busy
  counters between two reads belong to that one command (calibration);
* **plain**: the step as the compiler emits it, with counter reads only where it waits for idle
  anyway (load, compute, store sections; validation).

:func:`vrow_program` is the V engine's calibration: every VROW operation and walk alone at
several row counts and row lengths (:data:`VROW_SHAPES`), so that a command's fixed cycles and
its cycles per row at each row length are told apart (the DiT block is then validated out of
sample).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.differential import DiffLinear
from dstar_rtl.golden.layouts import VPU_OPS
from dstar_rtl.program.compiler import compile_block
from dstar_rtl.program.isa import BUFFERS, VROW_OPS, Cmd, core_for, row_to_words
from dstar_rtl.program.layer import LayerProgram
from dstar_rtl.program.workloads import block_workload
from dstar_rtl.sim.core_programs import CNT, END, Program

__all__ = ["LayerShape", "layer_program", "layer_steps", "isolated", "plain_program",
           "isolated_program", "sectioned", "Sectioned", "block_runs", "block_program",
           "shapes", "SHAPES", "vrow_program", "VROW_SHAPES"]


@dataclass
class Sectioned:
    """A program whose runs carry counter reads at section boundaries: ``sections`` names the
    spans between consecutive reads of every step run."""

    program: Program
    sections: tuple


@dataclass(frozen=True)
class LayerShape:
    """``tokens`` × ``cin`` → ``cout`` (multiples of T); ``drift`` is the input's change per
    step (act units), which sets how many groups a differential step sends; ``steps`` steps."""

    tokens: int
    cin: int
    cout: int
    drift: int = 60
    steps: int = 3
    seed: int = 0

    @property
    def name(self) -> str:
        return f"N{self.tokens}_{self.cin}x{self.cout}_d{self.drift}_s{self.seed}"


#: Layer shapes per preset, in units of T (tokens, cin, cout, drift): square and skewed layers,
#: one tile and many, small and large changes between steps.
SHAPES = {
    "calibration": [(2, 2, 8, 60), (4, 8, 2, 200), (2, 16, 4, 20), (8, 4, 6, 60)],
    "validation": [(4, 4, 4, 60), (2, 8, 8, 100), (6, 2, 4, 40), (4, 16, 2, 60),
                   (2, 4, 12, 300), (8, 8, 2, 10), (4, 6, 6, 150), (2, 12, 6, 60),
                   (6, 6, 2, 0), (4, 2, 16, 80)],
}


def shapes(cfg: Config, kind: str, steps: int = 3) -> list:
    """The ``kind`` (``calibration`` or ``validation``) shapes in channels for ``cfg``, clipped
    to its ``max_reduction``."""
    T = cfg.tile
    out = []
    for i, (n, ci, co, d) in enumerate(SHAPES[kind]):
        ci = min(ci * T, cfg.max_reduction // T * T)
        out.append(LayerShape(n * T, ci, co * T, d, steps, seed=i))
    return out


def layer_program(cfg: Config, shape: LayerShape) -> LayerProgram:
    rng = np.random.default_rng(shape.seed)
    layer = DiffLinear(rng.integers(-127, 128, (shape.cin, shape.cout)),
                       rng.uniform(0.002, 0.02, shape.cout), cfg,
                       bias=rng.uniform(-1, 1, shape.cout), name=shape.name)
    return LayerProgram(layer, shape.tokens, core_for(cfg))


def layer_steps(cfg: Config, shape: LayerShape) -> tuple:
    """``(init run, [step runs])`` of the layer; the input starts random and drifts."""
    prog = layer_program(cfg, shape)
    rng = np.random.default_rng(shape.seed + 1000)
    lim = 1 << (cfg.act_width - 2)
    x = rng.integers(-lim, lim, (shape.tokens, shape.cin))
    steps = []
    for _ in range(shape.steps):
        steps.append(prog.step(x))
        x = np.clip(x + rng.integers(-shape.drift, shape.drift + 1, x.shape), -lim, lim)
    return prog.init(), steps


def isolated(cmds: list) -> list:
    """A counter read after every command (the reads bracket each command). A SKIP's count is
    doubled so that it still covers its commands (and their reads); the read after the last
    skipped command stays, so a skipping step has one read per executed command too."""
    out = [CNT]
    for c in cmds[:-1]:
        if c.op == "SKIP":
            c = Cmd(c.op, {**c.args, "count": 2 * c.args["count"]}, c.wait, c.signal)
        out += [c, CNT]
    return out + [END]


def isolated_program(cfg: Config, shape: LayerShape) -> Program:
    init, steps = layer_steps(cfg, shape)
    return Program("iso_" + shape.name, [init] + [(isolated(c), h) for c, h in steps])


def sectioned(cmds: list) -> list:
    """A layer step with a counter read at the start, after the input LOAD, after the compute
    (QCFG .. BARRIER) and at the end: the reads fall where the step waits for idle anyway."""
    i = next(k for k, c in enumerate(cmds) if c.op == "BARRIER")
    return [CNT, cmds[0], CNT] + cmds[1:i + 1] + [CNT] + cmds[i + 1:-1] + [CNT, END]


def plain_program(cfg: Config, shape: LayerShape) -> Sectioned:
    """Init, then every step :func:`sectioned`."""
    init, steps = layer_steps(cfg, shape)
    return Sectioned(Program("plain_" + shape.name, [init] + [(sectioned(c), h)
                                                            for c, h in steps]),
                     ("load", "compute", "store"))


def block_runs(cfg: Config, steps: int = 4) -> tuple:
    """The preset's test DiT block (:func:`program.workloads.block_workload`) compiled for
    the core: ``(init run, step commands, [step host words], sections)``."""
    make_block, inputs = block_workload(cfg, steps)
    prog = compile_block(make_block(), core_for(cfg))
    init = prog.init_commands()
    if init[-1].op != "END":
        init = init + [END]
    hosts = [prog.step_host_words(x, mod) for x, mod in inputs]
    return (init, prog.init_host_words()), prog.step_commands(), hosts, prog.sections


def block_program(cfg: Config, steps: int = 4) -> Sectioned:
    """The DiT block over ``steps`` steps (cache and reuse steps alternate at the preset's SAR
    interval) with a counter read at every section boundary: the whole core's validation (its
    layers and its VROWs are at shapes the model was not fitted on)."""
    init, cmds, hosts, sections = block_runs(cfg, steps)
    body = []
    for _name, a, b in sections:
        body += [CNT] + [c for c in cmds[a:b] if c.op != "END"]
    body += [CNT, END]
    plain = Program("plain_block", [init] + [(body, h) for h in hosts])
    return Sectioned(plain, tuple(n for n, _a, _b in sections))


#: V-engine calibration shapes in units of T, ``(rows / T, n / T)``: rows of 1 to 16 beats (a
#: paper-scale softmax has 16 and more; beyond, the model extends the last slope) and one to
#: four tiles of rows, two row counts at one beat and at 16 so that the fixed cycles and those
#: that grow with the last row's length are told apart from those per row (row lengths clipped
#: to ``max_reduction``).
VROW_SHAPES = ((1, 1), (3, 1), (4, 2), (2, 4), (2, 8), (1, 10), (1, 16), (3, 16))


def vrow_program(cfg: Config, seed: int = 0) -> Program:
    """Every VROW operation (token walk, and the sub-channel walk of ``kv_amax``/``kv_quant``)
    alone at each of :data:`VROW_SHAPES`, a counter read after every command (:func:`isolated`),
    on random activations, VBUF vectors and softmax masks; the token-walk results are STOREd at
    the end so the run is checked against the executor. Two runs: the init (LOADs, VPARAM) and
    the isolated VROWs."""
    T = cfg.tile
    rng = np.random.default_rng(seed)
    lim = 1 << (cfg.act_width - 3)
    kmax = max(1, cfg.max_reduction // T)
    shapes = sorted({(r * T, min(k, kmax) * T) for r, k in VROW_SHAPES})
    src_rows = max(r // T * n for r, n in shapes)
    dst = src_rows
    vb_rows = min(kmax, max(k for _r, k in VROW_SHAPES))     # VBUF vectors of the longest row
    mask_rows = 6          # 3 random (bit 0 kept), 3 empty: softmax_mx's rows keep nothing, so
                           # RMAX (untouched here) bounds them; its cycles do not depend on it
    buf = {b: BUFFERS.index(b) for b in BUFFERS}

    def cmd(op, **f):
        return Cmd(op, f)

    words = []
    for _ in range(src_rows):
        words += row_to_words(cfg, "ABUF", {"v": rng.integers(-lim, lim, T)})
    for _ in range(vb_rows):
        words += row_to_words(cfg, "VBUF", {"v": rng.integers(-lim // 4, lim // 4, T)})
    for i in range(mask_rows):
        bits = int(rng.integers(0, 1 << kmax)) | 1 if i < 3 else 0
        words += row_to_words(cfg, "MASK", {"bits": bits})
    init = [cmd("LOAD", buf=buf["ABUF"], zero=0, addr=0, count=src_rows),
            cmd("LOAD", buf=buf["VBUF"], zero=0, addr=0, count=vb_rows),
            cmd("LOAD", buf=buf["MASK"], zero=0, addr=0, count=mask_rows),
            cmd("VPARAM", value=1 << 12), END]
    body = []
    for op in VROW_OPS:
        vop = VPU_OPS.index(op)
        for R, n in shapes:
            body.append(cmd("VROW", vop=vop, cols=0, R=R, n=n, a=0, C=n, c=0,
                            vb=3 if op == "softmax_mx" else 0,
                            dst=0 if op == "kv_quant" else dst, sreg=0))
        if op in ("kv_amax", "kv_quant"):
            for R, n in shapes:                     # sub-channel walk: R // T tiles of n / T
                tiles, nch = R // T, n // T
                body.append(cmd("VROW", vop=vop, cols=1, R=tiles, n=nch, a=0, C=nch, c=0,
                                vb=0, dst=0, sreg=1))
    out_rows = max(r // T * n for r, n in shapes)
    body.append(cmd("STORE", buf=buf["ABUF"], addr=dst, count=out_rows))
    return Program("iso_vrow", [(init, words), (isolated(body + [END]), [])])
