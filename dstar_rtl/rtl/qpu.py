"""The QPU: a tile of differential activations in, the MPU's lane groups out (numerics §2.2-2.3).

Five stages: (1) max |u| of a sub-channel, (2) precision/exponent bins, (3) quantize, slice and
reconstruct (:class:`~rtl.qpu_front.QuantizeSlice`); chunk assembly
(:class:`~rtl.chunker.ChunkAssembler`); (4) the bitonic sort of each chunk by (valid, exponent)
(:class:`~rtl.sorter.BitonicSorter`, the golden network); (5) packing into lane groups with their
digit columns (:class:`~rtl.packer.Packer`). With ``cfg.packer == "bins"`` (the presets') the
exponent bins of :class:`~rtl.binner.Binner` take the place of chunk assembly, sort and packing.
With the sort, the columns (digits, channel, signed flag) wait in
a store of ``SLOTS`` chunk slots while their keys and positions are sorted. The reconstruction
``dequant(q)`` of every sub-channel leaves in order on a second stream (through a 4-beat
:class:`~rtl.stream_queue.StreamQueue`), and the statistics counters of numerics §2.3 count exactly
as the golden model's.
"""

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden import layouts as gl
from dstar_rtl.golden.config import Config
from dstar_rtl.golden.layouts import group_layout, recon_layout
from dstar_rtl.golden.schedule import COUNTER_MAX, COUNTER_NAMES

from .binner import Binner
from .chunker import SLOTS, ChunkAssembler, chunk_side_layout, column_layout, descriptor_layout
from .layouts import to_layout
from .packer import Packer
from .params import check_config
from .qpu_front import QuantizeSlice, front_in_layout, qpu_config_layout
from .sorter import BitonicSorter
from .stream_queue import StreamQueue

__all__ = ["QPU", "counters_layout", "RECON_DEPTH"]

#: Beats the reconstruction stream's queue holds (one sub-channel each, for the Q engine's x̂).
RECON_DEPTH = 4


def counters_layout() -> data.StructLayout:
    return to_layout(gl.counters_layout())


