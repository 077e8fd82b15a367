"""QPU stage 5: pack sorted descriptors into lane groups and fetch their digits (DESIGN.md 2.3).

A sorted chunk has its valid descriptors first, in descending exponent order. From the read
pointer ``p`` the packer takes the run of up to ``lanes`` consecutive descriptors whose exponent
equals that of descriptor ``p``, fetches their digit columns from the chunk's digit store by
``pos``, and emits one group: absolute exponent, per lane channel, signed, valid and the T digits,
padded lanes all zero; the tile's first group carries ``first`` and its last ``last``. An empty
chunk (a tile without kept columns) becomes one all-invalid group with exponent 0.

Latency: a chunk's first group is in the output register one cycle after the chunk is taken;
then one group per cycle, and the next chunk is taken in the cycle the previous one's last group
is produced, so consecutive chunks stream without a bubble. The output is a register that holds
under back-pressure.
"""

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from golden.config import Config
from golden.layouts import group_layout

from .layouts import to_layout
from .params import check_config

__all__ = ["Packer"]


class Packer(wiring.Component):
    """Sorted chunks in, lane groups out.

    Members
    -------
    i : In(stream of sorted chunks ``{entries, side}``).
    digits : In(sort_n × T raw ``cfg.digit_width``-bit digits): the digit store of the chunk being packed (the slot named
        by ``current_slot``).
    current_slot : Out(slot index of the chunk being packed).
    o : Out(stream of :func:`golden.layouts.group_layout` records).
    done : Out(1): pulses when a chunk's last group has been produced (its slot is free).
    """

    def __init__(self, cfg: Config, chunk_layout, slot_shape):
        check_config(cfg)
        self._cfg = cfg
        self._chunk = chunk_layout
        super().__init__({
            "i": In(stream.Signature(chunk_layout)),
            "digits": In(data.ArrayLayout(data.ArrayLayout(cfg.digit_width, cfg.rows),
                                          cfg.sort_n)),
            "current_slot": Out(slot_shape),
            "o": Out(stream.Signature(to_layout(group_layout(cfg)))),
            "done": Out(1),
        })

    def elaborate(self, platform):
        cfg = self._cfg
        n, L, X, T = cfg.sort_n, cfg.lanes, cfg.exp_width, cfg.rows
        m = Module()
        cur = Signal(self._chunk, name="chunk")
        active = Signal()
        ptr = Signal(range(n + 1))
        m.d.comb += self.current_slot.eq(cur.side.slot)

        entries = Array(cur.entries[k] for k in range(n))
        digits = Array(self.digits[k] for k in range(n))

        def valid_of(entry):
            return entry.key[X]

        # The window of `lanes` entries from the pointer and its leading run of equal exponent.
        head = entries[ptr]
        head_exp = head.key[:X]
        run = []
        for lane in range(L):
            idx = ptr + lane
            ent = entries[idx]
            ok = (idx < n) & valid_of(ent) & (ent.key[:X] == head_exp)
            run.append(ok if lane == 0 else run[-1] & ok)
        taken = Signal(range(L + 1))
        m.d.comb += taken.eq(sum(run))
        nxt = ptr + taken
        finished = Signal()
        m.d.comb += finished.eq((nxt >= n) | ~valid_of(entries[nxt]))

        out = self.o.p
        out_valid = Signal()
        can_emit = Signal()
        m.d.comb += [can_emit.eq(~out_valid | self.o.ready), self.o.valid.eq(out_valid),
                     self.i.ready.eq(~active | (can_emit & finished))]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += out_valid.eq(0)

        m.d.comb += self.done.eq(0)
        with m.If(active & can_emit):
            m.d.sync += [
                out_valid.eq(1),
                out.exp.eq(Mux(run[0], head_exp, 0)),
                out.first.eq(cur.side.first & (ptr == 0)),
                out.last.eq(cur.side.last & finished),
                ptr.eq(nxt),
            ]
            for lane in range(L):
                ent = entries[ptr + lane]
                live = run[lane]
                m.d.sync += [
                    out.valid[lane].eq(live),
                    out.channel[lane].eq(Mux(live, ent.payload.channel, 0)),
                    out.signed[lane].eq(live & ent.payload.signed),
                ]
                col = digits[ent.payload.pos]
                for t in range(T):
                    m.d.sync += out.digits[t][lane].eq(Mux(live, col[t], 0))
            with m.If(finished):
                m.d.sync += active.eq(0)
                m.d.comb += self.done.eq(1)
        # A new chunk loads as soon as the previous one's last group is out (same cycle).
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [cur.eq(self.i.p), active.eq(1), ptr.eq(0)]
        return m
