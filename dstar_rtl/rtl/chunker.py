"""QPU chunk assembly: kept slice columns → chunks of ``sort_n`` descriptors (numerics §2.3).

Each quantized sub-channel brings up to four kept columns; their descriptors
``(exp = e + 2k, signed = (k == b/2 - 1), channel, pos)`` (Booth digits: ``signed = 1``) are
appended in channel-then-k order. Only the key and ``pos`` go through the sorter: ``pos`` is the
descriptor's slot in its chunk, and the column store (:func:`column_layout`: the digits, channel
and signed flag of every slot) is where the packer looks up all the rest by it, so the sorter's
compare-exchanges carry ``log2(sort_n)`` payload bits per entry instead of the channel and flag
as well. A chunk is handed on lazily: when it is full and more descriptors of the same tile
arrive, or when the tile ends (padded with invalid entries). So the last chunk of a
tile always holds at least one descriptor and a tile without descriptors emits one empty chunk,
exactly as the golden schedule fills its chunks. When the tile's last sub-channel overflows a full
chunk, the remainder goes out one cycle later (the input waits that cycle).

Latency: a chunk leaves the cycle its tile ends or the cycle after it overflows; one sub-channel
accepted per cycle otherwise.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import Config

from .params import check_config
from .qpu_front import front_out_layout

__all__ = ["ChunkAssembler", "descriptor_layout", "column_layout", "chunk_side_layout", "SLOTS",
           "check_chunk_layout"]

#: Chunks that may be between the assembler and the end of the packer (digit-store slots).
SLOTS = 4


def descriptor_layout(cfg: Config) -> data.StructLayout:
    """Sort payload of one descriptor: its slot in the chunk (an index into the column store)."""
    return data.StructLayout({"pos": range(cfg.sort_n)})


def column_layout(cfg: Config) -> data.StructLayout:
    """What the column store holds per slot of a chunk: the column's T raw digits, its weight row
    (``channel``) and, for 2-bit slices, the signed flag of a sub-channel's top digit (every Booth
    digit is signed: no flag)."""
    fields = {"digits": data.ArrayLayout(cfg.digit_width, cfg.rows), "channel": cfg.chan_width}
    if cfg.digits == "slice":
        fields["signed"] = 1
    return data.StructLayout(fields)


def chunk_side_layout(cfg: Config) -> data.StructLayout:
    """Per-chunk data that travels with it: tile markers and the digit-store slot."""
    return data.StructLayout({"first": 1, "last": 1, "slot": range(SLOTS)})


def check_chunk_layout(cfg: Config, chunk_layout) -> data.StructLayout:
    """Return ``chunk_layout`` if it is a chunk of the sorter for ``cfg``: a ``data.StructLayout``
    with ``entries`` (an array of ``sort_n`` entries) and ``side``, such as
    :attr:`rtl.sorter.BitonicSorter.chunk_layout`; else raise ValueError."""
    members = chunk_layout.members if isinstance(chunk_layout, data.StructLayout) else {}
    entries = members.get("entries")
    if (not isinstance(entries, data.ArrayLayout) or entries.length != cfg.sort_n
            or "side" not in members):
        raise ValueError(f"chunk_layout must be a data.StructLayout {{entries: {cfg.sort_n} "
                         f"(sort_n) entries, side}} (BitonicSorter.chunk_layout), not "
                         f"{chunk_layout!r}")
    return chunk_layout


class ChunkAssembler(wiring.Component):
    """Appends each sub-channel's kept columns to the current chunk and emits full chunks.

    Parameters
    ----------
    cfg : Config.
    chunk_layout : keyword-only, the sorter's chunk (:func:`check_chunk_layout`).

    Members
    -------
    i : In(stream of quantized sub-channels, :func:`~rtl.qpu_front.front_out_layout`).
    o : Out(stream of ``{entries: sort_n × {key, payload: {pos}}, side}``) into the sorter.
    o_columns : Out(sort_n × :func:`column_layout`): the emitted chunk's columns by ``pos``,
        valid with ``o``.
    slot_free : In(1): the packer released the oldest slot.
    overflow : Out(1): sticky; a tile had more than ``max_reduction`` sub-channels.
    """

    def __init__(self, cfg: Config, *, chunk_layout):
        self._cfg = check_config(cfg)
        self._chunk = check_chunk_layout(cfg, chunk_layout)
        super().__init__({
            "i": In(stream.Signature(front_out_layout(cfg))),
            "o": Out(stream.Signature(chunk_layout)),
            "o_columns": Out(data.ArrayLayout(column_layout(cfg), cfg.sort_n)),
            "slot_free": In(1),
            "overflow": Out(1),
        })

    def elaborate(self, platform):
        cfg = self._cfg
        n, T, X = cfg.sort_n, cfg.rows, cfg.exp_width
        m = Module()
        # Buffered entries do not store `pos`: a descriptor's slot in the chunk is its index; nor
        # `signed` with Booth digits (every one is signed).
        entry_fields = {"key": X + 1, "channel": cfg.chan_width}
        if cfg.digits == "slice":
            entry_fields["signed"] = 1
        entry_shape = data.StructLayout(entry_fields)
        col_shape = data.ArrayLayout(cfg.digit_width, T)

        def emit_entry(i, value, digits):
            ent, col = self.o.p.entries[i], self.o_columns[i]
            out = [ent.key.eq(value.key), ent.payload.pos.eq(i), col.digits.eq(digits),
                   col.channel.eq(value.channel)]
            if cfg.digits == "slice":
                out.append(col.signed.eq(value.signed))
            return out

        buf = Signal(data.ArrayLayout(entry_shape, n), name="buf")
        buf_dig = Signal(data.ArrayLayout(col_shape, n), name="buf_digits")
        fill = Signal(range(n + 1))
        flush = Signal()           # the tile's remainder waits to go out
        started = Signal()         # a chunk of this tile has gone out
        channel = Signal(range(cfg.max_reduction + 1))
        inflight = Signal(range(SLOTS + 1))
        wslot = Signal(range(SLOTS))

        # The incoming sub-channel's descriptors, compacted in k order.
        p = self.i.p
        kept = [p.kept[k] for k in range(4)]
        ranks = []
        for k in range(4):
            ranks.append(sum((kept[j] for j in range(k)), Const(0, 3)) if k else Const(0, 3))
        count = Signal(range(5))
        m.d.comb += count.eq(sum(kept[k] for k in range(4)))
        top = Signal(range(4))
        m.d.comb += top.eq((p.b >> 1) - 1)
        desc = []          # (present, entry value, digits) for rank r
        for r in range(4):
            e_val = Signal(entry_shape, name=f"desc{r}")
            d_val = Signal(col_shape, name=f"desc{r}_digits")
            present = Signal(name=f"desc{r}_present")
            m.d.comb += present.eq(count > r)
            for k in range(4):
                with m.If(kept[k] & (ranks[k] == r)):
                    m.d.comb += [
                        e_val.key.eq(Cat((p.e + 2 * k)[:X], Const(1, 1))),
                        e_val.channel.eq(channel),
                        d_val.eq(p.digits[k]),
                    ]
                    if cfg.digits == "slice":
                        m.d.comb += e_val.signed.eq(top == k)
            desc.append((present, e_val, d_val))

        # Combined view: the buffer followed by the new descriptors (sort_n + 4 positions).
        total = Signal(range(n + 5))
        m.d.comb += total.eq(fill + count)
        comb_e = [Signal(entry_shape, name=f"comb{i}") for i in range(n + 4)]
        comb_d = [Signal(col_shape, name=f"comb{i}_digits") for i in range(n + 4)]
        for i in range(n + 4):
            if i < n:
                with m.If(i < fill):
                    m.d.comb += [comb_e[i].eq(buf[i]), comb_d[i].eq(buf_dig[i])]
            for r, (present, e_val, d_val) in enumerate(desc):
                if i - r < 0 or i - r > n:
                    continue
                with m.If(present & (fill == i - r)):
                    m.d.comb += [comb_e[i].eq(e_val), comb_d[i].eq(d_val)]

        can_emit = Signal()
        m.d.comb += can_emit.eq(self.o.ready & (inflight < SLOTS))
        overflow_chunk = total > n
        need_emit = overflow_chunk | p.last
        take = Signal()
        emit = Signal()
        m.d.comb += [
            self.i.ready.eq(~flush & (~need_emit | can_emit)),
            take.eq(self.i.valid & self.i.ready),
        ]

        side = self.o.p.side
        m.d.comb += [side.first.eq(~started), side.slot.eq(wslot)]
        with m.If(flush):
            # The remainder of a tile whose last sub-channel overflowed the previous chunk.
            m.d.comb += [emit.eq(can_emit), side.last.eq(1)]
            for i in range(n):
                live = Signal(entry_shape, name=f"flush{i}")
                m.d.comb += live.eq(Mux(i < fill, buf[i].as_value(), 0))
                m.d.comb += emit_entry(i, live, buf_dig[i])
            with m.If(emit):
                m.d.sync += [flush.eq(0), fill.eq(0), started.eq(0)]
        with m.Else():
            m.d.comb += [emit.eq(take & need_emit), side.last.eq(p.last & ~overflow_chunk)]
            for i in range(n):
                m.d.comb += emit_entry(i, comb_e[i], comb_d[i])
            with m.If(take):
                m.d.sync += channel.eq(Mux(p.last, 0, channel + 1))
                with m.If(channel >= cfg.max_reduction):
                    m.d.sync += self.overflow.eq(1)
                with m.If(overflow_chunk):
                    # The first sort_n go out; the rest start the next chunk.
                    for i in range(n):
                        src = i + n
                        if src < n + 4:
                            m.d.sync += [buf[i].eq(comb_e[src]), buf_dig[i].eq(comb_d[src])]
                    m.d.sync += [fill.eq(total - n), started.eq(1), flush.eq(p.last)]
                with m.Elif(p.last):
                    m.d.sync += [fill.eq(0), started.eq(0)]
                with m.Else():
                    m.d.sync += [fill.eq(total)]
                    for i in range(n):
                        m.d.sync += [buf[i].eq(comb_e[i]), buf_dig[i].eq(comb_d[i])]
        m.d.comb += self.o.valid.eq((inflight < SLOTS) &
                                    Mux(flush, 1, self.i.valid & need_emit))
        with m.If(emit):
            m.d.sync += wslot.eq(Mux(wslot == SLOTS - 1, 0, wslot + 1))
        m.d.sync += inflight.eq(inflight + emit - self.slot_free)
        return m
