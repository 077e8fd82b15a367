"""DiT checkpoints in the parameter layout of the reference implementation (facebookresearch/DiT,
``models.py``): load them as ``(DiTSpec, params)`` for :class:`models.dit.DiT` and the quantized
models, and export this project's weights to that layout.

The two layouts hold the same function; they differ in names, in the orientation of the linear
weights and in the flattening of a patch:

==========================================  ===============================  =====================
reference tensor (PyTorch layout)           this project                     conversion
==========================================  ===============================  =====================
``x_embedder.proj.weight`` (D, C, p, p)     ``x_embed.W`` (p·p·C, D)         see *patches* below
``x_embedder.proj.bias`` (D)                ``x_embed.b``                    as is
``pos_embed`` (1, T, D)                     ``pos_embed`` (T, D)             ``[0]``, values as is
``t_embedder.mlp.0.weight`` (D, F)          ``t_embed.fc1.W`` (F, D)         transposed
``t_embedder.mlp.2.weight`` (D, D)          ``t_embed.fc2.W``                transposed
``y_embedder.embedding_table.weight``       ``y_embed`` (classes + 1, D)     as is (last row: null)
``blocks.N.attn.qkv.weight`` (3D, D)        ``blocks.N.attn.qkv.W`` (D, 3D)  transposed
``blocks.N.attn.proj.weight`` (D, D)        ``blocks.N.attn.proj.W``         transposed
``blocks.N.mlp.fc1.weight`` (M, D)          ``blocks.N.mlp.fc1.W`` (D, M)    transposed
``blocks.N.mlp.fc2.weight`` (D, M)          ``blocks.N.mlp.fc2.W`` (M, D)    transposed
``blocks.N.adaLN_modulation.1.weight``      ``blocks.N.adaLN.W`` (D, 6D)     transposed
``final_layer.adaLN_modulation.1.weight``   ``final.adaLN.W`` (D, 2D)        transposed
``final_layer.linear.weight`` (p·p·Co, D)   ``final.linear.W`` (D, p·p·C)    eps rows, transposed
==========================================  ===============================  =====================

Every ``.bias`` maps to the project's ``.b`` of the same layer. Everything else already agrees
(checked against ``models.py``): the timestep embedding (cos then sin, ``F / 2`` frequencies, max
period 10000), LayerNorm without affine and eps 1e-6, tanh-GELU, the fused qkv split as
(3, heads, head_dim), the adaLN chunk orders (shift, scale, gate for attention then MLP; shift,
scale in the final layer) and raster token order.

Patches. The reference embeds patches with a ``Conv2d`` of stride ``p``: token ``gy·g + gx``
gets ``sum w[d, c, ky, kx] · img[c, gy·p + ky, gx·p + kx]``. This project's
:meth:`~models.dit.DiT.patchify` flattens a patch with the channel fastest, feature
``(ky·p + kx)·C + c``, so ``x_embed.W[(ky·p + kx)·C + c, d] = w[d, c, ky, kx]``, i.e.
``W = w.transpose(2, 3, 1, 0).reshape(p·p·C, D)``. The reference's ``unpatchify`` reshapes a
token's outputs as (p, p, Co) (einsum ``nhwpqc->nchpwq``), also the channel fastest, the same order
as this project's :meth:`~models.dit.DiT.unpatchify`: output row ``(ky·p + kx)·Co + c`` is pixel
(ky, kx) of channel ``c``.

``learn_sigma``. A checkpoint trained with ``learn_sigma=True`` has ``Co = 2C`` output channels,
the last ``C`` of them the variance. Only eps is kept: the reference rows ``(ky·p + kx)·2C + c``
with ``c < C`` (every other block of ``C`` rows, not the first half of the rows), which become the
project's rows ``(ky·p + kx)·C + c``.

``pos_embed`` is used exactly as stored, never regenerated. The reference stores a fixed 2-D
sin-cos table, but not this project's :func:`models.dit._pos_embed`: ``get_2d_sincos_pos_embed``
builds its grid with ``np.meshgrid(grid_w, grid_h)``, so its first ``D / 2`` features encode the
column and the last ``D / 2`` the row, the other way round from ``_pos_embed`` (the halves
swapped; each half is the same sin-then-cos code). Since the model only adds the table, the
stored one is the one that gives the reference's function.

Sizes come from the shapes alone (:func:`from_reference`); the number of attention heads is not
in a state dict and is an argument. The reference computes the timestep embedding in float32; this
project computes everything in float64, so a loaded model matches a PyTorch run to float32
rounding, and an export followed by a load gives the same model to the last bit of the stored
dtype.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from dstar_rtl.models.dit import DiTSpec

__all__ = ["STATE_DICT_KEYS", "STRIPPED_PREFIXES", "reference_shapes", "from_reference",
           "to_reference", "load_checkpoint", "export_checkpoint"]

# A PyTorch checkpoint that is a dict holding the state dict (as the reference's train.py writes:
# {"model", "ema", "opt", "args"}) is read from the first of these keys it has; "ema" first, as
# the reference's own loader (download.find_model) does.
STATE_DICT_KEYS = ("ema", "model", "state_dict")
# Name prefixes that DistributedDataParallel and torch.compile add; removed when every name has one.
STRIPPED_PREFIXES = ("module.", "_orig_mod.")

_INSTALL = {"safetensors": "pip install -e '.[safetensors]'", "torch": "pip install -e '.[torch]'"}


def _block_linears(spec: DiTSpec):
    """(project name, reference name, out, in) of every plain linear layer of the blocks."""
    D, M = spec.hidden, spec.mlp_hidden
    for i in range(spec.depth):
        yield from ((f"blocks.{i}.attn.qkv", f"blocks.{i}.attn.qkv", 3 * D, D),
                    (f"blocks.{i}.attn.proj", f"blocks.{i}.attn.proj", D, D),
                    (f"blocks.{i}.mlp.fc1", f"blocks.{i}.mlp.fc1", M, D),
                    (f"blocks.{i}.mlp.fc2", f"blocks.{i}.mlp.fc2", D, M),
                    (f"blocks.{i}.adaLN", f"blocks.{i}.adaLN_modulation.1", 6 * D, D))


def _linears(spec: DiTSpec):
    """(project name, reference name, out, in) of every linear layer stored transposed only."""
    D, F = spec.hidden, spec.freq_dim
    yield "t_embed.fc1", "t_embedder.mlp.0", D, F
    yield "t_embed.fc2", "t_embedder.mlp.2", D, D
    yield from _block_linears(spec)
    yield "final.adaLN", "final_layer.adaLN_modulation.1", 2 * D, D


def reference_shapes(spec: DiTSpec, learn_sigma: bool = False) -> dict:
    """``{reference name: shape}`` of a reference-layout state dict for ``spec``, in the order of
    the reference's ``state_dict()``; ``learn_sigma`` doubles the output channels of
    ``final_layer.linear``."""
    D, C, p = spec.hidden, spec.channels, spec.patch
    rows = p * p * (2 if learn_sigma else 1) * C
    layers = [("x_embedder.proj", (D, C, p, p)), ("t_embedder.mlp.0", (D, spec.freq_dim)),
              ("t_embedder.mlp.2", (D, D)), ("y_embedder.embedding_table", None)]
    layers += [(ref, (o, i)) for _, ref, o, i in _block_linears(spec)]
    layers += [("final_layer.linear", (rows, D)), ("final_layer.adaLN_modulation.1", (2 * D, D))]
    s = {"pos_embed": (1, spec.tokens, D)}
    for ref, shape in layers:
        if shape is None:  # the class table has no bias
            s[f"{ref}.weight"] = (spec.classes + 1, D)
            continue
        s[f"{ref}.weight"] = shape
        s[f"{ref}.bias"] = shape[:1]
    return s


def _project_shapes(spec: DiTSpec) -> dict:
    """``{project name: shape}`` of :func:`models.dit.init_params` for ``spec``."""
    D, p = spec.hidden, spec.patch
    s = {"x_embed.W": (spec.patch_dim, D), "x_embed.b": (D,), "pos_embed": (spec.tokens, D),
         "y_embed": (spec.classes + 1, D)}
    for name, _, o, i in _linears(spec):
        s[f"{name}.W"] = (i, o)
        s[f"{name}.b"] = (o,)
    s["final.linear.W"] = (D, p * p * spec.channels)
    s["final.linear.b"] = (p * p * spec.channels,)
    return s


def _shape(shape) -> str:
    return str(tuple(int(n) for n in shape))


class _Checker:
    """Collects what does not fit in a dict of arrays and raises one one-line ValueError."""

    def __init__(self, arrays: Mapping, source: str):
        self.a, self.source = arrays, source

    def fail(self, msg: str):
        raise ValueError(f"{self.source}: {msg}") from None

    def get(self, name: str, ndim: int, expected: str):
        if name not in self.a:
            self.fail(f"tensor {name!r} is missing (expected shape {expected})")
        shape = tuple(np.shape(self.a[name]))
        if len(shape) != ndim or 0 in shape:
            self.fail(f"tensor {name!r} has shape {_shape(shape)}, expected {expected}")
        return shape

    def bad(self, name: str, shape, expected: str, why: str = ""):
        self.fail(f"tensor {name!r} has shape {_shape(shape)}, expected {expected}"
                  + (f" ({why})" if why else ""))

    def check_all(self, expected: Mapping, what: str):
        """Every name of ``expected`` present with its shape and nothing else: else one error
        naming the first problem (missing, then unexpected, then shape) and counting the rest."""
        problems = [f"tensor {k!r} is missing (expected shape {_shape(s)})"
                    for k, s in expected.items() if k not in self.a]
        problems += [f"unexpected tensor {k!r} of shape {_shape(np.shape(v))} (not a {what} "
                     f"parameter)" for k, v in self.a.items() if k not in expected]
        problems += [f"tensor {k!r} has shape {_shape(np.shape(self.a[k]))}, expected "
                     f"{_shape(s)}" for k, s in expected.items()
                     if k in self.a and tuple(np.shape(self.a[k])) != tuple(s)]
        if problems:
            more = len(problems) - 1
            self.fail(problems[0] + (f"; and {more} more problem{'s' * (more > 1)}, next: "
                                     f"{problems[1]}" if more else ""))

    def value(self, name: str):
        """The tensor as float64, refusing non-numeric and non-finite ones."""
        a = np.asarray(self.a[name])
        if a.dtype == object or not (np.issubdtype(a.dtype, np.floating)
                                     or np.issubdtype(a.dtype, np.integer)):
            self.fail(f"tensor {name!r} has dtype {a.dtype}, expected a real number type")
        a = a.astype(np.float64)
        if not np.isfinite(a).all():
            self.fail(f"tensor {name!r} of shape {_shape(a.shape)} holds non-finite values")
        return a


def _strip_prefixes(sd: Mapping) -> dict:
    sd = dict(sd)
    for pre in STRIPPED_PREFIXES:
        if sd and all(isinstance(k, str) and k.startswith(pre) for k in sd):
            sd = {k[len(pre):]: v for k, v in sd.items()}
    return sd


def _mlp_ratio(mlp: int, hidden: int) -> float:
    """The float ``r`` with ``int(hidden * r) == mlp`` (what DiTSpec.mlp_hidden computes)."""
    r = mlp / hidden
    for _ in range(4):
        if int(hidden * r) == mlp:
            return r
        r = float(np.nextafter(r, math.inf))
    raise AssertionError(f"no float mlp_ratio gives {mlp} from {hidden}")  # never for ints


def from_reference(state_dict: Mapping, heads: int, source: str = "state dict"):
    """Convert a reference-layout state dict (names → arrays) to ``(DiTSpec, params)``.

    Every size comes from a shape: ``hidden`` D, ``channels`` C and ``patch`` p from
    ``x_embedder.proj.weight`` (D, C, p, p); the token grid from ``pos_embed`` (1, T, D) with
    T = grid² and ``image_size = grid·p``; ``freq_dim`` from ``t_embedder.mlp.0.weight`` (D, F);
    ``classes`` from ``y_embedder.embedding_table.weight`` (rows − 1, the last row the null
    class); ``depth`` as the number of distinct ``blocks.N`` (they must be 0 … depth − 1);
    ``mlp_ratio`` as M / D from ``blocks.0.mlp.fc1.weight`` (M, D); ``learn_sigma`` from
    ``final_layer.linear.weight`` (p·p·C or p·p·2C rows). ``heads`` must divide D. ``ada_std``
    and ``qk_gain`` (random initialisation only) keep their defaults. Names with a
    :data:`STRIPPED_PREFIXES` prefix on every name lose it.

    A missing or unexpected tensor, a shape that does not fit, a non-numeric or non-finite tensor
    or a bad ``heads`` raises one one-line ``ValueError`` starting with ``source`` and naming the
    tensor, its shape and the shape expected.
    """
    sd = _strip_prefixes(state_dict)
    ck = _Checker(sd, source)
    for k in sd:
        if not isinstance(k, str):
            ck.fail(f"state dict key {k!r} is not a string")
    if any(k.startswith("param/") for k in sd) or "x_embed.W" in sd:
        ck.fail("this is this project's own parameter layout (param/<name>, x_embed.W, ...), "
                "not the reference DiT's; read it with models.digits.load_trained")

    D, C, p, p2 = ck.get("x_embedder.proj.weight", 4, "(hidden, channels, patch, patch)")
    if p2 != p:
        ck.bad("x_embedder.proj.weight", (D, C, p, p2), "(hidden, channels, patch, patch)",
               "the patch must be square")
    _, T, Dp = shape = ck.get("pos_embed", 3, f"(1, grid*grid, {D})")
    grid = math.isqrt(T)
    if shape[0] != 1 or Dp != D or grid * grid != T:
        ck.bad("pos_embed", shape, f"(1, grid*grid, {D})")
    name = "t_embedder.mlp.0.weight"
    Dt, F = shape = ck.get(name, 2, f"({D}, frequency_embedding_size)")
    if Dt != D or F % 2:
        ck.bad(name, shape, f"({D}, frequency_embedding_size)",
               "frequency_embedding_size must be even" if Dt == D else "")
    name = "y_embedder.embedding_table.weight"
    K, Dy = shape = ck.get(name, 2, f"(classes + 1, {D})")
    if Dy != D or K < 2:
        ck.bad(name, shape, f"(classes + 1, {D})",
               "the last row is the null class, and at least one class is needed")
    blocks = {int(m.group(1)) for k in sd if (m := re.match(r"blocks\.(\d+)\.", k))}
    depth = len(blocks)
    if not depth:
        ck.fail(f"tensor 'blocks.0.attn.qkv.weight' is missing (expected shape {_shape((3 * D, D))}"
                "): no transformer blocks")
    name = "blocks.0.mlp.fc1.weight"
    M, Dm = shape = ck.get(name, 2, f"(mlp_hidden, {D})")
    if Dm != D:
        ck.bad(name, shape, f"(mlp_hidden, {D})")
    name = "final_layer.linear.weight"
    R, Df = shape = ck.get(name, 2, f"({p * p * C} or {2 * p * p * C} (learn_sigma), {D})")
    if Df != D or R not in (p * p * C, 2 * p * p * C):
        ck.bad(name, shape, f"({p * p * C}, {D}) or ({2 * p * p * C}, {D}) with learn_sigma",
               f"patch {p}, {C} channels")
    learn_sigma = R == 2 * p * p * C
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1 or D % heads:
        ck.fail(f"heads must be a positive integer that divides the hidden size {D} (of tensor "
                f"'x_embedder.proj.weight' of shape {_shape((D, C, p, p))}), not {heads!r}")
    try:
        spec = DiTSpec(image_size=grid * p, patch=p, channels=C, hidden=D, depth=depth,
                       heads=heads, mlp_ratio=_mlp_ratio(M, D), classes=K - 1, freq_dim=F)
    except ValueError as e:
        ck.fail(str(e))
    ck.check_all(reference_shapes(spec, learn_sigma), "reference DiT")

    P = {}
    w = ck.value("x_embedder.proj.weight")
    P["x_embed.W"] = w.transpose(2, 3, 1, 0).reshape(p * p * C, D)
    P["x_embed.b"] = ck.value("x_embedder.proj.bias")
    P["pos_embed"] = ck.value("pos_embed")[0]
    P["y_embed"] = ck.value("y_embedder.embedding_table.weight")
    for proj, ref, _, _ in _linears(spec):
        P[f"{proj}.W"] = ck.value(f"{ref}.weight").T
        P[f"{proj}.b"] = ck.value(f"{ref}.bias")
    out = 2 * C if learn_sigma else C
    w = ck.value("final_layer.linear.weight").reshape(p * p, out, D)[:, :C]
    P["final.linear.W"] = w.reshape(p * p * C, D).T
    P["final.linear.b"] = ck.value("final_layer.linear.bias").reshape(p * p, out)[:, :C].ravel()
    P = {k: np.ascontiguousarray(v) for k, v in P.items()}
    return spec, P


def to_reference(spec: DiTSpec, params: Mapping, dtype=np.float32) -> dict:
    """This project's ``params`` for ``spec`` as a reference-layout state dict of ``dtype``
    arrays (eps only: ``final_layer.linear`` has ``C`` output channels). Checks that ``params``
    has exactly the names and shapes of :func:`models.dit.init_params`."""
    ck = _Checker(params, "params")
    ck.check_all(_project_shapes(spec), "DiT")
    D, C, p = spec.hidden, spec.channels, spec.patch
    sd = {"x_embedder.proj.weight": ck.value("x_embed.W").reshape(p, p, C, D).transpose(3, 2, 0, 1),
          "x_embedder.proj.bias": ck.value("x_embed.b"),
          "pos_embed": ck.value("pos_embed")[None],
          "y_embedder.embedding_table.weight": ck.value("y_embed")}
    for proj, ref, _, _ in _linears(spec):
        sd[f"{ref}.weight"] = ck.value(f"{proj}.W").T
        sd[f"{ref}.bias"] = ck.value(f"{proj}.b")
    sd["final_layer.linear.weight"] = ck.value("final.linear.W").T
    sd["final_layer.linear.bias"] = ck.value("final.linear.b")
    order = reference_shapes(spec)
    return {k: np.ascontiguousarray(sd[k], dtype=dtype) for k in order}


def _need(module: str):
    raise ImportError(f"reading or writing this checkpoint format needs the optional package "
                      f"{module!r}: `{_INSTALL[module]}`") from None


def _unreadable(path, kind: str, exc: BaseException) -> ValueError:
    """The one-line ValueError for a checkpoint file its reader cannot parse (truncated or
    corrupted): the file, the format and what the reader found. A reader's advice to load
    pickled data (NumPy's ``allow_pickle``) is not passed on: a checkpoint is never unpickled."""
    text = " ".join(str(exc).split())
    if "allow_pickle" in text or "pickled" in text:
        text = "it holds pickled Python objects, which are never loaded"
    why = f"{type(exc).__name__}: {text[:160]}" if text else type(exc).__name__
    return ValueError(f"{path}: not a readable {kind}, truncated or corrupted ({why})")


def _read_npz(path: Path) -> dict:
    """The arrays of an ``.npz`` (a zip of ``.npy`` files), never unpickling anything; one
    ValueError naming the file for anything that is not a readable archive."""
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic not in (b"PK\x03\x04", b"PK\x05\x06"):
        what = "it is empty" if not magic else f"it starts with {magic!r}"
        raise ValueError(f"{path}: not a NumPy .npz archive, which is a zip file ({what}: "
                         f"truncated, corrupted or another format)")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as exc:  # zipfile, zlib and NumPy's header errors: the file is damaged
        raise _unreadable(path, "NumPy .npz archive", exc) from None


def _torch():
    try:
        import torch
    except ImportError:
        _need("torch")
    return torch


def _torch_load(path: Path):
    """``torch.load(weights_only=True)`` of ``path`` as a dict of float64 arrays."""
    import argparse
    import pickle

    torch = _torch()
    safe = getattr(torch.serialization, "safe_globals", None)
    try:
        if safe is None:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        else:  # the reference's training checkpoints keep their argparse.Namespace under "args"
            with safe([argparse.Namespace]):
                obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        m = re.search(r"Unsupported global: GLOBAL (\S+)", str(e))
        what = (f"it holds a {m.group(1)} object" if m else
                re.sub(r"\x1b\[[0-9;]*m|\s+", " ", str(e)).strip()[:200] or type(e).__name__)
        raise ValueError(f"{path}: torch.load(weights_only=True) refused the file ({what}); save "
                         f"the state dict alone, e.g. torch.save(model.state_dict(), path)") \
            from None
    except Exception as e:  # a damaged zip or pickle stream (RuntimeError, EOFError, ...)
        raise _unreadable(path, "PyTorch checkpoint", e) from None
    if not isinstance(obj, Mapping):
        raise ValueError(f"{path}: holds a {type(obj).__name__}, expected a state dict "
                         f"(a dict of tensors)") from None
    for key in STATE_DICT_KEYS:
        if isinstance(obj.get(key), Mapping):
            obj = obj[key]
            break
    sd = {}
    for k, v in obj.items():
        if not torch.is_tensor(v):
            raise ValueError(f"{path}: entry {k!r} is not a tensor but {type(v).__name__} (a "
                             f"checkpoint dict must hold its state dict under one of "
                             f"{', '.join(map(repr, STATE_DICT_KEYS))})") from None
        sd[k] = v.detach().cpu().to(torch.float64).numpy()
    return sd


def load_checkpoint(path, heads: int):
    """Read a DiT checkpoint in the reference layout: ``(DiTSpec, params)`` with float64 arrays,
    usable as ``DiT(spec, params=params)``.

    Formats, by suffix: ``.npz`` (NumPy; names as keys), ``.safetensors`` (optional extra
    ``safetensors``) and ``.pt`` / ``.pth`` (optional extra ``torch``; read with
    ``torch.load(map_location="cpu", weights_only=True)``). A PyTorch file may be the state dict
    itself (the released DiT checkpoints) or a dict holding it under ``"ema"``, ``"model"`` or
    ``"state_dict"``, tried in that order (the reference's train.py writes ``model``, ``ema``,
    ``opt`` and ``args``; an ``argparse.Namespace`` is allowed for the latter).

    ``heads`` is the number of attention heads (not stored in a state dict). Sizes, name checks
    and errors as :func:`from_reference`; ``pos_embed`` is used exactly as stored (module
    docstring). Raises FileNotFoundError for a missing file, ImportError naming the ``pip
    install`` command when the format's optional package is missing, and a one-line ValueError
    naming the file for one its reader cannot parse (truncated, corrupted, another format);
    nothing is ever unpickled beyond what ``torch.load(weights_only=True)`` allows.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"DiT checkpoint {path} not found")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        sd = _read_npz(path)
    elif suffix == ".safetensors":
        try:
            from safetensors.numpy import load_file
        except ImportError:
            _need("safetensors")
        try:
            sd = load_file(str(path))
        except Exception as exc:  # safetensors' SafetensorError (from Rust), an OSError, ...
            raise _unreadable(path, ".safetensors file", exc) from None
    elif suffix in (".pt", ".pth"):
        sd = _torch_load(path)
    else:
        raise ValueError(f"{path}: unknown checkpoint format {path.suffix!r}; expected .npz, "
                         f".safetensors, .pt or .pth")
    return from_reference(sd, heads, source=str(path))


def export_checkpoint(spec: DiTSpec, params: Mapping, path, dtype=np.float32) -> Path:
    """Write ``params`` (this project's layout, for ``spec``) as a reference-layout checkpoint
    that :func:`load_checkpoint` and the reference's ``DiT.load_state_dict`` read: ``.npz``,
    ``.safetensors`` (optional extra ``safetensors``) or ``.pt`` / ``.pth`` (a plain state dict;
    optional extra ``torch``), by suffix. ``dtype`` is float32 as the reference stores it (exact
    for the bundled digits DiT, trained in float32); pass ``np.float64`` for a lossless copy of
    float64 weights. The head count is not stored: pass ``spec.heads`` to
    :func:`load_checkpoint`. Returns the path."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".npz", ".safetensors", ".pt", ".pth"):
        raise ValueError(f"{path}: unknown checkpoint format {path.suffix!r}; expected .npz, "
                         f".safetensors, .pt or .pth")
    sd = to_reference(spec, params, dtype)
    if suffix == ".npz":
        with open(path, "wb") as f:
            np.savez(f, **sd)
    elif suffix == ".safetensors":
        try:
            from safetensors.numpy import save_file
        except ImportError:
            _need("safetensors")
        save_file(sd, str(path))
    else:
        torch = _torch()
        torch.save({k: torch.from_numpy(v) for k, v in sd.items()}, path)
    return path
