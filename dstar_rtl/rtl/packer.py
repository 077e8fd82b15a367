"""QPU stage 5: pack sorted descriptors into lane groups and fetch their columns (numerics §2.3).

A sorted chunk has its valid descriptors first, in descending exponent order. From the read
pointer ``p`` the packer looks at a window of ``lanes`` descriptors and takes the run of those
whose exponent equals that of descriptor ``p``; their columns (digits, channel, signed flag) come
from the chunk's column store by ``pos``. The group it forms has the absolute exponent, per lane
channel, signed, valid and the T digits, padded lanes all zero; the tile's first group carries
``first`` and its last ``last``. An empty chunk (a tile without kept columns) becomes one
all-invalid group with exponent 0.

With ``cfg.open_groups = K > 0`` the packer also holds up to K partial groups open across the
chunks of a tile, with their columns, in slot registers (:func:`golden.schedule.pack_tile` is
the specification): a window whose exponent an open slot holds (``m`` descriptors) puts them in
lanes ``0..m-1`` and the run's next ``lanes - m`` descriptors after them, freeing the slot; a
group that stays partial because its run ends is stored instead of emitted when the chunk is not
its tile's last and a slot is free (the one it came from, else the lowest free one); after the
tile's last chunk the slots still open are emitted one per cycle in slot order, the last of them
marked ``last``.

Latency and throughput: a chunk's first window is packed the cycle after the chunk is taken,
then one window per cycle; a window that stores a partial group emits nothing that cycle, unless
``cfg.pack_windows == 2``: then the cycle also packs the window after it (in the same chunk)
when that one's group is emitted, so a stored window costs a cycle only when the window after
it is stored too, or ends the chunk. The next chunk is taken in the cycle the
previous one's last window is packed, so consecutive chunks stream without a bubble, except that
after a tile's last chunk each slot still open takes one more cycle. The output is a register
that holds under back-pressure (a store proceeds under back-pressure, the window after it waits).
"""

from amaranth.hdl import Array, C, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from dstar_rtl.golden.config import Config
from dstar_rtl.golden.layouts import group_layout

from .chunker import check_chunk_layout, column_layout
from .layouts import to_layout
from .params import check_config, check_shape

__all__ = ["Packer"]