class QPU(wiring.Component):
    """Quantization and packing unit.

    Parameters
    ----------
    cfg : Config (rows = T, act widths, base and thresholds defaults, e_max, sort_n, lanes,
        drop_zero_columns, max_reduction).

    Members
    -------
    subch : In(stream ``{u[T], last}``): one sub-channel (T differences of one input channel) per
        beat, channel by channel; ``last`` ends the tile.
    config : In(stream ``{base_log2, thr[3]}``): per-layer base and thresholds, always ready; a
        value that is not legal (``B > B_max``, thresholds not strictly increasing below 127) is
        ignored and sets ``config_error``. Applies to sub-channels entering after it.
    groups : Out(stream of :func:`golden.layouts.group_layout` records) to the MPU.
    recon : Out(stream of :func:`golden.layouts.recon_layout`): ``dequant(q)`` per sub-channel.
    counters : Out(32-bit saturating counters of numerics §2.3); ``counters_clear`` zeroes them.
    config_error, overflow : Out(1), sticky: a refused configuration; a tile longer than
        ``max_reduction`` sub-channels.

    Latency and throughput
    ----------------------
    One sub-channel per cycle in; one group per cycle out. Stages 1-3 take 3 cycles. With
    ``packer == "sort"`` a chunk enters the sorter when it is complete (or its tile ends), spends
    ``S = log2(sort_n) · (log2(sort_n) + 1) / 2`` cycles in it, and its first group is out one
    cycle later. With ``packer == "bins"`` the sub-channels go straight into the exponent bins
    (:class:`~rtl.binner.Binner`: a sub-channel that sends ``g > 1`` groups takes ``g``
    cycles; a tile's end waits a cycle per open bin and one more).
    """

    def __init__(self, cfg: Config):
        check_config(cfg)
        if cfg.packer == "sort" and cfg.sort_n < 4:
            raise ValueError(f"sort_n must be >= 4 for the QPU (one sub-channel brings up to 4 "
                             f"slice columns and a chunk must hold the overflow), not {cfg.sort_n}")
        self._cfg = cfg
        super().__init__({
            "subch": In(stream.Signature(front_in_layout(cfg))),
            "config": In(stream.Signature(qpu_config_layout(cfg))),
            "groups": Out(stream.Signature(to_layout(group_layout(cfg)))),
            "recon": Out(stream.Signature(to_layout(recon_layout(cfg)))),
            "counters": Out(counters_layout()),
            "counters_clear": In(1),
            "config_error": Out(1),
            "overflow": Out(1),
        })

    @property
    def cfg(self):
        return self._cfg

    @property
    def sorter_latency(self):
        lg = self._cfg.sort_n.bit_length() - 1
        return lg * (lg + 1) // 2

    def _sort_and_pack(self, m):
        """``packer == "sort"``: chunk assembly, the bitonic sort and the packer, with the column
        store between the assembler and the packer. Returns the assembler (the front end's
        sink)."""
        cfg = self._cfg
        m.submodules.sorter = sorter = BitonicSorter(
            cfg.sort_n, key_width=cfg.exp_width + 1, payload_shape=descriptor_layout(cfg),
            side_shape=chunk_side_layout(cfg))
        chunk = sorter.chunk_layout
        m.submodules.chunker = chunker = ChunkAssembler(cfg, chunk_layout=chunk)
        m.submodules.packer = packer = Packer(cfg, chunk_layout=chunk, slot_shape=range(SLOTS))
        wiring.connect(m, chunker.o, sorter.i)
        wiring.connect(m, sorter.o, packer.i)
        wiring.connect(m, packer.o, wiring.flipped(self.groups))
        m.d.comb += chunker.slot_free.eq(packer.done)

        # Column store: one slot per chunk between the assembler and the packer.
        slots = Array(Signal(data.ArrayLayout(column_layout(cfg), cfg.sort_n), name=f"slot{s}")
                      for s in range(SLOTS))
        with m.If(chunker.o.valid & chunker.o.ready):
            m.d.sync += slots[chunker.o.p.side.slot].eq(chunker.o_columns)
        m.d.comb += packer.columns.eq(slots[packer.current_slot])
        return chunker

    def elaborate(self, platform):
        cfg = self._cfg
        m = Module()

        # Configuration registers with the elaboration-time defaults.
        base = Signal(range(cfg.act_frac + 1), init=cfg.base_log2)
        thr = Signal(data.ArrayLayout(7, 3), init=list(cfg.thr))
        cp = self.config.p
        legal = ((cp.base_log2 <= cfg.B_max) & (cp.thr[0] < cp.thr[1]) &
                 (cp.thr[1] < cp.thr[2]) & (cp.thr[2] < 127))
        m.d.comb += self.config.ready.eq(1)
        with m.If(self.config.valid):
            with m.If(legal):
                m.d.sync += [base.eq(cp.base_log2), thr.eq(cp.thr)]
            with m.Else():
                m.d.sync += self.config_error.eq(1)

        m.submodules.front = front = QuantizeSlice(cfg)
        m.d.comb += [front.config.base_log2.eq(base), front.config.thr.eq(thr)]
        wiring.connect(m, wiring.flipped(self.subch), front.i)

        if cfg.packer == "bins":
            # Exponent bins: the sub-channels straight into the open groups (no sort).
            m.submodules.packer = sink = Binner(cfg)
            wiring.connect(m, sink.o, wiring.flipped(self.groups))
        else:
            sink = self._sort_and_pack(m)
        m.d.comb += self.overflow.eq(sink.overflow)

        # Reconstruction queue and the hand-off of a quantized sub-channel to both consumers.
        m.submodules.recon_fifo = recon_q = StreamQueue(to_layout(recon_layout(cfg)),
                                                              depth=RECON_DEPTH)
        m.d.comb += [
            sink.i.payload.eq(front.o.payload),
            sink.i.valid.eq(front.o.valid & recon_q.i.ready),
            front.o.ready.eq(sink.i.ready & recon_q.i.ready),
            recon_q.i.valid.eq(front.o.valid & front.o.ready),
            recon_q.i.payload.eq(front.o.p.recon),
        ]
        wiring.connect(m, recon_q.o, wiring.flipped(self.recon))

        # Counters (numerics §2.3): 32 bits, saturating.
        sub = front.o.valid & front.o.ready
        fo = front.o.p
        kept = sum(fo.kept[k] for k in range(4))
        incs = {
            "subchannels": sub,
            "subchannels_b2": sub & (fo.b == 2),
            "subchannels_b4": sub & (fo.b == 4),
            "subchannels_b6": sub & (fo.b == 6),
            "subchannels_b8": sub & (fo.b == 8),
            "subchannels_zero": sub & (fo.b == 0),
            "saturated": sub & fo.saturated,
            "slice_columns": Mux(sub, kept, 0),
            "dropped_columns": Mux(sub, (fo.b >> 1) - kept, 0),
        }
        grp = self.groups.valid & self.groups.ready
        gv = self.groups.p.valid
        incs["groups"] = grp
        incs["padded_lanes"] = Mux(grp, cfg.lanes - sum(gv[i] for i in range(cfg.lanes)), 0)
        # Shift statistics: exponent changes between consecutive groups of a tile.
        prev_exp = Signal(cfg.exp_width)
        gexp = self.groups.p.exp
        step = Mux(prev_exp > gexp, prev_exp - gexp, gexp - prev_exp)
        moved = grp & ~self.groups.p.first & (step != 0)
        with m.If(grp):
            m.d.sync += prev_exp.eq(gexp)
        incs["shifts"] = moved
        incs["shift_amount"] = Mux(moved, step, 0)
        for name in COUNTER_NAMES:
            ctr = getattr(self.counters, name)
            nxt = ctr + incs[name]
            with m.If(self.counters_clear):
                m.d.sync += ctr.eq(0)
            with m.Else():
                m.d.sync += ctr.eq(Mux(nxt > COUNTER_MAX, COUNTER_MAX, nxt))
        return m
