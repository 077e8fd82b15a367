"""The output-stationary systolic array and the front end both arrays share.

:class:`SystolicArray` is a ``rows × cols`` grid of PEs. Row operands enter unskewed at
``rows_in`` and column operands (with their control) at ``cols_in``. A row operand is
registered after every ``ka = cfg.act_hop``-th column on its way right, a column operand after
every ``kw = cfg.weight_hop``-th row on its way down (``1``: at every PE, systolic forwarding;
the array's size: broadcast, one net per row or column). The array delays row ``i`` by
``h(i) = i // kw`` cycles and column ``j`` by ``v(j) = j // ka``, so PE (i, j) sees an operand
pair ``h(i) + v(j)`` cycles after it entered. When the bottom-right PE has captured a tile's
last group, every PE has; the array then drains the shadows row by row (row 0 first) as a
stream with back-pressure, shifting each column's shadow chain up by one on every accepted beat.

:class:`ArrayUnit` adds what the MPU and the INT8 baseline have in common: a weight buffer
(``amaranth.lib.memory``) written through the ``wload`` stream and read through ``read_ports``
ports, a two-register front end (read, then mask and register), and the tile-flow rule: a
group marked ``last`` is accepted only when the previous tile's shadows have been drained, so
a drain never races a capture. Groups of the next tile are accepted meanwhile.

Timing (no back-pressure, ``S = pe_stages``):

- latency from the transfer of a tile's last group to its first drain beat:
  ``L = h(rows - 1) + v(cols - 1) + S + 4`` cycles (``rows + cols + S + 2`` with both hops 1);
  the drain then takes ``rows`` beats;
- the next tile's last group transfers no earlier than ``D = L + rows`` cycles after this one's,
  so a tile of ``G`` groups occupies ``max(G, D)`` cycles; one group per cycle in steady state.
"""

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import Config

from .layouts import drain_layout, to_layout, weight_load_layout
from .params import check_bool, check_callable, check_config, check_int, check_shape

__all__ = ["SystolicArray", "ArrayUnit"]


class SystolicArray(wiring.Component):
    """A ``rows × cols`` output-stationary array of PEs built by ``pe_factory(cfg, register_w,
    register_a)`` (:meth:`Config.weight_registered` of the PE's row,
    :meth:`Config.act_registered` of its column).

    Members
    -------
    rows_in : In(ArrayLayout(row_shape, rows)), unskewed row operands.
    cols_in : In(ArrayLayout(col_shape, cols)), unskewed column operands with control.
    drain : Out(stream.Signature(drain_layout)), one row of accumulators per beat.
    """

    def __init__(self, cfg: Config, *, pe_factory, row_shape, col_shape, baseline: bool = False):
        self._cfg = check_config(cfg)
        self._pe_factory = check_callable("pe_factory", pe_factory, "a PE class")
        self._baseline = check_bool("baseline", baseline)
        super().__init__({
            "rows_in": In(data.ArrayLayout(check_shape("row_shape", row_shape), cfg.rows)),
            "cols_in": In(data.ArrayLayout(check_shape("col_shape", col_shape), cfg.cols)),
            "drain": Out(stream.Signature(drain_layout(cfg, baseline))),
        })

    def elaborate(self, platform):
        cfg = self._cfg
        R, C = cfg.rows, cfg.cols
        m = Module()
        pes = [[None] * C for _ in range(R)]
        for i in range(R):
            for j in range(C):
                pe = self._pe_factory(cfg, register_w=cfg.weight_registered(i),
                                      register_a=cfg.act_registered(j))
                m.submodules[f"pe_{i}_{j}"] = pe
                pes[i][j] = pe

        def delayed(sig, n, name):
            for k in range(n):
                reg = Signal.like(sig, name=f"{name}_d{k + 1}")
                m.d.sync += reg.eq(sig)
                sig = reg
            return sig

        # Skew and neighbour wiring.
        for i in range(R):
            m.d.comb += pes[i][0].a_in.eq(delayed(self.rows_in[i], i // cfg.weight_hop,
                                                  f"skew_row{i}"))
            for j in range(1, C):
                m.d.comb += pes[i][j].a_in.eq(pes[i][j - 1].a_out)
        for j in range(C):
            m.d.comb += pes[0][j].w_in.eq(delayed(self.cols_in[j], j // cfg.act_hop,
                                                  f"skew_col{j}"))
            for i in range(1, R):
                m.d.comb += pes[i][j].w_in.eq(pes[i - 1][j].w_out)

        # Drain: shadow chains run upwards; row 0's shadows are the beat.
        ovf = cfg.overflow_detect and not self._baseline
        draining = Signal()
        row = Signal(range(R))
        shift = Signal()
        m.d.comb += shift.eq(self.drain.valid & self.drain.ready)
        for i in range(R):
            for j in range(C):
                pe = pes[i][j]
                m.d.comb += pe.drain_shift.eq(shift)
                if i + 1 < R:
                    m.d.comb += pe.shadow_in.eq(pes[i + 1][j].shadow_out)
                    if ovf:
                        m.d.comb += pe.ovf_in.eq(pes[i + 1][j].ovf_out)
        for j in range(C):
            m.d.comb += self.drain.p.acc[j].eq(pes[0][j].shadow_out)
            if ovf:
                m.d.comb += self.drain.p.ovf[j].eq(pes[0][j].ovf_out)
        m.d.comb += [
            self.drain.valid.eq(draining),
            self.drain.p.row.eq(row),
            self.drain.p.last.eq(row == R - 1),
        ]
        with m.If(pes[R - 1][C - 1].captured):
            m.d.sync += [draining.eq(1), row.eq(0)]
        with m.Elif(shift):
            m.d.sync += row.eq(row + 1)
            with m.If(row == R - 1):
                m.d.sync += draining.eq(0)
        return m


