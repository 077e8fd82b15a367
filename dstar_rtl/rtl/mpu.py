"""The MPU: DSTAR's mixed-precision output-stationary systolic array (numerics §2.4, 3)."""

from amaranth.hdl import Mux, Signal

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.layouts import group_layout

from .array import ArrayUnit
from .params import check_config
from .pe import SlicePE, slice_col_layout, slice_row_layout

__all__ = ["MPU"]


class MPU(ArrayUnit):
    """``rows × cols`` array of :class:`~rtl.pe.SlicePE` fed by a stream of lane groups.

    Each accepted group is one cycle of work: row ``i`` gets the lane digits of token ``i``;
    the weight front end reads ``W[channel_l, :]`` for every lane through ``lanes`` read ports of
    the weight buffer (1 cycle), feeds weight 0 on padded lanes, and column ``j`` gets
    ``W[channel_l, j]``. After a tile's last group every accumulator holds
    ``Σ_c q[i,c] · 2**e[c] · W[c, j]`` and is drained row by row.

    Parameters
    ----------
    cfg : Config (rows, cols, lanes, weight_width, acc width, alignment, pe_stages,
        max_reduction = weight-buffer depth).
    weight_depth : keyword-only, rows of the weight buffer (an integer >= ``max_reduction``, the
        core's WMEM); the ``channel`` fields of ``groups`` and ``wload`` then address all of it.

    Members
    -------
    groups : In(stream of :func:`golden.layouts.group_layout` records).
    wload : In(stream of weight rows ``(w[cols], channel)``), always ready, one row per cycle.
    drain : Out(stream of drain beats ``(acc[cols], row, last[, ovf[cols]])``).

    Latency and throughput
    ----------------------
    One group per cycle in steady state. From the transfer of a tile's last group to its first
    drain beat: ``L = (rows - 1) // weight_hop + (cols - 1) // act_hop + pe_stages + 4`` cycles
    (``rows + cols + pe_stages + 2`` with both operands registered at every PE); the drain takes
    ``rows`` beats. The next tile's last group transfers at least ``L + rows`` cycles after this
    one's, so a stream of tiles with ``G_k`` groups takes ``Σ_k max(G_k, L + rows)`` cycles (the
    first tile counts ``G_0``) plus ``L + rows`` to drain the last tile, when the input never
    stalls and the drain is always ready.
    """

    def __init__(self, cfg: Config, *, weight_depth: int | None = None):
        super().__init__(check_config(cfg), in_fields=group_layout(cfg), pe_factory=SlicePE,
            row_shape=slice_row_layout(cfg), col_shape=slice_col_layout(cfg),
            read_ports=cfg.lanes, weight_depth=weight_depth)

    def read_addresses(self, beat):
        return [beat.channel[lane] for lane in range(self._cfg.lanes)]

    def unused_fields(self):
        return ("signed",) if self._cfg.digits == "booth" else ()   # a Booth digit is signed

    def operands(self, m, s1, s1_valid, rdata, rows, cols):
        cfg = self._cfg
        for i in range(cfg.rows):
            m.d.sync += rows[i].d.eq(s1.digits[i])
            if cfg.digits == "slice":     # a Booth digit is signed by itself
                m.d.sync += rows[i].s.eq(s1.signed)
        if cfg.alignment == "horner":
            prev_exp = Signal(cfg.exp_width)
            with m.If(s1_valid):
                m.d.sync += prev_exp.eq(s1.exp)
        for j in range(cfg.cols):
            for lane in range(cfg.lanes):
                m.d.sync += cols[j].w[lane].eq(Mux(s1.valid[lane], rdata[lane][j], 0))
            ctrl = cols[j].ctrl
            m.d.sync += [ctrl.valid.eq(s1_valid), ctrl.first.eq(s1.first),
                         ctrl.last.eq(s1.last), ctrl.exp.eq(s1.exp)]
            if cfg.alignment == "horner":
                m.d.sync += ctrl.dexp.eq(Mux(s1.first, 0, prev_exp - s1.exp))
