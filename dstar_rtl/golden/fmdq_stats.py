"""Per-layer FMDQ statistics, accumulated over denoising steps (numerics §2.2, 2.3).

One :class:`LayerStats` collects what the QPU saw for one linear layer: the precision of every
sub-channel, the element-weighted average activation bits, the share of sub-channels that needed a
PoT exponent, slice columns and groups per tile, lane fill and saturations. Both the quantized
reference DiT (:mod:`models.dit`) and the trace analysis (:mod:`analysis.trace`) fill it from the
:class:`~golden.fmdq.Quantized` sub-channels and :class:`~golden.schedule.TileSchedule` list of
:func:`golden.schedule.schedule_matrix`, so both report the same quantities the same way.

Definitions (all over every step added):

- ``avg_bits``: each real element (padded token rows excluded) counts the precision ``b`` of its
  sub-channel; an all-zero sub-channel (``b = 0``) counts 0 bits.
- ``hist``: sub-channel counts per precision 0, 2, 4, 6, 8; ``share_b*``/``share_zero`` divide
  them by the number of sub-channels.
- ``share_e_pos``: share of sub-channels with PoT exponent ``e > 0``.
- ``slice_columns_per_tile``, ``groups_per_tile``: QPU counters divided by token tiles.
- ``lane_fill``: valid lanes / issued lane slots (``groups · lanes``).
- ``saturated``: sub-channels with a clipped value (the QPU counter).
"""

from __future__ import annotations

import numpy as np

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.fmdq import Quantized

__all__ = ["LayerStats", "PRECISION_BINS"]

PRECISION_BINS = (0, 2, 4, 6, 8)


class LayerStats:
    """Running FMDQ statistics of one layer.

    Parameters
    ----------
    cfg : the configuration (tile size and lanes).
    """

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.steps = 0
        self.hist = dict.fromkeys(PRECISION_BINS, 0)
        self.subchannels = 0
        self.e_pos = 0
        self.bits = 0
        self.elements = 0
        self.tiles = 0
        self.slice_columns = 0
        self.groups = 0
        self.padded_lanes = 0
        self.saturated = 0
        self.input_saturated = 0
        self.output_saturated = 0
        self._err_max = 0.0
        self._err_sq = 0.0
        self._err_n = 0

    def add(self, qz: Quantized, tiles, tokens: int):
        """Add one step: ``qz`` and ``tiles`` from :func:`~golden.schedule.schedule_matrix` of a
        (``tokens``, channels) difference; ``tiles`` None (a layer built without the schedule)
        leaves the schedule's counters (slice columns, groups, padded lanes) unchanged."""
        T = self.cfg.tile
        nt = len(tiles) if tiles is not None else max(1, -(-tokens // T))
        b = np.asarray(qz.b).reshape(nt, -1)
        rows = np.minimum(T, tokens - np.arange(nt) * T)
        self.steps += 1
        for bb in PRECISION_BINS:
            self.hist[bb] += int(np.count_nonzero(b == bb))
        self.subchannels += int(b.size)
        self.e_pos += int(np.count_nonzero(qz.e > 0))
        self.bits += int((b.sum(axis=1) * rows).sum())
        self.elements += int(rows.sum()) * b.shape[1]
        self.tiles += nt
        if tiles is None:
            self.saturated += int(np.count_nonzero(qz.saturated))
        for ts in tiles or ():
            c = ts.counters
            self.slice_columns += c["slice_columns"]
            self.groups += c["groups"]
            self.padded_lanes += c["padded_lanes"]
            self.saturated += c["saturated"]

    def add_error(self, err):
        """Add absolute errors (any shape) of this layer's reconstruction or output."""
        err = np.abs(np.asarray(err, dtype=np.float64))
        if err.size:
            self._err_max = max(self._err_max, float(err.max()))
            self._err_sq += float((err ** 2).sum())
            self._err_n += err.size

    @property
    def avg_bits(self) -> float:
        return self.bits / self.elements if self.elements else 0.0

    @property
    def lane_fill(self) -> float:
        slots = self.groups * self.cfg.lanes
        return (slots - self.padded_lanes) / slots if slots else 0.0

    def to_dict(self, err_name: str = "err") -> dict:
        """Plain JSON-serialisable summary; errors appear as ``<err_name>_max``/``_rms``."""
        n = max(self.subchannels, 1)
        d = dict(steps=self.steps, avg_bits=self.avg_bits,
                 hist={f"b{bb}": self.hist[bb] for bb in PRECISION_BINS},
                 share_zero=self.hist[0] / n)
        for bb in PRECISION_BINS[1:]:
            d[f"share_b{bb}"] = self.hist[bb] / n
        d.update(share_e_pos=self.e_pos / n, subchannels=self.subchannels,
                 slice_columns_per_tile=self.slice_columns / max(self.tiles, 1),
                 groups_per_tile=self.groups / max(self.tiles, 1), lane_fill=self.lane_fill,
                 saturated=self.saturated, input_saturated=self.input_saturated,
                 output_saturated=self.output_saturated)
        d[f"{err_name}_max"] = self._err_max
        d[f"{err_name}_rms"] = float(np.sqrt(self._err_sq / self._err_n)) if self._err_n else 0.0
        return d

    @staticmethod
    def summarize(stats) -> dict:
        """Element-weighted summary over several :class:`LayerStats`."""
        stats = list(stats)
        if not stats:
            return dict(avg_bits=0.0, lane_fill=0.0, share_e_pos=0.0, saturated=0,
                        hist={f"b{bb}": 0 for bb in PRECISION_BINS})
        bits = sum(s.bits for s in stats)
        el = sum(s.elements for s in stats)
        lanes = stats[0].cfg.lanes
        slots = sum(s.groups for s in stats) * lanes
        pad = sum(s.padded_lanes for s in stats)
        sub = sum(s.subchannels for s in stats)
        return dict(avg_bits=bits / el if el else 0.0,
                    lane_fill=(slots - pad) / slots if slots else 0.0,
                    share_e_pos=sum(s.e_pos for s in stats) / max(sub, 1),
                    saturated=sum(s.saturated for s in stats),
                    hist={f"b{bb}": sum(s.hist[bb] for s in stats) for bb in PRECISION_BINS})
