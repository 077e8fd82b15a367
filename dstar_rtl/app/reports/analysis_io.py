"""Shared input and output of the analysis subcommands (``dstar trace``, ``fmdq``, ``sar``,
``dit``, ``dit-int``; one module each, :mod:`app.commands.trace` and its siblings).

- The reference-model options (``--model``, ``--steps``, ``--seed``, ``--weight-seed``,
  ``--label``) and their checks, and the check that every linear layer of the model fits a
  configuration's ``max_reduction``, made before any sampling.
- The fixed-width console table the commands print, and the per-layer FMDQ rows of ``fmdq``
  and ``dit``.
- A PNG writer for :func:`gen.outputs.write_together`.

Every output path is checked before any work (:func:`gen.outputs.check_outputs`: not a folder,
not the input trace, not another output of the command; a missing folder is created), and the
outputs of a command (trace, JSON, PNG, Markdown) are written together
(:func:`gen.outputs.write_together`) only after everything succeeded, so a failed command leaves
no output.
"""

from __future__ import annotations

from dstar_rtl.gen.errors import UserError
from dstar_rtl.models.dit import DIT_MODELS

__all__ = ["PRECISIONS", "add_model_options", "check_widths", "fmdq_rows", "model_args",
           "nonneg", "print_table"]

#: The digit precisions of the per-layer shares, 0 being a zero sub-channel.
PRECISIONS = (0, 2, 4, 6, 8)


# ------------------------------------------------------------------------------- model input
def nonneg(name, v):
    """``v``, refused (:class:`UserError`) when negative."""
    if v < 0:
        raise UserError(f"{name} must be >= 0, not {v}")
    return v


def add_model_options(p):
    """The options that choose and sample the reference DiT."""
    p.add_argument("--model", default="small", choices=sorted(DIT_MODELS),
                   help="reference DiT size (default: small)")
    p.add_argument("--steps", type=int, default=10, help="DDIM denoising steps (default: 10)")
    p.add_argument("--seed", type=int, default=0,
                   help="sampling seed: noise and label (default: 0)")
    p.add_argument("--weight-seed", type=int, default=0,
                   help="seed of the random DiT weights (default: 0)")
    p.add_argument("--label", type=int, default=None,
                   help="class label (default: drawn from --seed; the null class is CLASSES)")


def model_args(args):
    """The model spec of ``args`` after checking the options of :func:`add_model_options`."""
    nonneg("--seed", args.seed)
    nonneg("--weight-seed", args.weight_seed)
    if args.steps < 1:
        raise UserError(f"--steps must be >= 1, not {args.steps}")
    spec = DIT_MODELS[args.model]
    if args.label is not None and not 0 <= args.label <= spec.classes:
        raise UserError(f"--label must be in [0, {spec.classes}] for model {args.model!r} "
                        f"({spec.classes} is the null class), not {args.label}")
    return spec


def check_widths(args, spec, cfgs):
    """Refuse, before any sampling, a model whose widest linear input exceeds a configuration's
    ``max_reduction`` (the layer would not fit the array)."""
    from dstar_rtl.models.dit import init_params, linear_layer_names

    params = init_params(spec, args.weight_seed)
    for cfg in cfgs:
        for layer in linear_layer_names(spec):
            cin = params[f"{layer}.W"].shape[0]
            if cin > cfg.max_reduction:
                raise UserError(f"layer {layer!r} of model {args.model!r} has {cin} input "
                                f"channels; max_reduction of {cfg.name!r} is "
                                f"{cfg.max_reduction} (use --set max_reduction={cin} or a "
                                f"larger preset)")


# ---------------------------------------------------------------------------- console tables
def _cell(v, width=8, prec=3):
    if v is None:
        return f"{'-':>{width}}"
    if isinstance(v, float):
        return f"{v:>{width}.{prec}f}"
    return f"{v:>{width}}"


def print_table(header, rows):
    """Print a table on stdout: the first column left-aligned as wide as its longest entry,
    the others right-aligned in 8 characters (floats to 3 decimals, ``None`` as ``-``)."""
    name_w = max([len(header[0])] + [len(r[0]) for r in rows])
    print(f"{header[0]:<{name_w}} " + " ".join(f"{h:>8}" for h in header[1:]))
    for r in rows:
        print(f"{r[0]:<{name_w}} " + " ".join(_cell(v) for v in r[1:]))


def fmdq_rows(layers: dict, err_key: str):
    """``(header, rows)`` of per-layer FMDQ statistics; the last column is ``<err_key>_max``."""
    rows = []
    for name, d in layers.items():
        rows.append([name, d["avg_bits"], *(d[f"share_b{b}"] if b else d["share_zero"]
                                            for b in PRECISIONS),
                     d["share_e_pos"], d["groups_per_tile"], d["lane_fill"], d["saturated"],
                     d[f"{err_key}_max"]])
    header = ["layer", "bits", "b0", "b2", "b4", "b6", "b8", "e>0", "grp/tile", "lanefill",
              "sat", "err_max"]
    return header, rows


# ----------------------------------------------------------------------------------- figures
