"""The VPU, bit for bit (numerics §2.7): an integer model of every VPU function, exactly as the RTL
computes it, each with a float reference.

Conventions
-----------
* Vectors are the last axis of int64 arrays ("rows"); leading axes are independent rows. Values are
  in the activation format: ``act_width`` (``W``) bits, ``act_frac`` (``F``) fractional bits, i.e.
  one LSB is ``2**-F``. Inputs outside their stated width are refused (``ValueError``).
* Every rounding is :func:`golden.fmdq.rnd` (divide by ``2**r``, half away from zero); every output
  is rounded once and then saturated to its width (``act_width`` signed; ``P`` is unsigned
  ``0 .. 2**p_base_log2 - 1``, numerics §2.6). Functions return ``(out, n_saturated)``;
  ``n_saturated`` is a :class:`Saturated`, the count as an ``int`` that also carries the
  per-element flags (``.flags``).
* No float enters the integer path. Lookup tables are generated once per configuration in exact
  decimal/rational arithmetic (:class:`VPUTables`) and stored as Python integers; the RTL imports
  the same object. Program constants that come from a float (LayerNorm's ``eps``, the
  requantization ``(m, sh)``) are converted when the program is built, like
  :func:`golden.fmdq.requant_params`.
* Row reductions (max, sums) are exact in their stated widths, so the RTL may reduce in any order
  over its ``vpu_lanes`` lanes.
* Every intermediate has a stated width: the table in each docstring gives the formula and the
  value for the default activation format (``W = 16``, ``F = 8``, ``p_base_log2 = 7``) with
  ``n_max = 64`` (preset ``tiny``); ``VPUTables.widths`` holds the exact widths for any
  configuration, computed from the extreme values (the Newton cores by enumerating every input).
  ``u`` = unsigned, ``s`` = signed two's complement (sign bit included). Passing ``probe={}`` to a
  function records the bit length every intermediate actually needed (tests check it against
  ``widths``).
* Row lengths: softmax rows (keys) are reductions of the next matrix product, so ``n <= n_max =
  max_reduction`` (numerics §2.1); LayerNorm rows (hidden channels) may be longer, up to
  ``ln_n_max = cfg.ln_max`` (the VPU then takes such a row twice, numerics §2.7).

Symbols: ``W`` act_width, ``F`` act_frac, ``pb`` p_base_log2, ``n_max`` max_reduction (LayerNorm:
``ln_n_max``, ``cfg.ln_max``); table
parameters (:class:`VPUTables`): ``L`` log2e_frac, ``Z`` exp_lut_bits, ``Et`` exp_lut_frac, ``E``
exp_frac, ``Kr``/``Qr`` recip_lut_bits/recip_frac, ``Ks``/``Qs`` rsqrt_lut_bits/rsqrt_frac,
``Ge`` ln_eps_frac, ``Ra``/``Sg``/``G`` gelu_range_log2/gelu_seg_log2/gelu_frac.

The model runs in int64 except LayerNorm's per-row scalars (``nS2``, ``S1sq``, ``V``, ``eps``,
``Vp``: Python integers, up to 71 bits for ``paper``) and :func:`acc_requant`, which delegates to
:func:`golden.fmdq.requantize` (Python integers). :meth:`VPUTables.build` refuses a configuration
whose int64 intermediates would exceed 62 bits (the presets need at most 46).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from functools import lru_cache
from math import floor
from typing import NamedTuple

import numpy as np

from dstar_rtl.golden.config import Config, ConfigError, bitlen
from dstar_rtl.golden.fmdq import dequant, requantize, rnd
from dstar_rtl.golden.sar import expand_mask, masked_softmax, weight_operand

__all__ = [
    "VPUTables", "vpu_tables",
    "softmax", "softmax_block", "softmax_ref",
    "layernorm", "layernorm_ref", "layernorm_eps_int", "layernorm_passes",
    "modulate", "modulate_ref",
    "gelu", "gelu_ref",
    "gated_residual", "gated_residual_ref",
    "acc_requant", "acc_requant_ref", "AccRequant",
    "diff_delta", "xhat_update", "recon_matrix",
    "kv_int8", "kv_int8_ref", "kv_shift", "kv_quant",
    "recip_core", "rsqrt_core", "int_bitlen", "Saturated",
]

_MAX_MODEL_BITS = 62
# Per-row LayerNorm scalars computed on Python integers (no int64 limit in the model).
_PYINT_WIDTHS = ("layernorm.nS2", "layernorm.S1sq", "layernorm.V", "layernorm.eps",
                 "layernorm.Vp")
_PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459")
_GELU_C = Decimal("0.044715")


# ============================================================================ helpers
def int_bitlen(v):
    """Elementwise ``int.bit_length`` of non-negative int64 values (the RTL's leading-zero count),
    by a binary search of shifts, without floats."""
    v = np.asarray(v, dtype=np.int64)
    if np.any(v < 0):
        raise ValueError("int_bitlen: negative value")
    n = np.zeros(v.shape, np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = v >= (np.int64(1) << s)
        n = n + np.where(big, s, 0)
        v = np.where(big, v >> s, v)
    return n + (v > 0)


def _shift_round(v, s):
    """``rnd(v, s)`` for ``s >= 0``, the exact ``v << -s`` for ``s < 0`` (elementwise ``s``)."""
    s = np.asarray(s, np.int64)
    return rnd(v, np.maximum(s, 0)) << np.maximum(-s, 0)


class Saturated(int):
    """The number of saturated outputs, an ``int`` (so counts add and compare as before), with
    the per-element flags: ``flags`` is a bool array of the output's shape, True where the
    value was clipped (what the RTL's per-lane flag reports)."""

    flags: np.ndarray

    def __new__(cls, flags):
        flags = np.asarray(flags, bool)
        self = super().__new__(cls, int(np.count_nonzero(flags)))
        self.flags = flags
        return self

    def __reduce__(self):                  # copy and pickle rebuild it from its flags
        return Saturated, (self.flags,)


def _sat(v, width: int, signed: bool = True):
    """``v`` clipped to ``width`` bits and its :class:`Saturated` count."""
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    v = np.asarray(v, np.int64)
    return np.clip(v, lo, hi), Saturated((v < lo) | (v > hi))


def _check(name, v, width: int, signed: bool = True):
    """``v`` as int64, refused unless every value fits ``width`` bits."""
    v = np.asarray(v)
    if v.dtype == object:
        v = np.asarray(v.tolist(), dtype=np.int64) if v.size else v.astype(np.int64)
    if v.dtype == bool or not np.issubdtype(v.dtype, np.integer):
        raise ValueError(f"{name} must hold integers, not {v.dtype}")
    v = v.astype(np.int64)
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    if v.size and (v.min() < lo or v.max() > hi):
        raise ValueError(f"{name} exceeds its {width}-bit {'signed' if signed else 'unsigned'} "
                         f"range [{lo}, {hi}]: {int(v.min())}..{int(v.max())}")
    return v


def _note(probe, name, v):
    """Record in ``probe`` the bits ``v`` needs (two's complement with sign bit if any value is
    negative, else unsigned)."""
    if probe is None:
        return
    v = np.asarray(v, np.int64)
    if v.size == 0:
        return
    lo, hi = int(v.min()), int(v.max())
    if lo < 0:
        bits = max(bitlen(hi) + 1, bitlen(-lo - 1) + 1)
        key = (bits, True)
    else:
        key = (bitlen(hi), False)
    old = probe.get(name)
    if old is None:
        probe[name] = key
    else:
        probe[name] = (max(old[0], key[0]), old[1] or key[1])


def _uw(vmax: int) -> tuple:
    return (max(1, bitlen(int(vmax))), False)


def _sw(vmin: int, vmax: int) -> tuple:
    return (max(bitlen(int(vmax)), bitlen(-int(vmin) - 1)) + 1, True)


def _round_dec(x: Decimal) -> int:
    """Round a Decimal half away from zero (Decimal's ROUND_HALF_UP)."""
    return int(x.to_integral_value(rounding=ROUND_HALF_UP))


def _round_frac(x: Fraction) -> int:
    mag = floor(abs(x) + Fraction(1, 2))
    return -mag if x < 0 else mag


def _gelu_dec(x: Decimal) -> Decimal:
    """tanh-form GELU in 50-digit decimal arithmetic."""
    k = (Decimal(2) / _PI).sqrt()
    u = k * (x + _GELU_C * x * x * x)
    e2 = (2 * u).exp()
    th = (e2 - 1) / (e2 + 1)
    return x * (1 + th) / 2


# ============================================================================ tables
@dataclass(frozen=True)
class VPUTables:
    """Parameters, lookup tables and intermediate widths of the VPU for one configuration.

    Build with :func:`vpu_tables` (cached) or :meth:`build` (keyword overrides of the table
    parameters, for exploration; the RTL uses the defaults). Tables are tuples of Python ints;
    :meth:`array` returns one as int64. ``widths[name] = (bits, signed)``.

    Parameters and tables (defaults; ``n_max = max_reduction``, ``ln_n_max = cfg.ln_max``: the
    longest LayerNorm row, which sets LayerNorm's widths)
    ------------------------------------------------------------
    ``log2e_frac`` L = 15          ``log2e_q = round(2**L / ln 2) = 47274`` (16 bits u)
    ``exp_lut_bits`` Z = 8         ``exp_lut[i] = round(2**(Et - i/2**Z))``: 256 entries × 16 bits u
    ``exp_lut_frac`` Et = 15       (entries in (2**14, 2**15])
    ``exp_frac`` E = max(Et, pb + 3 + bitlen(n_max))  (17 tiny, 19 fpga, 23 paper): fractional
                                   bits of each exponential ``ex`` (so that the rounding of n_max
                                   small exponentials costs at most 2**-(pb+4) of the sum)
    ``recip_lut_bits`` Kr = 6      ``recip_lut[i] = round(2**Qr · 2/(a+c))`` over
    ``recip_frac`` Qr = 16         ``[a, c) = [1 + i/64, 1 + (i+1)/64)``: 64 entries × 16 bits u
    ``rsqrt_lut_bits`` Ks = 6      ``rsqrt_lut[o·64 + i] = round(2**Qs · 2/(sqrt(a)+sqrt(c)))``
    ``rsqrt_frac`` Qs = 16         over ``[a, c) = 2**o · [1 + i/64, 1 + (i+1)/64)``, o in {0, 1}:
                                   128 entries × 16 bits u
    ``ln_eps_frac`` Ge = 16        guard bits of LayerNorm's ``eps`` (even)
    ``gelu_range_log2`` Ra = 2     the GELU table covers ``|x| < A = 2**Ra = 4``
    ``gelu_seg_log2`` Sg = min(5, F)   segment width ``h = 2**-Sg`` (1/32): 128 segments
    ``gelu_frac`` G = 16           ``gelu_base[i] = round(gelu(-i·h)·2**G)`` (15 bits s, all <= 0),
                                   ``gelu_delta[i] = base[i+1] - base[i]`` (11 bits s), 128 each

    Seeds are the interval's minimax choice for one Newton step (``2/(a+c)``,
    ``2/(sqrt a + sqrt c)``). Every value is computed in exact rational or 50-digit decimal
    arithmetic and rounded half away from zero, so the tables are identical on every machine.
    ``recip_rel_err``/``rsqrt_rel_err``: the largest relative error of the Newton cores over every
    normalized input, measured when the tables are built (7.2e-5 and 4.1e-5 by default).
    """

    act_width: int
    act_frac: int
    p_base_log2: int
    n_max: int
    ln_n_max: int
    log2e_frac: int
    log2e_q: int
    exp_lut_bits: int
    exp_lut_frac: int
    exp_frac: int
    exp_lut: tuple
    recip_lut_bits: int
    recip_frac: int
    recip_lut: tuple
    rsqrt_lut_bits: int
    rsqrt_frac: int
    rsqrt_lut: tuple
    ln_eps_frac: int
    gelu_range_log2: int
    gelu_seg_log2: int
    gelu_frac: int
    gelu_base: tuple
    gelu_delta: tuple
    widths: dict = field(default_factory=dict, compare=False, repr=False)
    # Largest relative error of the Newton cores over every normalized input (measured at build).
    recip_rel_err: float = field(default=0.0, compare=False)
    rsqrt_rel_err: float = field(default=0.0, compare=False)
    _arrays: dict = field(default_factory=dict, compare=False, repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, cfg: Config, *, log2e_frac: int = 15, exp_lut_bits: int = 8,
              exp_lut_frac: int = 15, exp_frac: int | None = None, recip_lut_bits: int = 6,
              recip_frac: int = 16, rsqrt_lut_bits: int = 6, rsqrt_frac: int = 16,
              ln_eps_frac: int = 16, gelu_range_log2: int = 2, gelu_seg_log2: int | None = None,
              gelu_frac: int = 16) -> "VPUTables":
        W, F, pb, n_max = cfg.act_width, cfg.act_frac, cfg.p_base_log2, cfg.max_reduction
        if exp_frac is None:
            exp_frac = max(exp_lut_frac, pb + 3 + bitlen(n_max))
        if gelu_seg_log2 is None:
            gelu_seg_log2 = min(5, F)

        def need(cond, what):
            if not cond:
                raise ConfigError(f"VPU tables: {what}")

        need(1 <= log2e_frac <= 30, f"log2e_frac must be in [1, 30], not {log2e_frac}")
        need(1 <= exp_lut_bits <= F + log2e_frac,
             f"exp_lut_bits must be in [1, act_frac + log2e_frac], not {exp_lut_bits}")
        need(2 <= exp_lut_frac <= exp_frac,
             f"exp_lut_frac must be in [2, exp_frac], not {exp_lut_frac}")
        need(exp_frac + recip_frac >= pb, "exp_frac + recip_frac must be >= p_base_log2")
        need(1 <= recip_lut_bits <= recip_frac - 2, "recip_lut_bits must be in [1, recip_frac - 2]")
        need(1 <= rsqrt_lut_bits <= rsqrt_frac - 2, "rsqrt_lut_bits must be in [1, rsqrt_frac - 2]")
        need(ln_eps_frac >= 0 and ln_eps_frac % 2 == 0,
             f"ln_eps_frac must be even and >= 0, not {ln_eps_frac}")
        need(0 <= gelu_seg_log2 <= min(F, gelu_frac),
             f"gelu_seg_log2 must be in [0, min(act_frac, gelu_frac)], not {gelu_seg_log2}")
        need(gelu_range_log2 + F <= W - 1, "the GELU range 2**gelu_range_log2 must fit act_width")

        with localcontext() as ctx:
            ctx.prec = 50
            ln2 = Decimal(2).ln()
            log2e_q = _round_dec(Decimal(1 << log2e_frac) / ln2)
            exp_lut = tuple(_round_dec((-(Decimal(i) / (1 << exp_lut_bits)) * ln2).exp()
                                       * (1 << exp_lut_frac)) for i in range(1 << exp_lut_bits))
            recip_lut = tuple(_round_frac(Fraction(1 << (recip_frac + recip_lut_bits + 1),
                                                   (2 << recip_lut_bits) + 2 * i + 1))
                              for i in range(1 << recip_lut_bits))
            rs = []
            for o in (0, 1):
                for i in range(1 << rsqrt_lut_bits):
                    a = Decimal((1 << rsqrt_lut_bits) + i) * (1 << o) / (1 << rsqrt_lut_bits)
                    c = Decimal((1 << rsqrt_lut_bits) + i + 1) * (1 << o) / (1 << rsqrt_lut_bits)
                    rs.append(_round_dec(2 * Decimal(1 << rsqrt_frac) / (a.sqrt() + c.sqrt())))
            rsqrt_lut = tuple(rs)
            nseg = 1 << (gelu_range_log2 + gelu_seg_log2)
            knots = [_round_dec(_gelu_dec(-Decimal(i) / (1 << gelu_seg_log2)) * (1 << gelu_frac))
                     for i in range(nseg + 1)]
        gelu_base = tuple(knots[:-1])
        gelu_delta = tuple(knots[i + 1] - knots[i] for i in range(nseg))

        t = cls(act_width=W, act_frac=F, p_base_log2=pb, n_max=n_max, ln_n_max=cfg.ln_max,
                log2e_frac=log2e_frac,
                log2e_q=log2e_q, exp_lut_bits=exp_lut_bits, exp_lut_frac=exp_lut_frac,
                exp_frac=exp_frac, exp_lut=exp_lut, recip_lut_bits=recip_lut_bits,
                recip_frac=recip_frac, recip_lut=recip_lut, rsqrt_lut_bits=rsqrt_lut_bits,
                rsqrt_frac=rsqrt_frac, rsqrt_lut=rsqrt_lut, ln_eps_frac=ln_eps_frac,
                gelu_range_log2=gelu_range_log2,
                gelu_seg_log2=gelu_seg_log2, gelu_frac=gelu_frac, gelu_base=gelu_base,
                gelu_delta=gelu_delta)
        widths, rerr, serr = _derive_widths(t, cfg)
        object.__setattr__(t, "widths", widths)
        object.__setattr__(t, "recip_rel_err", rerr)
        object.__setattr__(t, "rsqrt_rel_err", serr)
        wide = {k: v for k, v in widths.items() if v[0] > _MAX_MODEL_BITS
                and k not in _PYINT_WIDTHS and not k.startswith("acc_requant.")}
        if wide:
            k = max(wide, key=lambda k: wide[k][0])
            raise ConfigError(f"VPU golden model: intermediate {k} needs {wide[k][0]} bits; the "
                              f"int64 model supports at most {_MAX_MODEL_BITS} (lower act_width or "
                              f"max_reduction)")
        return t

    def array(self, name: str) -> np.ndarray:
        """A table as an int64 array (``exp_lut``, ``recip_lut``, ``rsqrt_lut``, ``gelu_base``,
        ``gelu_delta``)."""
        arr = self._arrays.get(name)
        if arr is None:
            arr = np.array(getattr(self, name), dtype=np.int64)
            arr.setflags(write=False)
            self._arrays[name] = arr
        return arr

    @property
    def table_bits(self) -> dict:
        """``{table: (entries, entry_width, signed)}``: what a ROM of each table holds."""
        out = {}
        for name in ("exp_lut", "recip_lut", "rsqrt_lut", "gelu_base", "gelu_delta"):
            vals = getattr(self, name)
            lo, hi = min(vals), max(vals)
            bits, signed = _sw(lo, hi) if lo < 0 else _uw(hi)
            out[name] = (len(vals), bits, signed)
        return out

    def to_dict(self) -> dict:
        """Everything as JSON-compatible data (for manifests and the RTL generator)."""
        d = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()
             if k not in ("widths", "_arrays")}
        d["widths"] = {k: list(v) for k, v in self.widths.items()}
        return d


@lru_cache(maxsize=32)
def vpu_tables(cfg: Config) -> VPUTables:
    """The VPU tables of a configuration (cached; the default table parameters)."""
    return VPUTables.build(cfg)


def _tables(cfg: Config, tables):
    return vpu_tables(cfg) if tables is None else tables


# ============================================================================ Newton cores
def recip_core(X, tables: VPUTables, probe=None):
    """Reciprocal of a normalized ``x = X · 2**-Qr`` in [1, 2): returns ``Y1 ≈ 2**Qr / x`` (value
    ``Y1 · 2**-Qr`` in (1/2, 1]): a 64-entry seed table and one Newton step.

    ====  ============================  =======  ====
    name  operation                     width    tiny
    ====  ============================  =======  ====
    X     input, in [2**Qr, 2**(Qr+1))  Qr+1 u   17
    idx   (X >> (Qr-Kr)) & (2**Kr - 1)  Kr u     6
    y0    recip_lut[idx]                Qr u     16
    xy0   X · y0                        2Qr+1 u  33
    t     rnd(xy0, Qr)  (≈ 1)           Qr+1 u   17
    e     2**(Qr+1) - t  (≈ 1)          Qr+1 u   17
    y1    rnd(y0 · e, Qr)               Qr u     16
    ====  ============================  =======  ====
    """
    Qr, Kr = tables.recip_frac, tables.recip_lut_bits
    X = np.asarray(X, np.int64)
    idx = (X >> (Qr - Kr)) & ((1 << Kr) - 1)
    y0 = tables.array("recip_lut")[idx]
    xy0 = X * y0
    t = rnd(xy0, Qr)
    e = (np.int64(1) << (Qr + 1)) - t
    y1 = rnd(y0 * e, Qr)
    for k, v in (("X", X), ("y0", y0), ("xy0", xy0), ("t", t), ("e", e), ("y1", y1)):
        _note(probe, "recip." + k, v)
    return y1


def rsqrt_core(X, tables: VPUTables, probe=None):
    """Reciprocal square root of a normalized ``v = X · 2**-Qs`` in [1, 4): returns
    ``Y1 ≈ 2**Qs / sqrt(v)`` (value in (1/2, 1]): a 128-entry seed table indexed by the octave
    ``o`` and the top ``Ks`` mantissa bits, then one Newton step ``y·(3 - v·y²)/2``.

    ====  ========================================  ======  ====
    name  operation                                 width   tiny
    ====  ========================================  ======  ====
    X     input, in [2**Qs, 2**(Qs+2))              Qs+2 u  18
    o     X >= 2**(Qs+1)                            1 u     1
    idx   o·2**Ks + ((X >> (Qs+o-Ks)) & (2**Ks-1))  Ks+1 u  7
    y0    rsqrt_lut[idx]                            Qs u    16
    y0sq  rnd(y0 · y0, Qs)                          Qs u    16
    vy2   rnd(X · y0sq, Qs)  (≈ 1)                  Qs+1 u  17
    e     3·2**Qs - vy2  (≈ 2)                      Qs+2 u  18
    y1    rnd(y0 · e, Qs+1)                         Qs u    16
    ====  ========================================  ======  ====
    """
    Qs, Ks = tables.rsqrt_frac, tables.rsqrt_lut_bits
    X = np.asarray(X, np.int64)
    o = (X >> (Qs + 1)) & 1
    idx = (o << Ks) + ((X >> (Qs + o - Ks)) & ((1 << Ks) - 1))
    y0 = tables.array("rsqrt_lut")[idx]
    y0sq = rnd(y0 * y0, Qs)
    vy2 = rnd(X * y0sq, Qs)
    e = 3 * (np.int64(1) << Qs) - vy2
    y1 = rnd(y0 * e, Qs + 1)
    for k, v in (("X", X), ("y0", y0), ("y0sq", y0sq), ("vy2", vy2), ("e", e), ("y1", y1)):
        _note(probe, "rsqrt." + k, v)
    return y1


def _derive_widths(t: VPUTables, cfg: Config):
    """Exact widths from extreme values; the Newton cores by enumerating every input."""
    W, F, pb, n = t.act_width, t.act_frac, t.p_base_log2, t.n_max
    Z, L, Et, E = t.exp_lut_bits, t.log2e_frac, t.exp_lut_frac, t.exp_frac
    Qr, Qs = t.recip_frac, t.rsqrt_frac
    w = {}
    amax = 1 << (W - 1)          # largest magnitude of a W-bit value
    vmax = amax - 1
    # --- Newton cores: every normalized input.
    pr, ps = {}, {}
    Xr = np.arange(1 << Qr, 1 << (Qr + 1), dtype=np.int64)
    y1r = recip_core(Xr, t, pr)
    Xs = np.arange(1 << Qs, 1 << (Qs + 2), dtype=np.int64)
    y1s = rsqrt_core(Xs, t, ps)
    # Relative error against the exact value of the (truncated) input.
    rerr = float(np.max(np.abs(y1r * Xr / float(1 << (2 * Qr)) - 1.0)))
    serr = float(np.max(np.abs(y1s * np.sqrt(Xs / float(1 << Qs)) / float(1 << Qs) - 1.0)))
    w.update(pr)
    w.update(ps)
    w["recip.idx"] = (t.recip_lut_bits, False)
    w["rsqrt.o"] = (1, False)
    w["rsqrt.idx"] = (t.rsqrt_lut_bits + 1, False)
    y1r_max, y1s_max = int(y1r.max()), int(y1s.max())

    # --- softmax
    s = "softmax."
    w[s + "s"] = (W, True)
    w[s + "max"] = (W, True)
    nd_max = (1 << W) - 1
    w[s + "nd"] = _uw(nd_max)
    w[s + "t"] = _uw(nd_max * t.log2e_q)
    a_max = (nd_max * t.log2e_q + (1 << (F + L - Z - 1) if F + L - Z > 0 else 0)) >> (F + L - Z)
    w[s + "a"] = _uw(a_max)
    kclamp = E + 2
    w[s + "k"] = _uw(kclamp)
    w[s + "fr"] = (Z, False)
    w[s + "lut"] = _uw(max(t.exp_lut))
    w[s + "lut_sh"] = _uw(max(t.exp_lut) << (E - Et))
    w[s + "ex"] = _uw(max(t.exp_lut) << (E - Et))
    sum_max = n * (max(t.exp_lut) << (E - Et))
    w[s + "sum"] = _uw(sum_max)
    j_max = bitlen(sum_max) - 1
    w[s + "j"] = _uw(j_max)
    w[s + "X"] = (Qr + 1, False)
    w[s + "y1"] = _uw(y1r_max)
    w[s + "prod"] = _uw((max(t.exp_lut) << (E - Et)) * y1r_max)
    w[s + "shift"] = _uw(Qr + j_max - pb)
    w[s + "P"] = (pb, False)

    # --- layernorm (rows up to ln_row_max)
    s = "layernorm."
    n = t.ln_n_max
    w[s + "x"] = (W, True)
    w[s + "n"] = _uw(n)
    w[s + "S1"] = _sw(-n * amax, n * vmax)
    w[s + "sq"] = _uw(amax * amax)
    w[s + "S2"] = _uw(n * amax * amax)
    w[s + "nS2"] = _uw(n * n * amax * amax)
    w[s + "S1sq"] = _uw(n * n * amax * amax)
    V_max = (n * n * ((1 << W) - 1) ** 2) // 4
    w[s + "V"] = _uw(V_max)
    Ge = t.ln_eps_frac
    eps_max = n * n << (2 * F + Ge)             # eps <= 1 (refused above, when built)
    w[s + "eps"] = _uw(eps_max)
    Vp_max = (V_max << Ge) + eps_max
    w[s + "Vp"] = _uw(Vp_max)
    b_max = bitlen(Vp_max) - 1
    w[s + "b"] = _uw(b_max)
    w[s + "h"] = _uw(b_max >> 1)
    w[s + "X"] = (Qs + 2, False)
    w[s + "y1"] = _uw(y1s_max)
    D_max = (n - 1) * ((1 << W) - 1)
    w[s + "D"] = _sw(-D_max, D_max)
    w[s + "prod"] = _sw(-D_max * y1s_max, D_max * y1s_max)
    sh_lo, sh_hi = Qs - F - Ge // 2, Qs + (b_max >> 1) - F - Ge // 2
    w[s + "shift"] = _sw(sh_lo, sh_hi) if sh_lo < 0 else _uw(sh_hi)
    w[s + "y"] = (W, True)

    # --- modulate: y = rnd(x·(scale + 2**F) + shift·2**F, F)
    s = "modulate."
    for k in ("x", "shift", "scale"):
        w[s + k] = (W, True)
    ops_lo, ops_hi = -amax + (1 << F), vmax + (1 << F)
    w[s + "ops"] = _sw(ops_lo, ops_hi)
    p_ext = [a * b for a in (-amax, vmax) for b in (ops_lo, ops_hi)]
    w[s + "prod"] = _sw(min(p_ext), max(p_ext))
    w[s + "shift_f"] = _sw(-amax << F, vmax << F)
    w[s + "sum"] = _sw(min(p_ext) + (-amax << F), max(p_ext) + (vmax << F))
    w[s + "r"] = _sw(-rnd_neg(min(p_ext) + (-amax << F), F), rnd_pos(max(p_ext) + (vmax << F), F))
    w[s + "y"] = (W, True)

    # --- gated residual: y = rnd(x·2**F + gate·y, F)
    s = "gated_residual."
    for k in ("x", "gate", "y"):
        w[s + k] = (W, True)
    gy_lo, gy_hi = -amax * vmax, amax * amax
    w[s + "prod"] = _sw(gy_lo, gy_hi)
    w[s + "x_f"] = _sw(-amax << F, vmax << F)
    w[s + "sum"] = _sw(gy_lo + (-amax << F), gy_hi + (vmax << F))
    w[s + "r"] = _sw(-rnd_neg(gy_lo + (-amax << F), F), rnd_pos(gy_hi + (vmax << F), F))
    w[s + "out"] = (W, True)

    # --- GELU
    s = "gelu."
    G, Sg, Ra = t.gelu_frac, t.gelu_seg_log2, t.gelu_range_log2
    w[s + "x"] = (W, True)
    w[s + "a"] = _uw(amax)
    w[s + "ac"] = _uw((1 << (F + Ra)) - 1)
    w[s + "idx"] = (Ra + Sg, False)
    w[s + "f"] = (max(1, F - Sg), False)
    w[s + "base"] = _sw(min(t.gelu_base), max(t.gelu_base))
    w[s + "delta"] = _sw(min(t.gelu_delta), max(t.gelu_delta))
    fmax = (1 << (F - Sg)) - 1
    c_ext = [b * (1 << (F - Sg)) + d * f for b in (min(t.gelu_base), max(t.gelu_base))
             for d in (min(t.gelu_delta), max(t.gelu_delta)) for f in (0, fmax)]
    w[s + "c"] = _sw(min(c_ext), max(0, max(c_ext)))
    w[s + "x_g"] = _sw(-amax << (G - Sg), vmax << (G - Sg))
    w[s + "sum"] = _sw(min(min(c_ext), 0), (vmax << (G - Sg)) + max(0, max(c_ext)))
    w[s + "y"] = (W, True)

    # --- accumulate and requantize (golden.fmdq.requantize: Python integers, no int64 limit)
    s = "acc_requant."
    A, mw = cfg.acc_bits, cfg.mult_width
    w[s + "Y"] = (A, True)
    w[s + "acc"] = (A, True)
    w[s + "Ysum"] = (A + 1, True)
    w[s + "m"] = (mw, False)
    w[s + "sh"] = _uw(cfg.sh_max)
    w[s + "bias"] = (W, True)
    w[s + "prod"] = (A + mw, True)
    w[s + "bias_sh"] = (W + cfg.sh_max, True)
    w[s + "sum"] = (max(A + mw, W + cfg.sh_max) + 1, True)
    w[s + "y"] = (W, True)

    # --- differential pair
    s = "diff."
    w[s + "x"] = (W, True)
    w[s + "xhat"] = (cfg.xhat_width, True)
    w[s + "dx"] = (cfg.dx_width, True)
    w[s + "recon"] = (cfg.recon_width, True)
    w[s + "xhat_sum"] = (max(cfg.xhat_width, cfg.recon_width) + 1, True)

    # --- K/V to INT8
    s = "kv."
    e_max = 0
    while rnd_pos(amax, e_max) > 127:
        e_max += 1
    w[s + "v"] = (W, True)
    w[s + "amax"] = _uw(amax)
    w[s + "e"] = _uw(e_max)
    w[s + "w"] = (8, True)
    return w, rerr, serr


def rnd_pos(v: int, r: int) -> int:
    """``rnd`` of a non-negative Python int (width derivations)."""
    return v if r == 0 else (v + (1 << (r - 1))) >> r


def rnd_neg(v: int, r: int) -> int:
    """``-rnd(v, r)`` for a non-positive Python int ``v`` (width derivations)."""
    return rnd_pos(-v, r)


# ============================================================================ softmax
def softmax(s, mask, cfg: Config, tables: VPUTables | None = None, probe=None, mx=None):
    """Row softmax of act-format logits under an element mask; returns ``(P, n_saturated)`` with
    ``P`` unsigned in units of ``2**-p_base_log2``, ``0 .. 2**p_base_log2 - 1``.

    ``mx`` (``softmax_mx``): the row max, given (broadcastable to ``s``'s rows, ``(..., 1)``)
    instead of found, so that a producer that sees the logits first (the core's matrix drain)
    spares the VPU its max pass; it must bound every kept entry (:class:`ValueError`
    otherwise: the VPU flags it), and the exact max gives exactly the ``mx = None`` result.

    ``s``: (..., n) logits in the activation format, ``1/sqrt(d)`` already folded into their
    requantization scale (numerics §2.6). ``mask``: bool, broadcastable to ``s`` (None keeps all).
    Masked entries are exactly 0 and take no part in the max or the sum. A row with no kept entry
    (impossible under a SAR mask, whose diagonal is kept) gives zeros.

    Algorithm: ``m = max s``; ``e**(s-m) = 2**-(a·2**-Z)`` with ``a = rnd((m-s)·log2e_q,
    F+L-Z)``, ``k = a >> Z`` (clamped to ``E+2``, beyond which the result is 0) and
    ``fr = a mod 2**Z``; ``ex = rnd(exp_lut[fr] << (E-Et), k)`` (value ``ex·2**-E``, the row max
    gives exactly ``2**E``); ``Σ = sum ex``; ``j = bitlen(Σ) - 1``; ``X`` = the top ``Qr+1`` bits
    of ``Σ`` (truncated); ``Y1 = recip_core(X)``; ``P = min(rnd(ex·Y1, Qr + j - pb), 2**pb - 1)``.

    ======  ================================  ===========================  ====
    name    operation                         width                        tiny
    ======  ================================  ===========================  ====
    s       input logit                       W s                          16
    max     row max over kept entries         W s                          16
    nd      max - s (kept entries; >= 0)      W u                          16
    t       nd · log2e_q                      W+16 u                       32
    a       rnd(t, F+L-Z)                     W+Z-F+1 u                    17
    k       min(a >> Z, E+2)                  bitlen(E+2) u                5
    fr      a & (2**Z - 1)                    Z u                          8
    lut     exp_lut[fr]                       Et+1 u                       16
    lut_sh  lut << (E-Et)                     E+1 u                        18
    ex      rnd(lut_sh, k); 0 if masked       E+1 u                        18
    sum     Σ ex                              E+bitlen(n_max) u            24
    j       bitlen(sum) - 1  (>= E)           bitlen(E+bitlen(n_max)-1) u  5
    X       sum >> (j-Qr), truncated          Qr+1 u                       17
    y1      recip_core(X)                     Qr u                         16
    prod    ex · y1                           E+Qr u                       33
    shift   Qr + j - pb                       bitlen(Qr+j_max-pb) u        6
    P       min(rnd(prod, shift), 2**pb - 1)  pb u                         7
    ======  ================================  ===========================  ====
    """
    T = _tables(cfg, tables)
    W, F, pb = cfg.act_width, cfg.act_frac, cfg.p_base_log2
    Z, L, Et, E, Qr = T.exp_lut_bits, T.log2e_frac, T.exp_lut_frac, T.exp_frac, T.recip_frac
    s = _check("softmax logits", s, W)
    if s.ndim == 0 or s.shape[-1] == 0:
        raise ValueError("softmax: logits must have a non-empty last axis")
    if s.shape[-1] > T.n_max:
        raise ValueError(f"softmax row of {s.shape[-1]} entries exceeds max_reduction {T.n_max}")
    mask = np.ones(s.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool),
                                                                        s.shape)
    lo = -(1 << (W - 1))
    if mx is None:
        mx = np.where(mask, s, lo).max(axis=-1, keepdims=True)
    else:
        mx = np.broadcast_to(_check("softmax row max", mx, W), s.shape[:-1] + (1,))
        if (mask & (s > mx)).any():
            raise ValueError("softmax_mx: a kept logit exceeds the given row max")
    nd = np.where(mask, mx - s, 0)
    t = nd * T.log2e_q
    a = rnd(t, F + L - Z)
    k = np.minimum(a >> Z, E + 2)
    fr = a & ((1 << Z) - 1)
    lut = T.array("exp_lut")[fr]
    lut_sh = lut << (E - Et)
    ex = np.where(mask, rnd(lut_sh, k), 0)
    tot = ex.sum(axis=-1, keepdims=True)
    empty = tot == 0
    tot_safe = np.where(empty, np.int64(1) << E, tot)
    j = int_bitlen(tot_safe) - 1
    X = np.where(j >= Qr, tot_safe >> np.maximum(j - Qr, 0), tot_safe << np.maximum(Qr - j, 0))
    y1 = recip_core(X, T, probe)
    prod = ex * y1
    shift = Qr + j - pb
    raw = np.where(empty, 0, rnd(prod, shift))
    P, nsat = _sat(raw, pb, signed=False)
    if probe is not None:
        kept = np.broadcast_to(mask, s.shape)
        for name, v in (("s", s[kept]), ("max", mx), ("nd", nd), ("t", t), ("a", a), ("k", k),
                        ("fr", fr), ("lut", lut), ("lut_sh", lut_sh), ("ex", ex),
                        ("sum", tot), ("j", j[~empty]), ("X", X[~empty]), ("y1", y1[~empty]),
                        ("prod", prod), ("shift", shift[~empty]), ("P", P)):
            _note(probe, "softmax." + name, v)
    return P, nsat


