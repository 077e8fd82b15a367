"""Activation traces of a DiT and their FMDQ and SAR analysis (numerics §2.2-2.6).

Trace format: one ``.npz`` archive whose arrays are named

- ``<layer>.x``: (steps, tokens, channels), the input of a linear layer at every denoising step;
- ``<layer>.attn``: (steps, heads, tokens, tokens), attention probabilities (rows sum to 1);
- ``<layer>.v``: optional, (steps, heads, tokens, head_dim), the ``V`` of that attention.

``<layer>`` is one or more dot-separated parts of letters, digits and ``_ - [ ]``. Values are
finite real numbers, stored as float32 by :func:`write_trace`. :func:`load_trace` checks all of it
and raises :class:`ValueError` with one line naming the array and the problem.

:func:`analyze_fmdq` replays every ``.x`` layer through the differential quantizer of numerics §2.5
(closed or open loop per ``cfg.closed_loop``) and the QPU schedule, without weights: it reports the
statistics of :class:`~golden.fmdq_stats.LayerStats` and the reconstruction error ``|x - x̂|`` in
float. :func:`analyze_sar` profiles SAR masks on the trace's own probabilities and replays the
cache/reuse schedule.
"""

from __future__ import annotations

import os
import re
import tempfile
import zipfile

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.fmdq import dequant, quantize_tile_matrix, to_fixed
from dstar_rtl.golden.fmdq_stats import LayerStats
from dstar_rtl.golden.sar import expand_mask, is_cache_step, p_to_int, profile_mask, quantize_p
from dstar_rtl.golden.schedule import schedule_matrix

__all__ = ["KINDS", "split_name", "validate_trace", "load_trace", "save_trace", "write_trace",
           "linear_layers", "attention_layers", "profile_base_log2", "check_fmdq", "analyze_fmdq",
           "check_sar", "analyze_sar"]

KINDS = {"x": (3, "(steps, tokens, channels)"),
         "attn": (4, "(steps, heads, tokens, tokens)"),
         "v": (4, "(steps, heads, tokens, head_dim)")}
_NAME = re.compile(r"^([A-Za-z0-9_\-\[\]]+(?:\.[A-Za-z0-9_\-\[\]]+)*)\.(x|attn|v)$")
ROW_SUM_TOL = 1e-3


def split_name(name: str):
    """``"blocks.0.attn.v"`` → ``("blocks.0.attn", "v")``; None if the name is not a trace name."""
    m = _NAME.match(name)
    return (m.group(1), m.group(2)) if m else None


def validate_trace(arrays: dict, source: str = "trace") -> dict:
    """Check a trace dict (see the module docstring); return it with float arrays.

    Raises ValueError with one line: ``<source>: array '<name>' <problem>``.
    """
    if not arrays:
        raise ValueError(f"{source}: the trace holds no arrays")
    out = {}
    for name, a in arrays.items():
        where = f"{source}: array {name!r}"
        parts = split_name(str(name))
        if parts is None:
            raise ValueError(f"{where} is not named <layer>.x, <layer>.attn or <layer>.v")
        kind = parts[1]
        a = np.asarray(a)
        if a.dtype == bool or not (np.issubdtype(a.dtype, np.floating)
                                   or np.issubdtype(a.dtype, np.integer)):
            raise ValueError(f"{where} must hold real numbers, not {a.dtype}")
        ndim, shape_doc = KINDS[kind]
        if a.ndim != ndim:
            raise ValueError(f"{where} must have {ndim} dimensions {shape_doc}, not shape "
                             f"{a.shape}")
        if a.size == 0:
            raise ValueError(f"{where} is empty (shape {a.shape})")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{where} holds NaN or Inf")
        if kind == "attn":
            if a.shape[2] != a.shape[3]:
                raise ValueError(f"{where} must be square over tokens {shape_doc}, not shape "
                                 f"{a.shape}")
            if a.min() < 0 or a.max() > 1 + ROW_SUM_TOL:
                raise ValueError(f"{where} holds values outside [0, 1]; probabilities expected")
            if np.abs(a.sum(axis=-1, dtype=np.float64) - 1).max() > ROW_SUM_TOL:
                raise ValueError(f"{where} has rows that do not sum to 1 "
                                 f"(tolerance {ROW_SUM_TOL}); probabilities expected")
        out[name] = a if np.issubdtype(a.dtype, np.floating) else a.astype(np.float64)
    for name, a in out.items():
        layer, kind = split_name(name)
        if kind != "v":
            continue
        att = out.get(f"{layer}.attn")
        if att is None:
            raise ValueError(f"{source}: array {name!r} has no matching {layer + '.attn'!r}")
        if a.shape[:3] != att.shape[:3]:
            raise ValueError(f"{source}: array {name!r} has shape {a.shape}; its (steps, heads, "
                             f"tokens) must match {layer + '.attn'!r} {att.shape[:3]}")
    return out


