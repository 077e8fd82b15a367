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

from golden import vpu
from golden.config import Config
from golden.dense_int8 import DenseInt8Linear, quantize_matrix, requant_int8
from golden.dit_int import AttnStep, IntDiTBlock, LayerStep
from golden.fmdq import requant_params
from golden.schedule import Counters

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

    def _attention(self, cache: bool, yqk, yv, sat) -> AttnStep:
        cfg, s = self.cfg, self.spec
        N, D, H, d, T = s.tokens, s.hidden, s.heads, s.head_dim, cfg.tile
        extra, ctr = {}, Counters()
        if cache:
            q, k = self._heads(yqk[:, :D]), self._heads(yqk[:, D:])
            k_w, k_e = vpu.kv_int8(k, cfg)
            s_acc = np.zeros((H, N, N), np.int64)
            S = np.zeros((H, N, N), np.int64)
            q_tiles = []
            sat["s"] = 0
            for h in range(H):
                tiles = quantize_matrix(q[h], cfg)
                q_tiles.append(tiles)
                for qa, tile in enumerate(tiles):
                    ctr.merge(tile.counters)
                    acc = tile.q.T @ k_w[h].T                     # (T, N)
                    rows = slice(qa * T, (qa + 1) * T)
                    kept = self.mask_el[h][rows]
                    vals, ns = requant_int8(acc[kept], self.s_m, self.s_sh - int(k_e[h]),
                                            tile.e, 0, cfg)
                    s_acc[h][rows][kept] = acc[kept]
                    S[h][rows][kept] = vals
                    sat["s"] += ns
            P, sat["softmax"] = vpu.softmax(S, self.mask_el, cfg, self.tables)
            self.pcache = []
            for h in range(H):
                Pm = np.where(self.mask_el[h], P[h], 0)
                tiles = quantize_matrix(Pm, cfg)
                for tile in tiles:
                    ctr.merge(tile.counters)
                self.pcache.append(Int8PCache(values=Pm, groups=sum(len(t.groups)
                                                                    for t in tiles)))
            sat["p_quant"] = 0
            extra = dict(q=q, q_qz=q_tiles, k_w=k_w, k_e=k_e, s_acc=s_acc, s=S, p=P)
        recs = self.pcache
        v_w, v_e = vpu.kv_int8(self._heads(yv), cfg)
        o_acc = np.stack([recs[h].values @ v_w[h] for h in range(H)])
        o = np.zeros_like(o_acc)
        sat["o"] = 0
        for h in range(H):
            o[h], ns = requant_int8(o_acc[h], self.o_m, self.o_sh - int(v_e[h]), 0, 0, cfg)
            sat["o"] += ns
        return AttnStep(cache_step=cache, pcache=list(recs),
                        pcache_bytes=[r.packed(T) for r in recs],
                        v_w=v_w, v_e=v_e, o_acc=o_acc, o=o, counters=dict(ctr.values),
                        o_tokens=o.transpose(1, 0, 2).reshape(N, H * d), **extra)


def make_block(params: dict, index: int, spec, cfg: Config, mask=None, **kw) -> IntDiTBlock:
    """The integer block of ``cfg``'s datapath: :class:`Int8DiTBlock` for ``"int8"``, else
    :class:`golden.dit_int.IntDiTBlock`."""
    cls = Int8DiTBlock if cfg.datapath == "int8" else IntDiTBlock
    return cls(params, index, spec, cfg, mask, **kw)