def softmax_block(S, block_mask, cfg: Config, tables: VPUTables | None = None):
    """:func:`softmax` of (heads, N, N) logits under a SAR block mask (heads, nb, nb)."""
    S = np.asarray(S)
    return softmax(S, expand_mask(np.asarray(block_mask, bool), S.shape[-1], cfg.tile), cfg, tables)


def softmax_ref(s, mask, cfg: Config):
    """Float reference: :func:`golden.sar.masked_softmax` of the real logits ``s·2**-F``, in units
    of ``2**-p_base_log2`` (not rounded, not saturated). A row with no kept entry gives zeros."""
    s = np.asarray(s, np.float64) / (1 << cfg.act_frac)
    mask = np.ones(s.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool),
                                                                        s.shape)
    any_kept = mask.any(axis=-1, keepdims=True)
    m2 = np.where(any_kept, mask, True)
    with np.errstate(invalid="ignore"):
        P = masked_softmax(s, m2)
    return np.where(any_kept, P, 0.0) * (1 << cfg.p_base_log2)


# ============================================================================ LayerNorm
def layernorm_eps_int(n: int, eps: float, cfg: Config, tables: VPUTables | None = None) -> int:
    """LayerNorm's ``eps`` as the program constant ``eps_q = round(eps · n² · 2**(2F + Ge))``
    (the units of ``V << Ge``, ``Ge = ln_eps_frac``), converted once when the program is built."""
    T = _tables(cfg, tables)
    if not 0 <= eps <= 1:
        raise ValueError(f"LayerNorm eps must be in [0, 1], not {eps}")
    if not 1 <= n <= T.ln_n_max:
        raise ValueError(f"layernorm row length must be in [1, {T.ln_n_max}], not {n}")
    return _round_frac(Fraction(eps) * n * n * (1 << (2 * cfg.act_frac + T.ln_eps_frac)))


