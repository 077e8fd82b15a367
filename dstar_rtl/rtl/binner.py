"""QPU packing by exponent bins (``cfg.packer == "bins"``; :func:`golden.schedule.bin_tile` is
the specification): quantized sub-channels in, lane groups out, with no chunks and no sort.

Each bin holds one open group: its exponent, how many columns it has (``0 .. lanes - 1``) and
their columns (digits, channel and, for 2-bit slices, the signed flag). A sub-channel's kept
columns ``k`` have exponents ``e + 2k`` and go to bins :func:`golden.schedule.bin_index` of them,
four different bins, so a sub-channel writes each bin at most once. A column that finds its bin
open with the same exponent joins it; the column that makes it ``lanes`` long leaves with it as a
full group (its bin is empty again); a column that finds its bin open with another exponent
first sends that group out partial and opens the bin again. After the tile's last sub-channel
the bins still open leave one per cycle in bin order.

A group waits in ``pend`` until the next group of its tile exists or the tile ends, so its
``last`` marker is known when it moves to the output register; a tile with no kept column sends
one all-invalid group. Padded lanes are zero.

Latency and throughput: one sub-channel per cycle when it sends at most one group; a
sub-channel whose columns send ``g > 1`` groups (evictions or full groups) is held ``g``
cycles, one group per cycle. A group reaches the output register one cycle after the next group
of its tile is formed, or two cycles after the tile's last group when the tile ends; after a
tile's last sub-channel each open bin takes a cycle and the tile's end one more, before the next
tile's first sub-channel is taken.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.layouts import group_layout

from .chunker import column_layout
from .layouts import to_layout
from .params import check_config
from .qpu_front import front_out_layout

__all__ = ["Binner"]


class Binner(wiring.Component):
    """Quantized sub-channels in, lane groups out, by exponent bins.

    Parameters
    ----------
    cfg : Config with ``packer == "bins"``.

    Members
    -------
    i : In(stream of :func:`~rtl.qpu_front.front_out_layout`): one quantized sub-channel per
        beat, channel by channel; ``last`` ends the tile.
    o : Out(stream of :func:`golden.layouts.group_layout` records).
    overflow : Out(1), sticky: a tile had more than ``max_reduction`` sub-channels.
    """

    def __init__(self, cfg: Config):
        self._cfg = check_config(cfg)
        if cfg.packer != "bins":
            raise ValueError(f"Binner needs cfg.packer == 'bins', not {cfg.packer!r}")
        super().__init__({
            "i": In(stream.Signature(front_out_layout(cfg))),
            "o": Out(stream.Signature(to_layout(group_layout(cfg)))),
            "overflow": Out(1),
        })

    def elaborate(self, platform):
        cfg = self._cfg
        K, L, X, T = cfg.pack_bins, cfg.lanes, cfg.exp_width, cfg.rows
        kb = K.bit_length() - 1
        slice_code = cfg.digits == "slice"
        col_shape = column_layout(cfg)
        grp_shape = to_layout(group_layout(cfg))
        m = Module()

        # Bin state: open flag, exponent, column count and the columns held.
        occ = Signal(K)
        tag = [Signal(X, name=f"bin{s}_exp") for s in range(K)]
        cnt = [Signal(range(L), name=f"bin{s}_count") for s in range(K)]
        ent = [Signal(data.ArrayLayout(col_shape, L - 1), name=f"bin{s}_cols") for s in range(K)]
        tags, cnts, ents = Array(tag), Array(cnt), Array(ent)
        opens = Array(occ[s] for s in range(K))

        channel = Signal(range(cfg.max_reduction + 1))
        done = Signal(4)          # columns of the held sub-channel already binned
        flushing = Signal()       # the tile's last sub-channel is binned: open bins go out
        started = Signal()        # a group of this tile has been formed
        pend = Signal(grp_shape)
        pend_valid = Signal()
        out_valid = Signal()
        m.d.comb += self.o.valid.eq(out_valid)
        out_free = ~out_valid | self.o.ready
        take_group = ~pend_valid | out_free     # a new group can enter pend this cycle

        # The held sub-channel's columns: exponent, bin, column record; hit / event per column.
        p = self.i.p
        top = (p.b >> 1) - 1
        exp, idx, col, act, hit, full, ev = [], [], [], [], [], [], []
        for k in range(4):
            x = Signal(X, name=f"col{k}_exp")
            i = Signal(range(K), name=f"col{k}_bin")
            c = Signal(col_shape, name=f"col{k}")
            m.d.comb += [x.eq(p.e + 2 * k),
                         i.eq(((x >> 1) + Mux(x[0], K // 2, 0))[:kb]),
                         c.digits.eq(p.digits[k]), c.channel.eq(channel)]
            if slice_code:
                m.d.comb += c.signed.eq(top == k)
            a = Signal(name=f"col{k}_active")
            h = Signal(name=f"col{k}_hit")
            f = Signal(name=f"col{k}_full")
            e = Signal(name=f"col{k}_event")
            m.d.comb += [
                a.eq(self.i.valid & ~flushing & p.kept[k] & ~done[k]),
                h.eq(opens[i] & (tags[i] == x)),
                f.eq(h & (cnts[i] == L - 1)),
                # The column sends a group: its bin is full with it, or open with another
                # exponent.
                e.eq(a & opens[i] & (~h | f)),
            ]
            exp.append(x), idx.append(i), col.append(c), act.append(a), hit.append(h)
            full.append(f), ev.append(e)

        # This cycle bins every column up to and including the first that sends a group (that
        # one only if pend can take the group).
        proc = []
        for k in range(4):
            before = Const(1, 1)
            for j in range(k):
                before = before & ~ev[j]
            pk = Signal(name=f"col{k}_binned")
            m.d.comb += pk.eq(act[k] & before & (~ev[k] | take_group))
            proc.append(pk)
        sends = Signal()
        first_ev = Signal(range(4))
        for k in reversed(range(4)):
            with m.If(ev[k]):
                m.d.comb += first_ev.eq(k)
        m.d.comb += sends.eq(sum(ev[k] & proc[k] for k in range(4)) != 0)
        beat_done = Signal()
        m.d.comb += beat_done.eq(sum(act[k] & ~proc[k] for k in range(4)) == 0)
        m.d.comb += self.i.ready.eq(~flushing & beat_done)

        # The group sent this cycle: an event's bin (full with the event's column in the last
        # lane, or evicted) or, flushing, the lowest open bin.
        flush_bin = Signal(range(K))
        for s in reversed(range(K)):
            with m.If(occ[s]):
                m.d.comb += flush_bin.eq(s)
        flush_go = Signal()
        m.d.comb += flush_go.eq(flushing & (occ != 0) & take_group)
        src = Signal(range(K))
        is_full = Signal()
        m.d.comb += [src.eq(Mux(flushing, flush_bin, Array(idx)[first_ev])),
                     is_full.eq(~flushing & Array(full)[first_ev])]
        g = Signal(grp_shape)
        held_cols, held_n = ents[src], cnts[src]
        new_col = Array(col)[first_ev]
        m.d.comb += [g.exp.eq(tags[src]), g.first.eq(~started)]
        for j in range(L):
            live = Signal(name=f"lane{j}_live")
            c = Signal(col_shape, name=f"lane{j}_col")
            if j < L - 1:
                m.d.comb += [live.eq(held_n > j), c.eq(held_cols[j])]
            else:
                m.d.comb += [live.eq(is_full), c.eq(new_col)]
            m.d.comb += [g.valid[j].eq(live), g.channel[j].eq(Mux(live, c.channel, 0)),
                         g.signed[j].eq(live & (c.signed if slice_code else 1))]
            for t in range(T):
                m.d.comb += g.digits[t][j].eq(Mux(live, c.digits[t], 0))

        # Output register: cleared when taken; pend moves there when the next group of its
        # tile is formed (last = 0) or at the tile's end (last = 1).
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += out_valid.eq(0)
        with m.If(sends | flush_go):
            m.d.sync += [pend.eq(g), pend_valid.eq(1), started.eq(1)]
            with m.If(pend_valid):
                m.d.sync += [self.o.p.eq(pend), self.o.p.last.eq(0), out_valid.eq(1)]
        closing = flushing & (occ == 0) & out_free
        with m.If(closing):
            m.d.sync += [flushing.eq(0), started.eq(0), pend_valid.eq(0), out_valid.eq(1)]
            with m.If(pend_valid):
                m.d.sync += [self.o.p.eq(pend), self.o.p.last.eq(1)]
            with m.Else():      # a tile without a kept column: one all-invalid group
                m.d.sync += [self.o.p.eq(0), self.o.p.first.eq(1), self.o.p.last.eq(1)]

        # Bin updates: each bin takes at most one column of the held sub-channel.
        for s in range(K):
            w = Signal(name=f"bin{s}_write")
            wk = Signal(range(4), name=f"bin{s}_from")
            for k in reversed(range(4)):
                with m.If(proc[k] & (idx[k] == s)):
                    m.d.comb += [w.eq(1), wk.eq(k)]
            wcol = Array(col)[wk]
            whit, wfull = Array(hit)[wk], Array(full)[wk]
            pos = Signal(range(L), name=f"bin{s}_pos")
            m.d.comb += pos.eq(Mux(whit, cnt[s], 0))
            with m.If(w):
                with m.If(wfull):
                    m.d.sync += [occ[s].eq(0), cnt[s].eq(0)]
                with m.Else():
                    m.d.sync += [occ[s].eq(1), tag[s].eq(Array(exp)[wk]), cnt[s].eq(pos + 1)]
                    for j in range(L - 1):
                        with m.If(pos == j):
                            m.d.sync += ent[s][j].eq(wcol)
            with m.If(flush_go & (flush_bin == s)):
                m.d.sync += [occ[s].eq(0), cnt[s].eq(0)]

        # Sub-channel hand-shake: its columns are all binned.
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [done.eq(0), channel.eq(Mux(p.last, 0, channel + 1))]
            with m.If(channel >= cfg.max_reduction):
                m.d.sync += self.overflow.eq(1)
            with m.If(p.last):
                m.d.sync += flushing.eq(1)
        with m.Elif(self.i.valid & ~flushing):
            m.d.sync += done.eq(done | Cat(*proc))
        return m