def load_trace(path) -> dict:
    """Read and validate a trace ``.npz``; returns ``{name: array}`` in archive order."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ValueError(f"trace {path}: no such file")
    if os.path.isdir(path):
        raise ValueError(f"trace {path}: is a directory, not an .npz file")
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"trace {path}: not a NumPy .npz archive "
                         f"({type(exc).__name__})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"trace {path}: a single .npy array, not an .npz archive")
    arrays = {}
    with data:
        for name in data.files:
            try:
                arrays[name] = data[name]
            except ValueError as exc:
                why = "holds Python objects" if "allow_pickle" in str(exc) else "cannot be read"
                raise ValueError(f"trace {path}: array {name!r} {why}") from None
            except (OSError, EOFError, zipfile.BadZipFile, KeyError):
                raise ValueError(f"trace {path}: array {name!r} cannot be read") from None
    return validate_trace(arrays, f"trace {path}")


def save_trace(file, arrays: dict):
    """Validate ``arrays`` and write them as float32 ``.npz`` to the open binary ``file``."""
    arrays = validate_trace(arrays, "trace")
    np.savez(file, **{k: np.asarray(v, dtype=np.float32) for k, v in arrays.items()})


def write_trace(path, arrays: dict):
    """Validate ``arrays`` and write them as float32 to ``path`` (exactly that name; written to a
    temporary file first and renamed, so a failure leaves no partial file)."""
    path = os.fspath(path)
    arrays = validate_trace(arrays, f"trace {path}")
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".trace-", suffix=".npz", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            save_trace(f, arrays)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def linear_layers(trace: dict) -> list:
    """Layer names with an ``.x`` array, in trace order."""
    return [split_name(n)[0] for n in trace if split_name(n)[1] == "x"]


def attention_layers(trace: dict) -> list:
    """Layer names with an ``.attn`` array, in trace order."""
    return [split_name(n)[0] for n in trace if split_name(n)[1] == "attn"]


# ---------------------------------------------------------------------------------------- FMDQ
def _to_tokens(recon, nt, C, T, N):
    return recon.reshape(nt, C, T).transpose(0, 2, 1).reshape(nt * T, C)[:N]


def _diff_loop(X, cfg: Config, on_step):
    """The differential loop of numerics §2.5 over the steps of ``X`` (steps, N, C), float.

    ``on_step(t, dx, xi, nsat)`` quantizes ``dx`` and returns its reconstruction in fixed-point
    units, (N, C). Returns nothing; the caller's ``on_step`` keeps what it needs.
    """
    lim = 1 << (cfg.xhat_width - 1)
    state = None
    for t in range(X.shape[0]):
        xi, nsat = to_fixed(X[t], cfg.act_width, cfg.act_frac)
        if state is None:
            state = np.zeros_like(xi)
        recon = on_step(t, xi - state, xi, nsat)
        state = np.clip(state + recon, -lim, lim - 1) if cfg.closed_loop else xi


def profile_base_log2(X, cfg: Config, e_pos_budget: float = 0.01) -> int:
    """The ``--profile-base`` rule: the largest ``B`` in ``[0, cfg.B_max]`` (finest step
    ``2**-B``) for which at most ``e_pos_budget`` of the sub-channels of the differential steps
    (``t >= 1``; step 0 is the dense start against ``x̂ = 0``, and is used only when the trace has
    a single step) need a PoT exponent ``e > 0``, i.e. leave the INT8 range of the base step.
    ``B = 0`` if none qualifies. (With the default thresholds no sub-channel ever clips, so "no
    saturation" would always pick ``B_max``; the exponent share is the quantity that moves.)
    """
    X = np.asarray(X, dtype=np.float64)
    first = 1 if X.shape[0] > 1 else 0
    N, C = X.shape[1:]
    T = cfg.tile
    for B in range(cfg.B_max, -1, -1):
        cnt = [0, 0]

        def step(t, dx, xi, nsat, B=B, cnt=cnt):
            qz, nt = quantize_tile_matrix(dx, cfg, B)
            if t >= first:
                cnt[0] += int(np.count_nonzero(qz.e > 0))
                cnt[1] += qz.e.size
            return _to_tokens(dequant(qz), nt, C, T, N)

        _diff_loop(X, cfg, step)
        if cnt[0] <= e_pos_budget * cnt[1]:
            return B
    return 0


def check_fmdq(trace: dict, cfg: Config, base_log2: int | None = None,
               profile_base: bool = False) -> dict:
    """The checks of :func:`analyze_fmdq`'s input, before any work (one-line ValueError): the
    trace (returned validated), the base options, and every linear layer no wider than
    ``cfg.max_reduction``."""
    trace = validate_trace(trace)
    if profile_base and base_log2 is not None:
        raise ValueError("give either base_log2 or profile_base, not both")
    if base_log2 is not None and not (isinstance(base_log2, (int, np.integer))
                                      and 0 <= base_log2 <= cfg.B_max):
        raise ValueError(f"base_log2 must be an integer in [0, {cfg.B_max}], not {base_log2!r}")
    names = linear_layers(trace)
    if not names:
        raise ValueError("trace holds no linear-layer inputs (<layer>.x arrays)")
    for name in names:
        C = np.shape(trace[f"{name}.x"])[-1]
        if C > cfg.max_reduction:
            raise ValueError(f"layer {name!r} has {C} input channels; max_reduction of "
                             f"{cfg.name!r} is {cfg.max_reduction} (use --set max_reduction={C} "
                             f"or a larger preset)")
    return trace


def analyze_fmdq(trace: dict, cfg: Config, base_log2: int | None = None,
                 profile_base: bool = False, e_pos_budget: float = 0.01) -> dict:
    """FMDQ statistics of every ``.x`` layer of ``trace``.

    Returns ``{"layers": {name: {...LayerStats fields, "base_log2", "recon_err_max",
    "recon_err_rms"}}, "summary": {...}, "closed_loop": bool}``. ``base_log2`` sets ``B`` of every
    layer (default ``cfg.base_log2``); ``profile_base`` picks it per layer with
    :func:`profile_base_log2`. A layer wider than ``cfg.max_reduction`` is refused (numerics §2.1).
    """
    trace = check_fmdq(trace, cfg, base_log2, profile_base)
    layers, all_stats = {}, []
    T = cfg.tile
    for name in linear_layers(trace):
        X = np.asarray(trace[f"{name}.x"], dtype=np.float64)
        N, C = X.shape[1:]
        if profile_base:
            B = profile_base_log2(X, cfg, e_pos_budget)
        else:
            B = cfg.base_log2 if base_log2 is None else int(base_log2)
        st = LayerStats(cfg)
        recon_sum = np.zeros((N, C), np.int64)

        def step(t, dx, xi, nsat, st=st, B=B):
            nonlocal recon_sum
            qz, tiles = schedule_matrix(dx, cfg, B)
            recon = _to_tokens(dequant(qz), len(tiles), C, T, N)
            recon_sum = recon_sum + recon
            st.add(qz, tiles, N)
            st.input_saturated += nsat
            st.add_error(X[t] - recon_sum * 2.0 ** -cfg.act_frac)
            return recon

        _diff_loop(X, cfg, step)
        d = st.to_dict("recon_err")
        d.update(base_log2=B, tokens=N, channels=C)
        layers[name] = d
        all_stats.append(st)
    summary = LayerStats.summarize(all_stats)
    summary.update(layers=len(layers),
                   recon_err_max=max(d["recon_err_max"] for d in layers.values()))
    return dict(layers=layers, summary=summary, closed_loop=cfg.closed_loop,
                base_rule=("profile" if profile_base else "fixed"), e_pos_budget=e_pos_budget)


# ----------------------------------------------------------------------------------------- SAR
def _renormalize(P, mask_el):
    """Restrict row distributions to the kept entries: equal to the row softmax over kept scores
    (numerics §2.6). A row whose kept mass underflowed to 0 becomes uniform over its kept
    entries."""
    Pm = np.where(mask_el, P, 0.0)
    s = Pm.sum(axis=-1, keepdims=True)
    uni = mask_el / mask_el.sum(axis=-1, keepdims=True)
    return np.where(s > 0, Pm / np.where(s > 0, s, 1.0), uni)


def check_sar(trace: dict, cfg: Config, thr: float | None = None, interval: int | None = None,
              block: int | None = None) -> tuple:
    """The checks of :func:`analyze_sar`'s input, before any work (one-line ValueError, a
    :class:`~golden.config.ConfigError` for a bad option): ``(the trace validated, cfg with
    the options applied)``."""
    trace = validate_trace(trace)
    changes = {}
    if thr is not None:
        changes["sar_thr"] = thr
    if interval is not None:
        changes["sar_interval"] = interval
    if block is not None:
        changes.update(rows=block, cols=block)
    cfg = cfg.replace(**changes) if changes else cfg
    if not attention_layers(trace):
        raise ValueError("trace holds no attention probabilities (<layer>.attn arrays)")
    return trace, cfg


def analyze_sar(trace: dict, cfg: Config, thr: float | None = None, interval: int | None = None,
                block: int | None = None) -> dict:
    """SAR over every ``.attn`` layer of ``trace``.

    The mask of each layer is profiled on the trace itself (all steps, :func:`golden.sar.
    profile_mask`) with block size ``block`` (default ``cfg.tile``; another value replaces the
    tile, since Bs = T) and threshold ``thr`` (default ``cfg.sar_thr``). Steps then run as
    :class:`golden.sar.SARAttention` does: a cache step quantizes ``P`` restricted to the kept
    blocks (FMDQ, ``r0 = 0``) into the P cache; a reuse step reads it. Work accounting as
    SARAttention: a cache step costs ``kept`` of the dense ``QKᵀ`` + ``P·V``, a reuse step
    ``kept / 2``.

    Error: with ``<layer>.v`` the attention output ``P_used · V_t`` against the float
    ``P_t · V_t`` (``err_kind = "output"``), otherwise ``P_used`` against ``P_t``
    (``err_kind = "probability"``). Returns ``{"layers": {name: {...}}, "summary": {...}}``;
    masks are (heads, nb, nb) lists of 0/1.
    """
    trace, cfg = check_sar(trace, cfg, thr, interval, block)
    names = attention_layers(trace)
    Bs, thr, interval = cfg.tile, cfg.sar_thr, cfg.sar_interval
    scale = float(1 << cfg.p_base_log2)
    layers = {}
    tot = dict(dense=0, done=0, kept_el=0, el=0, written=0.0, read=0.0, footprint=0)
    for name in names:
        P = np.asarray(trace[f"{name}.attn"], dtype=np.float64)
        V = trace.get(f"{name}.v")
        V = None if V is None else np.asarray(V, dtype=np.float64)
        S, H, N, _ = P.shape
        mask = profile_mask(P, Bs, thr)
        mask_el = expand_mask(mask, N, Bs)
        kept = float(mask_el.mean())
        d = 1 if V is None else V.shape[-1]
        dense = 2 * H * N * N * d
        cache, footprint, done = None, 0, 0
        per_step, err_max, err_sq, err_n = [], 0.0, 0.0, 0
        for t in range(S):
            if is_cache_step(t, interval) or cache is None:
                Pm = _renormalize(P[t], mask_el)
                recs = [quantize_p(p_to_int(Pm[h], cfg.p_base_log2), mask[h], cfg)
                        for h in range(H)]
                cache = np.stack([r.values for r in recs]).astype(np.float64) / scale
                footprint = sum(r.bytes for r in recs)
                kind, wr, rd = "cache", footprint, 0
                done += int(round(kept * dense))
            else:
                kind, wr, rd = "reuse", 0, footprint
                done += int(round(kept * dense / 2))
            if V is None:
                e = cache - P[t]
            else:
                e = np.einsum("hnm,hmd->hnd", cache, V[t]) - np.einsum("hnm,hmd->hnd", P[t], V[t])
            e = np.abs(e)
            err_max = max(err_max, float(e.max()))
            err_sq += float((e ** 2).sum())
            err_n += e.size
            per_step.append(dict(step=t, kind=kind, bytes_written=wr, bytes_read=rd,
                                 err_rms=float(np.sqrt((e ** 2).mean()))))
        layers[name] = dict(
            heads=H, tokens=N, blocks=int(mask.shape[-1]), kept_fraction=kept,
            work_removed=1.0 - done / (dense * S), pcache_bytes=footprint,
            mean_bytes_written_per_step=float(np.mean([p["bytes_written"] for p in per_step])),
            mean_bytes_read_per_step=float(np.mean([p["bytes_read"] for p in per_step])),
            err_kind="probability" if V is None else "output", err_max=err_max,
            err_rms=float(np.sqrt(err_sq / err_n)), per_step=per_step,
            mask=mask.astype(int).tolist())
        tot["dense"] += dense * S
        tot["done"] += done
        tot["kept_el"] += int(mask_el.sum())
        tot["el"] += mask_el.size
        tot["written"] += layers[name]["mean_bytes_written_per_step"]
        tot["read"] += layers[name]["mean_bytes_read_per_step"]
        tot["footprint"] += footprint
    summary = dict(layers=len(layers), kept_fraction=tot["kept_el"] / tot["el"],
                   work_removed=1.0 - tot["done"] / tot["dense"], pcache_bytes=tot["footprint"],
                   mean_bytes_written_per_step=tot["written"],
                   mean_bytes_read_per_step=tot["read"],
                   err_max=max(v["err_max"] for v in layers.values()))
    return dict(layers=layers, summary=summary, block=Bs, thr=thr, interval=interval,
                p_base_log2=cfg.p_base_log2)