def layernorm_passes(cfg: Config, n: int) -> int:
    """How many times a LayerNorm row of ``n`` elements enters the VPU: once (held in its row
    buffer between the statistics and the output pass) up to ``max_reduction``, twice (its
    statistics, then the output pass on the second copy) up to ``cfg.ln_max``."""
    return 1 if n <= cfg.max_reduction else 2


def _pyint(a):
    return np.asarray(a).astype(object)


def layernorm(x, cfg: Config, eps: float = 1e-6, tables: VPUTables | None = None, probe=None,
              eps_q: int | None = None):
    """LayerNorm without affine over the last axis: ``(x - mean)/sqrt(var + eps)``, act format in
    and out; returns ``(y, n_saturated)``.

    No division by ``n``: with ``S1 = Σx`` and ``S2 = Σx²`` (exact), ``V = n·S2 - S1² = n²·var``
    (units ``2**-2F``) and ``y = (n·x - S1)/sqrt(V + n²·eps)`` exactly in real numbers. ``eps``
    enters with ``Ge = 16`` guard bits: ``Vp = (V << Ge) + eps_q``, ``eps_q =
    layernorm_eps_int(n, eps)`` a program constant (so that ``eps`` keeps its precision for short
    rows). ``Vp`` is normalized by an even shift ``2h`` to ``X`` in ``[2**Qs, 2**(Qs+2))``
    (truncated), ``Y1 = rsqrt_core(X)``, and ``y = sat(rnd((n·x - S1)·Y1, Qs + h - F - Ge/2))``
    (a left shift when that is negative). A row with ``Vp = 0`` (all equal, ``eps = 0``) gives
    zeros. ``nS2``, ``S1sq``, ``V``, ``eps``, ``Vp`` are per-row scalars (Python integers in the
    model; the widest, ``Vp``, is 71 bits for ``paper``).

    =====  ======================================  ==============================  ====
    name   operation                               width                           tiny
    =====  ======================================  ==============================  ====
    x      input                                   W s                             16
    n      row length (program constant)           bitlen(ln_max) u                7
    S1     Σ x                                     bitlen(ln_max·2**(W-1))+1 s     22
    sq     x · x                                   2W-1 u                          31
    S2     Σ sq                                    bitlen(ln_max·2**(2W-2)) u      37
    nS2    n · S2                                  bitlen(ln_max²·2**(2W-2)) u     43
    S1sq   S1 · S1                                 bitlen(ln_max²·2**(2W-2)) u     43
    V      nS2 - S1sq  (>= 0)                      bitlen(ln_max²·(2**W-1)²/4) u   42
    eps    eps_q, program constant (eps <= 1)      bitlen(ln_max²·2**(2F+Ge)) u    45
    Vp     (V << Ge) + eps                         width(V)+Ge+1 u                 59
    b      bitlen(Vp) - 1                          bitlen u                        6
    h      b >> 1                                  bitlen u                        5
    X      Vp >> (2h-Qs) or << (Qs-2h), truncated  Qs+2 u                          18
    y1     rsqrt_core(X)                           Qs u                            16
    D      n·x - S1                                bitlen((ln_max-1)(2**W-1))+1 s  23
    prod   D · y1                                  width(D)+Qs s                   39
    shift  Qs + h - F - Ge/2                       bitlen u (s if F > Qs-Ge/2)     5
    y      sat(rnd(prod, shift))                   W s                             16
    =====  ======================================  ==============================  ====
    """
    T = _tables(cfg, tables)
    W, F, Qs, Ge = cfg.act_width, cfg.act_frac, T.rsqrt_frac, T.ln_eps_frac
    x = _check("layernorm input", x, W)
    n = x.shape[-1]
    if n == 0 or n > T.ln_n_max:
        raise ValueError(f"layernorm row length must be in [1, {T.ln_n_max}], not {n}")
    e_q = layernorm_eps_int(n, eps, cfg, T) if eps_q is None else int(eps_q)
    S1 = x.sum(axis=-1, keepdims=True)
    sq = x * x
    S2 = sq.sum(axis=-1, keepdims=True)
    # Per-row scalars on Python integers.
    nS2 = n * _pyint(S2)
    S1sq = _pyint(S1) * _pyint(S1)
    V = nS2 - S1sq
    Vp = (V << Ge) + e_q
    zero = np.asarray(Vp == 0, bool)
    Vs = np.where(zero, 1, Vp)
    b = np.frompyfunc(int.bit_length, 1, 1)(Vs).astype(np.int64) - 1
    h = b >> 1
    sh = 2 * h - Qs
    X = np.frompyfunc(lambda v, s: v >> s if s >= 0 else v << -s, 2, 1)(Vs, sh).astype(np.int64)
    y1 = rsqrt_core(X, T, probe)
    D = n * x - S1
    prod = D * y1
    shift = Qs + h - F - Ge // 2
    raw = np.where(zero, 0, _shift_round(prod, shift))
    y, nsat = _sat(raw, W)
    if probe is not None:
        for name, v in (("x", x), ("n", np.int64(n)), ("S1", S1), ("sq", sq), ("S2", S2),
                        ("b", b[~zero]), ("h", h[~zero]), ("X", X[~zero]), ("y1", y1[~zero]),
                        ("D", D), ("prod", prod), ("shift", shift), ("y", y)):
            _note(probe, "layernorm." + name, v)
        for name, v in (("nS2", nS2), ("S1sq", S1sq), ("V", V), ("eps", e_q), ("Vp", Vp)):
            bits = max(int(u).bit_length() for u in np.ravel(np.asarray(v, object)))
            old = probe.get("layernorm." + name, (0, False))
            probe["layernorm." + name] = (max(old[0], bits), False)
    return y, nsat