class Packer(wiring.Component):
    """Sorted chunks in, lane groups out.

    Parameters
    ----------
    cfg : Config.
    chunk_layout : keyword-only, the sorter's chunk (:func:`rtl.chunker.check_chunk_layout`).
    slot_shape : keyword-only, the shape of a column-store slot index (``current_slot``).

    Members
    -------
    i : In(stream of sorted chunks ``{entries: {key, payload: {pos}}, side}``).
    columns : In(sort_n × :func:`~rtl.chunker.column_layout`): the column store of the chunk being
        packed (the slot named by ``current_slot``), by ``pos``.
    current_slot : Out(slot index of the chunk being packed).
    o : Out(stream of :func:`golden.layouts.group_layout` records).
    done : Out(1): pulses when a chunk's last window has been packed (its store slot is free).
    """

    def __init__(self, cfg: Config, *, chunk_layout, slot_shape):
        self._cfg = check_config(cfg)
        self._chunk = check_chunk_layout(cfg, chunk_layout)
        check_shape("slot_shape", slot_shape)
        super().__init__({
            "i": In(stream.Signature(chunk_layout)),
            "columns": In(data.ArrayLayout(column_layout(cfg), cfg.sort_n)),
            "current_slot": Out(slot_shape),
            "o": Out(stream.Signature(to_layout(group_layout(cfg)))),
            "done": Out(1),
        })

    def elaborate(self, platform):
        cfg = self._cfg
        n, L, X, T, K = cfg.sort_n, cfg.lanes, cfg.exp_width, cfg.rows, cfg.open_groups
        two = cfg.pack_windows == 2          # the window after a stored one, same cycle
        col_shape = column_layout(cfg)
        m = Module()
        cur = Signal(self._chunk, name="chunk")
        active = Signal()
        ptr = Signal(range(n + 1))
        # A group of the current tile has been emitted: cleared when a tile's first chunk is
        # taken (a chunk whose windows are all stored emits nothing), set by every group.
        started = Signal(init=1)
        m.d.comb += self.current_slot.eq(cur.side.slot)

        entries = Array(cur.entries[k] for k in range(n))
        columns = Array(self.columns[k] for k in range(n))

        # The entries from the pointer on: `lanes` for the window; with two windows `lanes - 1`
        # more for the window after a stored one, and one more for where that window ends.
        span = 2 * L if two else L
        ext_ok, ext_key, ext_col = [], [], []
        for i in range(span):
            ent = entries[ptr + i]
            ext_ok.append((ptr + i < n) & ent.key[X])
            ext_key.append(ent.key[:X])
            if i < span - 1 or not two:
                col = Signal(col_shape, name=f"win{i}")
                m.d.comb += col.eq(columns[ent.payload.pos])
                ext_col.append(col)

        # Open slots: a partial group of one exponent waiting for the next run of it.
        slot_valid = Signal(max(K, 1))
        slot_exp = [Signal(X, name=f"slot{s}_exp") for s in range(K)]
        slot_count = [Signal(range(L), name=f"slot{s}_count") for s in range(K)]
        slot_lanes = [Signal(data.ArrayLayout(col_shape, L - 1), name=f"slot{s}_lanes")
                      for s in range(K)]

        def window(name, oks, keys, cols):
            """The group a window forms: its head's run, the open slot of the head's exponent
            (``hit``) in lanes ``0..m-1`` and the run's entries that still fit after them."""
            w = dict(head_exp=Signal(X, name=f"{name}_exp"))
            m.d.comb += w["head_exp"].eq(keys[0])
            run = []
            for i in range(L):
                ok = oks[i] & (keys[i] == w["head_exp"])
                run.append(ok if i == 0 else run[-1] & ok)
            w["head_valid"] = oks[0]
            w["hit"] = hit = [Signal(name=f"{name}_hit{s}") for s in range(K)]
            for s in range(K):
                m.d.comb += hit[s].eq(slot_valid[s] & (slot_exp[s] == w["head_exp"]) & run[0])
            held_count = Signal(range(L), name=f"{name}_held")
            held = [Signal(col_shape, name=f"{name}_held{j}") for j in range(L - 1)]
            for s in range(K):
                with m.If(hit[s]):
                    m.d.comb += held_count.eq(slot_count[s])
                    m.d.comb += [held[j].eq(slot_lanes[s][j]) for j in range(L - 1)]
            use = [run[i] & (held_count + i < L) for i in range(L)]
            w["taken"] = Signal(range(L + 1), name=f"{name}_taken")
            w["total"] = Signal(range(L + 1), name=f"{name}_total")
            m.d.comb += [w["taken"].eq(sum(use)), w["total"].eq(held_count + w["taken"])]
            w["live"] = [Signal(name=f"{name}_live{j}") for j in range(L)]
            w["col"] = [Signal(col_shape, name=f"{name}_lane{j}") for j in range(L)]
            for j in range(L):
                with m.Switch(held_count):
                    for mm in range(min(j, L - 1) + 1):
                        with m.Case(mm):
                            m.d.comb += [w["live"][j].eq(use[j - mm]),
                                         w["col"][j].eq(cols[j - mm])]
                    if j < L - 1:
                        with m.Default():
                            m.d.comb += [w["live"][j].eq(1), w["col"][j].eq(held[j])]
            return w

        a = window("a", ext_ok[:L], ext_key[:L], ext_col[:L])
        head_exp, hit, total = a["head_exp"], a["hit"], a["total"]
        nxt = ptr + a["taken"]
        finished = Signal()
        m.d.comb += finished.eq((nxt >= n) | ~entries[nxt].key[X])

        # Where a partial group would be stored, and which slots stay open after this window.
        free = [~slot_valid[s] | hit[s] for s in range(K)]
        target = Signal(range(max(K, 1)))
        for s in reversed(range(K)):
            with m.If(hit[s] | (free[s] & ~Cat(*hit).any())):
                m.d.comb += target.eq(s)
        store = Signal()
        leftover = Signal()
        if K:
            m.d.comb += [store.eq((total < L) & ~cur.side.last & Cat(*free).any()),
                         leftover.eq((slot_valid & ~Cat(*hit)).any())]

        # With two windows, a cycle that stores window A also emits the window B after it when
        # B's group goes out (full, or no slot left for it), so a store costs no cycle there.
        b_emit = Signal()
        b_go = Signal()               # B is emitted this cycle (and the output can take it)
        b_finished = Signal()
        if two:
            off = a["taken"]                 # 1 .. lanes - 1 when A stores

            # Window B: the span's entries from ``off`` on.
            b_ok = [Array(ext_ok)[off + i] for i in range(L)]
            b_key = [Array(ext_key)[off + i] for i in range(L)]
            b_col = []
            for i in range(L):
                col = Signal(col_shape, name=f"b_win{i}")
                m.d.comb += col.eq(Array(ext_col)[off + i])
                b_col.append(col)
            b = window("b", b_ok, b_key, b_col)
            # A's target slot holds A's exponent after the store; B's hit is another slot.
            b_free = [(free[s] & (target != s)) | b["hit"][s] for s in range(K)]
            b_end = Signal(range(2 * L + 1))
            m.d.comb += b_end.eq(off + b["taken"])
            b_end_ok = Array(ext_ok)[b_end]
            m.d.comb += [
                b_emit.eq(store & b["head_valid"] &
                          ((b["total"] == L) | ~Cat(*b_free).any())),
                b_finished.eq((ptr + b_end >= n) | ~b_end_ok),
            ]
            b_hit = b["hit"]
        done_now = Mux(b_go, b_finished, finished)

        out = self.o.p
        out_valid = Signal()
        can_emit = Signal()
        step = Signal()
        flushing = Signal()
        flush_sel = Signal(range(max(K, 1)))
        flush_last = Signal()
        for s in reversed(range(K)):
            with m.If(slot_valid[s]):
                m.d.comb += flush_sel.eq(s)
        if K:
            m.d.comb += flush_last.eq(sum(slot_valid[s] for s in range(K)) == 1)
        m.d.comb += [
            can_emit.eq(~out_valid | self.o.ready), self.o.valid.eq(out_valid),
            b_go.eq(b_emit & can_emit),
            step.eq(active & (store | can_emit)),
            self.i.ready.eq((~active & ~flushing) |
                            (step & done_now & ~(cur.side.last & leftover)) |
                            (flushing & can_emit & flush_last)),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += out_valid.eq(0)

        def emit(exp, live, cols, last):
            m.d.sync += [out_valid.eq(1), out.exp.eq(exp), out.first.eq(~started),
                         out.last.eq(last), started.eq(1)]
            for j in range(L):
                m.d.sync += [
                    out.valid[j].eq(live[j]),
                    out.channel[j].eq(Mux(live[j], cols[j].channel, 0)),
                    out.signed[j].eq(live[j] & (cols[j].signed if cfg.digits == "slice" else 1)),
                ]
                for t in range(T):
                    m.d.sync += out.digits[t][j].eq(Mux(live[j], cols[j].digits[t], 0))

        m.d.comb += self.done.eq(0)
        with m.If(step):
            m.d.sync += ptr.eq(nxt)
            for s in range(K):
                with m.If(hit[s]):
                    m.d.sync += slot_valid[s].eq(0)
            with m.If(store):
                for s in range(K):
                    with m.If(target == s):
                        m.d.sync += [slot_valid[s].eq(1), slot_exp[s].eq(head_exp),
                                     slot_count[s].eq(total)]
                        m.d.sync += [slot_lanes[s][j].eq(a["col"][j]) for j in range(L - 1)]
                if two:
                    with m.If(b_go):
                        m.d.sync += ptr.eq(ptr + b_end)
                        for s in range(K):
                            with m.If(b_hit[s]):
                                m.d.sync += slot_valid[s].eq(0)
                        emit(b["head_exp"], b["live"], b["col"], 0)
            with m.Else():
                emit(Mux(total != 0, head_exp, 0), a["live"], a["col"],
                     cur.side.last & finished & ~leftover)
            with m.If(done_now):
                m.d.sync += active.eq(0)
                m.d.comb += self.done.eq(1)
                if K:
                    with m.If(cur.side.last & leftover):
                        m.d.sync += flushing.eq(1)
        if K:
            # After a tile's last chunk: the slots still open, one per cycle, in slot order.
            with m.If(flushing & can_emit):
                count = Signal(range(L), name="flush_count")
                cols = [Signal(col_shape, name=f"flush_lane{j}") for j in range(L)]
                for s in range(K):
                    with m.If(flush_sel == s):
                        m.d.comb += [count.eq(slot_count[s]),
                                     *[cols[j].eq(slot_lanes[s][j]) for j in range(L - 1)]]
                        m.d.sync += slot_valid[s].eq(0)
                # An open slot holds fewer than L lanes: the last lane is never live.
                live = [count > j for j in range(L - 1)] + [C(0, 1)]
                emit(Array(slot_exp)[flush_sel], live, cols, flush_last)
                with m.If(flush_last):
                    m.d.sync += flushing.eq(0)
        # A new chunk loads as soon as the previous one's last group is out (same cycle).
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [cur.eq(self.i.p), active.eq(1), ptr.eq(0)]
            with m.If(self.i.p.side.first):
                m.d.sync += started.eq(0)
        return m