class ArrayUnit(wiring.Component):
    """Front end + weight buffer + :class:`SystolicArray`; the MPU and the baseline subclass it.

    A subclass passes ``in_fields`` (the golden field list of the input stream's payload) and the
    number of read ports, and defines ``read_addresses(beat)`` (one weight-row address per read
    port, from the input payload) and ``operands(m, s1, s1_valid, rdata, rows, cols)``, which
    assigns (``m.d.sync``) the registered row and column operands of the array from the input
    beat ``s1`` registered one cycle after its transfer and the read data ``rdata``.

    Members
    -------
    groups : In(stream.Signature(in_layout)): the operand stream.
    wload : In(stream.Signature(weight_load_layout)): weight rows into the buffer (always ready).
    drain : Out(stream.Signature(drain_layout)): accumulators, one row per beat.
    """

    #: Input fields used only as weight-buffer addresses (not registered into stage 1).
    address_fields = ("channel",)

    def unused_fields(self) -> tuple:
        """Input fields :meth:`operands` never reads (not registered into stage 1 either)."""
        return ()

    def __init__(self, cfg: Config, *, in_fields, pe_factory, row_shape, col_shape,
                 read_ports: int, baseline: bool = False, weight_depth: int | None = None):
        self._cfg = check_config(cfg)
        self._read_ports = check_int("read_ports", read_ports, lo=1)
        self._depth = cfg.max_reduction if weight_depth is None else check_int(
            "weight_depth", weight_depth, lo=cfg.max_reduction,
            why="None or at least max_reduction, the channels a group can address")
        if weight_depth is not None:   # a larger buffer: channel fields address all of it
            abits = max(1, (self._depth - 1).bit_length())
            in_fields = [(n, abits, d, s) if n == "channel" else (n, w, d, s)
                         for n, w, d, s in in_fields]
        self._in_fields = in_fields
        self._in_layout = in_layout = to_layout(in_fields)
        self._pe_factory = check_callable("pe_factory", pe_factory, "a PE class")
        self._row_shape = check_shape("row_shape", row_shape)
        self._col_shape = check_shape("col_shape", col_shape)
        self._baseline = check_bool("baseline", baseline)
        # Parameters are keyword-only; a bad one raises ValueError (TypeError for cfg).
        super().__init__({
            "groups": In(stream.Signature(in_layout)),
            "wload": In(stream.Signature(self._wload_layout(cfg))),
            "drain": Out(stream.Signature(drain_layout(cfg, baseline))),
        })

    def _wload_layout(self, cfg):
        lay = weight_load_layout(cfg)
        if self._depth == cfg.max_reduction:
            return lay
        return data.StructLayout({"w": lay.members["w"],
                                  "channel": range(self._depth)})

    @property
    def cfg(self):
        return self._cfg

    @property
    def weight_depth(self):
        """Rows of the weight buffer (``max_reduction`` unless given)."""
        return self._depth

    @property
    def in_fields(self):
        """The golden field list of the input stream's payload (:mod:`golden.layouts`)."""
        return self._in_fields

    @property
    def baseline(self):
        return self._baseline

    @property
    def latency(self):
        """Cycles from the transfer of a tile's last input beat to its first drain beat."""
        c = self._cfg
        return c.row_skew_max + c.col_skew_max + c.pe_stages + 4

    @property
    def tile_period(self):
        """Fewest cycles between the last beats of two consecutive tiles (drain turnaround)."""
        return self.latency + self._cfg.rows

    def elaborate(self, platform):
        cfg = self._cfg
        m = Module()
        wshape = data.ArrayLayout(signed(cfg.weight_width), cfg.cols)
        m.submodules.weights = mem = Memory(shape=wshape, depth=self._depth, init=[])
        wp = mem.write_port()
        m.d.comb += [
            self.wload.ready.eq(1),
            wp.en.eq(self.wload.valid),
            wp.addr.eq(self.wload.p.channel),
            wp.data.eq(self.wload.p.w),
        ]
        rports = [mem.read_port() for _ in range(self._read_ports)]

        m.submodules.array = array = SystolicArray(cfg, pe_factory=self._pe_factory, baseline=(
            self._baseline), row_shape=self._row_shape, col_shape=self._col_shape)
        wiring.connect(m, wiring.flipped(self.drain), array.drain)

        # Tile flow: a last beat waits until the previous tile is drained.
        busy = Signal()
        take = Signal()
        m.d.comb += [
            self.groups.ready.eq(~(busy & self.groups.p.last)),
            take.eq(self.groups.valid & self.groups.ready),
        ]
        with m.If(take & self.groups.p.last):
            m.d.sync += busy.eq(1)
        with m.Elif(self.drain.valid & self.drain.ready & self.drain.p.last):
            m.d.sync += busy.eq(0)

        # Stage 1: the beat is registered while the buffer is read.
        # The address fields were consumed by the read ports; the rest that is used travels on.
        skip = self.address_fields + self.unused_fields()
        kept = [f for f in self._in_fields if f[0] not in skip]
        s1 = Signal(to_layout(kept), name="s1_beat")
        s1_valid = Signal()
        m.d.sync += [getattr(s1, f[0]).eq(getattr(self.groups.p, f[0])) for f in kept]
        m.d.sync += s1_valid.eq(take)
        # A port reads only when a beat is taken (an SRAM read costs energy on every enabled
        # cycle); the data is used only with ``s1_valid``, so holding it changes no value.
        for port, addr in zip(rports, self.read_addresses(self.groups.p)):
            m.d.comb += [port.addr.eq(addr), port.en.eq(take)]

        # Stage 2: operands registered, then into the array.
        s2_rows = Signal.like(array.rows_in, name="s2_rows")
        s2_cols = Signal.like(array.cols_in, name="s2_cols")
        self.operands(m, s1, s1_valid, [p.data for p in rports], s2_rows, s2_cols)
        m.d.comb += [array.rows_in.eq(s2_rows), array.cols_in.eq(s2_cols)]
        return m