def layernorm_ref(x, cfg: Config, eps: float = 1e-6):
    """Float reference in output LSBs: ``(x - mean)/sqrt(var + eps)·2**F`` on the real values."""
    xf = np.asarray(x, np.float64) / (1 << cfg.act_frac)
    mu = xf.mean(axis=-1, keepdims=True)
    var = ((xf - mu) ** 2).mean(axis=-1, keepdims=True)
    den = np.sqrt(var + eps)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.where(den > 0, (xf - mu) / np.where(den > 0, den, 1.0), 0.0)
    return y * (1 << cfg.act_frac)


# ============================================================================ modulation
def modulate(x, shift, scale, cfg: Config, probe=None):
    """adaLN modulation ``x·(1 + scale) + shift`` (all act format; ``shift``/``scale`` broadcast
    along the rows, typically one value per channel); returns ``(y, n_saturated)``. Exact up to
    the one final rounding.

    =============  ==============  ======  ====
    name           operation       width   tiny
    =============  ==============  ======  ====
    x,shift,scale  inputs          W s     16
    ops            scale + 2**F    W+1 s   17
    prod           x · ops         2W s    32
    shift_f        shift << F      W+F s   24
    sum            prod + shift_f  2W s    32
    r              rnd(sum, F)     2W-F s  24
    y              sat(r)          W s     16
    =============  ==============  ======  ====
    """
    W, F = cfg.act_width, cfg.act_frac
    x = _check("modulate x", x, W)
    sh = _check("modulate shift", shift, W)
    sc = _check("modulate scale", scale, W)
    ops = sc + (1 << F)
    prod = x * ops
    shift_f = sh << F
    tot = prod + shift_f
    r = rnd(tot, F)
    y, nsat = _sat(r, W)
    for name, v in (("ops", ops), ("prod", prod), ("shift_f", shift_f), ("sum", tot), ("r", r),
                    ("y", y)):
        _note(probe, "modulate." + name, v)
    return y, nsat


