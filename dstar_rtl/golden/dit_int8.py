"""The integer DiT block of the INT8 core (numerics §2.8): :class:`Int8DiTBlock`, the golden
the core with ``datapath = "int8"`` must match bit for bit.

The dataflow, the VPU functions, the SAR schedule (cache and reuse steps, the block mask) and
the K/V operands are those of :class:`golden.dit_int.IntDiTBlock`; what differs is the matrix
datapath (:mod:`golden.dense_int8`):

* every linear layer is a dense :class:`golden.dense_int8.DenseInt8Linear`: no ``x̂``, no ``Y``,
  ``y = requant(W · q(x))`` with one exponent per token tile; on a reuse step ``qk`` is skipped
  and its output is the last cache step's;
* ``Q·Kᵀ``: ``Q`` of each head goes through the INT8 quantizer per query tile (the tile's ``d``
  sub-channels, exponent ``e_q``); ``S = sat(rnd(acc·m_S, max(0, sh_S - k_e - e_q)))`` with
  ``(m_S, sh_S) = requant_params(2**-act_frac / sqrt(d))`` (``Q`` in act LSBs, no base);
* ``P`` of each query tile over all ``N`` keys (dropped blocks zero) goes through the same
  quantizer: ``P <= 127`` gives ``e = 0`` and ``q = P`` exactly; the all-zero key columns make
  no group. The P cache is those groups (:class:`Int8PCache`);
* ``o = sat(rnd(acc·m_O, max(0, sh_O - v_e)))``, ``(m_O, sh_O) = requant_params(2**-p_base_log2)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.dense_int8 import DenseInt8Linear, quantize_matrix, requant_int8
from dstar_rtl.golden.dit_int import IntDiTBlock, LayerStep
from dstar_rtl.golden.fmdq import requant_params

__all__ = ["Int8DiTBlock", "Int8PCache", "make_block"]


@dataclass
class Int8PCache:
    """The INT8 core's P cache of one head: ``values`` (N, N) the stored ``P`` (zero on dropped
    blocks) and ``groups`` the number of groups (one per non-zero key column of a query tile,
    or one for an all-zero tile) its GMEM regions hold."""

    values: np.ndarray
    groups: int

    def packed(self, T: int) -> bytes:
        """The stored activations as bytes: per query tile and group, its ``T`` INT8 values."""
        out = bytearray()
        N = len(self.values)
        for qa in range(N // T):
            tile = self.values[qa * T:(qa + 1) * T]
            for c in range(N):
                if tile[:, c].any():
                    out += tile[:, c].astype(np.int8).tobytes()
        return bytes(out)


class Int8DiTBlock(IntDiTBlock):
    """Block ``index`` of a DiT on the INT8 core (module docstring). Parameters as
    :class:`golden.dit_int.IntDiTBlock` (``base_log2`` is kept for the interface; no INT8
    quantity uses it)."""

    def __init__(self, *args, **kw):
        self.qk_y = None            # the last cache step's qk output (ABUF keeps it)
        super().__init__(*args, **kw)
        if self.cfg.datapath != "int8":
            raise ValueError(f"Int8DiTBlock needs cfg.datapath 'int8', not "
                             f"{self.cfg.datapath!r}")

    def _make_layer(self, k, Wq, s_w, bias, name):
        return DenseInt8Linear(Wq, s_w, self.cfg, bias=bias, name=name)

    def _attention_scales(self, d: int):
        cfg = self.cfg
        self.s_m, self.s_sh = requant_params(2.0 ** -cfg.act_frac / math.sqrt(d),
                                             cfg.mult_width)
        self.o_m, self.o_sh = requant_params(2.0 ** -cfg.p_base_log2, cfg.mult_width)
        for what, sh in (("S (2**-act_frac / sqrt(d))", self.s_sh),
                         ("O (2**-p_base_log2)", self.o_sh)):
            if not 0 <= sh <= cfg.sh_max:
                raise ValueError(f"block {self.index}: requantization of {what} needs shift "
                                 f"{sh}, outside [0, {cfg.sh_max}]")

    def reset(self):
        super().reset()
        self.qk_y = None

    def _layer_state(self, k):
        return None, None

    def _run_layer(self, k, x, sat) -> LayerStep:
        layer = self.layers[k]
        before = layer.flags["y_saturated"]
        r = layer.step(x)
        ys = layer.flags["y_saturated"] - before
        sat[k] = ys
        if k == "qk":
            self.qk_y = r.y.copy()
        return LayerStep(name=layer.name, updated=True, xhat=None, Y=None, x=x, acc=r.acc, y=r.y,
                         y_saturated=ys, counters=dict(r.counters.values),
                         flags=dict(layer.flags), tiles=r.tiles)

    def _idle_layer(self, k) -> LayerStep:
        y = self.qk_y.copy() if k == "qk" and self.qk_y is not None else None
        return LayerStep(name=self.layers[k].name, updated=False, xhat=None, Y=None, y=y,
                         flags=dict(self.layers[k].flags))

    def _scores(self, h, q, k_w, k_e, s_acc, S, sat, ctr):
        """Head ``h``'s ``Q·Kᵀ``: ``Q`` through the INT8 quantizer per query tile, its exponent
        in the shift. Returns the tiles."""
        T = self.cfg.tile
        tiles = quantize_matrix(q, self.cfg)
        for qa, tile in enumerate(tiles):
            ctr.merge(tile.counters)
            acc = tile.q.T @ k_w.T                                # (T, N)
            rows = slice(qa * T, (qa + 1) * T)
            kept = self.mask_el[h][rows]
            s_acc[rows][kept] = acc[kept]
            S[rows][kept], ns = requant_int8(acc[kept], self.s_m, self.s_sh - k_e, tile.e, 0,
                                             self.cfg)
            sat["s"] += ns
        return tiles

    def _cache_p(self, P, sat, ctr):
        """``P`` of each query tile over every key through the INT8 quantizer (``e = 0``, exact);
        its groups are the cache."""
        self.pcache = []
        for h in range(self.spec.heads):
            Pm = np.where(self.mask_el[h], P[h], 0)
            tiles = quantize_matrix(Pm, self.cfg)
            for tile in tiles:
                ctr.merge(tile.counters)
            self.pcache.append(Int8PCache(values=Pm, groups=sum(len(t.groups) for t in tiles)))
        sat["p_quant"] = 0

    def _requant_o(self, acc, sh):
        return requant_int8(acc, self.o_m, sh, 0, 0, self.cfg)

    def _packed(self, h, rec) -> bytes:
        return rec.packed(self.cfg.tile)


def make_block(params: dict, index: int, spec, cfg: Config, mask=None, **kw) -> IntDiTBlock:
    """The integer block of ``cfg``'s datapath: :class:`Int8DiTBlock` for ``"int8"``, else
    :class:`golden.dit_int.IntDiTBlock`."""
    cls = Int8DiTBlock if cfg.datapath == "int8" else IntDiTBlock
    return cls(params, index, spec, cfg, mask, **kw)
