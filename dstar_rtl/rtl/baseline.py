"""The INT8×INT8 output-stationary baseline array, from the same generator as the MPU."""

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.layouts import baseline_group_layout

from .array import ArrayUnit
from .params import check_config
from .pe import Int8PE, int8_col_layout, int8_row_layout

__all__ = ["Baseline"]


class Baseline(ArrayUnit):
    """``rows × cols`` array of :class:`~rtl.pe.Int8PE`: the dense INT8 reference design.

    Each accepted beat carries one signed ``weight_width``-bit activation per row (token) for one
    input channel ``channel``; the front end reads ``W[channel, :]`` through one read port. After a
    tile's last beat, ``acc[i, j] = Σ_c a[i, c] · W[c, j]``. Same outer interface, weight buffer,
    drain and timing as :class:`~rtl.mpu.MPU` (one beat per cycle; ``L = (rows - 1) // weight_hop
    + (cols - 1) // act_hop + pe_stages + 4`` from a tile's last beat to its first drain beat;
    ``rows`` drain beats). ``weight_depth`` (keyword-only): rows of the weight buffer, as the
    MPU's (the INT8 core's WMEM).
    """

    def __init__(self, cfg: Config, *, weight_depth: int | None = None):
        super().__init__(check_config(cfg), in_fields=baseline_group_layout(cfg),
            pe_factory=Int8PE, row_shape=int8_row_layout(cfg), col_shape=int8_col_layout(cfg),
            read_ports=1, baseline=True, weight_depth=weight_depth)

    def read_addresses(self, beat):
        return [beat.channel]

    def operands(self, m, s1, s1_valid, rdata, rows, cols):
        cfg = self._cfg
        for i in range(cfg.rows):
            m.d.sync += rows[i].a.eq(s1.act[i])
        for j in range(cfg.cols):
            m.d.sync += [cols[j].w.eq(rdata[0][j]), cols[j].ctrl.valid.eq(s1_valid),
                         cols[j].ctrl.first.eq(s1.first), cols[j].ctrl.last.eq(s1.last)]