def modulate_ref(x, shift, scale, cfg: Config):
    """Float reference in output LSBs."""
    f = float(1 << cfg.act_frac)
    xf, shf, scf = (np.asarray(v, np.float64) / f for v in (x, shift, scale))
    return (xf * (1.0 + scf) + shf) * f


# ============================================================================ gated residual
def gated_residual(x, gate, y, cfg: Config, probe=None):
    """``x + gate·y`` (act format; ``gate`` broadcasts along the rows); returns
    ``(out, n_saturated)``. Exact up to the one final rounding.

    ========  ===========  ======  ====
    name      operation    width   tiny
    ========  ===========  ======  ====
    x,gate,y  inputs       W s     16
    prod      gate · y     2W s    32
    x_f       x << F       W+F s   24
    sum       x_f + prod   2W s    32
    r         rnd(sum, F)  2W-F s  24
    out       sat(r)       W s     16
    ========  ===========  ======  ====
    """
    W, F = cfg.act_width, cfg.act_frac
    x = _check("gated_residual x", x, W)
    g = _check("gated_residual gate", gate, W)
    yy = _check("gated_residual y", y, W)
    prod = g * yy
    x_f = x << F
    tot = x_f + prod
    r = rnd(tot, F)
    out, nsat = _sat(r, W)
    for name, v in (("prod", prod), ("x_f", x_f), ("sum", tot), ("r", r), ("out", out)):
        _note(probe, "gated_residual." + name, v)
    return out, nsat


def gated_residual_ref(x, gate, y, cfg: Config):
    """Float reference in output LSBs."""
    f = float(1 << cfg.act_frac)
    xf, gf, yf = (np.asarray(v, np.float64) / f for v in (x, gate, y))
    return (xf + gf * yf) * f


# ============================================================================ GELU
def gelu(x, cfg: Config, tables: VPUTables | None = None, probe=None):
    """GELU, tanh form, by piecewise-linear interpolation; returns ``(y, n_saturated)``.

    Uses ``gelu(x) = x + gelu(-x)``: one table ``c(a) = gelu(-a)`` for ``a = |x|`` in
    ``[0, A)``, ``A = 2**Ra = 4``, knots every ``h = 2**-Sg = 1/32`` stored with ``G = 16``
    fractional bits as ``gelu_base``/``gelu_delta`` (128 segments). ``a`` is clamped to
    ``A - 2**-F`` (beyond, ``|gelu(-a)| < 7.2e-5``, below 0.02 LSB). The interpolation is exact:
    ``c = base[i]·2**(F-Sg) + delta[i]·f`` in units of ``2**-(G+F-Sg)``; then
    ``y = sat(rnd((x >= 0 ? x << (G-Sg) : 0) + c, G - Sg))``, one rounding. The result is
    unimodal (non-increasing, then non-decreasing from the knot nearest ``x ≈ -0.75``).

    =====  ================================  ==================  ====
    name   operation                         width               tiny
    =====  ================================  ==================  ====
    x      input                             W s                 16
    a      |x|                               W u                 16
    ac     min(a, 2**(F+Ra) - 1)             F+Ra u              10
    idx    ac >> (F-Sg)                      Ra+Sg u             7
    f      ac & (2**(F-Sg) - 1)              F-Sg u              3
    base   gelu_base[idx]  (<= 0)            table s             15
    delta  gelu_delta[idx]                   table s             11
    c      base·2**(F-Sg) + delta·f  (<= 0)  width(base)+F-Sg s  18
    x_g    x << (G-Sg)                       W+G-Sg s            27
    sum    (x >= 0 ? x_g : 0) + c            W+G-Sg s            27
    y      sat(rnd(sum, G-Sg))               W s                 16
    =====  ================================  ==================  ====
    """
    T = _tables(cfg, tables)
    W, F = cfg.act_width, cfg.act_frac
    G, Sg, Ra = T.gelu_frac, T.gelu_seg_log2, T.gelu_range_log2
    x = _check("gelu input", x, W)
    a = np.abs(x)
    ac = np.minimum(a, (1 << (F + Ra)) - 1)
    idx = ac >> (F - Sg)
    f = ac & ((1 << (F - Sg)) - 1)
    base = T.array("gelu_base")[idx]
    delta = T.array("gelu_delta")[idx]
    c = base * (1 << (F - Sg)) + delta * f
    x_g = x << (G - Sg)
    tot = np.where(x >= 0, x_g, 0) + c
    y, nsat = _sat(rnd(tot, G - Sg), W)
    for name, v in (("a", a), ("ac", ac), ("idx", idx), ("f", f), ("base", base),
                    ("delta", delta), ("c", c), ("x_g", x_g), ("sum", tot), ("y", y)):
        _note(probe, "gelu." + name, v)
    return y, nsat


def gelu_ref(x, cfg: Config):
    """Float reference in output LSBs: ``0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³)))``."""
    f = float(1 << cfg.act_frac)
    xf = np.asarray(x, np.float64) / f
    y = 0.5 * xf * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (xf + 0.044715 * xf ** 3)))
    return y * f


# ============================================================================ requantize
class AccRequant(NamedTuple):
    Y: np.ndarray          # the running sum after the step as stored (ystate_width, saturating)
    y: np.ndarray          # requantized output, act format
    Y_saturated: Saturated  # entries of Y that saturated (sticky flag source), with flags
    y_saturated: Saturated  # outputs that saturated, with flags


def acc_requant(Y, acc, m, sh, bias, cfg: Config, stored: bool = False) -> AccRequant:
    """``Y += acc`` (saturating at ``acc_bits``, never wrapping, numerics §2.5), then
    ``y = sat(rnd(Y·m + bias·2**sh, sh))`` by :func:`golden.fmdq.requantize` (numerics §2.1).
    ``stored`` (the matrix engine's GEMM into YBUF, :class:`rtl.requant.Requant`) with
    ``ystate_frac`` set: the stored ``Y`` (``ystate_width`` bits) is the sum rounded by
    ``s = cfg.ystate_shift(sh)``: the sum is ``(Y << s) + acc`` and the returned ``Y`` is
    ``sat(rnd(sum, s))`` at ``ystate_width`` (the table is for ``s = 0``). The VPU's own
    ``acc_requant`` operation keeps ``Y`` whole.

    ``m``, ``sh``, ``bias`` broadcast along the last axis (one per output channel); ``bias`` is in
    output LSBs (act format). The product runs on Python integers (no int64 limit).

    =======  ===================================  ======================  ====
    name     operation                            width                   tiny
    =======  ===================================  ======================  ====
    Y,acc    inputs                               acc_bits s              31
    Ysum     Y + acc, then saturated to acc_bits  acc_bits+1 s            32
    m        mantissa                             mult_width u            16
    sh       shift in [0, sh_max]                 bitlen(sh_max) u        6
    bias     act format (output LSBs)             W s                     16
    prod     Y · m                                acc_bits+mult_width s   47
    bias_sh  bias << sh                           W+sh_max s              63
    sum      prod + bias_sh                       max(prod, bias_sh)+1 s  64
    y        sat(rnd(sum, sh))                    W s                     16
    =======  ===================================  ======================  ====
    """
    A, W = cfg.acc_bits, cfg.act_width
    stored = stored and cfg.ystate_frac is not None
    Y = _check("acc_requant Y", Y, cfg.ystate_width if stored else A)
    acc = _check("acc_requant acc", acc, A)
    _check("acc_requant m", m, cfg.mult_width, signed=False)
    _check("acc_requant bias", bias, W)
    # A stored Y (ystate_frac, numerics §2.5) comes back at full width by its channel's shift s
    # and goes out rounded by it; without it s = 0 and the stored Y is the full sum.
    s = np.broadcast_to(cfg.ystate_shift(sh) if stored else 0, np.shape(Y))
    Yn, ysat = _sat((Y << s) + acc, A)
    # Rounded at a width no result reaches (|rnd(sum, sh)| <= |Y|·m + |bias| + 1), then
    # saturated here, which gives the per-element flags as well as the count.
    wide, _ = requantize(Yn, m, sh, bias, A + cfg.mult_width + 1, cfg.sh_max)
    y, nsat = _sat(wide, W)
    if stored:
        Yn, zsat = _sat(rnd(Yn, s), cfg.ystate_width)
        ysat = Saturated(ysat.flags | zsat.flags)
    return AccRequant(Yn, y, ysat, nsat)


def acc_requant_ref(Y, acc, s, bias, cfg: Config):
    """Float reference in output LSBs: ``(Y + acc)·s + bias`` with the float scale ``s`` (the one
    ``(m, sh) = requant_params(s)`` comes from) and ``Y + acc`` saturated like the integer path."""
    lim = 1 << (cfg.acc_bits - 1)
    Yn = np.clip(np.asarray(Y, np.int64) + np.asarray(acc, np.int64), -lim, lim - 1)
    return Yn.astype(np.float64) * np.asarray(s, np.float64) + np.asarray(bias, np.float64)


# ============================================================================ differential pair
def diff_delta(x, xhat, cfg: Config, probe=None):
    """``Δx = x - x̂`` (numerics §2.5): ``x`` act_width bits, ``x̂`` act_width+1, ``Δx``
    act_width+2 bits, exact (it always fits: no saturation).

    ====  =================================  =====  ====
    name  operation                          width  tiny
    ====  =================================  =====  ====
    x     input                              W s    16
    xhat  state x-hat                         W+1 s  17
    dx    x - xhat (exact, never saturates)  W+2 s  18
    ====  =================================  =====  ====
    """
    x = _check("diff x", x, cfg.act_width)
    xh = _check("diff xhat", xhat, cfg.xhat_width)
    dx = x - xh
    _note(probe, "diff.dx", dx)
    return dx


def recon_matrix(qz, N: int, C: int, cfg: Config):
    """``dequant(q)`` (:func:`golden.fmdq.dequant`, recon_width bits) of a quantized (N, C)
    difference (:func:`golden.fmdq.quantize_tile_matrix` order) back in (tokens, channels)."""
    T = cfg.tile
    nt = max(1, -(-N // T))
    return dequant(qz).reshape(nt, C, T).transpose(0, 2, 1).reshape(nt * T, C)[:N]


def xhat_update(xhat, recon, cfg: Config, probe=None):
    """``x̂ += dequant(q)``: ``x̂`` act_width+1 bits, the reconstruction ``recon`` (from
    :func:`recon_matrix` or the QPU's reconstruction stream) act_width+3 bits, the sum
    act_width+4 bits, saturated to act_width+1 (the sticky ``xhat_saturated`` flag of
    :class:`golden.differential.DiffLinear`). Returns ``(x̂, n_saturated)``.

    ========  ===================================  =====  ====
    name      operation                            width  tiny
    ========  ===================================  =====  ====
    xhat      state x-hat                           W+1 s  17
    recon     dequant(q) = q << (e + r0)           W+3 s  19
    xhat_sum  xhat + recon, then saturated to W+1  W+4 s  20
    ========  ===================================  =====  ====
    """
    xh = _check("xhat", xhat, cfg.xhat_width)
    r = _check("recon", recon, cfg.recon_width)
    tot = xh + r
    _note(probe, "diff.xhat_sum", tot)
    return _sat(tot, cfg.xhat_width)


# ============================================================================ K, V to INT8
def kv_int8(v, cfg: Config, probe=None):
    """``K`` or ``V`` (heads, ...) in act format → INT8 weight operands per head (numerics §2.6) by
    :func:`golden.sar.weight_operand`: ``w = rnd(v, e)`` with the smallest ``e >= 0`` such that
    ``rnd(max|v|, e) <= 127``. Returns ``(w, e)`` with ``e`` of shape (heads,).

    ====  ===================================  =============  ====
    name  operation                            width          tiny
    ====  ===================================  =============  ====
    v     input (one head)                     W s            16
    amax  max |v| over the head                W u            16
    e     smallest e with rnd(amax, e) <= 127  bitlen(W-7) u  4
    w     rnd(v, e)                            8 s            8
    ====  ===================================  =============  ====
    """
    v = _check("kv input", v, cfg.act_width)
    if v.ndim < 1:
        raise ValueError("kv_int8: need a leading head axis")
    ws, es = [], []
    for h in range(v.shape[0]):
        w, e = weight_operand(v[h])
        ws.append(w)
        es.append(e)
        _note(probe, "kv.amax", np.abs(v[h]))
    w = np.stack(ws) if ws else np.zeros_like(v)
    e = np.array(es, np.int64)
    _note(probe, "kv.e", e)
    _note(probe, "kv.w", w)
    return w, e


def kv_shift(amax) -> int:
    """The K/V weight shift of numerics §2.6 for a head whose largest magnitude is ``amax``: the
    smallest ``e >= 0`` with ``rnd(amax, e) <= 127`` (what the VPU's ``kv_amax`` returns)."""
    amax = int(amax)
    if amax < 0:
        raise ValueError(f"kv_shift: amax must be >= 0, not {amax}")
    e = 0
    while int(rnd(amax, e)) > 127:
        e += 1
    return e


def kv_quant(v, e: int, cfg: Config):
    """``w = sat8(rnd(v, e))``: the VPU's ``kv_quant`` with a given shift (with the ``e`` of
    :func:`kv_shift` nothing saturates; :func:`kv_int8` is this with that ``e``). Returns
    ``(w, n_saturated)``."""
    v = _check("kv_quant input", v, cfg.act_width)
    if not 0 <= int(e) <= cfg.act_width:
        raise ValueError(f"kv_quant shift e must be in [0, {cfg.act_width}], not {e}")
    return _sat(rnd(v, int(e)), 8)


def kv_int8_ref(v, e):
    """Float reference in INT8 steps: ``v / 2**e`` per head."""
    v = np.asarray(v, np.float64)
    e = np.asarray(e, np.int64)
    return v / (2.0 ** e).reshape((-1,) + (1,) * (v.ndim - 1))
